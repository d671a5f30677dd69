"""How a run's work gets done: the run's judges (`JudgeSource`), what computing one
configuration on one question reads (`RunContext`), the one task type executors run for runs
(`QuestionTask`: one question through a row and the sources it reads; picklable, so a
process or Dask worker runs it on its own index and judges), and the three ways the run loop
gets its outcomes: computed on demand (`InOrder`), from a caller's map (`Mapped`), or from
an executor's stream of tasks (`Streamed`).

>>> from workbench.executors import Processes, load_outcome, run_remote
>>> question = questions[0]
>>> task = QuestionTask.evaluating(question, "lexical", Params())
>>> processes = Processes(2)
>>> future = processes.submit(run_remote, recipe_for(index, 2), None, task, question.id)
>>> [(o.config, o.question.id, o.record["R@10"]) for o in load_outcome(future.result()).value]
[('eval', 'docs-01', 50.0)]
>>> processes.close(wait=True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from workbench import safeio
from workbench.engine import unit_infos
from workbench.executors import Stream, TaskOutcome, recipe_for, sendable
from workbench.index.units import Question
from workbench.judges.cached import CachedJudge
from workbench.judges.registry import JudgeSpec, judge_key
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.params import Params
from workbench.protocols import summed_usage
from workbench.runs.policies import POLICIES, READS_SOURCE_TRACE, Config
from workbench.runs.records import EVALUATION, EXPERIMENT, Outcome, QuestionFailed, RecordShape, trace_failure
from workbench.trace import Trace


def judge_spec(judge, jev_options: dict | None = None) -> JudgeSpec:
    """A judge as a value: its text parsed (`JudgeSpec.parse`, the one parser), with the hosted
    judge's options (endpoint, model, cache...) added when it is `jev` (other judges take none)."""
    spec = JudgeSpec.parse(judge)
    if jev_options and spec.name == "jev":
        spec = spec.with_options(**jev_options)
    return spec


def require_gold(questions: list[Question], judge, source="questions") -> None:
    """A judge that needs gold labels (the oracle): refuse up front (safeio.InputError), naming
    the questions without them."""
    try:
        spec = JudgeSpec.parse(judge)
    except JudgeError:  # not a judge we know: that error comes where it is built
        return
    no_gold = [q for q in questions if not q.gold]
    if spec.kind.needs_gold and no_gold:
        ids = ", ".join(f"{q.id!r} (line {q.line})" if q.line else repr(q.id) for q in no_gold[:5])
        raise safeio.InputError(
            f"{source}: {len(no_gold)} question(s) have no gold labels (supporting_titles), "
            f"which the {spec} judge needs: {ids}{' ...' if len(no_gold) > 5 else ''}; "
            f"add them or use another judge"
        )


def require_unique_ids(questions: list[Question], source="questions") -> None:
    """Refuse up front (safeio.InputError) questions that share an id, naming the ids and their
    lines: results, resume records and TREC runs are keyed by id, so one would stand for both.

    >>> require_unique_ids([Question("a", "x?", line=1), Question("a", "y?", line=4)])
    Traceback (most recent call last):
    ...
    workbench.safeio.InputError: questions: repeated question ids (each must be unique): 'a' (lines 1, 4)
    """
    where: dict[str, list[int]] = {}
    for q in questions:
        where.setdefault(q.id, []).append(q.line)
    dupes = {qid: lines for qid, lines in where.items() if len(lines) > 1}
    if dupes:
        shown = [
            f"{qid!r} (lines {', '.join(map(str, lines))})" if all(lines) else f"{qid!r} ({len(lines)} times)"
            for qid, lines in list(dupes.items())[:10]
        ]
        more = f" and {len(dupes) - 10} more" if len(dupes) > 10 else ""
        raise safeio.InputError(f"{source}: repeated question ids (each must be unique): {', '.join(shown)}{more}")


def question_judge(spec: JudgeSpec, question: Question, shared, index):
    """The judge of `spec` for one question: a fresh one from its gold labels for a kind that
    needs them (the oracle), else `shared(spec)`, the one judge for every question."""
    if spec.kind.needs_gold:
        if not question.gold:
            raise ValueError(f"question {question.id!r} has no gold labels: the {spec} judge needs them")
        return spec.build(index, gold=question.gold)
    return shared(spec)


