"""Experiments: several configurations over one question set, sharing judgments — tidy
results, paired bootstrap intervals, per type/hop tables, plots — and `sag2wb ablate`,
the paper's comparisons (§4.2, §5.3, Appendix B) as one command.

>>> configs = [Config("sag2", judge="lexical"),
...            Config("no_idf", Params(term_weighting="no_idf"), judge="lexical")]   # doctest: +SKIP
>>> results = Experiment(index, questions, configs, resume_path="runs.jsonl").run()  # doctest: +SKIP
>>> results.summary()                      # one row per configuration              # doctest: +SKIP
>>> results.compare("no_idf", "sag2")      # paired 95% interval of the R@10 difference  # doctest: +SKIP
{'metric': 'R@10', 'a': 'no_idf', 'b': 'sag2', 'questions': 40, 'difference': -2.5, 'low': -6.25, 'high': 0.0}
>>> results.plot("R@10")                   # bars with intervals, like the paper's Figure 4  # doctest: +SKIP

A configuration is a name, Params, a judge (`bm25`, `lexical`, `oracle`, `jev`,
`FILE.py:NAME`) and a policy:

- `sag2`: a plain Run (with judge `bm25`: the BM25 baseline, no judge).
- `truncated`: the trajectories of another `sag2` configuration (`source`) read off after
  expansion round `params.H` (`engine.truncated_trace`): the paper's H=0/1/2 "from the same
  retrieval trajectories" (§4.2). No judgment is made again.
- `matched-budget`: one-shot BM25 pool of each question's `source` judgment count, scored
  once with no context (B.1). Questions with fewer BM25 matches than the budget are noted.
- `final-only`: BM25 seeds, uniform seed weights, the judge only on the final pool (B.2);
  see `final_only_trace` for the exact definition.

Every configuration shares one `JudgmentMemo`, so rows reuse judgments wherever their
inputs coincide (round 0 of every judged row, the matched-budget pool's first 100 units).
"""
from __future__ import annotations

import html
import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench import safeio
from workbench.index.corpora import Question
from workbench.engine import (
    Run, add_fusion, dedupe, initial_candidates, question_expression, rank, retrieve_expansion, score_round,
    select_seeds, select_terms, term_rows, truncated_trace,
)
from workbench.runs.evaluation import (
    METRICS, RESULT_MARKER, RESULT_VERSION, JudgeFailed, QuestionFailed, judge_factory, load_resume, naming_path,
    paired_bootstrap, question_metrics, record_fingerprint, require_gold, trace_failure,
)
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.executors import ComponentFetch, Progress, Sequential, heap_frozen, make_executor
from workbench.params import Params
from workbench.terms import TermWeightingError, get_term_weighting, variant_fingerprint
from workbench.trace import (
    STOP_EMPTY_QUESTION, STOP_MAX_ROUNDS, STOP_NO_CANDIDATES, STOP_NO_NEW_CANDIDATES,
    STOP_NO_SEEDS, STOP_NO_TERMS, STOP_TERM_WEIGHTING_ERROR, PoolEntry, RoundState, Seed, Trace,
)

POLICIES = ("sag2", "truncated", "matched-budget", "final-only")
ABLATION_ROWS = ("bm25", "H=0", "H=1", "H=2", "no-context", "matched-budget", "final-only")
REFERENCE_ROW = "H=2"
ROW_DEFINITIONS = {
    "bm25": "BM25 top 100 of the question expression (round 0's C0), lexical order, no judge.",
    "H=0": "BM25+judge without expansion: round 0 of the H=2 trajectories (C0 scored once, no context).",
    "H=1": "The H=2 trajectories stopped after the first expansion round (same judgments as their rounds 0-1).",
    "H=2": "SAG2 with the given parameters (default H=2): the trajectories the H=0/1 rows are read from.",
    "no-context": "SAG2 with the judge never shown context (Params(use_context=False)); same candidate policy.",
    "matched-budget": "One-shot BM25 pool of as many units as that question's H=2 judgment count, scored once "
                      "with no context (Params(B=budget, H=0)); questions with fewer BM25 matches are noted.",
    "final-only": "BM25 order chooses the seeds, every seed weighs the same, the judge scores only the final "
                  "pool (at most B units, once, no context); see experiments.final_only_trace.",
}


class ExperimentError(ValueError):
    """An experiment that cannot run or a comparison that cannot be made, with the reason named."""


