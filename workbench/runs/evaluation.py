"""Evaluation (SPEC §3 "Evaluation"): R@k and AE@k over unique original passages, per type
and hop count, judgment counts, paired bootstrap intervals; resumable.

>>> result = evaluate(index, load_questions("q.jsonl"), "lexical")      # doctest: +SKIP
>>> result.metrics                                                       # doctest: +SKIP
{'R@5': 61.2, 'R@10': 70.0, 'AE@10': 40.0, 'questions': 30, 'judgments': 8123}

The failure contract (docs/reliability.md): a question whose judge fails (or whose term
weighting misbehaves) is a *failure*, never a number. By default `evaluate` stops at the
first one with `QuestionFailed` (question, round, error); questions finished before it stay
in the resume file. With `keep_going=True` it goes on and the result's metrics cover the
completed questions only, labelled so, with `result.failures` saying which failed and why.
Resume reuses a record only when its fingerprint (question text, gold, params, judge key,
index identity) is unchanged, and never a failed one (failures are not written).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from workbench import safeio
from workbench.index.corpora import Question
from workbench.engine import Run
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.judges.registry import make_judge
from workbench.executors import Progress, QuestionMap, Sequential, heap_frozen
from workbench.params import Params
from workbench.terms import TermWeightingError, variant_fingerprint
from workbench.trace import STOP_JUDGE_ERROR, STOP_TERM_WEIGHTING_ERROR, Trace

METRICS = ("R@5", "R@10", "AE@10")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261015
RESULT_MARKER = "sag2wb"  # the field that marks a JSON file as a result we wrote (safe to overwrite)
RESULT_VERSION = 1
FAILED_STOPS = (STOP_JUDGE_ERROR, STOP_TERM_WEIGHTING_ERROR)


# ---- failures ---------------------------------------------------------------------------------
class QuestionFailed(RuntimeError):
    """One question's run failed: which question, at which round, and the error (the judge's
    own message). Finished questions stay resumable; nothing was averaged in.

    >>> str(QuestionFailed("q7", 1, "judge 'j' raised ValueError: boom"))
    "question 'q7' failed at round 1: judge 'j' raised ValueError: boom"
    """

    def __init__(self, question: str, round: int | None, error: str, config: str | None = None,
                 kind: str = STOP_JUDGE_ERROR):
        self.question, self.round, self.error, self.config, self.kind = question, round, error, config, kind
        where = f"configuration {config!r}, " if config else ""
        at = f" at round {round}" if round is not None else ""
        super().__init__(f"{where}question {question!r} failed{at}: {error}")

    def __reduce__(self):  # picklable, for executors that run questions in other processes
        return type(self), (self.question, self.round, self.error, self.config, self.kind)

    def to_dict(self) -> dict:
        d = {"question": self.question, "round": self.round, "error": self.error, "kind": self.kind}
        return {"config": self.config, **d} if self.config else d


class JudgeFailed(QuestionFailed, JudgeError):
    """A judge error during a question (also a JudgeError, so older `except JudgeError` still catch it)."""


class TermWeightingFailed(QuestionFailed, TermWeightingError):
    """A term-weighting variant that misbehaved during a question (also a TermWeightingError)."""


def trace_failure(trace: Trace, question_id: str, config: str | None = None) -> QuestionFailed | None:
    """The failure a trace ended in (judge or term-weighting error), or None."""
    for r in trace.rounds:
        if r.stop in FAILED_STOPS:
            cls = JudgeFailed if r.stop == STOP_JUDGE_ERROR else TermWeightingFailed
            return cls(question_id, r.round, r.error or r.stop, config, r.stop)
    return None


# ---- metrics ----------------------------------------------------------------------------------
def recall_at(ranking_docs, gold, k: int) -> float:
    """|G ∩ top-k| / |G| over unique documents (first occurrences kept)."""
    gold = set(gold)
    return len(gold & set(ranking_docs[:k])) / len(gold) if gold else float("nan")


def all_evidence_at(ranking_docs, gold, k: int) -> float:
    """1.0 when every gold document is in the top k."""
    gold = set(gold)
    return float(gold <= set(ranking_docs[:k])) if gold else float("nan")


def question_metrics(ranking_docs, gold) -> dict:
    """R@5, R@10, AE@10 in percent; None each when the question has no gold (excluded from means)."""
    if not gold:
        return {m: None for m in METRICS}
    return {
        "R@5": 100 * recall_at(ranking_docs, gold, 5),
        "R@10": 100 * recall_at(ranking_docs, gold, 10),
        "AE@10": 100 * all_evidence_at(ranking_docs, gold, 10),
    }


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def mean_metrics(rows: list[dict]) -> dict:
    """Means over the rows that have a value (questions without gold have none); None when no row has."""
    out = {}
    for m in METRICS:
        vals = [r[m] for r in rows if not _missing(r[m])]
        out[m] = round(sum(vals) / len(vals), 2) if vals else None
    return out


def paired_bootstrap(a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """Mean of (a - b) and its paired 95% percentile interval over question resamples."""
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs the same questions on both sides ({a.shape[0]} vs {b.shape[0]})")
    diff = a - b
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(lo), float(hi)


# ---- judges and fingerprints --------------------------------------------------------------------
def judge_key(spec: str, judge=None) -> str:
    """What identifies a judge's answers for resume: its own key, plus a hash of the file's
    bytes for FILE.py:NAME (editing the function invalidates its records)."""
    key = getattr(judge, "key", None) or spec
    path = spec.rsplit(":", 1)[0] if ":" in spec else ""
    if path.endswith(".py"):
        try:
            key += ":" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
        except OSError:
            pass
    return key


def judge_factory(spec: str, index, **jev_options):
    """Question -> judge (None for bm25). One JEV client / lexical judge serves all questions.
    The returned function's `key` attribute identifies the judge for resume fingerprints."""
    if spec == "oracle":
        def oracle(q: Question):
            if not q.gold:
                raise ValueError(f"question {q.id!r} has no gold labels: the oracle judge needs them")
            return make_judge("oracle", index, gold=q.gold)
        oracle.key = "oracle"  # its answers follow the gold labels, which the fingerprint holds
        return oracle
    shared = make_judge(spec, index, **jev_options)
    factory = lambda q: shared  # noqa: E731
    factory.key = judge_key(spec, shared) if shared is not None else "bm25"
    return factory