class JudgeSource:
    """A run's judges by spec, built on first use: one judge for all questions (one JEV client,
    one lexical judge), or one per question from its gold (the oracle). `factories`:
    {spec: question -> judge} the caller gives instead (evaluate's `judge_for`); a factory's
    `key` attribute names its answers in resume fingerprints."""

    def __init__(self, index, factories: dict | None = None):
        self.index = index
        self.factories = dict(factories or {})
        self.built: dict = {}
        self.keys: dict = {}

    def shared(self, spec: JudgeSpec):
        """The one judge of `spec` (None for bm25)."""
        if spec not in self.built:
            self.built[spec] = spec.build(self.index)
        return self.built[spec]

    def __call__(self, spec: JudgeSpec, question: Question):
        factory = self.factories.get(spec)
        if factory is not None:
            return factory(question)
        return question_judge(spec, question, self.shared, self.index)

    def key(self, spec: JudgeSpec) -> str:
        """What identifies the judge's answers in resume fingerprints (`registry.judge_key`)."""
        if spec not in self.keys:
            if spec in self.factories:
                self.keys[spec] = getattr(self.factories[spec], "key", str(spec))
            else:
                self.keys[spec] = judge_key(spec, None if spec.kind.needs_gold else self.shared(spec))
        return self.keys[spec]

    def prepare(self, specs, question: Question | None = None) -> dict:
        """Build now the judges every question of `specs` shares (before threads start: one JEV
        client for all): {spec: judge}; a caller's factory is asked for `question`'s."""
        out = {}
        for spec in dict.fromkeys(specs):
            if spec.kind.needs_gold:
                continue
            if spec in self.factories:
                if question is not None:
                    out[spec] = self.factories[spec](question)
            else:
                out[spec] = self.shared(spec)
        return {spec: judge for spec, judge in out.items() if judge is not None}


class RunContext:
    """What computing a configuration on a question reads (the `run` a policy is given): the
    index, the judges, the judgment memo the run shares, and its sources' results — the traces
    of rows another reads (`truncated`), the judgment counts of records made or resumed
    (`matched-budget`). `shape`: the records' and failures' shape (`records.RecordShape`)."""

    def __init__(self, index, configs, judges, memo, *, shape: RecordShape = EXPERIMENT, explain: bool = True):
        self.index, self.judges, self.memo, self.shape = index, judges, memo, shape
        self.explain = explain  # False: traces are not kept, so judges are not asked why (records only)
        self.configs = {c.name: c for c in configs}
        self.needed = {c.source for c in configs if c.policy in READS_SOURCE_TRACE}
        self.traces: dict[str, dict[str, Trace]] = {}  # config name -> {question id: trace}
        self.judgments: dict[tuple[str, str], int] = {}  # (config name, question id) -> judgments

    def judge(self, config, question):
        return self.judges(config.judge, question)

    def label(self, config) -> str | None:
        """The configuration a failure names (an evaluation's names none)."""
        return self.shape.failure_config(config.name)

    def source_trace(self, config, question) -> Trace:
        trace = self.traces.get(config.source, {}).get(question.id)
        return trace if trace is not None else self.trace(self.configs[config.source], question)

    def source_judgments(self, config, question) -> int:
        known = self.judgments.get((config.source, question.id))
        return known if known is not None else self.trace(self.configs[config.source], question).judgments

    def trace(self, config, question) -> Trace:
        """The trace of one configuration on one question; its failure raised (QuestionFailed)."""
        trace, failure = self._compute(config, question)
        if failure is not None:
            raise failure
        return trace

    def _compute(self, config, question):
        try:
            trace = POLICIES[config.policy](self, config, question)
        except QuestionFailed as failure:  # the final-only judge, or a source recomputed for this row
            return None, failure
        if config.name in self.needed:
            self.traces.setdefault(config.name, {})[question.id] = trace
        return trace, trace_failure(trace, question.id, self.label(config))

    def outcome(self, config, question) -> Outcome:
        """The record (or the failure) of one configuration on one question."""
        trace, failure = self._compute(config, question)
        if failure is not None:
            return Outcome(
                question, trace=trace, failure=failure, stats=trace.stats if trace else {}, config=config.name
            )
        self.judgments[(config.name, question.id)] = trace.judgments
        return Outcome(
            question, self.shape.record(question, trace, config.name), trace, stats=trace.stats, config=config.name
        )


