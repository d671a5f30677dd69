"""Experiments: several configurations over one question set, sharing judgments — tidy
results, paired bootstrap intervals, per type/hop tables, plots — and `sag2wb ablate`,
the paper's comparisons (§4.2, §5.3, Appendix B) as one command. `Experiment.run` is the
one loop of the run layer (resume, failures, keep_going, progress, Ctrl-C); an evaluation
is an experiment with one configuration and the evaluation's record shape
(`Experiment(..., shape=EVALUATION)`, workbench/runs/evaluation.py).

>>> configs = [Config("sag2", judge="lexical"),
...            Config("no_idf", Params(term_weighting="no_idf"), judge="lexical")]
>>> results = Experiment(index, questions, configs, RunOptions(resume_path="runs.jsonl", progress=False)).run()
>>> results.summary()                      # one row per configuration
          R@5   R@10  AE@10  judgments  questions
config
sag2    67.59  90.74  77.78        350          9
no_idf  67.59  85.19  66.67        410          9
>>> results.compare("no_idf", "sag2")      # paired 95% interval of the R@10 difference
{'metric': 'R@10', 'a': 'no_idf', 'b': 'sag2', 'questions': 9, 'difference': -5.5556, 'low': -16.6667, 'high': 0.0}
>>> results.plot("R@10").layout.title.text  # bars with intervals, like the paper's Figure 4
'R@10 with 95% bootstrap intervals (9 questions)'

A configuration (`Config`) is a name, Params, a judge (`bm25`, `lexical`, `oracle`, `jev`,
`FILE.py:NAME`, ...: a `JudgeSpec`) and a policy from `policies.POLICIES`: `sag2` (with
judge `bm25`: the BM25 baseline), `truncated`, `matched-budget`, `final-only`.

Every configuration shares one `JudgmentMemo`, so rows reuse judgments wherever their
inputs coincide (round 0 of every judged row, the matched-budget pool's first 100 units).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench import safeio
from workbench.deprecation import keep_old_names
from workbench.executors import Sequential, default_concurrency, heap_frozen, make_executor
from workbench.index.units import Question
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgmentMemo
from workbench.params import Params
from workbench.protocols import model_sha256
from workbench.runs.options import RunOptions, from_keywords
from workbench.runs.policies import Config
from workbench.runs.progress import Progress
from workbench.runs.records import EXPERIMENT, ExperimentError, RecordShape
from workbench.runs.results import Results
from workbench.runs.resume import ResumeFile, naming_path, record_fingerprint, trace_file_name
from workbench.runs.tasks import InOrder, JudgeSource, Mapped, Plan, RunContext, Streamed, judge_spec, require_gold
from workbench.terms import variant_fingerprint
from workbench.trace import Trace

# names older code imported from here, readable with a DeprecationWarning (docs/deprecations.md)
keep_old_names(
    __name__,
    {
        "POLICIES": "workbench.runs.policies",
        "final_only_trace": "workbench.runs.policies",
        "QuestionFailed": "workbench.runs.records",
        "_run_order": "workbench.runs.experiment:run_order",
        **dict.fromkeys(
            [
                "ABLATION_ROWS",
                "EXTRA_COLUMNS",
                "FEEDBACK_ROWS",
                "FRAME_COLUMNS",
                "REFERENCE_ROW",
                "ROW_DEFINITIONS",
                "ablation_markdown",
                "ablation_report",
                "paired_interval",
            ],
            "workbench.runs.results",
        ),
    },
)


def judge_sha256(judge) -> str | None:
    """The sha256 of the model a judge reads (the learned judge's, as its trace name and cache key
    carry it), or None for a judge without a model file.

    >>> class Learned:  # workbench.judges.learned.LearnedJudge keeps its model's sha256 so
    ...     sha256 = "cd68c0e05dcb" + "0" * 52
    >>> judge_sha256(Learned())[:12], judge_sha256(None)
    ('cd68c0e05dcb', None)
    """
    return model_sha256(judge)


def paper_ablation(
    params: Params | None = None, judge: str | JudgeSpec = "lexical", feedback: bool = False
) -> list[Config]:
    """The paper's comparisons (§5.3, B.1, B.2) as configurations, in the table's row order;
    `feedback=True` adds B.3's lexical-feedback rows (RM3 and GAR-BM25, each without a judge
    and with final-only judging), as `sag2wb ablate` runs them.

    >>> [c.name for c in paper_ablation(judge="oracle")]
    ['bm25', 'H=0', 'H=1', 'H=2', 'no-context', 'matched-budget', 'final-only']
    >>> [c.name for c in paper_ablation(judge="oracle", feedback=True)][7:]
    ['rm3', 'rm3+final-only', 'gar-bm25', 'gar-bm25+final-only']
    """
    base = (params or Params()).replace(H=2)
    judge = JudgeSpec.parse(judge)
    return [
        Config("bm25", base, JudgeSpec.parse("bm25")),
        Config("H=0", base.replace(H=0), judge, "truncated", source="H=2"),
        Config("H=1", base.replace(H=1), judge, "truncated", source="H=2"),
        Config("H=2", base, judge),
        Config("no-context", base.replace(use_context=False), judge),
        Config("matched-budget", base.replace(H=0), judge, "matched-budget", source="H=2"),
        Config("final-only", base, judge, "final-only"),
    ] + (
        [
            Config("rm3", base, JudgeSpec.parse("bm25"), "rm3"),
            Config("rm3+final-only", base, judge, "rm3"),
            Config("gar-bm25", base, JudgeSpec.parse("bm25"), "gar"),
            Config("gar-bm25+final-only", base, judge, "gar"),
        ]
        if feedback
        else []
    )


def run_order(configs: list[Config]) -> list[Config]:
    """Sources first (a truncated / matched-budget row needs its source's trajectories)."""
    names = {c.name: c for c in configs}
    out, placed = [], set()

    def place(c, chain=()):
        if c.name in placed:
            return
        if c.name in chain:
            raise ExperimentError(f"configuration {c.name!r}: its sources form a cycle ({' -> '.join(chain)})")
        if c.source:
            place(names[c.source], (*chain, c.name))
        placed.add(c.name)
        out.append(c)

    for c in configs:
        place(c)
    return out


@dataclass
class Tally:
    """What one pass of the loop gave: each configuration's records in question order (with
    their positions), the failures (by position), and counts."""

    rows: dict  # config name -> [(position, record)]
    failed: dict  # position -> failure dict (the first failure of that question)
    reused: int = 0
    resumed: set = field(default_factory=set)  # ids of the questions with a reused record
    computed: int = 0
    rebuilt: int = 0  # resumed records whose traces were asked for: re-run (resume lines keep no traces)
    usage: dict = field(default_factory=dict)  # the judges' counters spent (requests, tokens, cost, ...)


class Experiment:
    """Configurations × questions over one index, sharing one judgment memo.

    `options` (`RunOptions`): how the run goes. `resume_path`: a JSONL file receiving one line
    per (configuration, question) as it finishes; a line is reused when its fingerprint
    (question id, text, gold and type, configuration, judge key, index) is unchanged, so an
    interrupted experiment resumes. Failed questions are never written there. A judge's
    options (JEV's endpoint, cache_dir, ...) are in its configuration's `JudgeSpec`.
    `shape`: the records' shape, chosen once (`EXPERIMENT`; `EVALUATION` is what `evaluate`
    makes: one configuration, the evaluation's records, resume lines and fingerprints).

    A failed question (judge or term-weighting error) stops the run with `QuestionFailed`
    naming configuration, question and round; with `keep_going=True` the run goes on and
    every configuration's results cover only the questions that completed in all of them
    (so comparisons stay paired), with `results.failures` listing the rest.

    >>> results = Experiment(index, questions, paper_ablation(judge="oracle"), RunOptions(progress=False)).run()
    >>> results
    Results(7 configurations × 9 questions: bm25, H=0, H=1, H=2, no-context, matched-budget, final-only)
    """

    def __init__(
        self,
        index,
        questions: list[Question],
        configs: list[Config],
        options: RunOptions | None = None,
        *,
        shape: RecordShape = EXPERIMENT,
        **keywords,
    ):
        """`keywords`: the older form (`progress=`, `resume_path=`, `memo=`, `keep_traces=`,
        `keep_going=`, `judge_options=`), deprecated: give `options` and put JEV's options in
        the configurations' specs."""
        unknown = sorted(
            set(keywords) - {"memo", "resume_path", "progress", "keep_traces", "keep_going", "judge_options"}
        )
        if unknown:
            raise TypeError(f"Experiment() got unexpected keyword arguments: {', '.join(unknown)}")
        options, rest = from_keywords(options, keywords, "Experiment")
        judge_options = rest.get("judge_options")
        configs = [replace(c, judge=judge_spec(c.judge, judge_options)) for c in configs] if judge_options else configs
        shape.check(questions, configs)
        only_one = options.one_configuration_only()
        if only_one and len(configs) != 1:
            raise ExperimentError(
                f"{', '.join(only_one)}: only a run of one configuration takes it; this one has {len(configs)}"
            )
        self.index, self.questions, self.configs = index, list(questions), list(configs)
        self.options, self.shape = options, shape
        self.memo = options.memo if options.memo is not None else JudgmentMemo()
        self.resume_path = Path(options.resume_path) if options.resume_path is not None else None
        self.resume = ResumeFile(self.resume_path, make_folder=True) if self.resume_path is not None else None
        judge_for = options.hooks.judge_for  # stands for the one configuration's judge
        self.judges = JudgeSource(index, {self.configs[0].judge: judge_for} if judge_for is not None else None)
        for spec in dict.fromkeys(c.judge for c in self.configs if c.judge.kind.needs_gold):
            if spec not in self.judges.factories:  # a caller's judge_for brings its own gold
                require_gold(self.questions, spec)
        self.context = RunContext(index, self.configs, self.judges, self.memo, shape=shape)
        self.traces: dict[str, dict[str, Trace]] = self.context.traces  # kept traces, and the sources' rows read
        self._keys: dict[str, str] = {}
        self._rebuild = self._traces_wanted(None)  # set per loop: which resumed records are re-run for traces

    # ---- keys --------------------------------------------------------------------------------
    def config_key(self, config: Config) -> str:
        """Everything that changes a row's per-question results (resume reuses only equal keys)."""
        if config.name not in self._keys:
            by_name = {c.name: c for c in self.configs}
            key = {
                "name": config.name,
                "policy": config.policy,
                "judge": str(config.judge),
                "params": config.params.to_dict(),
                "variant": variant_fingerprint(config.params.term_weighting),
                "index": self.index.meta.get("fingerprint"),
                "source": self.config_key(by_name[config.source]) if config.source else None,
            }
            if config.feedback is not None:  # rm3 / gar settings (other rows' keys stay as they were)
                key["feedback"] = config.feedback.to_dict()
            self._keys[config.name] = json.dumps(key, sort_keys=True)
        return self._keys[config.name]

    def fingerprint(self, config: Config, question: Question) -> str:
        """The resume key of one (configuration, question) record (resume.record_fingerprint)."""
        return record_fingerprint(
            question,
            config.params,
            self.judges.key(config.judge),
            self.index.meta.get("fingerprint"),
            extra=self.shape.fingerprint_extra(self.config_key(config)),
        )

    def judge_sha256(self) -> dict[str, str]:
        """{configuration name: the sha256 of the model its judge read} for the judges built so far
        that read a model file (the learned judge; its trace name and cache key carry the same)."""
        out = {}
        for c in self.configs:
            sha256 = judge_sha256(self.judges.built.get(c.judge))
            if sha256:
                out[c.name] = sha256
        return out

    def trace(self, config: Config, question: Question) -> Trace:
        """The trace of one configuration on one question (computing a source if needed)."""
        return self.context.trace(config, question)

    def _save(self, fingerprint: str, config: Config, question: Question, record: dict) -> None:
        if self.resume is not None:
            self.resume.append(fingerprint, self.shape.head(config.name, question.id), record)

    # ---- all ---------------------------------------------------------------------------------
    def run(
        self, *, concurrency: int | None = None, processes: int | None = None, client=None, executor=None
    ) -> Results:
        """All configurations × questions. `concurrency=N` runs N questions at once on threads
        (default 8 when a configuration's judge waits on a service, JEV, else 1), `processes=N`
        on a process pool, `client=` (a dask.distributed Client or scheduler address) on a Dask
        cluster, `executor=` (default: the options') on that executor; results, resume lines and
        traces are the same as a sequential run's (workbench/executors.py). A caller's
        `hooks.judge_for` judges live in this process: its questions stay on threads here, and
        processes or a cluster are refused."""
        t0 = time.perf_counter()
        executor = executor or self.options.executor
        own = executor is None  # made here: closed here (a passed Client stays open either way)
        waits = next((c.judge for c in self.configs if c.judge.kind.waits), None)
        if executor is None and self.judges.factories and processes is None and client is None:
            # hooks.judge_for's judges live in this process: keep its questions on threads here
            # (for a judge that waits, 16 at once would otherwise spread over processes)
            concurrency, processes = concurrency or default_concurrency(waits), 1
        executor = executor or make_executor(concurrency, processes, client, judge=waits)
        if self.judges.factories and not executor.local:
            if own:
                executor.close()
            raise ExperimentError(
                f"hooks.judge_for with {executor.name}: its judges live in this process, and processes or a "
                "cluster build theirs from the judge's spec; run it on threads (concurrency=N) instead"
            )
        try:
            tally = self.loop(executor)
        finally:
            if own:
                executor.close()
        completed = [q.id for i, q in enumerate(self.questions) if i not in tally.failed]
        ordered = [rec for c in self.configs for i, rec in tally.rows[c.name] if i not in tally.failed]
        stats: dict = {
            "seconds": round(time.perf_counter() - t0, 3),
            "records_computed": tally.computed,
            "records_reused": tally.reused,
            "memo_hits": self.memo.hits,
            "memo_misses": self.memo.misses,
        }
        if tally.rebuilt:
            stats["traces_rebuilt"] = tally.rebuilt
        models = self.judge_sha256()
        if models:  # which model each learned row read (a model file refitted in place changes it)
            stats["judge_sha256"] = models
        return Results(
            ordered, completed, self.configs, stats, failures=list(tally.failed.values()), total=len(self.questions)
        )

    def loop(self, executor=None, *, send_judgments: bool = True) -> Tally:
        """The one loop: every configuration (sources first) × every question, in that order,
        reusing resumed records, computing the rest through `executor` (or the options'
        `hooks.map_outcomes(fn, questions)` for one configuration), saving each record as it comes,
        stopping at a failure or, with keep_going, leaving that question out of every row.
        Ctrl-C saves what an executor finished out of order, then re-raises. Judges are asked
        to explain only when traces are kept or written (records hold no explanations).
        `send_judgments`: workers send their judgments back (to this run's memo)."""
        before = self.context.explain
        self.context.explain = self.options.keep_traces or self.options.trace_dir is not None
        try:
            return self._loop(executor or Sequential(), send_judgments)
        finally:
            self.context.explain = before

    def _loop(self, executor, send_judgments: bool) -> Tally:
        map_outcomes, trace_dir = self.options.hooks.map_outcomes, self.options.trace_dir
        done = self.resume.load() if self.resume is not None else {}
        order = run_order(self.configs)
        questions, by_name = self.questions, {c.name: c for c in self.configs}
        self.context.judgments.clear()
        prints: dict = {}  # (config name, position) -> fingerprint, made as needed (judges are built then)

        def fingerprint(config, i):
            if (config.name, i) not in prints:
                prints[(config.name, i)] = self.fingerprint(config, questions[i])
            return prints[(config.name, i)]

        ahead = map_outcomes is not None or not isinstance(executor, Sequential)
        # what is to do known now (else found as the loop goes, building each row's judge when it
        # comes); one configuration's is cheap to know: its one judge is built first anyway
        planned = ahead or len(order) == 1
        self._rebuild = self._traces_wanted(trace_dir)
        todo = {
            (c.name, i)
            for c in order
            for i in range(len(questions))
            if planned and (fingerprint(c, i) not in done or self._rebuild(i))
        }
        first = next(
            (questions[i] for c in order for i in range(len(questions)) if not planned or (c.name, i) in todo), None
        )
        if trace_dir is not None:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        bar = Progress(
            len(questions) * len(order),
            self.options.label or "experiment",
            self.options.progress,
            self.judges.prepare([c.judge for c in order if c.judge.kind.waits], first).values(),
        )
        fetch: InOrder = InOrder(self.context, questions)
        if map_outcomes is not None:
            fetch = Mapped(
                self.context,
                order[0],
                questions,
                [i for i in range(len(questions)) if (order[0].name, i) in todo],
                map_outcomes,
            )
        elif ahead:
            known = {k: done[f]["record"]["judgments"] for k, f in prints.items() if f in done}
            plan = Plan(
                order, questions, todo, known, self.options.keep_traces or trace_dir is not None, send_judgments
            )
            fetch = Streamed(
                executor,
                self.context,
                plan,
                self.judges.prepare([c.judge for c in order], first),
                progress=bar,
                on_arrival=self.options.hooks.on_arrival,
            )
        tally = Tally({c.name: [] for c in order}, {})
        with heap_frozen():  # collections during the run skip what the caller held before it
            try:
                for config in order:
                    for i in range(len(questions)):
                        # a question failed in one configuration is left out of every one anyway
                        made = (
                            0
                            if i in tally.failed
                            else self._step(config, i, fingerprint(config, i), done, fetch, tally)
                        )
                        bar.update(1, made)
            except KeyboardInterrupt:  # records finished out of order by an executor are kept for resume too
                for name, i, out in fetch.finished():
                    self._save(fingerprint(by_name[name], i), by_name[name], questions[i], out.record or {})
                raise
            finally:
                bar.close()
                fetch.close()
        tally.usage = fetch.usage() or tally.usage  # threads: counted once for all, not per question
        return tally

    def _traces_wanted(self, trace_dir):
        """position -> True when that question's trace is asked for (kept, or a --trace-dir file
        not there yet): a resumed record then gets its trajectory re-run, since resume lines
        keep no traces (a trace's JSON is ~6.5x its resume line on the encyclopedia, 57 vs 9 kB) —
        never a trace silently missing."""
        folder = Path(trace_dir) if trace_dir is not None else None

        def wanted(i: int) -> bool:
            if self.options.keep_traces:
                return True
            return folder is not None and not (folder / trace_file_name(self.questions[i].id)).exists()

        return wanted

    def _step(self, config: Config, i: int, fp: str, done: dict, fetch: InOrder, tally: Tally) -> int:
        """One (configuration, question): its resumed record, or its outcome computed now and kept
        (record, trace, resume line) or counted as a failure. Returns the judgments made. A
        resumed record whose trace is asked for is re-run: the same record (deterministic judges)
        is counted resumed; a different one (a judge that answers differently now) replaces it."""
        q, rows = self.questions[i], tally.rows[config.name]
        resumed = done.get(fp)
        if resumed is not None and resumed["record"].get(self.shape.id_field) != q.id:
            resumed = None  # another question's record (cannot happen with the id in the key; never reused)
        if resumed is not None and not self._rebuild(i):
            rec = resumed["record"]
            rows.append((i, rec))
            self.context.judgments[(config.name, q.id)] = rec["judgments"]
            tally.reused += 1
            tally.resumed.add(q.id)
            return 0
        out = fetch.get(config, i)
        for k, v in out.stats.items():  # the judges' own counters (requests, tokens, cost, ...)
            if k not in ("judgments", "memo_hits", "memo_misses"):
                tally.usage[k] = tally.usage.get(k, 0) + v
        if out.failure is not None:
            if not self.options.keep_going:
                raise out.failure
            tally.failed[i] = out.failure.to_dict()
            return 0
        rec, trace = out.record or {}, out.trace
        if resumed is not None:
            tally.rebuilt += 1
            if json.loads(json.dumps(rec, ensure_ascii=False)) == resumed["record"]:
                rec = resumed["record"]
                rows.append((i, rec))
                self.context.judgments[(config.name, q.id)] = rec["judgments"]
                tally.reused += 1
                tally.resumed.add(q.id)
                self._keep_trace(config, q, trace)
                return rec["judgments"]
        rows.append((i, rec))
        self.context.judgments[(config.name, q.id)] = rec["judgments"]
        self._keep_trace(config, q, trace)
        self._save(fp, config, q, rec)
        tally.computed += 1
        return rec["judgments"]

    def _keep_trace(self, config: Config, q: Question, trace: Trace | None) -> None:
        trace_dir = self.options.trace_dir
        if self.options.keep_traces and trace is not None:
            self.traces.setdefault(config.name, {})[q.id] = trace
        if trace_dir is not None and trace is not None:
            with naming_path(trace_dir):
                safeio.atomic_write_text(Path(trace_dir) / trace_file_name(q.id), trace.to_json(), record="trace")


def run_experiment(index, questions, configs, options: RunOptions | None = None) -> Results:
    """`Experiment(index, questions, configs, options).run()`."""
    return Experiment(index, questions, configs, options).run()
