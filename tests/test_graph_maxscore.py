"""The compiled kernel's question-side max-score (workbench/feedback/graph_kernel.py): the
lists of a question's phrases of least bound are not read when their bounds add up to less
than the k-th best score found from the rarest phrases' lists. Whatever the seed size and the
share, the graph stays the definition's (one `Index.search` per passage), bit for bit; and the
phrase bounds are the largest listed contributions (a hand-checked table)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_graph_scale import assert_same, corpora, numpy_asked  # noqa: F401 (the fixture)
from workbench.feedback import GraphParams, graph_kernel, graph_scoring
from workbench.feedback.graph_scoring import Level, PhraseTable


def kernel_constants(seeds: int, share: float, extra: int = graph_scoring.EXTRA) -> tuple:
    """`score_share`'s constants as `score_all` passes them, with these seed positions, essential
    share and extra partial sums scored for theta."""
    return (graph_scoring.MARGIN, extra, graph_scoring.START_SHARE, graph_scoring.KEEP_SHARE, seeds, share)


def every_rows_question(rows_of, n_rows: int, rng) -> graph_scoring.Questions:
    """Every row's question: the phrases whose lists (`rows_of`) hold it, in a shuffled order."""
    members = [set(rows.tolist()) for rows in rows_of]
    phrases_of = [[p for p in range(len(rows_of)) if r in members[p]] for r in range(n_rows)]
    for question in phrases_of:
        rng.shuffle(question)
    return graph_scoring.Questions(
        ids=np.arange(n_rows),
        offsets=np.concatenate([[0], np.cumsum([len(q) for q in phrases_of])]),
        phrases=np.array([p for q in phrases_of for p in q], dtype=np.int32),
        vocabulary=[],
    )


def test_phrase_bounds_are_the_largest_listed_contribution():
    # phrase 0: rows 1, 4 (0.5, 2.0); phrase 1: none; phrase 2: rows 0, 1, 2 (1.0, 3.0, 0.25)
    table = PhraseTable(
        offsets=np.array([0, 2, 2, 5]),
        rows=np.array([1, 4, 0, 1, 2], dtype=np.int32),
        impacts=np.array([0.5, 2.0, 1.0, 3.0, 0.25]),
        missing=np.zeros(3, dtype=bool),
    )
    whole = Level(0.0, table.offsets, None, None)
    assert graph_kernel.phrase_bounds(table, whole).tolist() == [2.0, 0.0, 3.0]
    # a prefix level that lists phrase 0's row 1 and phrase 2's rows 0 and 2 only
    entries = np.array([0, 2, 4], dtype=np.int32)
    listed = Level(1.0, np.searchsorted(entries, table.offsets).astype(np.int64), entries, np.zeros(5))
    assert graph_kernel.phrase_bounds(table, listed).tolist() == [0.5, 0.0, 1.0]
    assert listed.bounds is not None and listed.bounds.tolist() == [0.5, 0.0, 1.0]  # kept for the workers


@pytest.mark.parametrize("seed", [1, 40, 10**9])
@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_any_seed_and_share_give_the_definitions_graph(corpora, seed, share, monkeypatch):  # noqa: F811
    """share 0.0 reads every list (the kernel before max-score); 1.0 leaves out the most;
    seed 1: one phrase's list gives theta0; 10**9: every list is a seed (nothing left out)."""
    if not numpy_asked():
        assert graph_kernel.load() is not None, "the compiled kernel did not load (no C compiler?)"
    monkeypatch.setattr(graph_scoring, "SEED_POSITIONS", seed)
    monkeypatch.setattr(graph_scoring, "ESSENTIAL_SHARE", share)
    for corpus in ("encyclopedia", "internal_docs"):
        assert_same(corpora[corpus], GraphParams(), workers=1)
        assert_same(corpora[corpus], GraphParams(neighbours=3, query_tokens=12), workers=1)


@pytest.mark.parametrize("fractions", [(0.02,), (0.3,), (0.05, 0.15, 0.3)])
def test_max_score_with_prefix_levels_gives_the_definitions_graph(corpora, fractions, monkeypatch):  # noqa: F811
    """At a prefix level an unlisted row has its left-out mass (beta) too: the unread lists'
    bounds are added to the level's budget."""
    monkeypatch.setattr(graph_scoring, "KERNEL_FRACTIONS", fractions)
    monkeypatch.setattr(graph_scoring, "SEED_POSITIONS", 20)
    monkeypatch.setattr(graph_scoring, "ESSENTIAL_SHARE", 0.9)
    for corpus in ("encyclopedia", "internal_docs"):
        assert_same(corpora[corpus], GraphParams(), workers=1)


