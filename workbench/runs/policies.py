"""Candidate policies and the configurations that name them. A `Config` is one row of an
experiment: a name, Params, a judge (a `JudgeSpec`; text is parsed) and a policy.

A policy is how one configuration turns one question into a trace. A registry like
`terms.TERM_WEIGHTINGS`: `POLICIES[name](run, config, question) -> Trace`, where `run` (a
`tasks.RunContext`) gives the index, the shared judgment memo, the configuration's judge for
the question and, for a row read off another (`config.source`), that source's trace or its
judgment count.

- `sag2`: a plain Run (with judge `bm25`: the BM25 baseline, no judge).
- `truncated`: the trajectories of another `sag2` configuration (`source`) read off after
  expansion round `params.H` (`truncated_trace`): the paper's H=0/1/2 "from the same
  retrieval trajectories" (§4.2). No judgment is made again.
- `matched-budget`: one-shot BM25 pool of each question's `source` judgment count, scored
  once with no context (B.1). Questions with fewer BM25 matches than the budget are noted.
- `final-only`: BM25 seeds, uniform seed weights, the judge only on the final pool (B.2);
  see `final_only_trace` for the exact definition.
- `rm3`: RM3 feedback (B.3; workbench/feedback/rm3.py); with judge `bm25` its lexical
  ranking, with any other judge that judge once on its first 100 units (final-only judging).
  `Config.feedback`: an `RM3Params` (default: the paper's).
- `gar`: GAR-BM25 (B.3; workbench/feedback/gar.py) over the index's corpus graph; with
  `bm25` its lexical ranking, with a judge that judge once on the (at most 100) units the
  adaptive loop took. `Config.feedback`: a `GARParams`.

>>> list(POLICIES)
['sag2', 'truncated', 'matched-budget', 'final-only', 'rm3', 'gar']
>>> Config("rm3+oracle", judge="oracle", policy="rm3").feedback.original_weight   # the paper's RM3 by default
0.5
>>> Config("no_idf", Params(term_weighting="no_idf"), judge="lexical").policy
'sag2'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from workbench.engine import (
    Run,
    add_fusion,
    dedupe,
    final_ranking,
    initial_candidates,
    question_expression,
    rank,
    retrieve_expansion,
    select_seeds,
    select_terms,
)
from workbench.feedback.gar import GARParams
from workbench.feedback.rm3 import RM3Params
from workbench.feedback.traces import gar_trace, rm3_trace
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.params import Params
from workbench.runs.records import ExperimentError, JudgeFailed, QuestionFailed
from workbench.terms import TermWeightingError, get_term_weighting
from workbench.trace import (
    STOP_EMPTY_QUESTION,
    STOP_MAX_ROUNDS,
    STOP_NO_CANDIDATES,
    STOP_NO_NEW_CANDIDATES,
    STOP_NO_SEEDS,
    STOP_NO_TERMS,
    STOP_TERM_WEIGHTING_ERROR,
    PoolEntry,
    RoundState,
    Seed,
    Trace,
    term_rows,
)


def truncated_trace(index, trace: Trace, H: int) -> Trace:
    """The trace as if the run had stopped after expansion round H (same trajectory):
    how the paper reads H=0, 1, 2 off one run."""
    rounds = list(trace.rounds[: H + 1])
    if rounds and rounds[-1].stop is None:
        rounds[-1] = replace(rounds[-1], stop=STOP_MAX_ROUNDS)
    final = final_ranking(index, rounds, trace.params, judged=trace.judge != "bm25")
    return replace(
        trace,
        params=trace.params.replace(H=min(H, trace.params.H)),
        rounds=tuple(rounds),
        final_ranking=tuple(final),
        stats={**trace.stats, "judgments": sum(r.judgments for r in rounds)},
    )


def sag2(run, config, question) -> Trace:
    """SAG2 with the configuration's parameters and judge (none for bm25: the baseline)."""
    return Run(
        run.index, question, config.params, run.judge(config, question), memo=run.memo, explain=run.explain
    ).run()


def truncated(run, config, question) -> Trace:
    """The source's trajectory as if it had stopped after expansion round `params.H`."""
    return truncated_trace(run.index, run.source_trace(config, question), config.params.H)


def matched_budget(run, config, question) -> Trace:
    """One BM25 pool of as many units as the source judged on this question, scored once."""
    judge = run.judge(config, question)
    budget = run.source_judgments(config, question)
    if budget == 0:  # the source judged nothing (no candidates): nothing to match
        trace = Run(run.index, question, config.params.replace(H=0), None, memo=run.memo).run()
    else:
        trace = Run(
            run.index, question, config.params.replace(B=budget, H=0), judge, memo=run.memo, explain=run.explain
        ).run()
    return replace(trace, stats={**trace.stats, "budget": budget})


