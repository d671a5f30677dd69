"""RM3 and GAR-BM25 as traces, with no judge or with final-only judging (paper B.3), in the
shape every trace reader already knows (records, metrics, the dashboard, PyTerrier rows).

Both traces have two rounds:
- Round 0: C0, the BM25 list of the question expression, unscored, in lexical order.
- Round 1, RM3: candidates = the first B units by the weighted BM25 sum; seeds = the
  feedback passages (score s(d), weight s(d) / sum of s); terms = the relevance model, its
  selected terms (order 1..terms) with priority w(t), then the pruned ones (see
  `rm3_term_rows`); expression = the OR of every weighted term.
- Round 1, GAR-BM25: candidates = the units the adaptive loop took, in the order taken
  (`via_term` None: from the initial ranking; 'graph:U': a neighbour of unit U;
  `term_rank`: the batch); seeds = the taken units whose neighbours were taken, with their
  s(u); expression = round 0's (the loop's BM25 scorer).
Without a judge round 1 is unscored and ranked lexically (stop `STOP_LEXICAL`). With a judge
the pool — RM3's first `pool` units (B = 100), GAR's taken units (budget 100) — is judged
once with no context (at most 100 judgments), ranked by (score desc, fusion desc, id asc)
with fusion from round 1's retrieval rank, and the final top 10 gets the diversity order
every judged configuration gets.

>>> from workbench.judges import OracleJudge
>>> trace = rm3_trace(index, questions[0], Params(), OracleJudge(questions[0].gold))
>>> [r.round for r in trace.rounds], trace.judgments, trace.stop
([0, 1], 15, 'max rounds reached (H)')
>>> rm3_trace(index, questions[0], Params(), None).stop
'lexical feedback: no judge'
"""

from __future__ import annotations

from dataclasses import replace

from workbench.engine import Run, add_fusion, rank
from workbench.feedback.gar import GARParams, GARWalk, gar_expansion
from workbench.feedback.rm3 import RM3Expansion, RM3Params, rm3_expansion
from workbench.index.store import Index
from workbench.judgment import JudgmentMemo
from workbench.params import Params
from workbench.trace import (
    STOP_EMPTY_QUESTION,
    STOP_MAX_ROUNDS,
    STOP_NO_CANDIDATES,
    PoolEntry,
    RoundState,
    Seed,
    Term,
    Trace,
)

STOP_LEXICAL = "lexical feedback: no judge"
STOP_JUDGED = STOP_MAX_ROUNDS  # the final pool judged: the run is complete, as final-only's


def rm3_term_rows(expansion: RM3Expansion, keep: int) -> tuple[Term, ...]:
    """The relevance model as trace terms (the first `keep`): `seed` = the feedback passage
    contributing most, `tf` its count there, `df` units matching the term, `priority` =
    w(t), `seed_score` s(d), `seed_weight` its normalised weight; `extra`: R(t), the raw sum,
    the original query's part λ·Q(t), the number of feedback passages that kept the term."""
    total = sum(s for _, s in expansion.feedback) or 1.0
    score_of = dict(expansion.feedback)
    rows = []
    order = 0
    for t in expansion.model[:keep]:
        order += t.selected
        seed = t.passages[0]
        rows.append(
            Term(
                term=t.term,
                kind="token",
                surface=t.term,
                seed=seed,
                tf=t.tf,
                df=t.df,
                idf=0.0,
                query_connection=0.0,
                seed_score=score_of[seed],
                seed_weight=score_of[seed] / total,
                priority=t.weight,
                selected=t.selected,
                order=order if t.selected else 0,
                resolved=t.term,
                resolution="as is",
                extra=(
                    ("rm3_relevance", t.relevance),
                    ("rm3_raw", t.raw),
                    ("rm3_query_weight", t.query_weight),
                    ("rm3_passages", len(t.passages)),
                ),
            )
        )
    return tuple(rows)


def _start(index: Index, question, params: Params, judge, memo):
    run = Run(index, question, params, judge, memo=memo or JudgmentMemo())  # started now: its stats count ours
    return run, run.question


def _record(run: Run, *states: RoundState) -> None:
    # rounds a feedback method computed itself go in through the engine's hook, in order
    for state in states:
        if run.step(state) is None:
            raise RuntimeError(f"round {state.round} given after the run stopped")


def _early(run: Run, expression: str, repaired: str | None, stop: str) -> Trace:
    run.step(RoundState(0, expression, stop=stop, repaired_question=repaired))
    return run.trace()


def _finish(run: Run, round0: RoundState, round1: RoundState, pool_ids) -> Trace:
    """Round 1 unscored (no judge) or its pool judged once by the run's judge, no context."""
    if run.judge is None:
        _record(run, round0, replace(round1, stop=STOP_LEXICAL))
        return run.trace()
    pool = tuple(PoolEntry(u, "new") for u in pool_ids)
    # the judge receives the question as given (SPEC §3), counted in the run's stats; a JudgeError is the caller's
    scores, judgments = run.score_pool(pool)
    fusion = add_fusion({}, round1.candidates, run.params)
    ranking = rank(list(pool_ids), scores, fusion, run.params)
    judged = replace(
        round1, pool=pool, scores=tuple(scores), ranking=ranking, scored=True, judgments=judgments, stop=STOP_JUDGED
    )
    _record(run, round0, judged)
    return run.trace()