@dataclass(frozen=True)
class Config:
    """One row of an experiment: a name, Params, a judge and a policy (see the module doc).

    >>> Config("no_idf", Params(term_weighting="no_idf"), judge="lexical").policy
    'sag2'
    """

    name: str
    params: Params = field(default_factory=Params)
    judge: str = "lexical"
    policy: str = "sag2"
    source: str | None = None  # truncated / matched-budget: the sag2 configuration they read

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ExperimentError(f"configuration name {self.name!r}: expected a non-empty string")
        if self.policy not in POLICIES:
            raise ExperimentError(f"configuration {self.name!r}: unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")
        if self.policy in ("truncated", "matched-budget") and not self.source:
            raise ExperimentError(f"configuration {self.name!r}: policy {self.policy!r} needs source=<a sag2 configuration>")
        if self.policy in ("matched-budget", "final-only", "truncated") and self.judge == "bm25":
            raise ExperimentError(f"configuration {self.name!r}: policy {self.policy!r} needs a judge, not bm25")
        get_term_weighting(self.params.term_weighting)  # unknown variant: fail now, listing the registered ones


def paper_ablation(params: Params | None = None, judge: str = "lexical") -> list[Config]:
    """The paper's comparisons (§5.3, B.1, B.2) as configurations, in the table's row order.

    >>> [c.name for c in paper_ablation(judge="oracle")]
    ['bm25', 'H=0', 'H=1', 'H=2', 'no-context', 'matched-budget', 'final-only']
    """
    base = (params or Params()).replace(H=2)
    return [
        Config("bm25", base, "bm25"),
        Config("H=0", base.replace(H=0), judge, "truncated", source="H=2"),
        Config("H=1", base.replace(H=1), judge, "truncated", source="H=2"),
        Config("H=2", base, judge),
        Config("no-context", base.replace(use_context=False), judge),
        Config("matched-budget", base.replace(H=0), judge, "matched-budget", source="H=2"),
        Config("final-only", base, judge, "final-only"),
    ]


