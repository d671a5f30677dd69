"""The build workers' compiled word table (`index/words_kernel.py`) numbers chunks as a dict in
order of first look-up does, splits where `str.split()` splits, and puts the columns' FTS5 texts
together as the Python loop does."""

import sys

import numpy as np
import pytest

from workbench.index import tokenized, words_kernel

from .test_build_positions import TRICKY, assert_same, straightforward


@pytest.fixture
def table():
    lib = words_kernel.load()
    if lib is None:
        pytest.skip("no C compiler")
    return words_kernel.WordTable(lib)


def test_hand_checked_columns(table):
    # chunks a, b, x, y numbered 0-3 in order of first look-up; the empty column has none;
    # U+2028 (line separator) and U+00A0 split as str.split() does; 'role_id' is one chunk
    ids, counts, new = table.lookup(["a b  a", "", "x\u2028y\xa0b", "role_id\t"])
    assert ids.tolist() == [0, 1, 0, 2, 3, 1, 4] and counts.tolist() == [3, 0, 3, 1]
    assert new == ["a", "b", "x", "y", "role_id"]
    table.settle(0, ["a", "", "x", "ÿ", "role id role_id"])  # b has no tokens (a stopword, say)
    assert table.texts(ids, counts) == ["a a", "", "x ÿ", "role id role_id"]
    ids, counts, new = table.lookup(["b a  é"])  # known chunks keep their numbers
    assert ids.tolist() == [1, 0, 5] and new == ["é"] and len(table) == 6


def test_one_letter_columns_fit(table):
    # a column's end splits without a byte of white space: 3 chunks in 3 bytes
    ids, counts, new = table.lookup(["a", "b", "c", "a b"] * 1000)
    assert counts.tolist() == [1, 1, 1, 2] * 1000 and new == ["a", "b", "c"] and len(ids) == 5000


def test_every_white_space_splits_and_nothing_else(table):
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    others = ["\u200b", "\u180e", "\ufeff", "é", "中", "\U0001f600", "\x00"]  # not white space in Python
    texts = [f"a{c}b" for c in spaces + others]
    _, counts, _ = table.lookup(texts)
    assert counts.tolist() == [len(t.split()) for t in texts] == [2] * len(spaces) + [1] * len(others)


def test_many_and_long_chunks_number_as_a_dict(table):
    rng = np.random.default_rng(7)
    words = ["w" * int(n) + str(i) for i, n in enumerate(rng.integers(1, 40, 60_000))]  # past 16 bytes too
    picks = rng.integers(0, len(words), (4_000, 30)).tolist()
    texts = [" ".join(words[i] for i in row) for row in picks]  # the table grows midway
    want: dict[str, int] = {}
    flat = [want.setdefault(w, len(want)) for t in texts for w in t.split()]
    ids, counts, new = table.lookup(texts)
    assert ids.tolist() == flat and new == list(want) and counts.tolist() == [30] * len(texts)


def test_rows_equal_without_the_table(monkeypatch):
    ids = [3, 4, 9, 10, 11, 40]
    with_table = tokenized.tokenize_rows(ids, TRICKY)
    monkeypatch.setattr(words_kernel, "load", lambda: None)  # no compiler: the Python loop
    monkeypatch.setattr(tokenized, "_WORDS", tokenized._Words())
    assert tokenized._WORDS.table is None
    assert_same(tokenized.tokenize_rows(ids, TRICKY), straightforward(ids, TRICKY))
    assert_same(with_table, straightforward(ids, TRICKY))
