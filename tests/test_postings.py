"""Postings stored at build time compute FTS5's bm25() bit for bit (SPEC §2 ranking)."""

import math

import numpy as np
import pytest

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.postings import _varints, phrases_of
from workbench.index.store import Index, bm25_order, query_expression
from workbench.judges.lexical import LexicalJudge

from .conftest import REPO, build_index, units_from

MIXED = [
    ("Apple pie", "apple apple banana"),
    ("Banana", "banana split dessert"),
    ("Cherry", "cherry tart"),
    ("Date", "date palm"),
    ("José Martí", "José Martí wrote poems; the role_id of 3.5% is new new news."),
    ("北京大学", "北京大学 是 一所 大学 apple"),
    ("Twin One", "same words here"),
    ("Twin Two", "same words here"),
]


def both(tmp_path, passages=MIXED):
    memory = build_index(tmp_path, passages)
    fts5 = Index(memory.path, max_postings=0)  # FTS5's own bm25()
    assert memory.postings is not None and fts5.postings is None
    return memory, fts5


def test_hand_checked_bm25(tmp_path):
    fruit = [
        ("Apple pie", "apple apple banana"),
        ("Banana", "banana split dessert"),
        ("Cherry", "cherry tart"),
        ("Date", "date palm"),
    ]
    memory, fts5 = both(tmp_path, fruit)
    # rows have 5, 4, 3, 3 tokens (title + body): avgdl = 15 / 4; N = 4
    norm = {1: 1.2 * (0.25 + 0.75 * 5 / 3.75), 2: 1.2 * (0.25 + 0.75 * 4 / 3.75)}
    # "apple" hits 1 row: idf = ln(3.5 / 1.5); unit 1: title once (weight 2) + body twice = 4
    apple = math.log(3.5 / 1.5)
    got = memory.search(query_expression(["apple"]), 10)
    assert got == fts5.search(query_expression(["apple"]), 10)
    assert got == [(1, pytest.approx(-(apple * (4 * 2.2) / (4 + norm[1])), rel=1e-12))]
    # "banana" hits 2 of 4 rows: ln(2.5 / 2.5) = 0, so FTS5 uses 1e-6; unit 2 has f = 2 + 1
    got = memory.search(query_expression(["banana"]), 10)
    assert got == fts5.search(query_expression(["banana"]), 10)
    assert got == [
        (2, pytest.approx(-(1e-6 * (3 * 2.2) / (3 + norm[2])), rel=1e-12)),
        (1, pytest.approx(-(1e-6 * (1 * 2.2) / (1 + norm[1])), rel=1e-12)),
    ]


@pytest.mark.parametrize("weights", [(2.0, 2.0, 1.0), (1.0, 1.0, 1.0), (0.3, 1.7, 0.1), (0.0, 0.0, 1.0)])
def test_scores_equal_fts5_for_every_kind_of_phrase(tmp_path, weights):
    memory, fts5 = both(tmp_path)
    terms = [
        "apple",
        "banana",
        "josé martí",
        "jose marti",
        "role_id",
        "3.5%",
        "new new",
        "new",
        "北京大学",
        "same words",
        "words same",
        "nothing",
        "apple",
        "poems",
        '"quoted"',
        "大学 apple",
    ]
    for k in range(1, len(terms) + 1):
        expression = query_expression(terms[:k])
        assert memory.search(expression, 5, weights) == fts5.search(expression, 5, weights)
        assert memory.bm25_all(expression, weights) == fts5.bm25_all(expression, weights)
        among = {1, 5, 7, 8}
        assert memory.bm25_all(expression, weights, among=among) == fts5.bm25_all(expression, weights, among=among)


def test_phrase_rows_equal_fts5(tmp_path):
    memory, fts5 = both(tmp_path)
    for term in [
        "apple",
        "josé martí",
        "jose marti",
        "role_id",
        "3.5%",
        "new new",
        "new new new",
        "北京大学",
        "same words",
        "words same",
        "twin",
        "nothing",
        "apple pie",
        '"quoted"',
        "大学 apple",
    ]:
        assert memory.matches(term) == fts5.matches(term), term
    assert memory.matches("apple pie") == {1} and memory.matches("new new new") == frozenset()


