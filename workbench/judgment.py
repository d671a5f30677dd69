"""A judge's error, score validation and the in-process memo (the `Judge` protocol and its
optional capabilities are in `workbench.protocols`).

Just above the leaves: the engine and every judge import it; of the workbench it imports only
`workbench.protocols` (and `workbench.deprecation`, for the names that moved there).
"""

from __future__ import annotations

import math
import numbers

from workbench.deprecation import keep_old_names
from workbench.protocols import is_batch_dependent
from workbench.usage import count_usage

# names older code imported from here, readable with a DeprecationWarning (docs/deprecations.md)
keep_old_names(__name__, {"Judge": "workbench.protocols", "judge_usage": "workbench.protocols:usage_of"})


class JudgeError(RuntimeError):
    """A judge that failed or answered something unusable; the message names the judge."""


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
        if isinstance(scores, (str, bytes, dict)):  # iterable, but not a list of probabilities
            raise TypeError
        scores = list(scores)
    except Exception:
        raise JudgeError(
            f"judge {name!r} returned {type(scores).__name__}, expected a list of {n} probabilities"
        ) from None
    if len(scores) != n:
        raise JudgeError(f"judge {name!r} returned {len(scores)} scores for {n} candidates")
    out = []
    for i, s in enumerate(scores):
        value = _as_number(s)
        if value is None:
            raise JudgeError(f"judge {name!r}: score {i} is {describe_value(s)}, not a number")
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise JudgeError(f"judge {name!r}: score {i} is {describe_value(s)}, outside [0, 1]")
        out.append(value)
    return out


def _as_number(s) -> float | None:
    """A score as a float, or None when it is no number. numpy scalars and 0-d arrays are numbers
    (np.float32 is no Python float); bools (np.bool_ too) and strings are not; an integer too big
    for a float is +-inf (outside [0, 1]), not an OverflowError.

    >>> import numpy as np
    >>> [_as_number(v) for v in (np.float32(0.5), np.int64(1), np.array(0.25), True, "0.5", 10**400)]
    [0.5, 1.0, 0.25, None, None, inf]
    """
    if getattr(s, "shape", None) == () and hasattr(s, "dtype"):  # a numpy scalar or 0-d array
        if s.dtype.kind not in "fiu":
            return None
        s = s.item()
    if isinstance(s, bool) or not isinstance(s, numbers.Real):
        return None
    if isinstance(s, numbers.Integral):  # float() of an int past ~1.8e308 raises OverflowError
        n = int(s)
        return float(n) if abs(n) < 2**1024 else (math.inf if n > 0 else -math.inf)
    try:
        return float(s)
    except (TypeError, ValueError, OverflowError):
        return None


def describe_value(v, limit: int = 60) -> str:
    """A value as an error message shows it: its repr, cut; a huge integer by its digits (its
    repr may not even exist: Python refuses int->str past 4300 digits).

    >>> describe_value(10**400), describe_value(float("nan")), describe_value("x" * 100)[-20:]
    ('an integer of 401 digits', 'nan', '... (102 characters)')
    """
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**limit:
        digits = math.floor(math.log10(abs(v))) + 1
        return f"an integer of {digits} digits"
    try:
        text = repr(v)
    except Exception:
        text = f"<{type(v).__name__}>"
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return text


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
        # a batch-dependent judge's batches, each with a token that stands for it in the keys:
        # hashing a key then hashes no batch (the batch in every key cost 0.4-0.6 ms a round of
        # 100-125 candidates, each key hashed three times). Equal batches share one token.
        self._batches: dict[tuple, object] = {}

    @staticmethod
    def context_key(context: list[dict]) -> tuple:
        return tuple((c["unit_id"], c.get("previous_score")) for c in context)

    def judge(self, judge, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        ckey = self.context_key(context)
        keys: list[tuple] = [(judge.key, question, ckey, c["unit_id"], c["text"]) for c in candidates]
        if is_batch_dependent(judge):  # an answer depends on its call's candidates (JEV stateful)
            batch = tuple((c["unit_id"], c["text"]) for c in candidates)
            # setdefault is one step under the GIL: threads asking for an equal new batch get one token
            token = self._batches.setdefault(batch, object())
            keys = [(*k, token) for k in keys]
        missing = [i for i, k in enumerate(keys) if k not in self.scores]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        count_usage(memo_hits=len(keys) - len(missing), memo_misses=len(missing))  # the calling run's (usage.py)
        if missing:
            todo = [candidates[i] for i in missing]
            try:
                got = judge.judge(question, todo, context)
            except JudgeError:
                raise
            except (KeyboardInterrupt, GeneratorExit):
                raise
            except BaseException as exc:  # SystemExit too: a judge's sys.exit() ends its question, not the run
                raise JudgeError(f"judge {judge.name!r} raised {_exc_text(exc)}") from exc
            got = validate_scores(judge.name, got, len(todo))
            for i, s in zip(missing, got):
                self.scores[keys[i]] = s
        return [self.scores[k] for k in keys]


def _exc_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit (it called sys.exit({exc.code!r}))"
    return f"{type(exc).__name__}: {exc}"
