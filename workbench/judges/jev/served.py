"""What a served workbench judge answers: SAG2 candidates, generic Jev questions, and the data-hash judge.

A workbench judge scores candidate passages for a question, `judge(question, candidates,
context) -> [p]`. A request in a SAG2 layout is exactly that (`reading.SagRequest`). A generic
Jev question is put to the same judge with the request's `state` as the one passage (title "",
text: the state, objects and arrays as compact JSON) and no context:

  noul    p = judge(instructions + the "true" criterion, [state])
  choice  each option is scored as judge(instructions + option + its description, [state]);
          probabilities are those scores normalised to sum 1 (all 0: uniform); choice the most
          probable option (the first on a tie); confidence (max p - 1/n) / (1 - 1/n)
  score   each level is scored as judge(instructions + level, [state]), normalised the same way;
          score the expectation sum(i * p_i); legend {"0": level 0, ...} (structured levels as
          compact JSON); confidence 1 - spread / (a uniform distribution's spread), the spread
          being sum(p_i * |i - mode|) around the most probable level

Each question, and each option, is judged on its own: no answer depends on the question ids,
the other questions or their order.

>>> judge = DataHashJudge()
>>> answers = answer_generic(judge, "Charged twice.", {"team": {"type": "choice", "instructions": "Team?",
...     "criteria": {"Billing": None, "Sales": None}}})
>>> sorted(answers["team"]), round(sum(answers["team"]["probabilities"].values()), 9)
(['choice', 'confidence', 'probabilities', 'type'], 1.0)
"""

from __future__ import annotations

import hashlib
import json

from workbench.judges.jev.reading import SagRequest
from workbench.judgment import validate_scores
from workbench.protocols import JudgesSagRequests


