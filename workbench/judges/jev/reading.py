"""The judge server's reading of a Jev request: validation with named errors, and the SAG2 layouts.

Any Jev-valid body is read (SPEC §3b, jevcompat's SPEC §3): `model` a string, `state` a JSON
string, object or array, `questions` a non-empty object of `noul`, `choice` and `score`
questions under any ids, instructions and descriptions as strings, objects or arrays,
unknown top-level fields ignored. A body that is not valid is a `RequestError`: HTTP 422
with `{"detail": [{"loc": ["body", ...], "msg", "type"}]}`, every problem named by its field.

A request in a SAG2 layout is also read into what a workbench judge takes, (question,
candidates, context):

  reference  `state` (a JSON string, or an object) holding `original_question`,
             `previously_retrieved_evidence` [{title, passage, previous_jev_score?}] and, in
             stateful style, `candidate_passages` {"1": {title, passage}, ...}; each question
             a noul whose instructions name `candidate_number` (stateful) or carry
             `candidate_title` and `candidate_passage` (inline). What the authors' client sends.
  workbench  the state the workbench's first client sent: `task`, `question`, `context`
             [{title, text, tentative_score?}], `candidates` [{number, title, text}], and
             string instructions ending in a JSON line naming the candidate.

A field of a SAG2 layout that is missing or of the wrong kind is a 422 naming it, never an
empty context.

>>> state = {"original_question": "Who directed Glass Harbour?", "previously_retrieved_evidence": [],
...          "candidate_passages": {"1": {"title": "Glass Harbour", "passage": "A film."}}}
>>> body = {"model": "m", "state": json.dumps(state),
...         "questions": {"candidate_7": {"type": "noul", "instructions": {"question": "...", "candidate_number": 1}}}}
>>> sag = read_request(body).sag
>>> sag.layout, sag.question, [c["title"] for c in sag.candidates], sag.positions, sag.keys
('reference', 'Who directed Glass Harbour?', ['Glass Harbour'], [1], ['candidate_7'])
>>> read_request({**body, "state": json.dumps({**state, "previously_retrieved_evidence": [{"title": "x"}]})})
Traceback (most recent call last):
...
workbench.judges.jev.reading.RequestError: state.previously_retrieved_evidence[0].passage: missing \
(an evidence item is {"title", "passage", "previous_jev_score"?})
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

MAX_CHOICE_OPTIONS = 255
MAX_SCORE_LEVELS = 10
QUESTION_TYPES = ("noul", "choice", "score")
REFERENCE_STATE_FIELDS = (
    "original_question",
    "previously_retrieved_evidence",
    "evidence_score_note",
    "candidate_passages",
    "candidate_question",
    "candidate_criteria",
)
WORKBENCH_STATE_FIELDS = ("task", "criteria", "question", "context_note", "recheck_note", "context", "candidates")
_TEXT = (str, dict, list)


class RequestError(ValueError):
    """A request the server cannot answer, with every problem as (location, message, type)."""

    def __init__(self, problems: list[tuple[tuple, str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{_where(loc)}: {msg}" if loc else msg for loc, msg, _ in problems))

    def detail(self) -> list[dict]:
        """FastAPI's shape: [{"loc": ["body", ...], "msg", "type"}] (the message names the field too)."""
        return [
            {"loc": ["body", *loc], "msg": f"{_where(loc)}: {msg}" if loc else msg, "type": kind}
            for loc, msg, kind in self.problems
        ]


