"""The compiled postings loops (`workbench/index/postings_kernel.py`) against the numpy and Python
paths they replace: decoded keys (blob by blob and grouped; blobs the build never writes refused),
a phrase's starts kept by a merge, the expansion's sums over its candidate rows, round 0's first
rows by BM25 with ties by row, and whole trajectories with the kernel and without it."""

import os
import subprocess
import sys

import numpy as np
import pytest

from workbench.engine import Run
from workbench.index import postings_kernel
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.postings import (
    _decode_small,
    bm25_order,
    decode_grouped,
    decode_keys_numpy,
    encode_groups,
    find_sorted,
    sorted_unique,
)
from workbench.index.postings_kernel import top_of_short_lists
from workbench.index.store import Index
from workbench.judges.lexical import LexicalJudge

from .conftest import REPO
from .test_index_blocks import _keys

KERNEL = postings_kernel.load()
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="no C compiler here")


@needs_kernel
def test_hand_checked_blob():
    # ob = 2 (offsets up to 3); v = 1 << 4 | 2 << 2 | 3 = 27, then a gap of 300 << 4 - 27 = 4773
    # (LEB128 0xA5 0x25) to row 300, column 0, offset 0
    blob = bytes([2, 27, 0xA5, 0x25])
    keys, counts = postings_kernel.decode_blobs(KERNEL, [blob, blob])
    one = [(1 << 32) | (2 << 24) | 3, 300 << 32]
    assert keys.tolist() == one + one  # each blob's gaps count from 0
    assert counts.tolist() == [2, 2]


@needs_kernel
@pytest.mark.parametrize("big", [False, True], ids=["short-blobs", "long-blobs"])
def test_kernel_equals_the_numpy_and_python_decoders(big):
    rng = np.random.default_rng(7 if big else 8)
    for _ in range(30):
        groups = _keys(rng, int(rng.integers(1, 40)), big)
        blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
        keys, counts = postings_kernel.decode_blobs(KERNEL, blobs)
        assert keys.dtype == np.int64
        assert keys.tolist() == decode_keys_numpy(blobs).tolist() == _decode_small(blobs)
        assert keys.tolist() == np.concatenate(groups).tolist()
        assert counts.tolist() == [len(g) for g in groups]


@needs_kernel
def test_grouped_counts_equal_the_numpy_path(monkeypatch):
    rng = np.random.default_rng(9)
    groups = _keys(rng, 25, True)
    blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
    # terms of 0, 1 and several blobs (a term with no stored blob is an empty group)
    grouped = [blobs[:3], [], blobs[3:4], blobs[4:11], [], blobs[11:]]
    keys, counts = decode_grouped(grouped)
    monkeypatch.setattr(postings_kernel, "load", lambda: None)  # the numpy path
    keys_np, counts_np = decode_grouped(grouped)
    assert keys.tolist() == keys_np.tolist()
    assert (
        counts.tolist()
        == counts_np.tolist()
        == [sum(len(g) for g in groups[a:b]) for a, b in [(0, 3), (3, 3), (3, 4), (4, 11), (11, 11), (11, 25)]]
    )


@needs_kernel
@pytest.mark.parametrize("bad", [bytes([2, 27, 0xA5]), bytes([2, 0x80, 0x80])], ids=["cut-varint", "no-end"])
def test_a_blob_cut_inside_a_varint_is_refused(bad):
    with pytest.raises(ValueError, match="did not write"):
        postings_kernel.decode_blobs(KERNEL, [bytes([2, 27]), bad])