@dataclass(frozen=True)
class QuestionTask:
    """One question through configurations of a run (a row and the sources it reads, in run
    order): the task executors run for runs. `task(env, memo)` runs it in a worker, on the
    worker's index and judges (`executors.WorkerEnv`); `task.run(context)` in this process.
    `keep_traces=False`: a worker sends records, not traces (~60 kB pickled per question on
    2Wiki, most of the caller's work per question); the records are made by the same function."""

    configs: tuple  # every configuration of the run (a row's source is found by name)
    names: tuple  # the ones to compute, in run order
    question: Question
    known: tuple = ()  # (configuration name, judgments) of resumed records a row may read
    shape: RecordShape = EXPERIMENT
    keep_traces: bool = True

    @classmethod
    def evaluating(
        cls, question: Question, judge, params: Params | None = None, *, keep_traces: bool = True, name: str = "eval"
    ) -> QuestionTask:
        """The task of one question of an evaluation with `judge` and `params`."""
        return cls(
            (Config(name, params or Params(), judge),), (name,), question, shape=EVALUATION, keep_traces=keep_traces
        )

    def run(self, context: RunContext) -> list[Outcome]:
        for name, judgments in self.known:
            context.judgments[(name, self.question.id)] = judgments
        out = []
        for name in self.names:
            try:
                out.append(context.outcome(context.configs[name], self.question))
            except Exception as exc:  # raised by the caller at this (configuration, question)
                out.append(Outcome(self.question, config=name, error=exc))
        return out

    def __call__(self, env, memo) -> list[Outcome]:
        def judges(spec, question):
            return question_judge(spec, question, env.judge, env.index)

        context = RunContext(env.index, self.configs, judges, memo, shape=self.shape, explain=self.keep_traces)
        outcomes = self.run(context)
        return [_to_send(o, self.keep_traces) for o in outcomes]


def _to_send(outcome: Outcome, keep_trace: bool) -> Outcome:
    """An outcome as a worker sends it: no trace unless kept; a kept trace's `units` cut to a
    tuple of ids (titles and sources are the caller's index's, engine.unit_infos: a third of
    the bytes pickled back per question, ~28 of ~90 KB on 2Wiki); an exception that pickles."""
    trace = outcome.trace
    if trace is not None:
        trace = replace(trace, units=tuple(trace.units)) if keep_trace else None  # type: ignore[arg-type]
    error = sendable(outcome.error) if outcome.error is not None else None
    return replace(outcome, trace=trace, error=error)


def _with_units(outcomes, index) -> list[Outcome]:
    """The inverse of `_to_send`'s cut, in the caller: the same UnitInfo, in the same order."""
    out = []
    for o in outcomes or ():
        if o.trace is not None and isinstance(o.trace.units, tuple):
            o = replace(o, trace=replace(o.trace, units=unit_infos(index, o.trace.units)))
        out.append(o)
    return out


def worker_spec(spec: JudgeSpec, judge=None) -> JudgeSpec:
    """The spec a worker builds the caller's `judge` from: a cached judge's store folder made
    absolute (workers read the caller's store when they see it), for a spec given options
    (the CLI always gives JEV its options; bare `jev` leaves each worker its own default)."""
    if spec.options and isinstance(judge, CachedJudge) and judge.cache_dir is not None:
        return spec.with_options(cache_dir=str(Path(judge.cache_dir).resolve()))
    return spec


def absorb_judgments(memo: JudgmentMemo, index, judges, on_usage=None):
    """An `absorb` for Stream: remote judgments into `memo` (unit texts from `index`), new
    store entries into the store of the caller's cached judge (the first among `judges()`, the
    judge objects in use), usage to `on_usage`."""

    def absorb(outcome: TaskOutcome) -> None:
        for (key, question, context_key, unit_id), score in outcome.judgments.items():
            memo.scores[(key, question, context_key, unit_id, index.unit(unit_id).body)] = score
        if outcome.cache:
            cached = next((j for j in judges() if isinstance(j, CachedJudge)), None)
            if cached is not None:
                cached.keep(list(outcome.cache.items()))
        if on_usage is not None and outcome.usage:
            on_usage(outcome.usage)

    return absorb


def components(configs, run_order) -> list[list]:
    """Configurations grouped so that a row and its source are in one group (each group in
    run order, groups in the order of their first row): one task per group and question."""
    parent = {c.name: c.name for c in configs}

    def root(n):
        while parent[n] != n:
            n = parent[n]
        return n

    for c in configs:
        if c.source:
            parent[root(c.name)] = root(c.source)
    groups: dict[str, list] = {}
    for c in run_order:
        groups.setdefault(root(c.name), []).append(c)
    return list(groups.values())