def _where(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fail(loc: tuple, msg: str, kind: str = "value_error") -> NoReturn:
    raise RequestError([(loc, msg, kind)])


@dataclass
class SagRequest:
    """A request in a SAG2 layout, as a workbench judge takes it. `positions[i]` is the candidate's
    number in the state's batch (stateful) or None (inline); `batch` the state's numbered passages
    in order, as (title, text)."""

    layout: str
    question: str
    context: list[dict]
    keys: list[str] = field(default_factory=list)
    candidates: list[dict] = field(default_factory=list)
    positions: list[int | None] = field(default_factory=list)
    batch: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class JevRequest:
    model: str
    state: Any
    questions: dict
    sag: SagRequest | None = None


# ---- JSON as a client sends it: every failure a RequestError naming where ----------------------
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # the only way a lone surrogate gets into parsed text
_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS_SAID = re.compile(r"value has ([0-9]+) digits")


class _NotJSON(ValueError):
    pass


class _TwiceNamed(dict):
    """An object that named a key twice (kept so the walk can say where)."""

    duplicate: str


def _refuse_constant(name: str):
    raise _NotJSON(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: json reads it as inf, which no judge or answer can use
        raise _NotJSON(f"the number {text[:40]} is out of a float's range")
    return value


def parse_json(text: str, loc: tuple = ()):
    """JSON text (the body, or the state string at `loc`), refused with a RequestError at `loc` when
    it is not JSON, nests too deeply, holds NaN/Infinity, a number out of range, an integer past
    Python's digit limit, a lone UTF-16 surrogate (not text), or an object that names a key twice
    (json would keep the last silently: one question id twice got one answer)."""
    what = "the body " if not loc else ""  # at `loc`, the message is prefixed with the field's name
    twice: list[_TwiceNamed] = []

    def pairs(items: list) -> dict:
        obj = dict(items)
        if len(obj) != len(items):
            seen: set = set()
            obj = _TwiceNamed(obj)
            obj.duplicate = next(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            twice.append(obj)
        return obj

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotJSON as exc:
        _fail(loc, f"{what}is not JSON: {exc}", "json_invalid")
    except json.JSONDecodeError as exc:
        _fail(loc, f"{what}is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "json_invalid")
    except RecursionError:
        _fail(loc, f"{what}is JSON nested too deeply", "json_invalid")
    except ValueError as exc:  # an integer past Python's int-digit limit (4300 by default)
        said = _DIGITS_SAID.search(str(exc))
        size = f"an integer of {said.group(1)} digits" if said else "an integer too long"
        _fail(loc, f"{what}holds {size}; integers of up to 4300 digits are read", "json_invalid")
    if twice or _SURROGATE_ESCAPE.search(text):
        problem = _first_problem(value)
        if problem is not None:
            _fail((*loc, *problem[0]), problem[1], "json_invalid")
    return value


def _first_problem(value) -> tuple[tuple, str] | None:
    """The first (in document order) key named twice or string with a lone surrogate, and where."""
    lone = "holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), which is not text"
    stack: list[tuple[tuple, Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return path, lone if path else f"the body {lone}"
        elif isinstance(v, dict):
            if isinstance(v, _TwiceNamed):
                return (*path, v.duplicate), "is named twice in one object (JSON keys must be unique)"
            for k in v:
                if _SURROGATE.search(k):
                    return path, f"a key {lone}"
            stack.extend(((*path, k), x) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in reversed(list(enumerate(v))))
    return None


# ---- the generic Jev request --------------------------------------------------------------------
def read_request(body) -> JevRequest:
    """A validated request (and its SAG2 reading, if it is in a SAG2 layout), or a RequestError."""
    if not isinstance(body, dict):
        _fail((), f"the body must be a JSON object, not {_kind(body)}", "dict_type")
    problems: list[tuple[tuple, str, str]] = []
    for name in ("model", "state", "questions"):
        if name not in body:
            problems.append(((name,), "missing (a request is {model, state, questions})", "missing"))
    if "model" in body and not isinstance(body["model"], str):
        problems.append((("model",), f"must be a string, not {_kind(body['model'])}", "string_type"))
    if "state" in body and not isinstance(body["state"], _TEXT):
        problems.append((("state",), f"must be a string, object or array, not {_kind(body['state'])}", "union_type"))
    questions = body.get("questions")
    if "questions" in body:
        if not isinstance(questions, dict):
            problems.append((("questions",), f"must be an object of questions, not {_kind(questions)}", "dict_type"))
        elif not questions:
            problems.append((("questions",), "must hold at least one question", "too_short"))
        else:
            for key, q in questions.items():
                problems += _question_problems(key, q)
    if problems:
        raise RequestError(problems)
    request = JevRequest(body["model"], body["state"], body["questions"])
    request.sag = read_sag(request.state, request.questions)
    return request


def _kind(v) -> str:
    return (
        "null"
        if v is None
        else {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(v), "a number")
    )


def _question_problems(key: str, q) -> list[tuple[tuple, str, str]]:
    loc: tuple = ("questions", key)
    if not key:
        return [(loc, "a question id must be a non-empty string", "string_too_short")]
    if not isinstance(q, dict):
        return [(loc, f"must be an object with a type, not {_kind(q)}", "model_attributes_type")]
    if "type" not in q:
        return [((*loc, "type"), "missing: expected one of noul, choice, score", "union_tag_not_found")]
    qtype = q["type"]
    if qtype not in QUESTION_TYPES:
        return [((*loc, "type"), f"{qtype!r} is not one of noul, choice, score", "union_tag_invalid")]
    out = []
    if q.get("instructions") is not None and not isinstance(q["instructions"], _TEXT):
        out.append(((*loc, "instructions"), "must be a string, object or array", "string_type"))
    crit = q.get("criteria")
    cloc = (*loc, "criteria")
    if qtype == "noul":
        if crit is not None:
            if not isinstance(crit, dict) or set(crit) - {"true", "false"}:
                out.append((cloc, 'must be null or an object with "true" and/or "false"', "model_type"))
            else:
                for side, text in crit.items():
                    if text is not None and not isinstance(text, _TEXT):
                        out.append(((*cloc, side), "must be a string, object or array", "string_type"))
    elif qtype == "choice":
        if not isinstance(crit, dict):
            out.append((cloc, "must be an object {option: description} (the options)", "dict_type"))
        elif not 1 <= len(crit) <= MAX_CHOICE_OPTIONS:
            out.append((cloc, f"has {len(crit)} options; 1 to {MAX_CHOICE_OPTIONS} are answered", "too_long"))
        else:
            for name, desc in crit.items():
                if desc is not None and not isinstance(desc, _TEXT):
                    out.append(((*cloc, name), "a description must be a string, object, array or null", "string_type"))
    else:
        if not isinstance(crit, list):
            why = "a map of levels is not accepted: list them in order" if isinstance(crit, dict) else "missing"
            out.append((cloc, f"must be an array of levels ({why})", "list_type"))
        elif not 1 <= len(crit) <= MAX_SCORE_LEVELS:
            out.append((cloc, f"has {len(crit)} levels; 1 to {MAX_SCORE_LEVELS} are answered", "too_long"))
        else:
            for i, level in enumerate(crit):
                if not isinstance(level, _TEXT):
                    out.append(
                        ((*cloc, i), f"a level must be a string, object or array, not {_kind(level)}", "string_type")
                    )
    return out


# ---- the SAG2 layouts ---------------------------------------------------------------------------
def read_sag(state, questions: dict) -> SagRequest | None:
    """The (question, candidates, context) of a request in a SAG2 layout; None for any other state."""
    obj = state
    if isinstance(state, str):
        if not state.lstrip().startswith("{"):
            return None  # a plain-text state: a generic Jev request
        # a state that opens an object is JSON (how every client encodes one); malformed, it would
        # be judged as plain text, with the SAG2 data it meant to carry guessed at: refused instead
        obj = parse_json(state, ("state",))
    if not isinstance(obj, dict):
        return None
    if "original_question" in obj:
        return _read_reference(obj, questions)
    if "task" in obj and "question" in obj and any(_names_a_candidate(q) for q in questions.values()):
        return _read_workbench(obj, questions)
    return None


def _names_a_candidate(q: dict) -> bool:
    """A question of the workbench's first layout: string instructions ending in a JSON object that
    names a candidate (so a generic state that happens to have "task" and "question" stays generic)."""
    ins = q.get("instructions")
    if not isinstance(ins, str):
        return False
    try:
        ref = json.loads(ins.rsplit("\n", 1)[-1])
    except (ValueError, RecursionError):  # not JSON, or an integer past the digit limit
        return False
    return isinstance(ref, dict) and ("candidate" in ref or "title" in ref)


def _string(obj: dict, name: str, loc: tuple, what: str) -> str:
    if name not in obj:
        _fail((*loc, name), f"missing ({what})", "missing")
    if not isinstance(obj[name], str):
        _fail((*loc, name), f"must be a string, not {_kind(obj[name])} ({what})", "string_type")
    return obj[name]


def _unknown_fields(obj: dict, known: tuple, loc: tuple, layout: str) -> None:
    extra = [k for k in obj if k not in known]
    if extra:
        _fail(
            (*loc, extra[0]),
            f"not a field of the {layout} layout (known: {', '.join(known)}); "
            f"it would not reach the judge, so the request is refused rather than misread",
        )


class _Units:
    """Synthetic unit ids: the same id for the same (title, text), so a judge that skips a candidate's
    own context entry still can."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}

    def item(self, title: str, text: str) -> dict:
        return {"unit_id": self.ids.setdefault((title, text), len(self.ids) + 1), "title": title, "text": text}


def _score(value, loc: tuple) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(loc, f"must be a finite number, not {_kind(value)}", "float_type")
    try:
        score = float(value)
    except OverflowError:  # a 400-digit integer: no float holds it
        _fail(loc, f"must be a finite number, not an integer of {len(str(abs(value)))} digits", "float_type")
    if not math.isfinite(score):
        _fail(loc, f"must be a finite number, not {json.dumps(value)}", "float_type")
    return score


EVIDENCE_ITEM = 'an evidence item is {"title", "passage", "previous_jev_score"?}'
PASSAGE_ITEM = 'a candidate passage is {"title", "passage"}'


def _read_reference(state: dict, questions: dict) -> SagRequest:
    _unknown_fields(state, REFERENCE_STATE_FIELDS, ("state",), "SAG2 reference")
    question = _string(state, "original_question", ("state",), "the user's question")
    units = _Units()
    loc: tuple = ("state", "previously_retrieved_evidence")
    if loc[1] not in state:
        _fail(loc, "missing (the evidence list, [] in the first round)", "missing")
    evidence = state[loc[1]]
    if not isinstance(evidence, list):
        _fail(loc, f"must be an array, not {_kind(evidence)} ({EVIDENCE_ITEM})", "list_type")
    context = []
    for i, item in enumerate(evidence):
        if not isinstance(item, dict):
            _fail((*loc, i), f"must be an object, not {_kind(item)} ({EVIDENCE_ITEM})", "dict_type")
        c = units.item(
            _string(item, "title", (*loc, i), EVIDENCE_ITEM), _string(item, "passage", (*loc, i), EVIDENCE_ITEM)
        )
        if "previous_jev_score" in item:
            c["previous_score"] = _score(item["previous_jev_score"], (*loc, i, "previous_jev_score"))
        context.append(c)
    batch: dict[int, tuple[str, str]] = {}
    if "candidate_passages" in state:
        ploc: tuple = ("state", "candidate_passages")
        passages = state["candidate_passages"]
        if not isinstance(passages, dict):
            _fail(ploc, f'must be an object {{"1": {{title, passage}}, ...}}, not {_kind(passages)}', "dict_type")
        for number, p in passages.items():
            if not (number.isascii() and number.isdigit()) or len(number) > 18 or number != str(int(number)):
                _fail((*ploc, number), "a candidate's key must be its number (1, 2, ...)", "int_parsing")
            if not isinstance(p, dict):
                _fail((*ploc, number), f"must be an object, not {_kind(p)} ({PASSAGE_ITEM})", "dict_type")
            title = _string(p, "title", (*ploc, number), PASSAGE_ITEM)
            batch[int(number)] = (title, _string(p, "passage", (*ploc, number), PASSAGE_ITEM))
    sag = SagRequest("reference", question, context, batch=[batch[n] for n in sorted(batch)])
    for key, q in questions.items():
        qloc: tuple = ("questions", key)
        if q["type"] != "noul":
            _fail((*qloc, "type"), f"{q['type']!r}: a SAG2 request asks one noul question per candidate")
        ins = q.get("instructions")
        if not isinstance(ins, dict):
            _fail(
                (*qloc, "instructions"),
                f"must be an object naming the candidate "
                f'({{"candidate_number"}} or {{"candidate_title", "candidate_passage"}}), not {_kind(ins)}',
                "dict_type",
            )
        iloc: tuple = (*qloc, "instructions")
        if "candidate_number" in ins:
            if "candidate_title" in ins or "candidate_passage" in ins:
                _fail(iloc, "names a candidate_number and also carries a candidate: one or the other")
            n = ins["candidate_number"]
            if isinstance(n, bool) or not isinstance(n, int):
                _fail((*iloc, "candidate_number"), f"must be an integer, not {json.dumps(n)}", "int_type")
            if "candidate_passages" not in state:
                _fail(
                    ("state", "candidate_passages"), f"missing (question {key!r} names candidate_number {n})", "missing"
                )
            if n not in batch:
                _fail((*iloc, "candidate_number"), f"{n} is not a key of state.candidate_passages")
            title, text = batch[n]
            position: int | None = n
        elif "candidate_title" in ins or "candidate_passage" in ins:
            what = 'an inline candidate is {"candidate_title", "candidate_passage"}'
            title, text, position = (
                _string(ins, "candidate_title", iloc, what),
                _string(ins, "candidate_passage", iloc, what),
                None,
            )
        else:
            _fail(
                iloc,
                'names no candidate: expected "candidate_number" or "candidate_title" and "candidate_passage"',
                "missing",
            )
        _add(sag, units, key, title, text, position)
    return sag


def _add(sag: SagRequest, units: _Units, key: str, title: str, text: str, position: int | None) -> None:
    sag.keys.append(key)
    sag.candidates.append({**units.item(title, text), "document": title})
    sag.positions.append(position)


def _read_workbench(state: dict, questions: dict) -> SagRequest:
    _unknown_fields(state, WORKBENCH_STATE_FIELDS, ("state",), "workbench")
    question = _string(state, "question", ("state",), "the user's question")
    units = _Units()
    what = 'a context item is {"title", "text", "tentative_score"?}'
    context = []
    items = state.get("context", [])  # the workbench layout leaves the field out when there is no context
    if not isinstance(items, list):
        _fail(("state", "context"), f"must be an array, not {_kind(items)} ({what})", "list_type")
    for i, item in enumerate(items):
        loc: tuple = ("state", "context", i)
        if not isinstance(item, dict):
            _fail(loc, f"must be an object ({what})", "dict_type")
        c = units.item(_string(item, "title", loc, what), _string(item, "text", loc, what))
        if "tentative_score" in item:
            c["previous_score"] = _score(item["tentative_score"], (*loc, "tentative_score"))
        context.append(c)
    numbered: dict[int, tuple[str, str]] = {}
    what = 'a candidate is {"number", "title", "text"}'
    passages = state.get("candidates", [])
    if not isinstance(passages, list):
        _fail(("state", "candidates"), f"must be an array ({what})", "list_type")
    for i, p in enumerate(passages):
        loc = ("state", "candidates", i)
        if not isinstance(p, dict) or isinstance(p.get("number"), bool) or not isinstance(p.get("number"), int):
            _fail(loc, f"must be an object with an integer number ({what})", "dict_type")
        numbered[p["number"]] = (_string(p, "title", loc, what), _string(p, "text", loc, what))
    sag = SagRequest("workbench", question, context, batch=[numbered[n] for n in sorted(numbered)])
    for key, q in questions.items():
        iloc: tuple = ("questions", key, "instructions")
        ins = q.get("instructions")
        if q["type"] != "noul" or not isinstance(ins, str):
            _fail(iloc, "the workbench layout asks noul questions with string instructions")
        try:
            ref = parse_json(ins.rsplit("\n", 1)[-1], iloc)
        except RequestError as exc:
            _fail(iloc, f"its last line is not the candidate's JSON ({exc.problems[0][1]})", "json_invalid")
        if isinstance(ref, dict) and "candidate" in ref:
            if isinstance(ref["candidate"], bool) or not isinstance(ref["candidate"], int):
                _fail(iloc, f'its last line names "candidate" {_kind(ref["candidate"])}, not a number', "int_type")
            if ref["candidate"] not in numbered:
                _fail(iloc, f"candidate {ref['candidate']!r} is not in state.candidates")
            title, text = numbered[ref["candidate"]]
            position: int | None = ref["candidate"]
        elif isinstance(ref, dict) and "title" in ref:
            what = 'an inline candidate is {"title", "text"}'
            title, text, position = _string(ref, "title", iloc, what), _string(ref, "text", iloc, what), None
        else:
            _fail(iloc, "its last line names no candidate passage")
        _add(sag, units, key, title, text, position)
    return sag


def read_payload(body) -> tuple[str, list[dict], list[dict], list[str]]:
    """(question, candidates, context, question keys) of a request in a SAG2 layout; ValueError
    (a RequestError) naming what is wrong, also for a request in no SAG2 layout."""
    sag = read_request(body).sag
    if sag is None:
        _fail(("state",), "is in no SAG2 layout (no original_question)", "missing")
    return sag.question, sag.candidates, sag.context, sag.keys
