"""Block-max bounds in the compiled kernel (workbench/feedback/graph_blocks.py): the rows in
blocks of 2**shift ids, each long list's largest contribution per block, and the positions of
blocks whose bound is below theta left unread. A hand-worked question where one block is
skipped and one whose bound equals theta is not (it holds the tie that the lower id wins);
the maxima's bytes by hand; and the graphs with every list's maxima kept, with none, and at
several block sizes equal to the definition's (one `Index.search` per passage), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_graph_maxscore import every_rows_question, kernel_constants
from tests.test_graph_scale import assert_same, corpora, numpy_asked  # noqa: F401 (the fixture)
from workbench.feedback import GraphParams, graph_blocks, graph_kernel, graph_scoring
from workbench.feedback.graph_scoring import Level, PhraseTable


def _kernel():
    lib = graph_kernel.load()
    if lib is None:
        pytest.skip("the compiled kernel's blocks (SAG2WB_GRAPH_KERNEL=numpy or no compiler)")
    return lib


def test_block_maxima_are_rounded_up_steps_of_one_unit():
    """Blocks of 2 rows; phrase 0 (rows 0, 1, 5 at 1.0, 2.0, 0.5) and phrase 2 (rows 2, 3 at
    4.0, 0.3) are kept (2+ rows), phrase 1 (one row) is not. unit = 4.0 / 254; a block's byte
    is floor(max / unit) + 1: 2.0 -> 127 + 1, 0.5 -> 31 + 1, 0.3 -> 19 + 1; the largest, 4.0,
    is 255 (254 steps and over): each byte x unit >= the block's largest contribution."""
    lib = _kernel()
    table = PhraseTable(
        offsets=np.array([0, 3, 4, 6]),
        rows=np.array([0, 1, 5, 4, 2, 3], dtype=np.int32),
        impacts=np.array([1.0, 2.0, 0.5, 9.0, 4.0, 0.3]),
        missing=np.zeros(3, dtype=bool),
    )
    bounds = graph_kernel.phrase_bounds(table, Level(0.0, table.offsets, None, None))
    blocks = graph_blocks.block_maxima(lib, table, 6, bounds, shift=1, from_rows=2)
    assert (blocks.n_blocks, blocks.slot.tolist(), blocks.unit) == (3, [0, -1, 1], 4.0 / 254)
    assert blocks.maxima.tolist() == [128, 0, 32, 0, 255, 0]
    kept = blocks.maxima.reshape(2, 3) * blocks.unit
    assert (kept >= [[2.0, 0.0, 0.5], [0.0, 4.0, 0.0]]).all()


def _one_question(lib, table, signatures, whole, questions, constants, stats, blocks):
    """The kernel over question 0 alone (row 0, nothing skipped, one neighbour), no buckets."""
    skip = np.zeros(1, dtype=np.uint8)
    return graph_kernel.score_share(
        lib, table, signatures, whole, questions, skip, 1, 0, 1, constants, stats, None, None, blocks
    )


