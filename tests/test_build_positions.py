"""`fts_positions` (FTS5's positions computed from the SAG2 tokens) equals what FTS5 itself
stores: the chunk inserted into a scratch FTS5 table with the index's tokenizer and read
back with `read_instances`, on hand-made tricky tokens and on whole corpora."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from workbench import text as textlib
from workbench.index import build, fts_positions
from workbench.index.corpora import iter_corpus
from workbench.index.postings import read_instances

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("/work/shared/data")


def fts5_positions(ids, columns):
    """The straightforward way: a scratch FTS5 table of the space-joined tokens, read back."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE fts USING fts5(title, heading, body, content='')")
        db.executemany(
            "INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)",
            [(i, *(" ".join(c) for c in cols)) for i, cols in zip(ids, columns)],
        )
        terms, counts, keys = read_instances(db)
    finally:
        db.close()
    return terms, list(counts), keys


def assert_same(ids, columns):
    terms, counts, keys = fts_positions.fts_positions(ids, columns)
    want = fts5_positions(ids, columns)
    assert terms == want[0]
    assert counts == want[1]
    assert np.array_equal(keys, want[2])


# tokens the tokenizer can emit and some it cannot (any whitespace-free string is handled)
TRICKY = [
    "role_id",
    "a.b-c",
    "3.5%",
    "c++",
    "c#",
    "at&t",
    "a+b",
    "x_y_z",
    "v1.2.3",
    "-",
    "_",
    "%",
    "a--b",
    "ab_",
    "josé",
    "é",
    "martí",
    "straße",
    "ǆ",
    "ﬁ",
    "²",
    "①",
    "ⅻ",
    "σς",
    "İstanbul",
    "ı",
    "ŉ",
    "Ωmega",
    "ÀÉÎ",
    "北京大学",
    "北京",
    "日本語テキスト",
    "한국어",
    "ไทย",
    "हिन्दी",
    "e\u0301",
    "\u0301",
    "a\u200db",
    "😀",
    "a😀b",
    "٣٤",
    "x\u00adz",
    "ｆｕｌｌ",
    "Ⅻ",
    "ⓐ",
    "\U0001d400",
    "a'b",
    "o’neill",
    "l·l",
    "x" * 300,
]


def test_tricky_tokens_give_fts5s_own_terms_and_positions():
    columns = [(["title", t], [], ["body", t, "tail", t]) for t in TRICKY]
    assert_same(list(range(1, len(TRICKY) + 1)), columns)
    # all at once in one column, and ids with gaps (an update's rows)
    assert_same([5, 9, 1000], [(TRICKY, ["x"], TRICKY[::-1]), ([], [], []), (["α"], TRICKY[:3], ["é"] * 3)])


def test_every_ascii_character_between_letters():
    tokens = [f"a{chr(c)}b{chr(c)}" for c in range(33, 127)] + [chr(c) for c in range(33, 127)]
    assert_same([1, 2], [(tokens, [], tokens[::-1]), ([t.upper() for t in tokens], tokens, [])])


def test_a_process_that_forgets_its_tables_gives_the_same_positions(monkeypatch):
    monkeypatch.setattr(fts_positions, "_LIMIT", 3)  # tables start afresh at nearly every call
    for k in range(4):
        assert_same([1 + k, 2 + k], [(TRICKY[k:], ["new", str(k)], TRICKY), (["x"], [], TRICKY[: 7 + k])])


def corpus_chunks(path: Path):
    first = 1
    for chunk in build.document_chunks(iter_corpus(path), 512):
        ids = list(range(first, first + len(chunk)))
        first += len(chunk)
        yield ids, [(textlib.tokenize(u.title), textlib.tokenize(u.heading), textlib.tokenize(u.body)) for u in chunk]


@pytest.mark.parametrize(
    "corpus",
    ["encyclopedia/corpus.json", pytest.param("internal_docs", marks=pytest.mark.slow)],  # jieba's load
)
def test_bundled_corpora(corpus):
    for ids, columns in corpus_chunks(ROOT / "sample_corpora" / corpus):
        assert_same(ids, columns)


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["2wiki/corpus.json", "hotpotqa-sample/corpus.json"])
def test_whole_corpora(corpus):
    path = DATA / corpus
    if not path.exists():
        pytest.skip(f"{path} not here")
    n = 0
    for ids, columns in corpus_chunks(path):
        assert_same(ids, columns)
        n += len(ids)
    assert n > 100


def test_chinese_text_through_the_tokenizer():
    texts = ["登录后系统保存role_id到会话。", "中华人民共和国成立了", "北京大学的学生 José Martí 3.5% c++"]
    columns = [tuple(textlib.tokenize(t) for t in (x, "", x + " 再见")) for x in texts]
    assert_same([1, 2, 3], columns)
    assert json.dumps(columns, ensure_ascii=False).count("北京") >= 1