def test_the_environment_switch_turns_the_kernel_off():
    code = "from workbench.index import postings_kernel; print(postings_kernel.load() is None)"
    env = {**os.environ, "SAG2WB_POSTINGS_KERNEL": "numpy"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


@needs_kernel
def test_keep_followed_equals_the_binary_search():
    rng = np.random.default_rng(11)
    for n, m in [(0, 10), (10, 0), (5, 100_000), (20_000, 30_000), (50_000, 800), (1, 1)]:
        for spread in (1 << 8, 1 << 20, 1 << 40):
            starts = np.unique(rng.integers(0, spread, n)).astype(np.int64)
            other = np.unique(rng.integers(0, spread, m)).astype(np.int64)
            if len(starts) and len(other):  # make sure some follow
                other = np.unique(np.concatenate([other, starts[::3] + 2]))
            for k in (0, 1, 2, 5):
                want = starts[find_sorted(other, starts + k)[1]]
                assert postings_kernel.keep_followed(KERNEL, starts, other, k).tolist() == want.tolist()


@needs_kernel
def test_keep_followed_hand_checked():
    starts = np.array([3, 10, 20, 30], dtype=np.int64)
    other = np.array([1, 4, 11, 12, 31, 40], dtype=np.int64)
    assert postings_kernel.keep_followed(KERNEL, starts, other, 1).tolist() == [3, 10, 30]
    assert postings_kernel.keep_followed(KERNEL, starts, other, 2).tolist() == [10]
    assert postings_kernel.keep_followed(KERNEL, starts, other, 10).tolist() == [30]


def test_sorted_unique_equals_np_unique():
    rng = np.random.default_rng(12)
    for n in (0, 1, 2, 1000, 40_000):
        ids = rng.integers(0, 50_000, n)
        assert sorted_unique(ids).tolist() == np.unique(ids).tolist()


def _random_lists(rng, n_lists: int, size: int, ties: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    lists = []
    for _ in range(n_lists):
        rows = np.unique(rng.integers(0, size, int(rng.integers(0, size)))).astype(np.int64)
        # few distinct terms make equal sums (ties broken by row), else sums that differ in the last bits
        terms = rng.choice([0.25, 0.5, 1.0], len(rows)) if ties else rng.random(len(rows)) * 3
        lists.append((rows, terms.astype(np.float64)))
    return lists


@needs_kernel
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_add_among_equals_the_straightforward_sum(ties):
    rng = np.random.default_rng(13)
    for size in (1, 50, 5000):
        lists = _random_lists(rng, int(rng.integers(1, 8)), size, ties)
        among = np.unique(rng.integers(0, size, int(rng.integers(1, size + 1)))).astype(np.int64)
        want = []
        for u in among.tolist():
            total = 0.0
            for rows, terms in lists:  # phrases in query order, from 0.0
                at = int(np.searchsorted(rows, u))
                if at < len(rows) and rows[at] == u:
                    total += float(terms[at])
            want.append(total)
        assert postings_kernel.add_among(KERNEL, among, lists).tolist() == want
        # through row slots (lists up to 16x longer than `among` read straight through), left at -1
        slots = np.full(size + 3, -1, dtype=np.int32)
        assert postings_kernel.add_among(KERNEL, among, lists, slots).tolist() == want
        assert (slots == -1).all()


@needs_kernel
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_top_bm25_equals_bm25_order_of_every_row(ties):
    rng = np.random.default_rng(14)
    for size, limit in [(1, 1), (40, 5), (3000, 100), (3000, 0), (200, 500)]:
        lists = _random_lists(rng, int(rng.integers(1, 6)), size, ties)
        total = np.zeros(size)
        hit = np.zeros(size, dtype=bool)
        for rows, terms in lists:
            total[rows] += terms
            hit[rows] = True
        rows = np.flatnonzero(hit)
        scores = -1.0 * total[rows]
        order = bm25_order(rows, scores, limit)
        got_rows, got_scores = postings_kernel.top_bm25(KERNEL, [x for x in lists if len(x[0])], size, limit)
        assert got_rows.tolist() == rows[order].tolist()
        assert got_scores.tolist() == scores[order].tolist()


@needs_kernel
def test_top_bm25_hand_checked_ties_by_row():
    lists = [
        (np.array([1, 3, 4], dtype=np.int64), np.array([1.0, 2.0, 1.0])),
        (np.array([1], dtype=np.int64), np.array([1.0])),
    ]
    rows, scores = postings_kernel.top_bm25(KERNEL, lists, 5, 3)
    assert rows.tolist() == [1, 3, 4] and scores.tolist() == [-2.0, -2.0, -1.0]
    with pytest.raises(IndexError):
        postings_kernel.top_bm25(KERNEL, lists, 4, 3)


@needs_kernel
@pytest.mark.slow
def test_whole_trajectories_equal_with_and_without_the_kernel(tmp_path, monkeypatch):
    units = load_corpus(REPO / "sample_corpora" / "encyclopedia" / "corpus.json")
    Index.build(units, tmp_path / "enc.sqlite")
    questions = load_questions(REPO / "sample_corpora" / "encyclopedia" / "questions.jsonl")

    def traces() -> list[str]:
        index = Index(tmp_path / "enc.sqlite")  # fresh caches: every phrase decoded and scored again
        return [Run(index, q, judge=LexicalJudge(index)).run().to_json(stats=False) for q in questions]

    compiled = traces()
    monkeypatch.setattr(postings_kernel, "load", lambda: None)
    assert traces() == compiled


@needs_kernel
def test_top_bm25_leaves_its_scratch_zeroed_for_the_next_call():
    rng = np.random.default_rng(15)
    size = 2000
    scratch = np.zeros(size, dtype=np.float64), np.zeros(size, dtype=np.uint8)
    for limit in (1, 10, 100, 3000):
        lists = [x for x in _random_lists(rng, 5, size, ties=True) if len(x[0])]
        fresh = postings_kernel.top_bm25(KERNEL, lists, size, limit)
        kept = postings_kernel.top_bm25(KERNEL, lists, size, limit, scratch)
        assert kept[0].tolist() == fresh[0].tolist() and kept[1].tolist() == fresh[1].tolist()
        assert not scratch[0].any() and not scratch[1].any()


def _question_like_lists(rng, size: int, ties: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """A few rare phrases with large terms, several common ones (most rows) with small terms."""
    lists = []
    for _ in range(int(rng.integers(1, 5))):
        rows = np.unique(rng.integers(0, size, int(rng.integers(1, 60)))).astype(np.int64)
        lists.append((rows, (rng.choice([2.0, 3.0], len(rows)) if ties else 1 + 3 * rng.random(len(rows)))))
    for _ in range(int(rng.integers(1, 6))):
        rows = np.unique(rng.integers(0, size, int(rng.integers(size // 4, size)))).astype(np.int64)
        lists.append((rows, (rng.choice([0.125, 0.25], len(rows)) if ties else 0.3 * rng.random(len(rows)))))
    order = rng.permutation(len(lists))  # query order mixes rare and common phrases
    return [lists[i] for i in order]


@needs_kernel
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_pruned_top_equals_scoring_every_row(ties):
    rng = np.random.default_rng(16 + ties)
    proved = 0
    slots = np.full(4000, -1, dtype=np.int32)  # kept across calls, as Postings keeps its own
    for _ in range(200):
        size = int(rng.integers(200, 4000))
        lists = _question_like_lists(rng, size, ties)
        limit = int(rng.integers(1, 12))
        dense = postings_kernel.top_bm25(KERNEL, lists, size, limit)
        pruned = top_of_short_lists(KERNEL, lists, limit, slots if limit % 2 else None)
        if pruned is not None:
            proved += 1
            assert pruned[0].tolist() == dense[0].tolist() and pruned[1].tolist() == dense[1].tolist()
    assert (slots == -1).all()
    assert proved > 50  # the pruned path is taken, not only its fallback


@needs_kernel
def test_pruned_top_hand_checked():
    # rare phrase: rows 5 (2.0) and 9 (2.0); common phrase: every row 0..99 with 0.5, row 7 with 1.0.
    # limit 2: rows 5 and 9 score 2.5; any other row at most 1.0 < 2.5: rows 5, 9 without the others
    common = np.arange(100, dtype=np.int64)
    terms = np.full(100, 0.5)
    terms[7] = 1.0
    lists = [(np.array([5, 9], dtype=np.int64), np.array([2.0, 2.0])), (common, terms)]
    rows, scores = top_of_short_lists(KERNEL, lists, 2)
    assert rows.tolist() == [5, 9] and scores.tolist() == [-2.5, -2.5]
    # limit 3: the rare rows give only 2 rows: not provable from them, every row is scored
    assert top_of_short_lists(KERNEL, lists, 3) is None
    # a common phrase whose largest term reaches the rare rows' sum is not left out: its rows are
    # scored too, and row 7 (2.5) ties with 5 and 9 and comes before 9
    terms[7] = 2.5
    rows, scores = top_of_short_lists(KERNEL, lists, 2)
    assert rows.tolist() == [5, 7] and scores.tolist() == [-2.5, -2.5]
    assert postings_kernel.top_bm25(KERNEL, lists, 100, 2)[0].tolist() == [5, 7]


@needs_kernel
def test_pruned_top_seeded_by_the_shortest_list_hand_checked():
    # no list of 16 * limit rows or fewer: the shortest (rows 0..19: 2.0, row 3: 3.0) seeds theta.
    # Its rows with the common phrase (rows 0..99, 0.5 each): row 3 3.5, the others 2.5, so theta
    # 3.5 at limit 1; the common phrase's 0.5 is below it and left out: row 3 alone, as scoring every row
    rare = np.arange(20, dtype=np.int64)
    rare_terms = np.full(20, 2.0)
    rare_terms[3] = 3.0
    lists = [(rare, rare_terms), (np.arange(100, dtype=np.int64), np.full(100, 0.5))]
    rows, scores = top_of_short_lists(KERNEL, lists, 1)  # None before: no list of 16 rows or fewer
    assert rows.tolist() == [3] and scores.tolist() == [-3.5]
    assert postings_kernel.top_bm25(KERNEL, lists, 100, 1)[0].tolist() == [3]


@needs_kernel
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_pruned_top_without_short_lists_equals_scoring_every_row(ties):
    rng = np.random.default_rng(40 + ties)
    proved = 0
    for _ in range(200):
        size = int(rng.integers(2000, 6000))
        limit = int(rng.integers(1, 6))
        lists = [(rows, terms) for rows, terms in _question_like_lists(rng, size, ties) if len(rows) > 16 * limit]
        rare = np.unique(rng.integers(0, size, int(rng.integers(16 * limit + 1, 128 * limit)))).astype(np.int64)
        if len(rare) <= 16 * limit:
            continue
        lists.insert(int(rng.integers(0, len(lists) + 1)), (rare, 1 + 3 * rng.random(len(rare))))
        dense = postings_kernel.top_bm25(KERNEL, lists, size, limit)
        pruned = top_of_short_lists(KERNEL, lists, limit)
        if pruned is not None:
            proved += 1
            assert pruned[0].tolist() == dense[0].tolist() and pruned[1].tolist() == dense[1].tolist()
    assert proved > 50


@needs_kernel
def test_add_among_slots_refuse_rows_past_them():
    lists = [(np.array([1, 8], dtype=np.int64), np.array([1.0, 2.0]))]
    with pytest.raises(IndexError):
        postings_kernel.add_among(KERNEL, np.array([1], dtype=np.int64), lists, np.full(8, -1, dtype=np.int32))
    got = postings_kernel.add_among(KERNEL, np.array([1, 8], dtype=np.int64), lists, np.full(9, -1, dtype=np.int32))
    assert got.tolist() == [1.0, 2.0]
