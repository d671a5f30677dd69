"""GAR-BM25: graph-based adaptive retrieval (MacAvaney, Tonellotto and Macdonald 2022) with
BM25 in place of the neural scorer, as the paper's B.3 adapts it.

The adaptive loop (GAR's Algorithm 1), exactly:
- R0: C0, the first B units by BM25 of the question expression (round 0 of SAG2).
- Until `budget` (100) units are taken or nothing is left: take a batch of `batch_size` (16;
  the last one smaller, to fill the budget exactly) alternately from the initial ranking and
  from the graph frontier, starting with the initial ranking; when the pool whose turn it is
  has nothing left, the batch comes from the other one.
  - From the initial ranking: its first units not yet taken, in R0 order.
  - From the frontier: its units by priority, highest first; equal priorities in the order
    they joined the frontier (a taken unit's neighbours in graph order), as GAR's frontier does.
- Each taken unit is "scored" by BM25 — its s(u) = -bm25 for the question expression (0
  when it does not match), no intermediate neural reranking — and its `neighbours` (8)
  corpus-graph neighbours not yet taken join the frontier with priority s(u); a unit reached
  from several taken units keeps its highest priority (GAR's update).
- Without a judge the taken units are ranked by s(u) (highest first, ties: the order they
  were taken), then the untaken rest of R0 in R0 order (GAR's backfill), first B kept. With a
  judge (policies.gar), the taken units are the final pool, judged once.

>>> from workbench.feedback.graph import GraphParams, corpus_graph
>>> graph = corpus_graph(index, GraphParams(neighbours=8), progress=False)
>>> walk = gar_expansion(index, "How are refunds approved?", graph=graph, gar=GARParams(batch_size=4, budget=12))
>>> [(b.number, b.source, len(b.units)) for b in walk.batches]   # C0 spent: the frontier again
[(1, 'initial', 4), (2, 'frontier', 4), (3, 'frontier', 4)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from workbench.engine import initial_candidates, question_expression
from workbench.feedback.graph import GraphParams, corpus_graph
from workbench.index.store import Index
from workbench.params import Params, ParamsError
from workbench.trace import Candidate

INITIAL, FRONTIER = "initial", "frontier"


@dataclass(frozen=True)
class GARParams:
    """GAR-BM25's settings, the paper's (B.3) by default, each checked by name.

    >>> GARParams(batch_size=0)
    Traceback (most recent call last):
    ...
    workbench.params.ParamsError: batch_size (units per batch) must be an integer >= 1, got 0
    """

    neighbours: int = 8  # corpus-graph neighbours per passage
    batch_size: int = 16  # units per batch, alternating initial ranking / frontier
    budget: int = 100  # units the loop takes: the judged pool of final-only judging
    graph_query_tokens: int = 80  # distinct tokens of a passage's text in its graph query

    def __post_init__(self):
        for name, what in (
            ("neighbours", "corpus-graph neighbours per passage"),
            ("batch_size", "units per batch"),
            ("budget", "units the adaptive loop takes"),
            ("graph_query_tokens", "distinct tokens of a passage's graph query"),
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ParamsError(f"{name} ({what}) must be an integer >= 1, got {v!r}")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Batch:
    """One batch of the loop: where it came from, its units in order, and for a frontier
    batch each unit's priority and the taken unit that brought it (its best source)."""

    number: int  # 1-based
    source: str  # "initial" or "frontier"
    units: tuple[int, ...]
    priorities: tuple[float, ...]  # frontier: priority; initial: the unit's own s(u)
    via: tuple[int | None, ...]  # frontier: the taken unit whose neighbour it was; initial: None


