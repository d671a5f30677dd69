"""Evaluation (SPEC §3 "Evaluation"): R@k and AE@k over unique original passages, per type
and hop count, judgment counts, paired bootstrap intervals; resumable. An evaluation is an
experiment with one configuration and the evaluation's record shape (`Experiment(...,
shape=EVALUATION)`): the same loop, the same record maker, with the evaluation's record,
resume line and result shapes. How it goes is one value, `RunOptions`.

>>> result = evaluate(index, questions, "lexical", options=RunOptions(progress=False))
>>> result.metrics
{'R@5': 67.59, 'R@10': 90.74, 'AE@10': 77.78, 'questions': 9, 'judgments': 350}

The failure contract (docs/reliability.md): a question whose judge fails (or whose term
weighting misbehaves) is a *failure*, never a number. By default `evaluate` stops at the
first one with `QuestionFailed` (question, round, error); questions finished before it stay
in the resume file. With `RunOptions(keep_going=True)` it goes on and the result's metrics cover the
completed questions only, labelled so, with `result.failures` saying which failed and why.
Resume reuses a record only when its fingerprint (question id, text, gold, type and hops,
params, judge key, index identity) is unchanged, and never a failed one (failures are not
written); questions sharing an id are refused up front. With `keep_traces` (or a trace
folder missing a resumed question's file) a resumed question's trajectory is re-run, since
resume lines keep no traces: never a trace silently missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.deprecation import keep_old_names
from workbench.index.units import Question
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.metrics import METRICS, is_missing, mean_metrics
from workbench.params import Params
from workbench.runs.experiment import Experiment, judge_sha256
from workbench.runs.options import RunOptions
from workbench.runs.policies import Config
from workbench.runs.records import EVALUATION
from workbench.runs.resume import RESULT_MARKER, RESULT_VERSION
from workbench.runs.tasks import require_unique_ids

# the metrics, records, failures and files of a run, which older code imported from here: readable
# with a DeprecationWarning naming where each lives (docs/deprecations.md)
keep_old_names(
    __name__,
    {
        "judge_key": "workbench.judges.registry",
        "JudgmentMemo": "workbench.judgment",
        **dict.fromkeys(
            [
                "BOOTSTRAP_RESAMPLES",
                "BOOTSTRAP_SEED",
                "all_evidence_at",
                "paired_bootstrap",
                "question_metrics",
                "recall_at",
            ],
            "workbench.metrics",
        ),
        "progress_bar": "workbench.runs.progress",
        **dict.fromkeys(
            [
                "FAILED_STOPS",
                "JudgeFailed",
                "Outcome",
                "QuestionFailed",
                "TermWeightingFailed",
                "trace_failure",
            ],
            "workbench.runs.records",
        ),
        **dict.fromkeys(
            ["is_our_result", "load_resume", "naming_path", "record_fingerprint", "trace_file_name"],
            "workbench.runs.resume",
        ),
        **dict.fromkeys(["judge_spec", "require_gold", "require_unique_ids"], "workbench.runs.tasks"),
    },
)


@dataclass
class EvalResult:
    config: dict
    records: list[dict]  # one per completed question: _id, type, hops, metrics, judgments, ranking, rounds
    traces: dict = field(default_factory=dict)  # question id -> Trace (when kept)
    stats: dict = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)  # question, round, error, kind (keep_going only)
    total: int | None = None  # questions asked (completed + failed)

    @property
    def excluded(self) -> list[str]:
        """Completed questions without gold labels: in the records, not in the means."""
        return [r["_id"] for r in self.records if all(is_missing(r[m]) for m in METRICS)]

    @property
    def metrics(self) -> dict:
        """Means over completed questions with gold. Extra keys appear only when something is
        left out: `failed`, `excluded_no_gold` and `scope` (a sentence saying what the means cover)."""
        scored = len(self.records) - len(self.excluded)
        out = {
            **mean_metrics(self.records),
            "questions": scored,
            "judgments": sum(r["judgments"] for r in self.records),
        }
        if self.failures or self.excluded:
            total = self.total if self.total is not None else len(self.records) + len(self.failures)
            out["failed"] = len(self.failures)
            out["excluded_no_gold"] = len(self.excluded)
            left = [
                f"{n} {what}" for n, what in ((len(self.failures), "failed"), (len(self.excluded), "without gold")) if n
            ]
            out["scope"] = f"completed questions with gold only: {scored} of {total} ({', '.join(left)})"
        return out

    def frame(self):
        """One row per question: _id, type, hops, R@5, R@10, AE@10, judgments, stop."""
        import pandas as pd  # heavy (~0.4 s): loaded when a table is made, not with the run layer

        cols = ["_id", "type", "hops", *METRICS, "judgments", "stop"]
        df = pd.DataFrame([{c: r.get(c) for c in cols} for r in self.records], columns=cols)
        return df.astype({m: float for m in METRICS})

    def by(self, column: str):
        """Mean metrics per question type or hop count."""
        df = self.frame()
        if df[column].isna().all():
            return df.iloc[0:0]
        g = df.groupby(column)
        return g[list(METRICS)].mean().round(2).join(g.size().rename("questions")).join(g["judgments"].sum())

    def to_dict(self) -> dict:
        """The out.json body: marker, config, metrics, stats, per-question records (and failures)."""
        out = {
            RESULT_MARKER: {"kind": "eval", "version": RESULT_VERSION},
            "config": self.config,
            "metrics": self.metrics,
            "stats": self.stats,
            "questions": self.records,
        }
        if self.failures:
            out["failures"] = self.failures
        if self.excluded:
            out["excluded_no_gold"] = self.excluded
        for col in ("type", "hops"):
            table = group_means(self.records, col)
            if table:
                out[f"by_{col}"] = table
        return out


def group_means(records: list[dict], column: str) -> dict:
    """`EvalResult.by(column)` as out.json holds it, without pandas (~0.4 s to import, at the end
    of every eval): the same numbers, to the bit — groups in key order without the rows that
    have no key, means of the values present summed as pandas' groupby does (Kahan), rounded
    as numpy does (rint(x * 100) / 100), keys as pandas names them (a hop count column with a
    missing value is a float column: "2.0"); tests/test_eval_summary.py compares the two.

    >>> group_means([{"type": "b", "R@5": 50.0, "R@10": None, "AE@10": 100.0, "judgments": 3},
    ...              {"type": "a", "R@5": 100 / 3, "R@10": 0.0, "AE@10": 0.0, "judgments": 2}], "type")["a"]
    {'R@5': 33.33, 'R@10': 0.0, 'AE@10': 0.0, 'questions': 1.0, 'judgments': 2.0}
    """
    groups: dict = {}
    for r in records:
        if not is_missing(r.get(column)):
            groups.setdefault(r[column], []).append(r)
    as_floats = bool(groups) and all(type(k) is int for k in groups) and any(is_missing(r.get(column)) for r in records)
    out = {}
    for key in sorted(groups):
        rows, row = groups[key], {}
        for m in METRICS:
            total = compensation = 0.0
            n = 0
            for r in rows:
                if not is_missing(v := r.get(m)):
                    n += 1
                    y = float(v) - compensation
                    t = total + y
                    compensation = t - total - y
                    total = t
            row[m] = round(total / n * 100) / 100 if n else None
        row["questions"] = float(len(rows))
        row["judgments"] = float(sum(r.get("judgments") or 0 for r in rows))
        out[str(float(key)) if as_floats else str(key)] = row
    return out


def evaluate(
    index,
    questions: list[Question],
    judge: str | JudgeSpec = "lexical",
    params: Params | None = None,
    options: RunOptions | None = None,
) -> EvalResult:
    """Run SAG2 (or the BM25 baseline) over `questions` with `judge` (its text or a `JudgeSpec`,
    JEV's endpoint and cache among its options) and `params`; `options` (`RunOptions`) say how.

    `options.resume_path`: a JSONL file that receives one record per finished question; a record
    is reused when its `record_fingerprint` is unchanged, so an interrupted run resumes. A failed
    question raises `QuestionFailed` (default) or, with `keep_going=True`, is listed in
    `result.failures` and left out of the metrics. `hooks.judge_for(question) -> judge`: the
    judge to use instead of building `judge` (its `key` attribute names it for resume).
    `hooks.map_outcomes(fn, questions)`: how the questions to run are mapped to `Outcome`s
    (default: computed one by one as the loop asks; a thread pool's ordered map runs them at
    once); outcomes are consumed in question order. `executor`: a workbench.executors executor
    (`make_executor(concurrency=16)`, processes, Dask) that runs questions at once with results
    identical to a sequential run; `hooks.on_arrival(outcome)` sees each of its task outcomes as
    it arrives from a worker. `label`: the judge's name in the result (default: as given).

    >>> from pathlib import Path
    >>> _ = Path("j.py").write_text("def judge(question, candidates, context):\\n"
    ...                             "    if 'refund' in question: raise ValueError('boom')\\n"
    ...                             "    return [0.5] * len(candidates)\\n")
    >>> result = evaluate(index, questions, "j.py:judge", options=RunOptions(keep_going=True, progress=False))
    >>> result.failures
    [{'question': 'docs-08', 'round': 0, 'error': "judge 'j.py:judge' raised ValueError: boom", 'kind': 'judge error'}]
    >>> result.metrics["scope"]
    'completed questions with gold only: 8 of 9 (1 failed)'
    """
    options = options if options is not None else RunOptions()
    params = params or Params()
    require_unique_ids(questions)  # records, resume lines and TREC runs are keyed by id
    try:
        spec = JudgeSpec.parse(judge)
    except JudgeError:
        if options.hooks.judge_for is None:
            raise
        spec = JudgeSpec("function", (("target", str(judge)),))  # only a name: the caller gives the judge
    label = options.label or (judge if isinstance(judge, str) else str(spec))
    # gold required (the oracle) unless the caller's judge_for gives the judge
    experiment = Experiment(
        index, questions, [Config("eval", params, spec)], options.replace(label=label), shape=EVALUATION
    )
    built = experiment.judges.prepare([spec])  # built now: one judge (one JEV client) for every question
    # workers send their judgments back only when the caller will read the memo afterwards
    tally = experiment.loop(options.executor, send_judgments=options.memo is not None)
    records = [rec for _, rec in tally.rows["eval"]]
    memo = experiment.memo
    config = {"judge": label, "params": params.to_dict(), "index": index.meta.get("fingerprint")}
    sha256 = judge_sha256(built.get(spec))
    if sha256:  # which model answered (learned:J.json is refitted in place): as in the trace and cache keys
        config["judge_sha256"] = sha256
    stats = {
        "judgments": sum(r["judgments"] for r in records),
        "memo_hits": memo.hits,
        "memo_misses": memo.misses,
        "resumed_questions": len(tally.resumed),
        **tally.usage,
    }
    if tally.rebuilt:  # resumed questions whose traces were asked for: re-run (resume keeps no traces)
        stats["traces_rebuilt"] = tally.rebuilt
    traces = experiment.traces.get("eval", {}) if options.keep_traces else {}
    return EvalResult(config, records, traces, stats, list(tally.failed.values()), len(questions))
