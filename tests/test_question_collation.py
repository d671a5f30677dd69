"""The tie-break's collator loaded by blocks of code points (workbench/collation.py `sort_key`):
every key equals pyuca's full collator's, and a first question's tie-break never loads the
whole table."""

from __future__ import annotations

import os
import pickle
import random
import string
import subprocess
import sys
import unicodedata

import pytest
from pyuca import Collator

from workbench import collation

from .test_collator_cache import WORDS

# each test loads or parses pyuca's whole table (0.1-0.5 s): the long set
pytestmark = pytest.mark.slow


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(collation, "_SHARDED", [])
    monkeypatch.setattr(collation, "_COLLATOR", [])
    return tmp_path


def _words() -> list[str]:
    rng = random.Random(5)
    chars = [chr(c) for c in range(128)]
    words = chars + [a + b for a in chars for b in chars] + list(WORDS)
    words += ["".join(rng.choices(string.printable, k=rng.randint(1, 12))) for _ in range(2000)]
    # Latin letters with accents, combining marks after letters (decomposed and not), a
    # contraction's pieces (L + middle dot), Greek, Cyrillic, Thai, Tibetan, CJK, Hangul
    pools = ["àéîõüçñßøåÀÉ", "\u0301\u0308\u0327\u0323", "lL·\u00b7", "αβγάέ", "ёйжЁ", "กขคเ", "ཀཱིྲ", "北京東京", "한국"]
    for _ in range(3000):
        pool = "".join(rng.sample(pools, 2)) + "abcz -1"
        words.append("".join(rng.choices(pool, k=rng.randint(1, 8))))
    return words


def test_keys_equal_the_full_collators(cache_home):
    full = collation._collator()
    words = _words()
    got = [collation.sort_key(w) for w in words]  # blocks loaded as the words come
    assert got == [tuple(full.sort_key(w)) for w in words]
    # from a fresh start, each word first: only its own blocks are loaded
    for w in words[-300:]:
        collation._SHARDED.clear()
        assert collation.sort_key(w) == tuple(full.sort_key(w)), repr(w)
        assert collation._SHARDED[0][2] == {ord(c) >> 8 for c in unicodedata.normalize("NFD", w)}
    # hand-checked order: punctuation, digits, letters, case after the letter, accents after
    assert sorted(["b", "a1", "A", "á", "a", "-a", "10", "9"], key=collation.sort_key) == [
        "-a",
        "10",
        "9",
        "a",
        "A",
        "á",
        "a1",
        "b",
    ]


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})], ids=["empty", "garbage", "other"])
def test_a_damaged_shards_pickle_is_made_again(cache_home, damage):
    path = collation._collator_cache().with_suffix(".shards.pickle")
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    # through sort_key: made under its lock from the full collator, which takes its own lock
    assert collation.sort_key("apple pie") == tuple(Collator().sort_key("apple pie"))
    assert collation._COLLATOR  # the full one was loaded to make it
    shell, shards = pickle.loads(path.read_bytes())  # rewritten whole
    assert isinstance(shell, Collator) and shell.table.root.children == {} and 0 in shards


def test_a_first_tie_break_does_not_load_the_full_collator(cache_home):
    collation.sort_key("warm")  # the caches, as an earlier process leaves them
    words = ["zeta", "apple-pie", "Apple", "apple", "1990", "co-op", "coop", "applé", "北京"]
    code = (
        "from workbench import collation, terms\n"
        f"print(sorted({words!r}, key=terms.collation_key), len(collation._COLLATOR))\n"
        "print(sorted(collation._SHARDED[0][2]))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    c = Collator()
    assert out.split("\n")[:2] == [f"{sorted(words, key=lambda w: tuple(c.sort_key(w)))} 0", "[0, 3, 78, 83]"]