def adaptive_loop(
    initial: list[int],
    neighbours: Callable[[int], list[int]],
    score: Callable[[list[int]], dict[int, float]],
    batch_size: int,
    budget: int,
) -> tuple[list[Batch], dict[int, float]]:
    """The loop above on any graph: `neighbours(u)` best first, `score(units) -> {u: s(u)}`.
    Returns the batches and every taken unit's score.

    >>> graph = {1: [5, 6], 2: [6, 7], 3: [], 4: [], 5: [], 6: [], 7: []}
    >>> batches, _ = adaptive_loop([1, 2, 3, 4], graph.__getitem__, lambda us: {u: 10.0 - u for u in us}, 2, 6)
    >>> [(b.source, b.units, b.via) for b in batches]
    [('initial', (1, 2), (None, None)), ('frontier', (5, 6), (1, 1)), ('initial', (3, 4), (None, None))]
    """
    taken: set[int] = set()
    scores: dict[int, float] = {}
    frontier: dict[int, tuple[float, int]] = {}  # unit -> (priority, source), in joining order
    rest = list(initial)
    batches: list[Batch] = []
    turn = INITIAL
    while len(scores) < budget:
        rest = [u for u in rest if u not in taken]
        size = min(batch_size, budget - len(scores))
        source = turn if (rest if turn == INITIAL else frontier) else (FRONTIER if turn == INITIAL else INITIAL)
        if (source == INITIAL and not rest) or (source == FRONTIER and not frontier):
            break  # both pools empty
        if source == INITIAL:
            units = rest[:size]
            via: list[int | None] = [None] * len(units)
        else:
            units = sorted(frontier, key=lambda u: -frontier[u][0])[:size]  # stable: ties in joining order
            via = [frontier[u][1] for u in units]
        got = score(units)
        priorities = [frontier[u][0] if source == FRONTIER else got[u] for u in units]
        for u in units:
            taken.add(u)
            scores[u] = got[u]
            frontier.pop(u, None)
        for u in units:  # taken units' neighbours join the frontier with the taken unit's score
            for v in neighbours(u):
                if v not in taken and (v not in frontier or got[u] > frontier[v][0]):
                    frontier[v] = (got[u], u)
        batches.append(Batch(len(batches) + 1, source, tuple(units), tuple(priorities), tuple(via)))
        turn = FRONTIER if turn == INITIAL else INITIAL
    return batches, scores


@dataclass(frozen=True)
class GARWalk:
    """What GAR-BM25 did for one question: R0, the batches, every taken unit's s(u), and the
    lexical ranking (taken units by s(u), then R0's backfill)."""

    question: str  # after name repair
    expression: str
    initial: tuple[Candidate, ...]
    batches: tuple[Batch, ...]
    scores: dict  # unit -> s(u) = -bm25 of the question expression (0: no match)
    ranking: tuple[int, ...]

    @property
    def taken(self) -> tuple[int, ...]:
        return tuple(u for b in self.batches for u in b.units)

    def candidates(self) -> tuple[Candidate, ...]:
        """The taken units in the order taken; `via_term` says what brought each (None: the
        initial ranking, 'graph:U': a neighbour of taken unit U), `term_rank` its batch."""
        out: list[Candidate] = []
        for b in self.batches:
            for u, v in zip(b.units, b.via):
                via = None if v is None else f"graph:{v}"
                out.append(Candidate(u, len(out) + 1, -self.scores[u], via, b.number))
        return tuple(out)


def gar_expansion(
    index: Index, question: str, params: Params | None = None, gar: GARParams | None = None, *, graph=None
) -> GARWalk | None:
    """GAR-BM25 for one question over `graph` (a CorpusGraph; default: the index's, built or
    read by `corpus_graph`). None when the question has no tokens."""
    params, gar = params or Params(), gar or GARParams()
    repaired, expression = question_expression(index, question, params)
    if not expression:
        return None
    if graph is None:
        graph = corpus_graph(index, GraphParams(gar.neighbours, gar.graph_query_tokens, params.field_weights))
    c0 = initial_candidates(index, expression, params)

    def score(units: list[int]) -> dict[int, float]:
        bm25 = index.bm25_all(expression, params.field_weights, among=set(units))
        return {u: -bm25[u] if u in bm25 else 0.0 for u in units}

    batches, scores = adaptive_loop(
        [c.unit_id for c in c0], lambda u: graph.neighbours_of(u, gar.neighbours), score, gar.batch_size, gar.budget
    )
    taken = [u for b in batches for u in b.units]
    position = {u: i for i, u in enumerate(taken)}
    ranked = sorted(taken, key=lambda u: (-scores[u], position[u]))
    backfill = [c.unit_id for c in c0 if c.unit_id not in position]
    return GARWalk(repaired, expression, c0, tuple(batches), scores, tuple((ranked + backfill)[: params.B]))