def unit_float(*parts: str) -> float:
    """A deterministic float in [0, 1) from text: sha256, 53 bits (exact on every platform)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)


def _canonical(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


# ---- the data-hash judge --------------------------------------------------------------------------
class DataHashJudge:
    """Each candidate's answer is a hash of its data as the decision model would see it.

    Stateful (the candidate is a number in the state's batch): the original question, the
    evidence (title, passage and previous score at full precision, in order), the batch's
    candidate passages in order and the candidate's number. Inline: the question, the evidence
    and the candidate alone. Never the instruction wording, criteria, notes or question ids: two
    clients that send the same data in the same batches get the same answers, whatever they say.

    >>> judge = DataHashJudge()
    >>> q, a = "Who directed Glass Harbour?", {"unit_id": 1, "title": "Glass Harbour", "text": "A film."}
    >>> judge.judge(q, [a], []) == judge.judge(q, [a, a], [])[:1]   # inline: alone
    True
    >>> sag = SagRequest("reference", q, [], ["candidate_1"], [a], [1], [("Glass Harbour", "A film.")])
    >>> judge.judge_sag(sag) != judge.judge(q, [a], [])   # stateful and inline differ
    True
    """

    name = "data-hash"
    key = "data-hash-v1"

    def judge(self, question, candidates, context):
        """Every candidate inline (alone)."""
        return [data_hash(question, context, (c["title"], c["text"]), None, None) for c in candidates]

    def judge_sag(self, sag: SagRequest) -> list[float]:
        # Stateful candidates share the batch: its canonical text is hashed once and each candidate
        # adds its position (the same bytes as data_hash's; hashing the batch per candidate made
        # 10,000 candidates take 105 s).
        shared = None
        out = []
        for c, n in zip(sag.candidates, sag.positions):
            if n is None:
                out.append(data_hash(sag.question, sag.context, (c["title"], c["text"]), None, None))
                continue
            if shared is None:
                evidence = [[e["title"], e["text"], e.get("previous_score")] for e in sag.context]
                batch = _canonical([list(p) for p in sag.batch])
                shared = hashlib.sha256(f'{{"batch":{batch},"evidence":{_canonical(evidence)},"position":'.encode())
            h = shared.copy()
            h.update(f'{n},"question":{_canonical(sag.question)},"style":"stateful"}}'.encode())
            out.append((int.from_bytes(h.digest()[:8], "big") >> 11) / float(1 << 53))
        return out


def data_hash(question: str, context: list[dict], candidate, batch, position) -> float:
    """The data-hash of one candidate: `batch` and `position` in stateful style, None inline."""
    data: dict = {
        "question": question,
        "evidence": [[c["title"], c["text"], c.get("previous_score")] for c in context],
    }
    if position is None:
        data["style"], data["candidate"] = "inline", list(candidate)
    else:
        data["style"], data["batch"], data["position"] = "stateful", [list(p) for p in batch], position
    return unit_float(_canonical(data))


def judge_sag(judge, sag: SagRequest) -> list[float]:
    """A served judge's scores for a SAG2 request (a judge with `judge_sag` sees the batch layout)."""
    scores = (
        judge.judge_sag(sag)
        if isinstance(judge, JudgesSagRequests)
        else judge.judge(sag.question, sag.candidates, sag.context)
    )
    return validate_scores(getattr(judge, "name", "judge"), scores, len(sag.candidates))


# ---- generic Jev questions ------------------------------------------------------------------------
def text_of(value) -> str:
    """Text as a judge reads it: a string as is, null as "", objects and arrays as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _join(*parts) -> str:
    return "\n".join(p for p in (text_of(x) for x in parts) if p)


def answer_generic(judge, state, questions: dict) -> dict:
    """Answers to generic Jev questions (noul, choice, score), each judged on its own."""
    passage = [{"unit_id": 1, "title": "", "text": text_of(state), "document": ""}]
    name = getattr(judge, "name", "judge")

    def score(question: str) -> float:
        return validate_scores(name, judge.judge(question, passage, []), 1)[0]

    out = {}
    for key, q in questions.items():
        instructions = q.get("instructions")
        crit = q.get("criteria")
        if q["type"] == "noul":
            out[key] = {"type": "noul", "noul": score(_join(instructions, (crit or {}).get("true")))}
        elif q["type"] == "choice":
            names = list(crit)
            probs = _normalise([score(_join(instructions, n, crit[n])) for n in names])
            top = max(range(len(names)), key=lambda i: probs[i])
            out[key] = {
                "type": "choice",
                "choice": names[top],
                "probabilities": dict(zip(names, probs)),
                "confidence": choice_confidence(probs),
            }
        else:
            probs = _normalise([score(_join(instructions, level)) for level in crit])
            out[key] = {
                "type": "score",
                "score": sum(i * p for i, p in enumerate(probs)),
                "legend": {str(i): text_of(level) for i, level in enumerate(crit)},
                "probabilities": {str(i): p for i, p in enumerate(probs)},
                "confidence": score_confidence(probs),
            }
    return out


def _normalise(scores: list[float]) -> list[float]:
    total = sum(scores)
    if total <= 0:
        return [1.0 / len(scores)] * len(scores)
    return [s / total for s in scores]


def choice_confidence(probs: list[float]) -> float:
    """(max p - 1/n) / (1 - 1/n); 1 for a single option.

    >>> choice_confidence([0.5, 0.5]), choice_confidence([1.0, 0.0]), choice_confidence([1.0])
    (0.0, 1.0, 1.0)
    """
    n = len(probs)
    if n <= 1:
        return 1.0
    return min(1.0, max(0.0, (max(probs) - 1 / n) / (1 - 1 / n)))


def score_confidence(probs: list[float]) -> float:
    """1 - spread / uniform spread, spread = sum(p_i * |i - mode|) (the mode: the first most probable level).

    >>> score_confidence([0.0, 1.0, 0.0]), score_confidence([1/3, 1/3, 1/3]) < 0.5
    (1.0, True)
    """
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: probs[i])
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return min(1.0, max(0.0, 1 - spread / uniform))