def require_gold(questions: list[Question], judge: str, source="questions") -> None:
    """The oracle judge needs gold labels: refuse up front (safeio.InputError), naming the questions."""
    no_gold = [q for q in questions if not q.gold]
    if judge == "oracle" and no_gold:
        ids = ", ".join(f"{q.id!r} (line {q.line})" if q.line else repr(q.id) for q in no_gold[:5])
        raise safeio.InputError(f"{source}: {len(no_gold)} question(s) have no gold labels (supporting_titles), "
                                f"which the oracle judge needs: {ids}{' ...' if len(no_gold) > 5 else ''}; "
                                f"add them or use another judge")


def record_fingerprint(question: Question, params: Params, judge_key: str, index_identity, extra=None) -> str:
    """The key of one resumable record: a hash of everything its result depends on — question
    text and gold, the parameters (with the term-weighting variant's code), the judge key and
    the index identity (`extra`: anything else, e.g. an experiment configuration's policy).
    A record is reused only under an equal fingerprint.

    >>> a = record_fingerprint(Question("q1", "Who?", ("A",)), Params(), "lexical-v1", "ix1")
    >>> a == record_fingerprint(Question("q1", "Who? ", ("A",)), Params(), "lexical-v1", "ix1")
    False
    """
    body = {"question": question.question, "gold": list(question.gold), "params": params.to_dict(),
            "variant": variant_fingerprint(params.term_weighting), "judge": judge_key, "index": index_identity,
            "extra": extra}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def load_resume(path, key: str = "fingerprint") -> dict[str, dict]:
    """{fingerprint: line} of a resume file; lines cut by a crash or of an older format are skipped."""
    done: dict[str, dict] = {}
    path = Path(path)
    if not path.exists():
        return done
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
                done[rec[key]] = rec
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return done


# ---- one question, and the loop ----------------------------------------------------------------
@dataclass
class Outcome:
    """What running one question gave: its record and trace, or its failure."""
    question: Question
    record: dict | None = None
    trace: Trace | None = None
    failure: QuestionFailed | None = None
    stats: dict = field(default_factory=dict)  # the trace's stats (kept when a worker drops the trace)