def final_only(run, config, question) -> Trace:
    """`final_only_trace` with the configuration's judge; a judge failure names the configuration."""
    try:
        return final_only_trace(run.index, question, config.params, run.judge(config, question), run.memo)
    except QuestionFailed as exc:
        raise type(exc)(question.id, exc.round, exc.error, run.label(config), exc.kind) from None


FINAL_POOL = 100  # B.3: final-only judging over at most 100 candidates


def rm3(run, config, question) -> Trace:
    """RM3 with no judge (`bm25`) or the configuration's judge on its first 100 units."""
    try:
        return rm3_trace(
            run.index, question, config.params, run.judge(config, question), run.memo, config.feedback, FINAL_POOL
        )
    except JudgeError as exc:  # a failure, never a ranking: the loop decides (stop or keep going)
        raise JudgeFailed(question.id, 1, str(exc), run.label(config)) from exc


def gar(run, config, question) -> Trace:
    """GAR-BM25 with no judge (`bm25`) or the configuration's judge on the units it took."""
    try:
        return gar_trace(run.index, question, config.params, run.judge(config, question), run.memo, config.feedback)
    except JudgeError as exc:
        raise JudgeFailed(question.id, 1, str(exc), run.label(config)) from exc


Policy = Callable[..., Trace]
POLICIES: dict[str, Policy] = {
    "sag2": sag2,
    "truncated": truncated,
    "matched-budget": matched_budget,
    "final-only": final_only,
    "rm3": rm3,
    "gar": gar,
}
FEEDBACK_PARAMS = {"rm3": RM3Params, "gar": GARParams}  # the policies that take `Config.feedback`
NEEDS_SOURCE = ("truncated", "matched-budget")  # read another configuration's results (`source`)
NEEDS_JUDGE = ("truncated", "matched-budget", "final-only")  # meaningless with bm25
READS_SOURCE_TRACE = ("truncated",)  # the source's traces are kept for these rows


@dataclass(frozen=True)
class Config:
    """One row of an experiment: a name, Params, a judge and a policy (see the module doc).
    `judge` may be given as text (`"lexical"`, `"FILE.py:NAME"`): it is parsed into a JudgeSpec."""

    name: str
    params: Params = field(default_factory=Params)
    judge: JudgeSpec = "lexical"  # type: ignore[assignment]  # text, parsed in __post_init__
    policy: str = "sag2"
    source: str | None = None  # truncated / matched-budget: the sag2 configuration they read
    feedback: RM3Params | GARParams | None = None  # rm3 / gar: their settings (default: the paper's)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ExperimentError(f"configuration name {self.name!r}: expected a non-empty string")
        if self.policy not in POLICIES:
            raise ExperimentError(
                f"configuration {self.name!r}: unknown policy {self.policy!r}; known: {', '.join(POLICIES)}"
            )
        if self.policy in NEEDS_SOURCE and not self.source:
            raise ExperimentError(
                f"configuration {self.name!r}: policy {self.policy!r} needs source=<a sag2 configuration>"
            )
        object.__setattr__(self, "judge", JudgeSpec.parse(self.judge))
        if self.policy in NEEDS_JUDGE and self.judge.name == "bm25":
            raise ExperimentError(f"configuration {self.name!r}: policy {self.policy!r} needs a judge, not bm25")
        get_term_weighting(self.params.term_weighting)  # unknown variant: fail now, listing the registered ones
        kind = FEEDBACK_PARAMS.get(self.policy)
        if kind is None and self.feedback is not None:
            raise ExperimentError(
                f"configuration {self.name!r}: feedback settings are for the rm3 and gar policies, not {self.policy!r}"
            )
        if kind is not None:
            if self.feedback is None:
                object.__setattr__(self, "feedback", kind())
            elif not isinstance(self.feedback, kind):
                raise ExperimentError(
                    f"configuration {self.name!r}: policy {self.policy!r} takes {kind.__name__}, "
                    f"got {type(self.feedback).__name__}"
                )


