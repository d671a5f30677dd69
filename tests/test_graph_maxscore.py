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