def run_question(index, question: Question, params: Params, judge, memo: JudgmentMemo) -> Outcome:
    """Run one question; a judge or term-weighting error becomes `Outcome.failure` (never a record).
    This is the unit an executor may run in parallel; `evaluate` consumes outcomes in question order."""
    trace = Run(index, question, params, judge, memo=memo).run()
    failure = trace_failure(trace, question.id)
    if failure is not None:
        return Outcome(question, trace=trace, failure=failure, stats=trace.stats)
    return Outcome(question, question_record(trace, question), trace, stats=trace.stats)


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
        return [r["_id"] for r in self.records if all(_missing(r[m]) for m in METRICS)]

    @property
    def metrics(self) -> dict:
        """Means over completed questions with gold. Extra keys appear only when something is
        left out: `failed`, `excluded_no_gold` and `scope` (a sentence saying what the means cover)."""
        scored = len(self.records) - len(self.excluded)
        out = {**mean_metrics(self.records), "questions": scored, "judgments": sum(r["judgments"] for r in self.records)}
        if self.failures or self.excluded:
            total = self.total if self.total is not None else len(self.records) + len(self.failures)
            out["failed"] = len(self.failures)
            out["excluded_no_gold"] = len(self.excluded)
            left = [f"{n} {what}" for n, what in ((len(self.failures), "failed"),
                                                  (len(self.excluded), "without gold")) if n]
            out["scope"] = f"completed questions with gold only: {scored} of {total} ({', '.join(left)})"
        return out

    def frame(self):
        """One row per question: _id, type, hops, R@5, R@10, AE@10, judgments, stop."""
        import pandas as pd

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
        out = {RESULT_MARKER: {"kind": "eval", "version": RESULT_VERSION}, "config": self.config,
               "metrics": self.metrics, "stats": self.stats, "questions": self.records}
        if self.failures:
            out["failures"] = self.failures
        if self.excluded:
            out["excluded_no_gold"] = self.excluded
        for col in ("type", "hops"):
            table = self.by(col)
            if len(table):
                out[f"by_{col}"] = {str(k): {m: (None if _missing(v) else float(v)) for m, v in row.items()}
                                    for k, row in table.iterrows()}
        return out


