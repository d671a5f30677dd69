"""The judge interface the engine calls, its error, score validation and the in-process memo.

A leaf: the engine and every judge import it; it imports nothing of the workbench.
"""

from __future__ import annotations

import math
from typing import Protocol


class JudgeError(RuntimeError):
    """A judge that failed or answered something unusable; the message names the judge."""


class Judge(Protocol):
    name: str
    key: str

    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]: ...


def validate_scores(name: str, scores, n: int) -> list[float]:
    """Probabilities in [0, 1], one per candidate, or a JudgeError naming the judge.

    >>> validate_scores("half", [0.5, 1], 2)
    [0.5, 1.0]
    >>> validate_scores("half", [1.5], 1)
    Traceback (most recent call last):
    ...
    workbench.judgment.JudgeError: judge 'half': score 0 is 1.5, outside [0, 1]
    """
    try:
        scores = list(scores)
    except TypeError:
        raise JudgeError(
            f"judge {name!r} returned {type(scores).__name__}, expected a list of {n} probabilities"
        ) from None
    if len(scores) != n:
        raise JudgeError(f"judge {name!r} returned {len(scores)} scores for {n} candidates")
    out = []
    for i, s in enumerate(scores):
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise JudgeError(f"judge {name!r}: score {i} is {s!r}, not a number")
        s = float(s)
        if math.isnan(s) or not 0.0 <= s <= 1.0:
            raise JudgeError(f"judge {name!r}: score {i} is {s!r}, outside [0, 1]")
        out.append(s)
    return out


class JudgmentMemo:
    """In-process judgment cache shared by re-runs: (judge key, question, context, unit) -> score.

    Judgments are assumed independent of which other candidates share the call (true for
    every judge here; JEV answers each candidate as its own question).

    >>> class Half:
    ...     name, key = "half", "half-v1"
    ...     def judge(self, question, candidates, context):
    ...         return [0.5] * len(candidates)
    >>> memo, item = JudgmentMemo(), {"unit_id": 1, "title": "t", "text": "x", "document": "t"}
    >>> memo.judge(Half(), "q?", [item], []), memo.judge(Half(), "q?", [item], [])
    ([0.5], [0.5])
    >>> memo.hits, memo.misses
    (1, 1)
    """

    def __init__(self) -> None:
        self.scores: dict[tuple, float] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def context_key(context: list[dict]) -> tuple:
        return tuple((c["unit_id"], c.get("previous_score")) for c in context)

    def judge(self, judge, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        ckey = self.context_key(context)
        keys: list[tuple] = [(judge.key, question, ckey, c["unit_id"], c["text"]) for c in candidates]
        if getattr(judge, "batch_dependent", False):  # an answer depends on its call's candidates (JEV stateful)
            keys = [(*k, tuple((c["unit_id"], c["text"]) for c in candidates)) for k in keys]
        missing = [i for i, k in enumerate(keys) if k not in self.scores]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            todo = [candidates[i] for i in missing]
            try:
                got = judge.judge(question, todo, context)
            except JudgeError:
                raise
            except Exception as exc:
                raise JudgeError(f"judge {judge.name!r} raised {type(exc).__name__}: {exc}") from exc
            got = validate_scores(judge.name, got, len(todo))
            for i, s in zip(missing, got):
                self.scores[keys[i]] = s
        return [self.scores[k] for k in keys]


def judge_usage(judge) -> dict:
    """A judge's cumulative counters, if it keeps any (`usage()` -> {name: number})."""
    usage = getattr(judge, "usage", None)
    return dict(usage()) if callable(usage) else {}
