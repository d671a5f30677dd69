"""What one question of a run gives: its record (made by `question_record`, the one record
maker), or its failure (docs/reliability.md: a failure is never a number).

A record has two shapes, both written to resume files and result files byte for byte as
before: an evaluation's (`_id`, ..., `gold`, `ranking`, `rounds`) and an experiment row's
(`config`, `question`, ..., `ranking`, and `budget`/`shortfall` for a matched-budget row).

>>> str(QuestionFailed("q7", 1, "judge 'j' raised ValueError: boom"))
"question 'q7' failed at round 1: judge 'j' raised ValueError: boom"
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.index.corpora import Question
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


def question_record(question: Question, trace: Trace, config: str | None = None) -> dict:
    """The record of one question's trace: an evaluation's (`config=None`) or the row of
    configuration `config`. A trace whose stats carry a `budget` (the matched-budget policy)
    adds the budget and the judgments it fell short by."""
    docs = trace.documents()
    head = {"_id": question.id} if config is None else {"config": config, "question": question.id}
    rec = {
        **head,
        "type": question.type,
        "hops": question.hops,
        **question_metrics(docs, question.gold),
        "judgments": trace.judgments,
        "stop": trace.stop,
    }
    if config is None:
        rec.update(gold=list(question.gold), ranking=docs[:RANKING_DEPTH], rounds=trace.summary()["rounds"])
        return rec
    rec["ranking"] = docs[:RANKING_DEPTH]
    if "budget" in trace.stats:
        rec["budget"] = trace.stats["budget"]
        rec["shortfall"] = rec["budget"] - trace.judgments
    return rec


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
