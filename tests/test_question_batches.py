"""A question's reads done together give what they give one by one: many terms' positions
decoded in one pass, a round's df counted at once (Index.prefetch_df), a phrase's starts found
from its rarest token, and bm25_among's two ways of finding rows, against FTS5's own answers."""

import numpy as np
import pytest

from workbench.engine import Run
from workbench.index import store
from workbench.index.corpora import load_questions
from workbench.index.postings import decode_groups, decode_keys, encode_groups
from workbench.index.store import Index, query_expression
from workbench.judges.lexical import LexicalJudge

from .conftest import REPO, build_index
from .test_postings import MIXED

# "apple" and "words" in every passage, "seven" in one: phrases whose rarest token is not the first
PASSAGES = MIXED + [
    (f"Extra {i}", f"apple words {'seven' if i == 7 else i} same {'new ' * (i % 4)}tail") for i in range(40)
]
TERMS = [
    "apple",
    "words",
    "apple words",
    "apple words seven",
    "words seven same",
    "seven same new",
    "same new new tail",
    "new new",
    "josé martí",
    "jose marti",
    "北京大学",
    "大学 apple",
    "3.5%",
    "role_id",
    "nothing here",
    "absent",
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batches")
    memory = build_index(folder, PASSAGES)
    return memory, Index(memory.path, max_postings=0)


def test_decode_groups_hand_checked():
    # keys (row << 32 | column << 24 | offset): a term in rows 1 and 3, none, one in row 2
    a = [(1 << 32) | (2 << 24) | 3, (3 << 32) | 5]
    b = [(2 << 32) | (1 << 24)]
    blobs = encode_groups(np.array(a + b, dtype=np.int64), [2, 1])
    got = decode_groups([[blobs[0]], [], [blobs[1]]])
    assert [g.tolist() for g in got] == [a, [], b]
    assert decode_groups([[], []])[1].tolist() == []


def test_decode_groups_equal_each_groups_decoding():
    rng = np.random.default_rng(11)
    for _ in range(30):
        groups = []
        for _ in range(int(rng.integers(1, 9))):  # a term: 0-4 blobs (blocks) of sorted keys
            blobs = []
            for _ in range(int(rng.integers(0, 5))):
                n = int(rng.integers(1, 300))
                rows = rng.integers(0, 1 << int(rng.integers(1, 30)), n)
                keys = np.unique((rows << 32) | (rng.integers(0, 3, n) << 24) | rng.integers(0, 1 << 20, n))
                blobs += encode_groups(keys, [len(keys)])
            groups.append(blobs)
        got = decode_groups(groups)
        assert len(got) == len(groups)
        for group, keys in zip(groups, got):
            want = decode_keys(group) if group else np.zeros(0, dtype=np.int64)
            assert np.array_equal(keys, want)


def test_loaded_tokens_equal_tokens_read_one_by_one(pair):
    memory, _ = pair
    one = Index(memory.path)
    tokens = ["apple", "words", "seven", "new", "absent", "北京大学", "josé"]
    memory.postings.load_tokens(tokens)
    for t in tokens:
        assert t in memory.postings._token_keys
        assert np.array_equal(memory.postings._term_keys(t), one.postings._term_keys(t)), t


def test_phrase_starts_from_the_rarest_token_equal_fts5(pair):
    memory, fts5 = pair
    for term in TERMS:
        assert memory.matches(term) == fts5.matches(term), term
    assert memory.matches("words seven same") == {len(MIXED) + 8}
    assert memory.matches("apple words seven") == {len(MIXED) + 8}
    assert memory.matches("same new new tail") == {len(MIXED) + 1 + i for i in range(40) if i % 4 == 2}


def test_prefetched_df_equals_df_one_by_one_and_fts5(pair, monkeypatch):
    memory, fts5 = pair
    monkeypatch.setattr(store, "UNIT_CACHE_LIMIT", 4)  # the large-index path: vocabulary and positions
    ahead = Index(memory.path)
    ahead.prefetch_df(TERMS, phrases=False)
    singles = [t for t in TERMS if store._PLAIN_TOKEN.fullmatch(t)]
    assert sorted(t for t in TERMS if ahead.cached_df(t) is not None) == sorted(singles)
    ahead.prefetch_df(TERMS)
    one = Index(memory.path)
    for t in TERMS:
        assert ahead.cached_df(t) == one.df(t) == fts5.df(t), t
    assert ahead.cached_df("apple words seven") == 1 and ahead.cached_df("absent") == 0


@pytest.mark.parametrize("weights", [(2.0, 2.0, 1.0), (0.3, 1.7, 0.1)])
def test_bm25_among_both_ways_equal_fts5(pair, weights):
    memory, fts5 = pair
    expression = query_expression(["apple", "seven", "same new", "josé martí", "nothing"])
    everything = fts5.bm25_all(expression, weights)
    rows = sorted(everything)
    # one row: "apple"'s 40+ rows are > 16x longer, so it is searched; all rows: the slot map
    for among in ([rows[-1]], rows[:2], rows, rows[::3], []):
        got = memory.bm25_among(expression, np.array(among, dtype=np.int64), weights).tolist()
        assert got == [everything[u] for u in among]  # bit for bit


@pytest.mark.slow
def test_trajectories_on_the_large_index_path_equal_fts5(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "UNIT_CACHE_LIMIT", 4)
    corpus = REPO / "sample_corpora" / "encyclopedia"
    large = Index.build(corpus / "corpus.json", tmp_path / "enc.sqlite")
    plain = Index(large.path, max_postings=0)
    for q in load_questions(corpus / "questions.jsonl")[:12]:
        a = Run(large, q, judge=LexicalJudge(large)).run()
        b = Run(plain, q, judge=LexicalJudge(plain)).run()
        assert a.to_json(stats=False) == b.to_json(stats=False), q.id


def test_a_search_reads_its_phrases_tokens_together_and_scores_as_fts5(pair):
    memory, fts5 = pair
    fresh = Index(memory.path)
    read = []
    load = fresh.postings.load_tokens
    fresh.postings.load_tokens = lambda tokens: read.append(sorted(set(tokens))) or load(read[-1])
    expression = query_expression(["apple words", "seven", "josé martí", "北京大学", "absent"])
    assert fresh.search(expression, 10) == fts5.search(expression, 10)
    assert read == [["absent", "apple", "jose", "marti", "seven", "words", "北京大学"]]  # as FTS5 splits them
    assert fresh.search(expression, 10) == fts5.search(expression, 10)  # again, from the cached terms
    assert read[1:] == [[]]