# ---- the final-only policy (paper B.2) ------------------------------------------------------
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

    >>> final_only_trace(index, questions[0], Params(), OracleJudge(questions[0].gold)).judgments  # doctest: +SKIP
    100
    """
    if judge is None:
        raise ExperimentError("final-only needs a judge (it scores the final pool)")
    memo = memo or JudgmentMemo()
    run = Run(index, question, params, judge, memo=memo)  # started now: its stats count our judgments
    text = run.question
    repaired, expression = question_expression(index, text, params)
    if not expression:
        run.rounds = [RoundState(0, "", stop=STOP_EMPTY_QUESTION, repaired_question=repaired)]
        return run.trace()
    c0 = initial_candidates(index, expression, params)
    if not c0:
        run.rounds = [RoundState(0, expression, stop=STOP_NO_CANDIDATES, repaired_question=repaired)]
        return run.trace()
    ids0 = [c.unit_id for c in c0]
    states = [RoundState(0, expression, c0, ranking=tuple(ids0), repaired_question=repaired)]
    protected = ids0[: params.p]
    seen, expanded = set(ids0), []
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
            stop_state = RoundState(r, "", seeds=seed_states, terms=term_rows(choices, {}, params.L), stop=STOP_NO_TERMS)
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
        scores, judgments = score_round(index, judge, memo, text, pool, (), {})
    except JudgeError as exc:  # a failure, never a ranking: the caller decides (stop or keep going)
        raise JudgeFailed(getattr(question, "id", text), pool_round, str(exc)) from exc
    fusion: dict[int, float] = {}
    for s in states:
        add_fusion(fusion, s.candidates, params)
    ranking = rank(list(pool_order), scores, fusion, params)
    states[pool_round] = replace(
        states[pool_round], pool=pool, scores=tuple(scores), ranking=ranking, scored=True, judgments=judgments,
        stop=None if stop_state is not None else STOP_MAX_ROUNDS,
    )
    states = states[: pool_round + 1]
    if stop_state is not None:
        states.append(replace(stop_state, ranking=ranking))
    run.rounds = states
    return run.trace()


# ---- running ---------------------------------------------------------------------------------
def _run_order(configs: list[Config]) -> list[Config]:
    """Sources first (a truncated / matched-budget row needs its source's trajectories)."""
    names = {c.name: c for c in configs}
    out, placed = [], set()

    def place(c, chain=()):
        if c.name in placed:
            return
        if c.name in chain:
            raise ExperimentError(f"configuration {c.name!r}: its sources form a cycle ({' -> '.join(chain)})")
        if c.source:
            place(names[c.source], chain + (c.name,))
        placed.add(c.name)
        out.append(c)

    for c in configs:
        place(c)
    return out


class Experiment:
    """Configurations × questions over one index, sharing one judgment memo.

    `resume_path`: a JSONL file receiving one line per (configuration, question) as it
    finishes; a line is reused when its fingerprint (question text and gold, configuration,
    judge key, index) is unchanged, so an interrupted experiment resumes. Failed questions
    are never written there. `judge_options` go to the JEV judge (endpoint, cache_dir, ...).

    A failed question (judge or term-weighting error) stops the run with `QuestionFailed`
    naming configuration, question and round; with `keep_going=True` the run goes on and
    every configuration's results cover only the questions that completed in all of them
    (so comparisons stay paired), with `results.failures` listing the rest.

    >>> results = Experiment(index, questions, paper_ablation(judge="oracle")).run()   # doctest: +SKIP
    """

    def __init__(self, index, questions: list[Question], configs: list[Config], *, memo: JudgmentMemo | None = None,
                 resume_path: str | Path | None = None, progress: bool = True, judge_options: dict | None = None,
                 keep_traces: bool = False, keep_going: bool = False):
        if not configs:
            raise ExperimentError("an experiment needs at least one configuration")
        names = [c.name for c in configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ExperimentError(f"configuration names must be unique; repeated: {dupes}")
        ids = [q.id for q in questions]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ExperimentError(f"question ids must be unique; repeated: {dupes[:10]}")
        if not questions:
            raise ExperimentError("an experiment needs at least one question")
        if any(c.judge == "oracle" for c in configs):
            require_gold(questions, "oracle")
        by_name = {c.name: c for c in configs}
        for c in configs:
            if not c.source:
                continue
            src = by_name.get(c.source)
            if src is None:
                raise ExperimentError(f"configuration {c.name!r}: source {c.source!r} is not among {names}")
            if src.policy != "sag2" or src.judge == "bm25":
                raise ExperimentError(f"configuration {c.name!r}: source {c.source!r} must be a judged sag2 configuration")
            if c.policy == "truncated":
                if src.judge != c.judge:
                    raise ExperimentError(f"configuration {c.name!r}: judge {c.judge!r} differs from its source's {src.judge!r}")
                if src.params != c.params.replace(H=src.params.H) or c.params.H > src.params.H:
                    raise ExperimentError(
                        f"configuration {c.name!r}: a truncated trajectory needs its source's parameters with "
                        f"H <= {src.params.H}; got {c.params} vs {src.params}")
        self.index = index
        self.questions = list(questions)
        self.configs = list(configs)
        self.memo = memo or JudgmentMemo()
        self.resume_path = Path(resume_path) if resume_path is not None else None
        self.progress = progress
        self.judge_options = dict(judge_options or {})
        self.keep_traces = keep_traces
        self.keep_going = keep_going
        self.traces: dict[str, dict[str, Trace]] = {}
        self._judges: dict[str, object] = {}
        self._keys: dict[str, str] = {}
        self._needed = {c.source for c in configs if c.policy == "truncated"}

    # ---- keys and judges --------------------------------------------------------------------
    def config_key(self, config: Config) -> str:
        """Everything that changes a row's per-question results (resume reuses only equal keys)."""
        if config.name not in self._keys:
            by_name = {c.name: c for c in self.configs}
            key = {
                "name": config.name, "policy": config.policy, "judge": config.judge,
                "params": config.params.to_dict(), "variant": variant_fingerprint(config.params.term_weighting),
                "index": self.index.meta.get("fingerprint"),
                "source": self.config_key(by_name[config.source]) if config.source else None,
            }
            self._keys[config.name] = json.dumps(key, sort_keys=True)
        return self._keys[config.name]

    def _factory(self, spec: str):
        if spec not in self._judges:
            self._judges[spec] = judge_factory(spec, self.index, **(self.judge_options if spec == "jev" else {}))
        return self._judges[spec]

    def judge_for(self, spec: str, question: Question):
        return None if spec == "bm25" else self._factory(spec)(question)

    def fingerprint(self, config: Config, question: Question) -> str:
        """The resume key of one (configuration, question) record (evaluate.record_fingerprint)."""
        jkey = "bm25" if config.judge == "bm25" else self._factory(config.judge).key
        return record_fingerprint(question, config.params, jkey, self.index.meta.get("fingerprint"),
                                  extra=self.config_key(config))

    # ---- resume -----------------------------------------------------------------------------
    def _save(self, fingerprint: str, config: Config, record: dict) -> None:
        if self.resume_path is None:
            return
        self.resume_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"fingerprint": fingerprint, "config": config.name, "question": record["question"],
                           "record": record}, ensure_ascii=False, allow_nan=True)
        with naming_path(self.resume_path):
            safeio.append_line(self.resume_path, line)

    # ---- one question -----------------------------------------------------------------------
    def trace(self, config: Config, question: Question, records: dict | None = None) -> Trace:
        """The trace of one configuration on one question (recomputing a source if needed)."""
        judge = self.judge_for(config.judge, question)
        if config.policy == "sag2":
            trace = Run(self.index, question, config.params, judge, memo=self.memo).run()
            if config.name in self._needed or self.keep_traces:
                self.traces.setdefault(config.name, {})[question.id] = trace
        elif config.policy == "truncated":
            source = self.traces.get(config.source, {}).get(question.id)
            if source is None:
                src = next(c for c in self.configs if c.name == config.source)
                source = self.trace(src, question)
            trace = truncated_trace(self.index, source, config.params.H)
        elif config.policy == "matched-budget":
            budget = (records or {}).get(config.source, {}).get(question.id, {}).get("judgments")
            if budget is None:
                src = next(c for c in self.configs if c.name == config.source)
                budget = self.trace(src, question).judgments
            if budget == 0:  # the source judged nothing (no candidates): nothing to match
                trace = Run(self.index, question, config.params.replace(H=0), None, memo=self.memo).run()
            else:
                trace = Run(self.index, question, config.params.replace(B=budget, H=0), judge, memo=self.memo).run()
            trace = replace(trace, stats={**trace.stats, "budget": budget})
        else:
            try:
                trace = final_only_trace(self.index, question, config.params, judge, self.memo)
            except QuestionFailed as exc:
                raise type(exc)(question.id, exc.round, exc.error, config.name, exc.kind) from None
        failure = trace_failure(trace, question.id, config.name)
        if failure is not None:
            raise failure
        return trace

    def record(self, config: Config, question: Question, trace: Trace) -> dict:
        docs = trace.documents()
        rec = {"config": config.name, "question": question.id, "type": question.type, "hops": question.hops,
               **question_metrics(docs, question.gold), "judgments": trace.judgments, "stop": trace.stop,
               "ranking": docs[:100]}
        if config.policy == "matched-budget":
            budget = trace.stats.get("budget", trace.judgments)
            rec["budget"] = budget
            rec["shortfall"] = budget - trace.judgments
        if self.keep_traces:
            self.traces.setdefault(config.name, {})[question.id] = trace
        return rec

    # ---- all --------------------------------------------------------------------------------
    def run(self, *, concurrency: int | None = None, processes: int | None = None, client=None,
            executor=None) -> "Results":
        """All configurations × questions. `concurrency=N` runs N questions at once on threads
        (default 8 when a configuration uses JEV, else 1), `processes=N` on a process pool,
        `client=` (a dask.distributed Client or scheduler address) on a Dask cluster; results,
        resume lines and traces are the same as a sequential run's (workbench.parallel)."""
        done = load_resume(self.resume_path) if self.resume_path is not None else {}
        records: dict[str, dict[str, dict]] = {}
        failures: dict[str, dict] = {}  # question id -> its first failure (keep_going)
        reused = computed = 0
        t0 = time.perf_counter()
        order = _run_order(self.configs)
        jev = any(c.judge == "jev" for c in self.configs)
        own = executor is None  # made here: closed here (a passed Client stays open either way)
        executor = executor or make_executor(concurrency, processes, client, judge="jev" if jev else "")
        bar = Progress(len(self.questions) * len(order), "experiment", self.progress,
                       self._factory("jev")(None) if jev else None)
        fetch, fetcher = self.trace, None
        if not isinstance(executor, Sequential):
            keys = {(c.name, q.id): self.fingerprint(c, q) for c in order for q in self.questions}
            fetch = fetcher = ComponentFetch(
                self, executor, order, {k for k, fp in keys.items() if fp not in done},
                {k: done[fp]["record"]["judgments"] for k, fp in keys.items() if fp in done}, bar)
        with heap_frozen():  # collections during the run skip what the caller held before it
            try:
                for config in order:
                    rows = records.setdefault(config.name, {})
                    for q in self.questions:
                        bar.update(1)
                        if q.id in failures:
                            continue  # left out of every configuration anyway
                        fp = self.fingerprint(config, q)
                        if fp in done:
                            rows[q.id] = done[fp]["record"]
                            reused += 1
                            continue
                        try:
                            rec = self.record(config, q, fetch(config, q, records))
                        except QuestionFailed as exc:
                            if not self.keep_going:
                                raise
                            failures[q.id] = exc.to_dict()
                            continue
                        self._save(fp, config, rec)
                        bar.update(0, rec["judgments"])
                        computed += 1
                        rows[q.id] = rec
            except KeyboardInterrupt:  # rows finished out of order by an executor are kept for resume too
                by_name = {c.name: c for c in self.configs}
                for name, q, trace in (fetcher.finished() if fetcher else []):
                    self._save(self.fingerprint(by_name[name], q), by_name[name], self.record(by_name[name], q, trace))
                raise
            finally:
                bar.close()
                if fetcher is not None:
                    fetcher.close()
                if own:
                    executor.close()
        completed = [q.id for q in self.questions if q.id not in failures]
        ordered = [records[c.name][i] for c in self.configs for i in completed]
        stats = {"seconds": round(time.perf_counter() - t0, 3), "records_computed": computed,
                 "records_reused": reused, "memo_hits": self.memo.hits, "memo_misses": self.memo.misses}
        return Results(ordered, completed, self.configs, stats, failures=list(failures.values()),
                       total=len(self.questions))


