"""What one question of a run gives: its record (made by `question_record`, the one record
maker), or its failure (docs/reliability.md: a failure is never a number).

A record has one of two shapes, a value chosen once when a run is made (`RecordShape`:
`EVALUATION` or `EXPERIMENT`) and passed down to its tasks and records; both are written to
resume files and result files byte for byte as before: an evaluation's (`_id`, ..., `gold`,
`ranking`, `rounds`) and an experiment row's (`config`, `question`, ..., `ranking`, and
`budget`/`shortfall` for a matched-budget row).

>>> str(QuestionFailed("q7", 1, "judge 'j' raised ValueError: boom"))
"question 'q7' failed at round 1: judge 'j' raised ValueError: boom"
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.index.units import Question
from workbench.judgment import JudgeError
from workbench.metrics import question_metrics
from workbench.terms import TermWeightingError
from workbench.trace import STOP_JUDGE_ERROR, STOP_TERM_WEIGHTING_ERROR, Trace

FAILED_STOPS = (STOP_JUDGE_ERROR, STOP_TERM_WEIGHTING_ERROR)
RANKING_DEPTH = 100  # the documents of the final ranking a record keeps


class ExperimentError(ValueError):
    """An experiment that cannot run or a comparison that cannot be made, with the reason named."""


class QuestionFailed(RuntimeError):
    """One question's run failed: which question, at which round, and the error (the judge's
    own message). Finished questions stay resumable; nothing was averaged in.

    >>> QuestionFailed("q7", None, "boom", "H=2").to_dict()
    {'config': 'H=2', 'question': 'q7', 'round': None, 'error': 'boom', 'kind': 'judge error'}
    """

    def __init__(
        self, question: str, round: int | None, error: str, config: str | None = None, kind: str = STOP_JUDGE_ERROR
    ):
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


class RecordShape:
    """What kind of run a record belongs to, and everything that differs between the kinds in one
    place: the record's fields, who a resume line is of, what a failure names, what else a
    resume fingerprint holds, what is refused up front. A value: `EVALUATION` or `EXPERIMENT`
    (pickled by name, so a worker's is the caller's).

    >>> EVALUATION.head("eval", "q1"), EXPERIMENT.head("H=2", "q1")
    ({'_id': 'q1'}, {'config': 'H=2', 'question': 'q1'})
    >>> EVALUATION.failure_config("eval"), EXPERIMENT.failure_config("H=2")
    (None, 'H=2')
    """

    name = ""
    id_field = ""  # the field of a record (and resume line) naming its question

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name  # the module-level constant of that name

    def head(self, config: str, question_id: str) -> dict:
        """Who a record (and its resume line) is of."""
        raise NotImplementedError

    def failure_config(self, config: str) -> str | None:
        """The configuration a failure names."""
        raise NotImplementedError

    def fingerprint_extra(self, config_key: str) -> str | None:
        """What a resume fingerprint holds besides the question, params, judge and index."""
        raise NotImplementedError

    def check(self, questions: list[Question], configs: list) -> None:
        """Refuse, naming the reason, a run of this kind that cannot run (ExperimentError)."""

    def record(self, question: Question, trace: Trace, config: str) -> dict:
        """The record of one question's trace under configuration `config` (the one record maker)."""
        docs = trace.documents()
        return {
            **self.head(config, question.id),
            "type": question.type,
            "hops": question.hops,
            **question_metrics(docs, question.gold),
            "judgments": trace.judgments,
            "stop": trace.stop,
            **self.tail(question, trace, docs),
        }

    def tail(self, question: Question, trace: Trace, docs: list[str]) -> dict:
        raise NotImplementedError


class EvaluationShape(RecordShape):
    """One configuration (`evaluate`): records keyed `_id` with gold, ranking and round summaries;
    failures name no configuration; no refusals here (evaluate makes its own)."""

    name, id_field = "EVALUATION", "_id"

    def head(self, config: str, question_id: str) -> dict:
        return {"_id": question_id}

    def failure_config(self, config: str) -> str | None:
        return None

    def fingerprint_extra(self, config_key: str) -> str | None:
        return None

    def tail(self, question: Question, trace: Trace, docs: list[str]) -> dict:
        return {"gold": list(question.gold), "ranking": docs[:RANKING_DEPTH], "rounds": trace.summary()["rounds"]}


class ExperimentShape(RecordShape):
    """Rows of configurations: records keyed (`config`, `question`), a matched-budget row's budget
    and shortfall; failures name the configuration; fingerprints hold the configuration's key."""

    name, id_field = "EXPERIMENT", "question"

    def head(self, config: str, question_id: str) -> dict:
        return {"config": config, "question": question_id}

    def failure_config(self, config: str) -> str | None:
        return config

    def fingerprint_extra(self, config_key: str) -> str | None:
        return config_key

    def check(self, questions: list[Question], configs: list) -> None:
        """No configurations or questions, repeated names or ids, a source that is not a judged
        sag2 row, a truncated row whose parameters are not its source's."""
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
        by_name = {c.name: c for c in configs}
        for c in configs:
            if c.source:
                _check_source(c, by_name.get(c.source), names)

    def tail(self, question: Question, trace: Trace, docs: list[str]) -> dict:
        if "budget" not in trace.stats:
            return {"ranking": docs[:RANKING_DEPTH]}
        budget = trace.stats["budget"]
        return {"ranking": docs[:RANKING_DEPTH], "budget": budget, "shortfall": budget - trace.judgments}


def _check_source(c, src, names: list[str]) -> None:
    """A row read off another (`source`): the source exists, is a judged sag2 row, and a truncated
    row shares its judge and its parameters but H (at most the source's)."""
    if src is None:
        raise ExperimentError(f"configuration {c.name!r}: source {c.source!r} is not among {names}")
    if src.policy != "sag2" or src.judge.name == "bm25":
        raise ExperimentError(f"configuration {c.name!r}: source {c.source!r} must be a judged sag2 configuration")
    if c.policy == "truncated":
        if src.judge != c.judge:
            raise ExperimentError(
                f"configuration {c.name!r}: judge {str(c.judge)!r} differs from its source's {str(src.judge)!r}"
            )
        if src.params != c.params.replace(H=src.params.H) or c.params.H > src.params.H:
            raise ExperimentError(
                f"configuration {c.name!r}: a truncated trajectory needs its source's parameters with "
                f"H <= {src.params.H}; got {c.params} vs {src.params}"
            )


EVALUATION: RecordShape = EvaluationShape()
EXPERIMENT: RecordShape = ExperimentShape()


@dataclass
class Outcome:
    """What running one configuration on one question gave: its record and trace, or its
    failure (a judge or term-weighting error: a result, counted or raised by the loop), or
    `error`, any other exception (raised where the sequential loop would raise it)."""

    question: Question
    record: dict | None = None
    trace: Trace | None = None
    failure: QuestionFailed | None = None
    stats: dict = field(default_factory=dict)  # the trace's stats (kept when a worker drops the trace)
    config: str | None = None
    error: BaseException | None = None
