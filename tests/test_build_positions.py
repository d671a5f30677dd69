"""The build's chunk tokenizing (`index/tokenized.py`): FTS5 positions put together from each
distinct chunk's terms equal a scratch FTS5 table's (the straightforward computation), and the
diversity counts equal each document's token set counted directly."""

import itertools
import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from workbench import text as textlib
from workbench.index import tokenized
from workbench.index.corpora import iter_corpus
from workbench.index.postings import read_instances
from workbench.index.schema import DIVERSITY_TOKEN, fold_accents, normalize_title

from .conftest import shared_data

ENCYCLOPEDIA = Path(__file__).resolve().parent.parent / "sample_corpora" / "encyclopedia" / "corpus.json"

TRICKY = [
    ("Role_id Guide", "", "the role_id of Zürich", "d1"),
    ("Role_id Guide", "Part two", "Straße STRASSE straße ß ǅ ﬁne ＡＢＣ１２３ x¨y", "d1"),  # case folding != lower
    ("中华人民共和国", "登录后系统", "登录后role_id决定权限 c++ C# AT&T a+b 3.5% a.b-c", "d2"),
    ("What", "the of", "?!... — , the and", "d3"),  # stopwords and punctuation only
    ("Élodie  Marchetti", "", "  José\tArriaga\n\nÉlodie   Gebühr’s ṩ ǆ İstanbul", "d4"),
    ("x", "", "", "d5"),
]


def straightforward(ids, rows):
    """What the build stored before: a scratch FTS5 table's positions, each document's set of
    diversity tokens, row lengths from the positions."""
    fts_rows = [(i, *(" ".join(textlib.tokenize(c)) for c in row[:3])) for i, row in zip(ids, rows)]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(title, heading, body, content='')")
    db.executemany("INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)", fts_rows)
    terms, counts, keys = read_instances(db)
    db.close()
    docs: dict[str, set] = {}
    for row in rows:
        docs.setdefault(row[3], set()).update(DIVERSITY_TOKEN.findall(row[2].casefold()))
    lengths = np.zeros(len(ids), dtype="<i4")
    found, n = np.unique(keys >> 32, return_counts=True)
    lengths[np.searchsorted(np.array(ids), found)] = n
    titles = Counter(" ".join(textlib.tokenize(r[0])) for r in rows if len(textlib.tokenize(r[0])) >= 2)
    return {
        "fts_rows": fts_rows,
        "terms": terms,
        "counts": counts,
        "keys": keys,
        "lengths": lengths.tobytes(),
        "phrases": sorted(titles.items()),
        "title_keys": [(normalize_title(r[0]), fold_accents(normalize_title(r[0]))) for r in rows],
        "diversity": sorted(Counter(t for s in docs.values() for t in s).items()),
    }


def assert_same(got, want):
    assert got.keys() == want.keys()
    for key in want:
        if key == "keys":
            assert got[key].dtype == np.int64 and np.array_equal(got[key], want[key])
        elif key == "diversity":  # (tokens, documents)
            assert sorted(zip(*got[key])) == want[key]
        else:
            assert got[key] == want[key], key


def test_hand_checked_positions():
    done = tokenized.tokenize_rows([7], [TRICKY[0]])
    # title 'role id role_id guide' -> FTS5 (unicode61) role id role id guide; body tokens
    # 'role id role_id z ü rich' -> role id role id z u rich (ü loses its mark)
    title = {"role": [0, 2], "id": [1, 3], "guide": [4]}
    body = {"role": [0, 2], "id": [1, 3], "z": [4], "u": [5], "rich": [6]}
    want = {
        t: [(7 << 32) | o for o in title.get(t, [])] + [(7 << 32) | (2 << 24) | o for o in body.get(t, [])]
        for t in sorted(title | body)
    }
    assert done["terms"] == sorted(want)
    assert done["counts"] == [len(want[t]) for t in sorted(want)]
    assert done["keys"].tolist() == [k for t in sorted(want) for k in want[t]]
    assert np.frombuffer(done["lengths"], dtype="<i4").tolist() == [12]
    # the body case-folded, split by [^\W_]+ (so 'role_id' gives 'role' and 'id'), stopwords kept
    assert sorted(zip(*done["diversity"])) == [("id", 1), ("of", 1), ("role", 1), ("the", 1), ("zürich", 1)]


def test_tricky_rows_equal_a_scratch_fts5_table(monkeypatch):
    ids = [3, 4, 9, 10, 11, 40]
    assert_same(tokenized.tokenize_rows(ids, TRICKY), straightforward(ids, TRICKY))
    # again with every chunk known, and with the memory forgotten before each call
    assert_same(tokenized.tokenize_rows(ids, TRICKY), straightforward(ids, TRICKY))
    monkeypatch.setattr(tokenized, "_WORDS_LIMIT", 1)
    assert_same(tokenized.tokenize_rows(ids[:2], TRICKY[:2]), straightforward(ids[:2], TRICKY[:2]))
    assert_same(tokenized.tokenize_rows(ids, TRICKY), straightforward(ids, TRICKY))