def test_body_df_equals_fts5(tmp_path):
    memory, fts5 = both(tmp_path)
    terms = [
        "apple",
        "josé martí",
        "jose marti",
        "role_id",
        "3.5%",
        "new new",
        "new new new",
        "北京大学",
        "same words",
        "words same",
        "twin one",
        "nothing here",
        "apple pie",
        "大学 apple",
        "josé",
        "martí",
    ]
    for term in terms:
        memory.postings.tokens(term)  # split like FTS5: a one-token term is a vocabulary look-up
        assert memory.df(term) == fts5.df(term), term
        assert memory.postings.body_rows(term) == fts5.df(term), term  # what a large index counts with
        memory.postings.phrase(term)
        assert memory.postings.body_rows(term) == fts5.df(term), term  # from a searched phrase's positions
    assert memory.df("apple pie") == 0 and memory.df("new new") == 1 and memory.df("new new new") == 0
    assert memory.postings.tokens("北京大学") == ("北京大学",)  # one FTS5 token: a vocabulary look-up
    assert memory.df("北京大学") == 1


def test_a_counted_phrase_is_searched_from_the_starts_its_count_found(tmp_path, monkeypatch):
    # term selection counts a phrase's body rows, then the expansion searches it: the second
    # step reuses the starts of the first instead of merging the tokens' positions again
    postings = build_index(tmp_path, MIXED).postings
    merges = []
    starts = postings._starts
    monkeypatch.setattr(postings, "_starts", lambda toks: merges.append(toks) or starts(toks))
    assert postings.body_rows("new new") == 1  # unit 5's body: '... is new new news.'
    assert merges == [("new", "new")]
    rows, where, cols = postings.phrase("new new")
    assert merges == [("new", "new")]  # not merged again
    assert rows.tolist() == [5] and where.tolist() == [0] and cols.tolist() == [2]  # once, in the body (column 2)
    assert "new new" not in postings._counted_starts  # handed over to the phrase cache
    assert postings.body_rows("new new") == 1 and merges == [("new", "new")]


def test_ties_keep_lower_id_first(tmp_path):
    memory, fts5 = both(tmp_path)
    got = memory.search(query_expression(["same"]), 10)
    assert got == fts5.search(query_expression(["same"]), 10)
    assert [u for u, _ in got] == [7, 8] and got[0][1] == got[1][1]


def test_phrases_of_reads_only_the_engines_form():
    assert phrases_of('"a" OR "b c" OR "say ""hi"""') == ["a", "b c", 'say "hi"']
    assert phrases_of('"a" AND "b"') is None
    assert phrases_of("a OR b") is None
    assert phrases_of('"a" OR b') is None


def test_varints_decode_the_averages_record():
    # 2Wiki's averages record: 6,119 rows, then title/heading/body token totals
    assert _varints(bytes.fromhex("AF67819A770093AC73")) == [6119, 19831, 0, 317043]
    assert _varints(bytes([0x7F, 0x81, 0x00])) == [127, 128]


