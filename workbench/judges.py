"""Judges: one narrow interface, (question, candidates, context) -> one probability each.

    judge(question: str, candidates: list[dict], context: list[dict]) -> list[float]

Each candidate dict has "unit_id", "title", "text" and "document"; each context dict has
"unit_id", "title", "text" and, in the final round, "previous_score". A judge object has
a `name`, a `key` (everything that changes its answers, for caching) and `judge(...)`.

>>> j = make_judge("lexical", index)                                       # doctest: +SKIP
>>> j.judge("Who founded Kestrel?", [{"unit_id": 1, "title": "Kestrel", "text": "..."}], [])  # doctest: +SKIP
[0.71]
"""
from __future__ import annotations

import math
from typing import Callable, Protocol

from . import text as textlib
from .terms import load_python_object

OFFLINE_JUDGES = ("bm25", "lexical", "oracle")


class JudgeError(RuntimeError):
    """A judge that failed or answered something unusable; the message names the judge."""


class Judge(Protocol):
    name: str
    key: str

    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]: ...


def validate_scores(name: str, scores, n: int) -> list[float]:
    """Probabilities in [0, 1], one per candidate, or a JudgeError naming the judge."""
    try:
        scores = list(scores)
    except TypeError:
        raise JudgeError(f"judge {name!r} returned {type(scores).__name__}, expected a list of {n} probabilities") from None
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


class OracleJudge:
    """1.0 for a gold passage, 0.0 otherwise. A ceiling for the candidate policy, not a model."""

    def __init__(self, gold):
        self.gold = frozenset(gold)
        self.name = "oracle (gold labels: a ceiling, not a model)"
        self.key = "oracle:" + "\x1f".join(sorted(self.gold))

    def judge(self, question, candidates, context):
        return [1.0 if c["document"] in self.gold else 0.0 for c in candidates]


class LexicalJudge:
    """An offline judge from lexical evidence; context matters.

    direct  = idf mass of the question's tokens found in the candidate / idf mass of the question
    bridge  = max over context items c (other than the candidate) of
              weight(c) * idf mass of c's non-question tokens found in the candidate
                        / idf mass of c's non-question tokens,
              weight(c) = its previous score in the final round, else 1
    score   = 1 - (1 - direct) * (1 - 0.5 * bridge)
    The bridge term is what lets a second-hop passage that shares a rare name with an
    evidence passage already in context outscore a topical distractor.
    """

    name = "lexical"
    key = "lexical-v1"

    def __init__(self, index):
        self.index = index
        self._tokens: dict[tuple[str, str], frozenset[str]] = {}

    def _set(self, title: str, text: str) -> frozenset[str]:
        key = (title, text)
        toks = self._tokens.get(key)
        if toks is None:
            if len(self._tokens) > 50_000:
                self._tokens.clear()
            toks = self._tokens[key] = frozenset(textlib.tokenize(title + "\n" + text))
        return toks

    def _mass(self, tokens) -> float:
        # fsum: exactly rounded whatever the set's order, which string hashing changes from
        # process to process; so every process (a worker, a re-run) gives the same bits
        return math.fsum(self.index.idf(t) for t in tokens)

    def judge(self, question, candidates, context):
        q = frozenset(textlib.tokenize(question))
        q_mass = self._mass(q)
        ctx = []
        for item in context:
            toks = self._set(item["title"], item["text"]) - q
            mass = self._mass(toks)
            if mass > 0:
                prev = item.get("previous_score")
                ctx.append((item.get("unit_id"), toks, mass, 1.0 if prev is None else prev))
        out = []
        for c in candidates:
            toks = self._set(c["title"], c["text"])
            direct = self._mass(q & toks) / q_mass if q_mass > 0 else 0.0
            bridge = 0.0
            for unit_id, ctoks, mass, weight in ctx:
                if unit_id is not None and unit_id == c.get("unit_id"):
                    continue
                bridge = max(bridge, weight * self._mass(ctoks & toks) / mass)
            out.append(min(1.0, max(0.0, 1 - (1 - direct) * (1 - 0.5 * bridge))))
        return out


class FunctionJudge:
    """A researcher's callable `judge(question, candidates, context) -> list[float]`."""

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.key = "function:" + self.name

    def judge(self, question, candidates, context):
        return self.fn(question, candidates, context)


def load_function_judge(spec: str) -> FunctionJudge:
    try:
        fn = load_python_object(spec, "judge")
    except ValueError as exc:
        raise JudgeError(f"{exc}. Valid judges: {', '.join(OFFLINE_JUDGES)}, jev, or FILE.py:NAME") from None
    return FunctionJudge(fn, name=spec)


def make_judge(spec: str, index, gold=None, **jev_options):
    """A judge from its CLI name: bm25 (None: the lexical baseline), lexical, oracle, jev, FILE.py:NAME."""
    if spec == "bm25":
        return None
    if spec == "lexical":
        return LexicalJudge(index)
    if spec == "oracle":
        if gold is None:
            raise JudgeError("judge 'oracle' needs gold labels (questions with supporting_titles)")
        return OracleJudge(gold)
    if spec == "jev":
        from .jev import make_jev_judge  # the hosted judge; optional at import time

        return make_jev_judge(**jev_options)
    if ":" in spec and spec.split(":")[0].endswith(".py"):
        return load_function_judge(spec)
    raise JudgeError(f"unknown judge {spec!r}; valid judges: {', '.join(OFFLINE_JUDGES)}, jev, or FILE.py:NAME")


class JudgmentMemo:
    """In-process judgment cache shared by re-runs: (judge key, question, context, unit) -> score.

    Judgments are assumed independent of which other candidates share the call (true for
    every judge here; JEV answers each candidate as its own question)."""

    def __init__(self):
        self.scores: dict[tuple, float] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def context_key(context: list[dict]) -> tuple:
        return tuple((c["unit_id"], c.get("previous_score")) for c in context)

    def judge(self, judge, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        ckey = self.context_key(context)
        keys = [(judge.key, question, ckey, c["unit_id"], c["text"]) for c in candidates]
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