def _hand_worked(lib, blocks):
    """k = 1, passage 0's question: phrases A, B, C (bounds 5, 3, 1), rows in blocks of 2.
    A: rows 0 (me) 5.0, 4 3.0. B: rows 2 0.5, 3 3.0, 4 1.0, 6 1.0, 7 1.0. C: row 3 1.0.
    Scores: row 3 = 3.0 + 1.0 = 4.0, row 4 = 3.0 + 1.0 = 4.0 (a tie: row 3, the lower id,
    is the neighbour), rows 6, 7 = 1.0, row 2 = 0.5. The seed is A's list (2 positions): row
    4's exact score gives theta = 4.0; share 0: B and C are both read. The blocks' bounds then
    (row 4's sum so far, and B's and C's block maxima): {0, 1} 5.0 (row 0's A), {2, 3} 3.0 +
    1.0 = 4.0 (not below theta: kept, so row 3 is found), {4, 5} 3.0 + 1.0 = 4.0, {6, 7} 1.0
    < 4.0: B's rows 6 and 7 are not read."""
    table = PhraseTable(
        offsets=np.array([0, 2, 7, 8]),
        rows=np.array([0, 4, 2, 3, 4, 6, 7, 3], dtype=np.int32),
        impacts=np.array([5.0, 3.0, 0.5, 3.0, 1.0, 1.0, 1.0, 1.0]),
        missing=np.zeros(3, dtype=bool),
    )
    questions = graph_scoring.Questions(
        ids=np.array([0]), offsets=np.array([0, 3]), phrases=np.array([0, 1, 2], dtype=np.int32), vocabulary=[]
    )
    whole = [Level(0.0, table.offsets, None, None)]
    graph_kernel.phrase_bounds(table, whole[0])
    signatures = graph_kernel.row_signatures(lib, table, 8)
    stats = np.zeros(5, dtype=np.int64)
    # extra 0: one best partial sum scored for theta; seeds: 1 position; share 0
    constants = kernel_constants(seeds=1, share=0.0, extra=0)
    made = None if blocks is None else graph_blocks.block_maxima(lib, table, 8, whole[0].bounds, 1, blocks)
    neighbours, scores = _one_question(lib, table, signatures, whole, questions, constants, stats, made)
    return neighbours.tolist(), scores.tolist(), int(stats[0]), table, questions, whole


@pytest.mark.parametrize("from_rows", [1, 100])  # every list's maxima kept (1), none (100: added in)
def test_a_block_below_theta_is_skipped_and_one_at_theta_is_not(from_rows):
    lib = _kernel()
    neighbours, scores, positions, table, questions, whole = _hand_worked(lib, from_rows)
    assert (neighbours, scores) == ([[3]], [[-4.0]])  # row 3: 4.0, the tie with row 4 by lower id
    assert positions == 2 + 3 + 1  # A's 2, B's 3 of 5 (rows 6, 7 skipped), C's 1
    # without blocks: every position read, the same list
    assert _hand_worked(lib, None)[:3] == ([[3]], [[-4.0]], 8)
    # the numpy path (no pruning) agrees
    rows, numpy_scores = graph_scoring.top_neighbours(
        table, graph_scoring.row_lists(table, 8), whole, questions.of(0), 0, 1, graph_scoring.Scratch.of(8, 3)
    )
    assert rows.tolist() == [3] and numpy_scores.tolist() == [-4.0]


@pytest.mark.parametrize("shift", [0, 3, 7])
def test_random_tables_give_the_same_lists_with_blocks_and_without(shift):
    """Long lists over 3,000 rows, impacts rounded (ties between rows, some at blocks' edges),
    every list kept or none: the kernel's neighbours and scores with blocks equal those without
    and the numpy path's, bit for bit."""
    lib = _kernel()
    rng = np.random.default_rng(11)
    n_rows, lengths = 3000, [2, 30, 64, 300, 900, 2999, 3000, 1500, 5, 700, 120, 2000]
    rows_of = [np.sort(rng.choice(n_rows, size=n, replace=False)).astype(np.int32) for n in lengths]
    impacts = rng.random(sum(lengths)).round(2) + 0.01
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    table = PhraseTable(offsets, np.concatenate(rows_of), impacts, np.zeros(len(lengths), dtype=bool))
    questions = every_rows_question(rows_of, n_rows, rng)
    whole = [Level(0.0, table.offsets, None, None)]
    bounds = graph_kernel.phrase_bounds(table, whole[0])
    signatures = graph_kernel.row_signatures(lib, table, n_rows)
    buckets = graph_kernel.list_buckets(lib, table, n_rows)
    skip = np.zeros(n_rows, dtype=np.uint8)
    constants = kernel_constants(seeds=40, share=0.9)
    found = []
    for blocks in (None, graph_blocks.block_maxima(lib, table, n_rows, bounds, shift, 1), "scatter"):
        if blocks == "scatter":
            blocks = graph_blocks.block_maxima(lib, table, n_rows, bounds, shift, n_rows + 1)
        stats = np.zeros(5, dtype=np.int64)
        nb, sc = graph_kernel.score_share(
            lib, table, signatures, whole, questions, skip, 8, 0, n_rows, constants, stats, buckets, None, blocks
        )
        found.append((nb.tolist(), sc.view(np.int64).tolist(), int(stats[0])))
    assert found[1][:2] == found[0][:2] and found[2][:2] == found[0][:2]
    if shift == 0:  # rows without locality: only blocks of one row rule any out here
        assert found[1][2] < found[0][2] and found[2][2] < found[0][2]
    by_row, scratch = graph_scoring.row_lists(table, n_rows), graph_scoring.Scratch.of(n_rows, len(lengths))
    for r in range(0, n_rows, 41):
        rows, scores = graph_scoring.top_neighbours(table, by_row, whole, questions.of(r), r, 8, scratch)
        assert found[0][0][r][: len(rows)] == rows.tolist()
        assert found[0][1][r][: len(rows)] == scores.view(np.int64).tolist()