def test_encyclopedia_chunks_equal_a_scratch_fts5_table():
    units = list(iter_corpus(ENCYCLOPEDIA))
    for start in range(0, len(units), 50):  # four chunks, later ones reusing known chunks
        part = units[start : start + 50]
        ids = list(range(1 + start, 1 + start + len(part)))
        rows = [(u.title, u.heading, u.body, u.document) for u in part]
        assert_same(tokenized.tokenize_rows(ids, rows), straightforward(ids, rows))


def test_diversity_token_never_matches_white_space():
    # a text's diversity tokens are its whitespace-split pieces' tokens only if no white space
    # character (what str.split splits at) can be part of a token
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(spaces) > 20
    assert not any(DIVERSITY_TOKEN.search(c) for c in spaces)
    assert all(len(("a" + c + "b").split()) == 2 for c in spaces)


def joined_chunks(text: str) -> str:
    """A text's FTS5 column as the build's workers make it: its chunks' joined tokens."""
    return " ".join(filter(None, map(textlib.joined_tokens, textlib.normalize(text).split())))


def test_joined_chunks_are_the_joined_tokens():
    for row in TRICKY:
        for text in row:
            assert joined_chunks(text) == " ".join(textlib.tokenize(text))


@pytest.mark.slow
def test_2wiki_chunks_equal_a_scratch_fts5_table():
    corpus = json.loads(shared_data("2wiki", "corpus.json").read_text(encoding="utf-8"))
    rows = [(p["title"], "", p["text"], p["title"]) for p in corpus]
    for start in range(0, len(rows), 2048):
        part = rows[start : start + 2048]
        ids = list(range(1 + start, 1 + start + len(part)))
        assert_same(tokenized.tokenize_rows(ids, part), straightforward(ids, part))
    assert all(
        joined_chunks(t) == " ".join(textlib.tokenize(t)) for t in itertools.chain.from_iterable(r[:3] for r in rows)
    )


def test_blocks_encoded_by_the_pool_give_the_same_file(tmp_path, monkeypatch):
    from workbench.index import build

    from .test_build_diversity import table_rows

    monkeypatch.setattr(build, "CHUNK_UNITS", 20)  # 9 chunks
    monkeypatch.setattr(build, "BLOCK_CHUNKS", 2)  # 5 blocks: 3 encoded by the pool, the last ones here
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "one.sqlite", "enc", workers=1)
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "two.sqlite", "enc", workers=2)
    one = table_rows(tmp_path / "one.sqlite")
    assert [r[0] for r in one["postings"]][-1] == 4 and one["meta"].count(("block_chunks", "2")) == 1
    assert one == table_rows(tmp_path / "two.sqlite")


def test_ascii_text_folds_as_it_lowers():
    # tokenize_rows skips the case folding of an ASCII body: NFKC + lower case equals it there
    text = "".join(map(chr, range(128))) * 2
    assert text.isascii() and textlib.normalize(text) == text.casefold()


def test_unsorted_terms_hold_the_same_positions():
    # the build's workers skip sorting a chunk's terms: the same groups of keys, and a block's
    # merge (which sorts) gives what the sorted chunk gives
    from workbench.index.build import merge_positions

    ids = [3, 4, 9, 10, 11, 40]
    want = straightforward(ids, TRICKY)
    got = tokenized.tokenize_rows(ids, TRICKY, sort_terms=False)
    assert got["terms"] != want["terms"] and sorted(got["terms"]) == want["terms"]
    bounds = np.cumsum([0, *got["counts"]])
    groups = {t: got["keys"][bounds[k] : bounds[k + 1]] for k, t in enumerate(got["terms"])}
    assert np.array_equal(np.concatenate([groups[t] for t in want["terms"]]), want["keys"])
    terms, counts, keys = merge_positions([(got["terms"], got["counts"], got["keys"])])
    assert terms == want["terms"] and counts.tolist() == want["counts"] and np.array_equal(keys, want["keys"])


def test_a_block_merge_equals_one_stable_sort_of_every_key():
    # chunks of random terms in random group order (as the workers send them): the merge moves
    # whole groups; the straightforward way sorts every key by its term's rank, stably
    from workbench.index.build import merge_positions

    rng = np.random.default_rng(5)
    vocabulary = [f"t{i}" for i in range(50)]
    parts = []
    for chunk in range(6):
        names = [str(t) for t in rng.choice(vocabulary, int(rng.integers(0, 12)), replace=False)]
        counts = rng.integers(1, 5, len(names)).tolist()
        keys = [np.sort(rng.integers(0, 1000, n)) + (chunk << 32) for n in counts]
        parts.append((names, counts, np.concatenate([np.zeros(0, np.int64), *keys]).astype(np.int64)))
    terms, counts, keys = merge_positions(parts)
    assert terms == sorted(set().union(*(p[0] for p in parts)))
    term_of = np.concatenate([np.repeat([terms.index(t) for t in p[0]], p[1]).astype(np.int64) for p in parts])
    every = np.concatenate([p[2] for p in parts])
    assert np.array_equal(keys, every[np.argsort(term_of, kind="stable")])
    assert counts.tolist() == np.bincount(term_of, minlength=len(terms)).tolist() and counts.dtype == np.int64