def run_experiment(index, questions, configs, **options) -> "Results":
    """`Experiment(index, questions, configs, **options).run()`."""
    return Experiment(index, questions, configs, **options).run()


# ---- results ---------------------------------------------------------------------------------
FRAME_COLUMNS = ["config", "question", "type", "hops", *METRICS, "judgments"]
EXTRA_COLUMNS = ["stop", "budget", "shortfall"]


def paired_interval(a, b, metric: str = "R@10", names=("a", "b")) -> dict:
    """Paired 95% percentile bootstrap of mean(a - b) (2,000 resamples, seed 20261015).

    `a`, `b`: per-question values as pandas Series indexed by question id (or dicts). The
    question sets must be equal — otherwise the comparison is refused, naming the difference.

    >>> paired_interval({"q1": 100.0, "q2": 50.0}, {"q1": 50.0, "q2": 50.0})["difference"]
    25.0
    """
    a, b = dict(a), dict(b)
    only_a, only_b = [q for q in a if q not in b], [q for q in b if q not in a]
    if only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} only in {names[0]!r} ({', '.join(map(str, only_a[:5]))}{', ...' if len(only_a) > 5 else ''})")
        if only_b:
            parts.append(f"{len(only_b)} only in {names[1]!r} ({', '.join(map(str, only_b[:5]))}{', ...' if len(only_b) > 5 else ''})")
        raise ExperimentError(
            f"refusing to compare {names[0]!r} ({len(a)} questions) with {names[1]!r} ({len(b)} questions): "
            f"the question sets differ — {'; '.join(parts)}")
    if not a:
        raise ExperimentError(f"nothing to compare: {names[0]!r} and {names[1]!r} have no questions")
    order = list(a)
    missing = [q for q in order if _is_nan(a[q]) or _is_nan(b[q])]
    if missing:
        raise ExperimentError(
            f"cannot compare {names[0]!r} with {names[1]!r} on {metric}: {len(missing)} question(s) have no value "
            f"(no gold labels?): {', '.join(map(str, missing[:5]))}{', ...' if len(missing) > 5 else ''}")
    diff, lo, hi = paired_bootstrap([a[q] for q in order], [b[q] for q in order])
    return {"metric": metric, "a": names[0], "b": names[1], "questions": len(order),
            "difference": round(diff, 4), "low": round(lo, 4), "high": round(hi, 4)}