# ---- where the loop's outcomes come from -------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What a pass of the loop has an executor compute: the configurations in run order, the
    questions, `todo` (the (configuration name, position) pairs to compute), `known`
    ({(name, position): judgments} of resumed records a row may read), whether workers send
    traces back (`keep_traces`) and their judgments (`send_judgments`)."""

    order: list
    questions: list
    todo: set
    known: dict
    keep_traces: bool
    send_judgments: bool


class InOrder:
    """Each outcome computed when the loop asks for it: the sequential run."""

    def __init__(self, context: RunContext, questions):
        self.context, self.questions = context, questions

    def get(self, config, i: int) -> Outcome:
        return self.context.outcome(config, self.questions[i])

    def finished(self) -> list:
        return []

    def usage(self) -> dict | None:
        return None

    def close(self) -> None:
        pass


class Mapped(InOrder):
    """A caller's `map_outcomes(fn, questions)` over the questions to run of a one-configuration
    run (the built-in lazy `map`, a thread pool's ordered map), consumed in question order."""

    def __init__(self, context: RunContext, config, questions, todo, map_outcomes):
        super().__init__(context, questions)
        self.outcomes = iter(map_outcomes(lambda q: context.outcome(config, q), [questions[i] for i in todo]))

    def get(self, config, i: int) -> Outcome:
        return next(self.outcomes)

    def close(self) -> None:
        close = getattr(self.outcomes, "close", None)  # a generator-based map: stop it early
        if close is not None:
            close()


class Streamed(InOrder):
    """Outcomes computed by an executor: one QuestionTask per (group of configurations linked
    by sources, question), submitted in the order the loop consumes them; `get` returns (or
    raises) what the sequential computation would, at the same (configuration, question).

    `plan`: what to compute (`Plan`). `judges`: {spec: the caller's shared judge}, built before
    any thread starts (their counters give a thread run's usage; a cached one receives the
    workers' new store entries)."""

    def __init__(self, executor, context: RunContext, plan: Plan, judges: dict, *, progress=None, on_arrival=None):
        questions, todo, known = plan.questions, plan.todo, plan.known
        super().__init__(context, questions)
        configs = list(context.configs.values())
        groups = components(configs, plan.order)
        self.group_of = {c.name: g for g, group in enumerate(groups) for c in group}
        self.local = executor.local
        if not self.local:  # workers build the same judges from the specs (a cache folder made absolute)
            configs = [replace(c, judge=worker_spec(c.judge, judges.get(c.judge))) for c in configs]
        self.tasks: dict = {}  # (group, position) -> QuestionTask
        for g, group in enumerate(groups):
            for i, q in enumerate(questions):
                names = tuple(c.name for c in group if (c.name, i) in todo)
                if names:
                    seen = tuple((c.name, known[(c.name, i)]) for c in group if (c.name, i) in known)
                    self.tasks[(g, i)] = QuestionTask(tuple(configs), names, q, seen, context.shape, plan.keep_traces)
        self.results: dict = {}  # (config name, position) -> Outcome, not taken yet
        self.judges = list(judges.values())
        self._start = summed_usage(self.judges)
        if self.local:
            self.stream = Stream(executor, list(self.tasks), lambda key: self.tasks[key].run(context))
        else:
            index = context.index
            self.stream = Stream(
                executor,
                list(self.tasks),
                None,
                remote=self.tasks.__getitem__,
                recipe=recipe_for(index, executor.workers, judgments=plan.send_judgments),
                index=index,
                unpack=lambda outcomes: _with_units(outcomes, index),
                absorb=absorb_judgments(
                    context.memo, index, lambda: self.judges, progress.add_usage if progress is not None else None
                ),
                on_arrival=on_arrival,
            )

    def get(self, config, i: int) -> Outcome:
        k = (config.name, i)
        if k not in self.results:
            for o in self.stream.get((self.group_of[config.name], i)):
                self.results[(o.config, i)] = o
        o = self.results.pop(k)
        if o.error is not None:
            raise o.error
        return o

    def finished(self) -> list:
        """[(config name, position, outcome)] computed without failure but not taken yet."""
        for (_, i), outcomes in self.stream.finished():
            for o in outcomes:
                self.results.setdefault((o.config, i), o)
        return [(name, i, o) for (name, i), o in self.results.items() if o.error is None and o.failure is None]

    def usage(self) -> dict | None:
        """Thread runs: the shared judges' counters spent since the stream started (measured once
        for all threads: per-question differences overlap); None for remote executors."""
        if not self.local:
            return None
        return {k: v - self._start.get(k, 0) for k, v in summed_usage(self.judges).items()}

    def close(self) -> None:
        self.stream.close()