@pytest.mark.parametrize(("shift", "from_rows"), [(0, 1), (2, 3), (4, 10**9)])
def test_any_block_size_gives_the_definitions_graph(corpora, shift, from_rows, monkeypatch):  # noqa: F811
    """The bundled corpora's lists are far shorter than BLOCK_FROM: with small blocks and
    every list kept (from 1 row) the kept maxima's path is the one taken."""
    if not numpy_asked():
        assert graph_kernel.load() is not None, "the compiled kernel did not load (no C compiler?)"
    monkeypatch.setattr(graph_blocks, "SHIFT", shift)
    monkeypatch.setattr(graph_blocks, "BLOCK_FROM", from_rows)
    monkeypatch.setattr(graph_scoring, "SEED_POSITIONS", 20)
    for corpus in ("encyclopedia", "internal_docs"):
        assert_same(corpora[corpus], GraphParams(), workers=1)
        assert_same(corpora[corpus], GraphParams(neighbours=3, query_tokens=12), workers=1)


def test_a_final_candidate_is_ruled_out_by_its_blocks_maximum_before_a_look_up():
    """k = 1, passage 0's question: phrases 0 (bound 3.0: rows 0-3 at 3.0, 3.0, 2.5, 2.5) and
    1 (bound 1.0: rows 0, 2, 3 at 1.0, 0.1, 1.0); blocks of one row, both lists kept. The
    seed (phrase 0's list) gives theta = 3.0 (row 1, which lacks phrase 1); phrase 1's list
    is not read (1.0 is below theta). Rows 2 and 3 pass the coarse bound (2.5 + 1.0) and the
    signature (both have phrase 1). Row 2's block maximum of phrase 1 is 0.1 (9 steps of 3.0 /
    254: 0.106), so 2.5 + 0.106 < 3.0 rules it out with no look-up; without blocks its
    contribution is looked up first. Row 3 (1.0 there) is looked up and scored: 3.5."""
    lib = _kernel()
    table = PhraseTable(
        offsets=np.array([0, 4, 7]),
        rows=np.array([0, 1, 2, 3, 0, 2, 3], dtype=np.int32),
        impacts=np.array([3.0, 3.0, 2.5, 2.5, 1.0, 0.1, 1.0]),
        missing=np.zeros(2, dtype=bool),
    )
    questions = graph_scoring.Questions(
        ids=np.array([0]), offsets=np.array([0, 2]), phrases=np.array([0, 1], dtype=np.int32), vocabulary=[]
    )
    whole = [Level(0.0, table.offsets, None, None)]
    bounds = graph_kernel.phrase_bounds(table, whole[0])
    signatures = graph_kernel.row_signatures(lib, table, 4)
    constants = kernel_constants(seeds=1, share=1.0, extra=0)
    searched = []
    for blocks in (graph_blocks.block_maxima(lib, table, 4, bounds, 0, 1), None):
        stats = np.zeros(5, dtype=np.int64)
        neighbours, scores = _one_question(lib, table, signatures, whole, questions, constants, stats, blocks)
        assert neighbours.tolist() == [[3]] and scores.tolist() == [[-3.5]]
        assert stats[:2].tolist() == [4, 1]  # phrase 1's list not read
        searched.append(int(stats[4]))
    assert searched == [1, 2]  # row 3's look-up only; without blocks row 2's too