def _tables(path) -> dict:
    import sqlite3

    db = sqlite3.connect(path)
    tables = ["units", "postings", "row_lengths", "terms", "title_phrases", "aliases", "diversity_df"]
    out = {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
    db.close()
    return out


def test_chunked_parallel_build_equals_one_process(tmp_path, monkeypatch):
    from workbench.index import build

    passages = MIXED * 1 + [(f"Extra {i}", f"apple words {i} same") for i in range(9)]
    whole = build_index(tmp_path, passages, "whole.sqlite")  # one chunk, this process
    monkeypatch.setattr(build, "CHUNK_UNITS", 3)  # six chunks: five tokenized by two workers
    pooled = Index.build(units_from(passages), tmp_path / "pooled.sqlite", workers=2)
    single = Index.build(units_from(passages), tmp_path / "single.sqlite", workers=1)
    assert pooled.meta["chunks"] == "6" and whole.meta["chunks"] == "1"
    assert _tables(pooled.path) == _tables(single.path)
    fts5 = Index(pooled.path, max_postings=0)
    for terms in (["apple"], ["same", "words"], ["josé martí", "new new"], ["extra", "3"], ["北京大学"]):
        expression = query_expression(terms)
        assert pooled.bm25_all(expression) == fts5.bm25_all(expression) == whole.bm25_all(expression), terms
        assert pooled.search(expression, 20) == whole.search(expression, 20)
    assert pooled.df("apple words") == fts5.df("apple words") == 9


@pytest.mark.slow
def test_whole_trajectories_equal_with_and_without_postings(tmp_path):
    units = load_corpus(REPO / "sample_corpora" / "encyclopedia" / "corpus.json")
    memory = Index.build(units, tmp_path / "enc.sqlite")
    fts5 = Index(memory.path, max_postings=0)
    questions = load_questions(REPO / "sample_corpora" / "encyclopedia" / "questions.jsonl")
    for q in questions:
        a = Run(memory, q, judge=LexicalJudge(memory)).run()
        b = Run(fts5, q, judge=LexicalJudge(fts5)).run()
        assert a.to_json(stats=False) == b.to_json(stats=False), q.id


@pytest.mark.parametrize("weights", [(2.0, 2.0, 1.0), (0.3, 1.7, 0.1)])
def test_bm25_among_equals_bm25_all_and_fts5(tmp_path, weights):
    # the expansion scores only its candidate rows, with each phrase's cached row terms
    memory, fts5 = both(tmp_path)
    expression = query_expression(["same words", "apple", "josé martí", "new", "nothing", "apple"])
    everything = fts5.bm25_all(expression, weights)
    assert sorted(everything) == [1, 5, 6, 7, 8]
    for among in ([1, 5, 6, 7, 8], [5], [1, 8], []):
        got = memory.bm25_among(expression, np.array(among, dtype=np.int64), weights).tolist()
        assert got == [everything[u] for u in among]  # bit for bit
        assert fts5.bm25_among(expression, np.array(among, dtype=np.int64), weights).tolist() == got
    # a second time from the cached terms, then the whole search: still FTS5's
    assert memory.bm25_among(expression, np.array([7, 8]), weights).tolist() == [everything[7], everything[8]]
    assert memory.bm25_all(expression, weights) == everything


def test_bm25_order_partial_sort_equals_full_sort():
    # the first `limit` of (score, id) order; many rows tie at the cut-off score
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(0, 400))
        rows = rng.permutation(1000)[:n].astype(np.int64)
        scores = -rng.integers(0, 6, n).astype(np.float64) / 4  # few distinct values: ties
        for limit in (0, 1, 3, 10, 50, 500):
            full = np.lexsort((rows, scores))[:limit]
            assert bm25_order(rows, scores, limit).tolist() == full.tolist()
    # hand-checked: scores -1, -2, -2, -2, 0 ...; the best two are -2 at ids 4 and 7
    rows = np.array([9, 7, 4, 8, *list(range(100, 200))])
    scores = np.array([-1.0, -2.0, -2.0, -2.0] + [0.0] * 100)
    assert bm25_order(rows, scores, 2).tolist() == [2, 1]


def test_match_rows_and_unseen_matches(tmp_path):
    memory, fts5 = both(tmp_path)
    for term in ("same words", "apple", "nothing", "josé martí", "大学 apple"):
        rows = memory.match_rows(term)
        assert rows.tolist() == sorted(fts5.matches(term)) == fts5.match_rows(term).tolist()
    # "same words" matches units 7 and 8
    assert memory.has_unseen_match("same words", frozenset({7})) is True
    assert memory.has_unseen_match("same words", frozenset({7, 8})) is False
    assert memory.has_unseen_match("same words", frozenset({1, 2, 3})) is True  # more seen than matches
    assert memory.has_unseen_match("same words", frozenset({7, 8, 1})) is False
    assert memory.has_unseen_match("nothing", frozenset()) is False


def test_find_sorted_hand_checked():
    from workbench.index.postings import find_sorted

    at, found = find_sorted(np.array([2, 5, 9]), np.array([1, 5, 9, 10]))
    assert found.tolist() == [False, True, True, False]
    assert at[found].tolist() == [1, 2]
    at, found = find_sorted(np.zeros(0, dtype=np.int64), np.array([3, 4]))
    assert found.tolist() == [False, False] and len(at) == 2