def test_a_share_above_one_is_refused(corpora, monkeypatch):  # noqa: F811
    """Above 1 the unread lists could hold a row of the k best: refused, not a wrong graph."""
    if numpy_asked():
        pytest.skip("the share is the compiled kernel's")
    monkeypatch.setattr(graph_scoring, "ESSENTIAL_SHARE", 1.5)
    with pytest.raises(ValueError, match="essential_share"):
        assert_same(corpora["internal_docs"], GraphParams(), workers=1)


def _passage_zero(table: PhraseTable, n_rows: int, constants):
    """The kernel (no buckets, no blocks) over passage 0's question, phrases 0 and 1, k = 1:
    (neighbours, scores, stats, the level, the questions)."""
    lib = graph_kernel.load()
    if lib is None:
        pytest.skip("the compiled kernel's bounds (SAG2WB_GRAPH_KERNEL=numpy or no compiler)")
    questions = graph_scoring.Questions(
        ids=np.array([0]), offsets=np.array([0, 2]), phrases=np.array([0, 1], dtype=np.int32), vocabulary=[]
    )
    whole = [Level(0.0, table.offsets, None, None)]
    signatures = graph_kernel.row_signatures(lib, table, n_rows)
    stats = np.zeros(5, dtype=np.int64)
    skip = np.zeros(1, dtype=np.uint8)
    neighbours, scores = graph_kernel.score_share(
        lib, table, signatures, whole, questions, skip, 1, 0, 1, constants, stats
    )
    return neighbours, scores, stats, whole, questions


def test_a_hand_worked_question_keeps_one_row_and_prunes_another():
    """Passage 0's question is phrases 0 and 1, k = 1, one exact score for the first theta.
    Phrase 0 (bound 3.0) lists rows 0 (me), 1, 2, 3 at 3.0, 3.0, 2.5, 2.5; phrase 1 (bound 1.0)
    lists rows 0 and 3 at 1.0. Seeds: phrase 0's list (4 positions); the best partial sum is
    row 1's (3.0, the first of the tie), exact 3.0 (row 1 lacks phrase 1): theta = 3.0. Phrase
    1's bound 1.0 is below the share of theta, so its list is not read; each candidate's coarse
    bound is its partial sum + 1.0: rows 2 and 3 both reach 3.5 >= theta. Row 2's signature
    lacks phrase 1's bit: its bound is 2.5 < 3.0, pruned without an exact score; row 3 has
    it: its contribution is looked up (1.0: the bound stays 3.5), then it is scored exactly,
    2.5 + 1.0 = 3.5, the neighbour. Two exact scores (rows 1, 3), one look-up."""
    table = PhraseTable(
        offsets=np.array([0, 4, 6]),
        rows=np.array([0, 1, 2, 3, 0, 3], dtype=np.int32),
        impacts=np.array([3.0, 3.0, 2.5, 2.5, 1.0, 1.0]),
        missing=np.zeros(2, dtype=bool),
    )
    # margin, extra (0: k + 0 = one best partial sum scored for theta), start, keep, seeds, share
    constants = kernel_constants(seeds=1, share=1.0, extra=0)
    neighbours, scores, stats, whole, questions = _passage_zero(table, 4, constants)
    assert neighbours.tolist() == [[3]] and scores.tolist() == [[-3.5]]
    positions, lists, past_coarse, exact, searched = stats.tolist()
    assert (positions, lists) == (4, 1)  # phrase 1's list was not read
    assert past_coarse == 2  # rows 2 and 3 (row 1 was scored for theta)
    assert exact == 2  # rows 1 and 3: row 2 pruned by its signature
    assert searched == 1  # row 3's contribution from phrase 1, looked up before its exact score
    # the numpy path (no pruning by signature) finds the same neighbour and score
    by_row = graph_scoring.row_lists(table, 4)
    rows, numpy_scores = graph_scoring.top_neighbours(
        table, by_row, whole, questions.of(0), 0, 1, graph_scoring.Scratch.of(4, 2)
    )
    assert rows.tolist() == [3] and numpy_scores.tolist() == [-3.5]