def final_only_trace(index, question, params: Params, judge, memo: JudgmentMemo | None = None) -> Trace:
    """BM25 seeds, uniform seed weights, the judge only on the final pool (paper B.2).

    Exactly:
    1. Round 0: C0 = first B BM25 units of the question expression (as in SAG2); no judge.
       Its ranking is C0's retrieval order.
    2. Expansion round r = 1..H: seeds S_{r-1} = first s units of the previous round's
       retrieval order never used as seeds (round 0: C0; round r: dedupe(P, A_r, C_r), which
       with P ⊆ A is the first s of C_r). Every seed gets the same score 1.0 (no judge score
       exists yet), so the paper's rule gives w(d) = 1 for every seed — uniform seed weights;
       the configured term-weighting variant is applied to those scores. Terms, name
       repair and interleaved retrieval are SAG2's (select_terms, retrieve_expansion); "seen"
       = every unit retrieved so far, so each round brings new units.
    3. Final pool = the first B units of dedupe(P, A, C_last) for the last round that
       retrieved candidates (C0 itself when no expansion happened): protected BM25 units and
       the seeds used, then the newest candidates. Each is judged once, with no context —
       at most B judgments per question. Ranking: (score desc, fusion desc, id asc) with
       fusion from each unit's first retrieval rank; greedy diversity on the top 10.
    Early stops (no seeds, no terms, no new candidates) end expansion; the pool is built from
    the last round that retrieved candidates.

    Why this reading of B.2: the paper's variant "uses BM25 to choose expansion seeds, assigns
    uniform seed weights, and applies JEV only to the final pool of at most 100 candidates"
    (98,836 judgments over 1,000 questions, i.e. ≤ 100 each). Ranking intermediate rounds by
    retrieval order is the only judge-free order the engine has; keeping P and A mirrors
    SAG2's own pools (W1 = dedupe(P, A1, C1)), which retain protected units and seeds; and
    with no intermediate scores there is no context to give the final judge. As the paper
    says, this jointly changes seed selection, weighting, retention and context, so its gap
    to SAG2 cannot be attributed to intermediate scoring alone.

    >>> from workbench.judges import OracleJudge
    >>> final_only_trace(index, questions[0], Params(), OracleJudge(questions[0].gold)).judgments  # <= B
    18
    """
    if judge is None:
        raise ExperimentError("final-only needs a judge (it scores the final pool)")
    memo = memo or JudgmentMemo()
    run = Run(index, question, params, judge, memo=memo)  # started now: its stats count our judgments
    text = run.question
    repaired, expression = question_expression(index, text, params)
    if not expression:
        run.step(RoundState(0, "", stop=STOP_EMPTY_QUESTION, repaired_question=repaired))
        return run.trace()
    c0 = initial_candidates(index, expression, params)
    if not c0:
        run.step(RoundState(0, expression, stop=STOP_NO_CANDIDATES, repaired_question=repaired))
        return run.trace()
    ids0 = [c.unit_id for c in c0]
    states = [RoundState(0, expression, c0, ranking=tuple(ids0), repaired_question=repaired)]
    protected = ids0[: params.p]
    seen, expanded = set(ids0), list[int]()
    order, pool_order = ids0, ids0[: params.B]
    pool_round, stop_state = 0, None
    for r in range(1, params.H + 1):
        seeds = select_seeds(order, expanded, params)
        if not seeds:
            stop_state = RoundState(r, "", stop=STOP_NO_SEEDS)
            break
        uniform = {u: 1.0 for u in seeds}
        try:
            choices, weights = select_terms(index, seeds, uniform, text, params)
        except TermWeightingError as exc:
            stop_state = RoundState(r, "", stop=STOP_TERM_WEIGHTING_ERROR, error=str(exc))
            break
        seed_states = tuple(Seed(u, i + 1, 1.0, weights.get(u)) for i, u in enumerate(seeds))
        selected = [c for c in choices if c.selected]
        if not selected:
            stop_state = RoundState(
                r, "", seeds=seed_states, terms=term_rows(choices, {}, params.L), stop=STOP_NO_TERMS
            )
            break
        expr_r, cands, resolutions = retrieve_expansion(index, selected, expression, frozenset(seen), params)
        expanded = dedupe(expanded, seeds)
        terms = term_rows(choices, resolutions, params.L)
        if not cands:
            stop_state = RoundState(r, expr_r, seeds=seed_states, terms=terms, stop=STOP_NO_NEW_CANDIDATES)
            break
        new = [c.unit_id for c in cands]
        order = dedupe(protected, expanded, new)
        pool_order, pool_round = order[: params.B], r
        seen.update(new)
        states.append(RoundState(r, expr_r, cands, seeds=seed_states, terms=terms, ranking=tuple(order)))

    def origin(u):
        if pool_round == 0:
            return "new"
        return "protected" if u in protected else "seed" if u in expanded else "new"

    pool = tuple(PoolEntry(u, origin(u)) for u in pool_order)
    try:
        scores, judgments = run.score_pool(pool)  # the question as given; counted in the run's stats
    except JudgeError as exc:  # a failure, never a ranking: the caller decides (stop or keep going)
        raise JudgeFailed(getattr(question, "id", text), pool_round, str(exc)) from exc
    fusion: dict[int, float] = {}
    for s in states:
        add_fusion(fusion, s.candidates, params)
    ranking = rank(list(pool_order), scores, fusion, params)
    states[pool_round] = replace(
        states[pool_round],
        pool=pool,
        scores=tuple(scores),
        ranking=ranking,
        scored=True,
        judgments=judgments,
        stop=None if stop_state is not None else STOP_MAX_ROUNDS,
    )
    states = states[: pool_round + 1]
    if stop_state is not None:
        states.append(replace(stop_state, ranking=ranking))
    for state in states:  # the run records them in order; the last one carries the stop
        run.step(state)
    return run.trace()