def rm3_trace(
    index: Index,
    question,
    params: Params | None = None,
    judge=None,
    memo: JudgmentMemo | None = None,
    rm3: RM3Params | None = None,
    pool: int = 100,
) -> Trace:
    """RM3 (workbench/feedback/rm3.py) without a judge (`judge=None`) or with the judge on
    its first `pool` units (B.3: at most 100)."""
    params, rm3 = params or Params(), rm3 or RM3Params()
    run, text = _start(index, question, params, judge, memo)
    expansion = rm3_expansion(index, text, params, rm3)
    if expansion is None:
        return _early(run, "", None, STOP_EMPTY_QUESTION)
    if not expansion.initial:
        return _early(run, expansion.expression, expansion.question, STOP_NO_CANDIDATES)
    round0 = _bm25_round(expansion)
    total = sum(s for _, s in expansion.feedback) or 1.0
    seeds = tuple(Seed(u, i + 1, s, s / total) for i, (u, s) in enumerate(expansion.feedback))
    round1 = RoundState(
        1,
        expansion.final_expression,
        expansion.candidates,
        seeds=seeds,
        terms=rm3_term_rows(expansion, 3 * rm3.terms),
        ranking=expansion.ranking,
    )
    return _finish(run, round0, round1, expansion.ranking[:pool])


def _bm25_round(start) -> RoundState:
    """Round 0 of RM3 or GAR: the question's BM25 list, unjudged, in retrieval order."""
    ranking = tuple(c.unit_id for c in start.initial)
    return RoundState(0, start.expression, start.initial, ranking=ranking, repaired_question=start.question)


def gar_seeds(walk: GARWalk) -> tuple[Seed, ...]:
    """The taken units whose neighbours the loop took, in the order taken, with their s(u)."""
    sources = {v for b in walk.batches for v in b.via if v is not None}
    return tuple(Seed(u, i + 1, walk.scores[u], None) for i, u in enumerate(u for u in walk.taken if u in sources))


def gar_trace(
    index: Index,
    question,
    params: Params | None = None,
    judge=None,
    memo: JudgmentMemo | None = None,
    gar: GARParams | None = None,
    *,
    graph=None,
) -> Trace:
    """GAR-BM25 (workbench/feedback/gar.py) without a judge or with the judge on the units
    the adaptive loop took (at most `gar.budget`, 100)."""
    params, gar = params or Params(), gar or GARParams()
    run, text = _start(index, question, params, judge, memo)
    walk = gar_expansion(index, text, params, gar, graph=graph)
    if walk is None:
        return _early(run, "", None, STOP_EMPTY_QUESTION)
    if not walk.initial:
        return _early(run, walk.expression, walk.question, STOP_NO_CANDIDATES)
    round0 = _bm25_round(walk)
    round1 = RoundState(1, walk.expression, walk.candidates(), seeds=gar_seeds(walk), ranking=walk.ranking)
    return _finish(run, round0, round1, walk.taken)


def gar_batches(trace: Trace) -> list[dict]:
    """A GAR-BM25 trace's batches read back from round 1's candidates: number, source
    ('initial' / 'frontier'), and per unit its title, s(u) and the unit that brought it.

    >>> [(b["batch"], b["source"], len(b["units"])) for b in gar_batches(gar_trace(index, questions[0]))][:3]
    [(1, 'initial', 15), (2, 'frontier', 9)]
    """
    if len(trace.rounds) < 2:
        return []
    out: dict[int, dict] = {}
    for c in trace.rounds[1].candidates:
        b = out.setdefault(c.term_rank or 0, {"batch": c.term_rank, "source": "initial", "units": []})
        via = int(c.via_term.split(":", 1)[1]) if c.via_term and c.via_term.startswith("graph:") else None
        if via is not None:
            b["source"] = "frontier"
        b["units"].append(
            {
                "unit_id": c.unit_id,
                "title": trace.units[c.unit_id].title,
                "score": -c.bm25,
                "via": via,
                "via_title": trace.units[via].title if via is not None else None,
            }
        )
    return [out[k] for k in sorted(out)]


class FeedbackRun:
    """An RM3 or GAR-BM25 trace behind the part of `engine.Run` an interactive caller steps
    (the dashboard): `step()` computes the whole trace at once, then returns None; `rerun`
    starts again with new parameters or judge. Pins do not apply (no intermediate scores).

    >>> run = FeedbackRun("gar", index, questions[0])
    >>> run.step().round, run.step(), run.finished, run.trace().stop
    (1, None, True, 'lexical feedback: no judge')
    """

    METHODS = ("rm3", "gar")

    def __init__(self, method: str, index, question, params=None, judge=None, *, pins=None, memo=None, settings=None):
        if method not in self.METHODS:
            raise ValueError(f"unknown feedback method {method!r}; known: {', '.join(self.METHODS)}")
        self.method, self.index, self.question = method, index, question
        self.params, self.judge, self.pins = params or Params(), judge, dict(pins or {})
        self.memo, self.settings = memo or JudgmentMemo(), settings
        self.rounds: list[RoundState] = []
        self._trace: Trace | None = None

    @property
    def finished(self) -> bool:
        return self._trace is not None

    def step(self) -> RoundState | None:
        if self._trace is not None:
            return None
        make = rm3_trace if self.method == "rm3" else gar_trace
        self._trace = make(self.index, self.question, self.params, self.judge, self.memo, self.settings)
        self.rounds = list(self._trace.rounds)
        return self.rounds[-1]

    def run(self) -> Trace:
        self.step()
        return self.trace()

    def trace(self) -> Trace:
        if self._trace is None:
            self.step()
        assert self._trace is not None
        return self._trace

    def rerun(self, from_round=None, *, params=None, judge="unchanged", pins=None) -> FeedbackRun:
        return FeedbackRun(
            self.method,
            self.index,
            self.question,
            params or self.params,
            self.judge if judge == "unchanged" else judge,
            pins=self.pins if pins is None else pins,
            memo=self.memo,
            settings=self.settings,
        )