def test_a_raise_does_not_score_a_row_that_cannot_enter_the_top():
    """Passage 0's question is phrases 0 and 1, k = 1, two best partial sums scored for theta.
    Phrase 0 (bound 5.0) lists rows 0 (me), 1, 2 at 5.0, 3.0, 2.0; phrase 1 (bound 1.0) lists
    rows 0 and 1 at 1.0. Seeds: phrase 0's list; the raise takes rows 1 (3.0) and 2 (2.0). Row
    1 fills the top: exact 3.0 + 1.0 = 4.0. Row 2's bound is its partial sum 2.0 plus phrase 1's
    bound only if its signature has phrase 1's bit (it has not): 2.0 < 4.0, so it is not scored
    (it could not enter the top). Every list is read (share 0), nothing else is a candidate:
    one exact score (before issue 33's seventh stop: two), no look-up; the neighbour row 1."""
    table = PhraseTable(
        offsets=np.array([0, 3, 5]),
        rows=np.array([0, 1, 2, 0, 1], dtype=np.int32),
        impacts=np.array([5.0, 3.0, 2.0, 1.0, 1.0]),
        missing=np.zeros(2, dtype=bool),
    )
    neighbours, scores, stats, _, _ = _passage_zero(table, 3, kernel_constants(seeds=1, share=0.0, extra=1))
    assert neighbours.tolist() == [[1]] and scores.tolist() == [[-4.0]]
    positions, lists, past_coarse, exact, searched = stats.tolist()
    assert (positions, lists) == (5, 2)
    assert exact == 1  # row 1 only: row 2 is bounded out in the raise
    assert (past_coarse, searched) == (0, 0)


def test_list_buckets_find_the_same_contributions_as_whole_list_searches():
    """Lists of 64 positions or more get buckets (`graph_kernel.list_buckets`): each bucket
    starts at the first position of its rows, and the kernel's neighbours with buckets equal
    those without and the numpy path's, on a random table whose long lists span 2,000 rows."""
    lib = graph_kernel.load()
    if lib is None:
        pytest.skip("the compiled kernel's buckets (SAG2WB_GRAPH_KERNEL=numpy or no compiler)")
    rng = np.random.default_rng(7)
    n_rows, lengths = 2000, [3, 40, 63, 64, 65, 200, 900, 1999, 2000, 1, 500, 120]
    rows_of = [np.sort(rng.choice(n_rows, size=n, replace=False)).astype(np.int32) for n in lengths]
    impacts = rng.random(sum(lengths)).round(3) + 0.01  # rounded: ties between rows too
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    table = PhraseTable(offsets, np.concatenate(rows_of), impacts, np.zeros(len(lengths), dtype=bool))
    buckets = graph_kernel.list_buckets(lib, table, n_rows)
    for p, rows in enumerate(rows_of):
        if len(rows) < 64:
            assert buckets.offsets[p] == -1
            continue
        shift = int(buckets.shift[p])
        n_buckets = ((n_rows - 1) >> shift) + 1
        assert n_buckets <= len(rows) // 8
        first = buckets.first[buckets.offsets[p] : buckets.offsets[p] + n_buckets + 1]
        assert first.tolist() == np.searchsorted(rows >> shift, np.arange(n_buckets + 1)).tolist()
    questions = every_rows_question(rows_of, n_rows, rng)
    whole = [Level(0.0, table.offsets, None, None)]
    signatures = graph_kernel.row_signatures(lib, table, n_rows)
    skip = np.zeros(n_rows, dtype=np.uint8)
    constants = kernel_constants(seeds=50, share=0.9)
    found = [
        graph_kernel.score_share(lib, table, signatures, whole, questions, skip, 8, 0, n_rows, constants, buckets=b)
        for b in (buckets, None)
    ]
    assert found[0][0].tolist() == found[1][0].tolist()
    assert found[0][1].view(np.int64).tolist() == found[1][1].view(np.int64).tolist()
    by_row, scratch = graph_scoring.row_lists(table, n_rows), graph_scoring.Scratch.of(n_rows, len(lengths))
    for r in range(0, n_rows, 37):
        rows, scores = graph_scoring.top_neighbours(table, by_row, whole, questions.of(r), r, 8, scratch)
        assert found[0][0][r, : len(rows)].tolist() == rows.tolist()
        assert found[0][1][r, : len(rows)].view(np.int64).tolist() == scores.view(np.int64).tolist()