def _is_nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


class Results:
    """Per-question records of several configurations; tables, intervals and plots."""

    def __init__(self, records: list[dict], question_ids: list[str] | None = None, configs=None, stats=None,
                 failures=None, total: int | None = None):
        self.records = list(records)
        self.configs = list(configs or [])
        self.stats = dict(stats or {})
        self.failures = list(failures or [])  # {config, question, round, error, kind}: left out of every row
        names = []
        for r in self.records:
            if r["config"] not in names:
                names.append(r["config"])
        self.names = names
        self.question_ids = list(question_ids) if question_ids is not None else list(
            dict.fromkeys(r["question"] for r in self.records))
        self.total = total if total is not None else len(self.question_ids) + len(self.failures)

    @property
    def scope(self) -> str | None:
        """None when every question completed; else a sentence saying what the figures cover."""
        if not self.failures:
            return None
        return (f"completed questions only: {len(self.question_ids)} of {self.total} "
                f"({len(self.failures)} failed and are left out of every configuration)")

    def __repr__(self) -> str:
        return f"Results({len(self.names)} configurations × {len(self.question_ids)} questions: {', '.join(self.names)})"

    def combine(self, other: "Results") -> "Results":
        """Rows of both (configuration names must not clash); comparisons still need equal question sets."""
        clash = sorted(set(self.names) & set(other.names))
        if clash:
            raise ExperimentError(f"cannot combine results: configuration names {clash} appear in both")
        ids = list(dict.fromkeys(self.question_ids + other.question_ids))
        return Results(self.records + other.records, ids, self.configs + other.configs,
                       {"combined": [self.stats, other.stats]}, failures=self.failures + other.failures)

    # ---- frames -----------------------------------------------------------------------------
    def frame(self, extras: bool = False):
        """Tidy DataFrame: config, question, type, hops, R@5, R@10, AE@10, judgments
        (`extras=True` adds stop, budget, shortfall)."""
        import pandas as pd

        cols = FRAME_COLUMNS + (EXTRA_COLUMNS if extras else [])
        df = pd.DataFrame([{c: r.get(c) for c in cols} for r in self.records], columns=cols)
        return df.astype({m: float for m in METRICS})  # no gold: None -> NaN, left out of means

    def values(self, config: str, metric: str = "R@10") -> dict:
        """{question id: value} of one configuration, in question order."""
        if config not in self.names:
            raise ExperimentError(f"no configuration {config!r}; configurations: {', '.join(self.names)}")
        return {r["question"]: r[metric] for r in self.records if r["config"] == config}

    def rankings(self, config: str) -> dict:
        """{question id: unique documents of the final ranking (first 100)}."""
        self.values(config)
        return {r["question"]: r.get("ranking") for r in self.records if r["config"] == config}

    def summary(self):
        """One row per configuration: mean R@5, R@10, AE@10, total judgments, questions."""
        df = self.frame()
        g = df.groupby("config", sort=False)
        out = g[list(METRICS)].mean().round(2)
        out["judgments"] = g["judgments"].sum()
        out["questions"] = g.size()
        return out.loc[self.names]

    def by(self, column: str = "type", metric: str = "R@10"):
        """Mean `metric` per question type (or hop count): rows = type, columns = configurations."""
        df = self.frame()
        if column not in ("type", "hops"):
            raise ExperimentError(f"group by 'type' or 'hops', not {column!r}")
        if metric not in METRICS and metric != "judgments":
            raise ExperimentError(f"unknown metric {metric!r}; metrics: {', '.join(METRICS)}, judgments")
        if df[column].isna().all():
            return df.iloc[0:0]
        table = df.pivot_table(index=column, columns="config", values=metric, aggfunc="mean", sort=True).round(2)
        table = table[[n for n in self.names if n in table.columns]]
        table["questions"] = df[df["config"] == self.names[0]].groupby(column).size()
        return table

    # ---- intervals --------------------------------------------------------------------------
    def compare(self, a: str, b: str, metric: str = "R@10") -> dict:
        """mean(a - b) of `metric` over the shared questions, with its paired 95% interval."""
        return paired_interval(self.values(a, metric), self.values(b, metric), metric, (a, b))

    def interval(self, config: str, metric: str = "R@10") -> tuple[float, float, float]:
        """Mean of one configuration and its 95% percentile bootstrap interval (same resamples)."""
        vals = list(self.values(config, metric).values())
        return paired_bootstrap(vals, [0.0] * len(vals))

    def table(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10"):
        """Like the paper's B.1: R@5, R@10, AE@10, judgments, and the paired interval of the
        `metric` difference against `reference` for every row."""
        out = self.summary()
        if reference is not None and reference in self.names:
            diffs, ci = [], []
            for n in self.names:
                c = self.compare(n, reference, metric)
                diffs.append(c["difference"])
                ci.append((c["low"], c["high"]))
            out[f"diff_{metric}_vs_{reference}"] = [round(d, 2) for d in diffs]
            out[f"ci_{metric}_vs_{reference}"] = [(round(lo, 2), round(hi, 2)) for lo, hi in ci]
        return out

    def to_markdown(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10", definitions=None) -> str:
        return _markdown_table(self.table(reference, metric), reference, metric, definitions)

    def to_html(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10", definitions=None) -> str:
        return _html_table(self.table(reference, metric), reference, metric, definitions)

    def _repr_html_(self) -> str:
        ref = REFERENCE_ROW if REFERENCE_ROW in self.names else None
        return self.to_html(ref)

    # ---- plots ------------------------------------------------------------------------------
    def plot(self, metric: str = "R@10", reference: str | None = None, title: str | None = None):
        """Plotly bars with 95% bootstrap intervals (like the paper's Figure 4).

        Without `reference`: each configuration's mean and the interval of that mean. With
        `reference`: each other configuration's paired difference to it and its interval."""
        import plotly.graph_objects as go

        names, ys, lo, hi, text = [], [], [], [], []
        for n in self.names:
            if reference is not None:
                if n == reference:
                    continue
                c = self.compare(n, reference, metric)
                mean, low, high = c["difference"], c["low"], c["high"]
            else:
                mean, low, high = self.interval(n, metric)
            judgments = sum(r["judgments"] for r in self.records if r["config"] == n)
            names.append(n)
            ys.append(mean)
            lo.append(mean - low)
            hi.append(high - mean)
            text.append(f"{mean:.2f} [{low:.2f}, {high:.2f}]<br>{judgments:,} judgments")
        fig = go.Figure(go.Bar(
            x=names, y=ys, error_y=dict(type="data", symmetric=False, array=hi, arrayminus=lo),
            hovertext=text, hoverinfo="text+x", marker_color="#4c72b0",
        ))
        label = f"{metric} − {reference}" if reference else metric
        fig.update_layout(
            title=title or (f"{metric}: paired difference to {reference} (95% interval, {len(self.question_ids)} questions)"
                            if reference else f"{metric} with 95% bootstrap intervals ({len(self.question_ids)} questions)"),
            yaxis_title=label, template="plotly_white", height=380, margin=dict(l=60, r=20, t=60, b=60),
        )
        return fig


def _fmt(v, digits=2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return f"{v:,}"
    return f"{v:.{digits}f}"


def _rows(table, reference, metric):
    head = ["Method", "R@5", "R@10", "AE@10", "Judgments"]
    dcol, ccol = f"diff_{metric}_vs_{reference}", f"ci_{metric}_vs_{reference}"
    has_ci = reference is not None and ccol in table.columns
    if has_ci:
        head.append(f"Δ{metric} vs {reference} [95% CI]")
    rows = []
    for name, row in table.iterrows():
        cells = [str(name), _fmt(row["R@5"]), _fmt(row["R@10"]), _fmt(row["AE@10"]), _fmt(int(row["judgments"]))]
        if has_ci:
            lo, hi = row[ccol]
            cells.append("–" if name == reference else f"{row[dcol]:+.2f} [{lo:.2f}, {hi:.2f}]")
        rows.append(cells)
    return head, rows


def _markdown_table(table, reference, metric, definitions=None) -> str:
    head, rows = _rows(table, reference, metric)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if definitions:
        lines.append("")
        lines += [f"- **{k}**: {v}" for k, v in definitions.items() if k in table.index]
    return "\n".join(lines) + "\n"


def _html_table(table, reference, metric, definitions=None) -> str:
    head, rows = _rows(table, reference, metric)
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    right = ' style="text-align:right"'
    body = "".join(
        "<tr>" + "".join(f"<td{'' if i == 0 else right}>{html.escape(c)}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    out = f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    if definitions:
        out += "<ul>" + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>"
                                for k, v in definitions.items() if k in table.index) + "</ul>"
    return out


# ---- sag2wb ablate ---------------------------------------------------------------------------
def ablation_report(results: Results, judge: str) -> dict:
    """The ablate command's JSON body: rows (R@5, R@10, AE@10, judgments, ci_R@10_vs_H=2),
    matched-budget notes (short questions, the exactly matched subset), per-type R@10."""
    table = results.table(REFERENCE_ROW, "R@10")
    rows = {}
    for name in results.names:
        row = table.loc[name]
        lo, hi = row[f"ci_R@10_vs_{REFERENCE_ROW}"]
        rows[name] = {"R@5": float(row["R@5"]), "R@10": float(row["R@10"]), "AE@10": float(row["AE@10"]),
                      "judgments": int(row["judgments"]), "questions": int(row["questions"]),
                      f"diff_R@10_vs_{REFERENCE_ROW}": float(row[f"diff_R@10_vs_{REFERENCE_ROW}"]),
                      f"ci_R@10_vs_{REFERENCE_ROW}": [float(lo), float(hi)]}
    report = {RESULT_MARKER: {"kind": "ablate", "version": RESULT_VERSION},
              "judge": judge, "questions": len(results.question_ids), "rows": rows,
              "definitions": {k: v for k, v in ROW_DEFINITIONS.items() if k in rows}}
    if results.failures:
        report["scope"] = results.scope
        report["failures"] = results.failures
    if judge == "oracle":
        report["note"] = "oracle judge (gold labels): these rows are the candidate policy's ceiling, not a model result"
    if "matched-budget" in results.names:
        mb = [r for r in results.records if r["config"] == "matched-budget"]
        short = [r for r in mb if r.get("shortfall", 0) > 0]
        exact = [r["question"] for r in mb if r.get("shortfall", 0) == 0]
        note = {"questions_with_too_few_matches": len(short), "ids": [r["question"] for r in short],
                "missing_judgments": int(sum(r["shortfall"] for r in short))}
        if exact and REFERENCE_ROW in results.names:
            a = {q: v for q, v in results.values("matched-budget").items() if q in set(exact)}
            b = {q: v for q, v in results.values(REFERENCE_ROW).items() if q in set(exact)}
            c = paired_interval(a, b, "R@10", ("matched-budget", REFERENCE_ROW))
            note["exactly_matched"] = {"questions": len(exact), "R@10": round(sum(a.values()) / len(a), 2),
                                       f"{REFERENCE_ROW} R@10": round(sum(b.values()) / len(b), 2),
                                       f"diff_R@10_vs_{REFERENCE_ROW}": c["difference"],
                                       f"ci_R@10_vs_{REFERENCE_ROW}": [c["low"], c["high"]]}
        report["matched_budget"] = note
    by_type = results.by("type", "R@10")
    if len(by_type):
        report["by_type_R@10"] = {str(t): {k: (float(v) if k != "questions" else int(v)) for k, v in row.items()}
                                  for t, row in by_type.iterrows()}
    by_hops = results.by("hops", "R@10")
    if len(by_hops):
        report["by_hops_R@10"] = {str(t): {k: (float(v) if k != "questions" else int(v)) for k, v in row.items()}
                                  for t, row in by_hops.iterrows()}
    return report


def ablation_markdown(results: Results, report: dict, title: str = "SAG2 ablation") -> str:
    """The B.1-like Markdown table, the matched-budget note and per-type R@10."""
    md = [f"# {title}", "", f"Judge: `{report['judge']}`; {report['questions']} questions. "
          f"Δ and intervals: paired 95% percentile bootstrap of the R@10 difference to {REFERENCE_ROW} "
          "(2,000 question resamples, seed 20261015).", ""]
    if report.get("note"):
        md += [f"**Note:** {report['note']}.", ""]
    if report.get("scope"):
        md += [f"**Figures over {report['scope']}.**", ""]
    md.append(results.to_markdown(REFERENCE_ROW, "R@10", ROW_DEFINITIONS))
    mb = report.get("matched_budget")
    if mb:
        ids = mb["ids"]
        listed = f": {', '.join(ids[:20])}" + (f" and {len(ids) - 20} more" if len(ids) > 20 else "") if ids else ""
        md.append(f"Matched budget: {mb['questions_with_too_few_matches']} question(s) have fewer BM25 matches than "
                  f"their H=2 judgment count ({mb['missing_judgments']:,} judgments short){listed}.")
        ex = mb.get("exactly_matched")
        if ex:
            lo, hi = ex[f"ci_R@10_vs_{REFERENCE_ROW}"]
            md.append(f"On the {ex['questions']} exactly matched questions: matched-budget R@10 {ex['R@10']:.2f}, "
                      f"{REFERENCE_ROW} {ex[f'{REFERENCE_ROW} R@10']:.2f}, difference "
                      f"{ex[f'diff_R@10_vs_{REFERENCE_ROW}']:+.2f} [{lo:.2f}, {hi:.2f}].")
        md.append("")
    for key, label in (("by_type_R@10", "question type"), ("by_hops_R@10", "hop count")):
        block = report.get(key)
        if not block:
            continue
        cols = results.names
        md += [f"R@10 by {label}:", "", "| " + " | ".join([label, *cols, "questions"]) + " |",
               "|" + "|".join(["---"] + ["---:"] * (len(cols) + 1)) + "|"]
        for t, row in block.items():
            md.append("| " + " | ".join([t, *(_fmt(row.get(c)) for c in cols), str(row.get("questions", ""))]) + " |")
        md.append("")
    return "\n".join(md)
