"""jieba's dictionary loaded the quick way (issue 33): its own cache file read in one piece, and
jieba imported without pkg_resources; the same dictionary and the same tokens as jieba's own way."""

import json
import marshal
import subprocess
import sys

# In a fresh process with TMPDIR set: a hand-made cache file stands for jieba's, and marshal.load
# (jieba's reader, object by object through the file) fails if called: only the bytes-at-once
# path can give the hand-made dictionary (without it, jieba would rebuild from dict.txt).
SCRIPT = """
import json, marshal, sys
def refused(*a, **k):
    raise RuntimeError("marshal.load called")
marshal.load = refused
from workbench import text
dt = text._jieba()
print(json.dumps([dt.FREQ, dt.total, dt.initialized, "pkg_resources" in sys.modules,
                  text.tokenize("甲乙丙")]))
"""


def test_jieba_dictionary_read_from_its_cache_file_in_one_piece(tmp_path):
    freq, total = {"甲": 0, "甲乙": 3, "丙": 2}, 5  # hand-checked: jieba's prefix dict keeps prefixes at 0
    (tmp_path / "jieba.cache").write_bytes(marshal.dumps((freq, total)))
    env = {"TMPDIR": str(tmp_path), "PATH": "", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    got_freq, got_total, initialized, pkg_resources, tokens = json.loads(done.stdout)
    assert (got_freq, got_total, initialized) == (freq, total, True)
    assert not pkg_resources  # jieba's import did not pull it in (~0.12 s)
    assert tokens == ["甲乙", "丙"]  # segmented with the hand-made dictionary: 甲乙 (3) + 丙 (2)


def test_jieba_dictionary_equals_jiebas_own_initialisation():
    import jieba

    from workbench import text as textlib

    dt = textlib._jieba()
    assert dt is jieba.dt and dt.initialized
    own = jieba.Tokenizer()
    own.initialize()  # jieba's way: marshal.load of the same cache file (or a rebuild from dict.txt)
    assert dt.total == own.total and dt.FREQ == own.FREQ


def test_no_cache_file_leaves_the_tokenizer_to_jieba(tmp_path):
    import jieba

    from workbench import text as textlib

    fresh = jieba.Tokenizer()
    fresh.tmp_dir = str(tmp_path)  # empty: no cache file
    assert not textlib._read_jieba_cache(fresh) and not fresh.initialized and fresh.FREQ == {}
    (tmp_path / "jieba.cache").write_bytes(b"not marshal")
    assert not textlib._read_jieba_cache(fresh) and not fresh.initialized
    other = jieba.Tokenizer(str(tmp_path / "dict.txt"))  # another dictionary: jieba checks its file's age
    (tmp_path / "jieba.cache").write_bytes(marshal.dumps(({"x": 1}, 1)))
    other.tmp_dir = str(tmp_path)
    assert not textlib._read_jieba_cache(other) and not other.initialized
    assert json.dumps(textlib._read_jieba_cache(fresh)) == "true" and fresh.FREQ == {"x": 1}