def evaluate(index, questions: list[Question], judge: str = "lexical", params: Params | None = None, *,
             progress: bool = True, resume_path: str | Path | None = None, trace_dir: str | Path | None = None,
             keep_traces: bool = False, memo: JudgmentMemo | None = None, judge_for=None, keep_going: bool = False,
             map_outcomes=None, executor=None, **jev_options) -> EvalResult:
    """Run SAG2 (or the BM25 baseline) over `questions`.

    `resume_path`: a JSONL file that receives one record per finished question; a record is
    reused when its `record_fingerprint` is unchanged, so an interrupted run resumes.
    A failed question raises `QuestionFailed` (default) or, with `keep_going=True`, is listed
    in `result.failures` and left out of the metrics. `map_outcomes(fn, questions)`: how the
    questions to run are mapped to `Outcome`s (default: the built-in lazy `map`; an executor's
    ordered map runs them in parallel); outcomes are consumed in question order.
    `executor`: a `workbench.parallel` executor (`make_executor(concurrency=16)`, processes,
    Dask) that runs questions at once with results identical to a sequential run.

    >>> evaluate(index, questions, "lexical", keep_going=True).failures   # doctest: +SKIP
    [{'question': 'q7', 'round': 1, 'error': "judge 'j.py:judge' raised ValueError: boom", 'kind': 'judge error'}]
    """
    params = params or Params()
    if judge == "oracle" and judge_for is None:
        require_gold(questions, judge)
    judge_for = judge_for or judge_factory(judge, index, **jev_options)
    own_memo = memo is None
    memo = memo or JudgmentMemo()
    identity = index.meta.get("fingerprint")
    jkey = getattr(judge_for, "key", judge)
    config = {"judge": judge, "params": params.to_dict(), "index": identity}
    fingerprints = {q.id: record_fingerprint(q, params, jkey, identity) for q in questions}
    done = {}
    if resume_path is not None:
        resume_path = Path(resume_path)
        saved = load_resume(resume_path)
        done = {q.id: saved[fingerprints[q.id]]["record"] for q in questions if fingerprints[q.id] in saved}
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    records, traces, failures = [], {}, []
    usage: dict = {}  # the judge's own counters summed over questions run now (requests, tokens, cost)
    todo = [q for q in questions if q.id not in done]
    bar = Progress(len(questions), f"{judge}", progress, judge_for(todo[0]) if todo and judge != "oracle" else None)
    if executor is not None and map_outcomes is None and not isinstance(executor, Sequential):
        map_outcomes = QuestionMap(executor, index, judge, params, memo, judge_for, jev_options, bar,
                                   keep_judgments=not own_memo, keep_traces=keep_traces or trace_dir is not None)
    outcomes = iter((map_outcomes or map)(lambda q: run_question(index, q, params, judge_for(q), memo), todo))

    def save(q, out):
        if resume_path is not None:
            with naming_path(resume_path):
                safeio.append_line(resume_path, json.dumps(
                    {"fingerprint": fingerprints[q.id], "_id": q.id, "record": out.record}, ensure_ascii=False))

    with heap_frozen():  # collections during the run skip what the caller held before it
        try:
            for q in questions:
                if q.id in done:
                    records.append(done[q.id])
                    bar.update(1)
                    continue
                out = next(outcomes)
                for k, v in out.stats.items():
                    if k not in ("judgments", "memo_hits", "memo_misses"):
                        usage[k] = usage.get(k, 0) + v
                if out.failure is not None:
                    if not keep_going:
                        raise out.failure
                    failures.append(out.failure.to_dict())
                    bar.update(1)
                    continue
                records.append(out.record)
                if keep_traces:
                    traces[q.id] = out.trace
                if trace_dir is not None:
                    with naming_path(trace_dir):
                        safeio.atomic_write_text(Path(trace_dir) / trace_file_name(q.id), out.trace.to_json())
                save(q, out)
                bar.update(1, out.record["judgments"])
        except KeyboardInterrupt:  # questions finished out of order by an executor are kept for resume too
            for out in getattr(map_outcomes, "finished", list)():
                save(out.question, out)
            raise
        finally:
            bar.close()
            close = getattr(outcomes, "close", None)  # a generator-based executor map: stop it early
            if close is not None:
                close()
    usage = getattr(map_outcomes, "usage", lambda: None)() or usage  # threads: counted once, not per question
    stats = {"judgments": sum(r["judgments"] for r in records), "memo_hits": memo.hits, "memo_misses": memo.misses,
             "resumed_questions": len(done), **usage}
    return EvalResult(config, records, traces, stats, failures, len(questions))


def question_record(trace: Trace, q: Question) -> dict:
    docs = trace.documents()
    summary = trace.summary()
    return {
        "_id": q.id, "type": q.type, "hops": q.hops, **question_metrics(docs, q.gold), "judgments": trace.judgments,
        "stop": trace.stop, "gold": list(q.gold), "ranking": docs[:100], "rounds": summary["rounds"],
    }


@contextlib.contextmanager
def naming_path(path):
    """Give an OSError raised inside the path it concerns (a write's ENOSPC carries none), so the
    CLI's one-line message can name it."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def trace_file_name(question_id: str) -> str:
    """A readable slug of the id plus a short hash of the id itself, so ids that slug alike
    (`q/1` and `q_1`) or share a long prefix never overwrite each other's trace.

    >>> trace_file_name("q/1"), trace_file_name("q_1")
    ('q_1-dd4810e7f3.json', 'q_1-688eed70a2.json')
    """
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in question_id)[:80].strip(".") or "q"
    return f"{slug}-{hashlib.sha256(question_id.encode('utf-8')).hexdigest()[:10]}.json"


def is_our_result(path, kind: str) -> bool:
    """True when `path` is a JSON result sag2wb wrote (its marker field names `kind`), or one of
    the results written before the marker existed (recognised by their exact top-level keys)."""
    legacy = {"eval": {"config", "metrics", "stats", "questions"},
              "ablate": {"judge", "questions", "rows", "definitions"}}
    try:
        if Path(path).stat().st_size > 2**30:
            return False
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    marker = data.get(RESULT_MARKER)
    if isinstance(marker, dict):
        return marker.get("kind") == kind
    return legacy[kind] <= set(data)


def progress_bar(total: int, desc: str, enabled: bool):
    """tqdm's notebook-aware bar, or a silent stand-in."""
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=desc, leave=False)
        except ImportError:
            pass

    class _Quiet:
        def update(self, n):
            pass

        def close(self):
            pass

    return _Quiet()
