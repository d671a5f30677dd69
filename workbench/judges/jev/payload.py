"""JEV payloads: the request bodies the reference implementation sends (SPEC §3b), their
packing into requests by o200k token counts, the server's reading of a body, and the
validation of an answer.

Wire format (one HTTP request per batch):
    request  {"model", "state": "<a JSON object, as a string>",
              "questions": {"candidate_<unit id>": {"type": "noul", "instructions": {...}, ...}}}
    answer   {"model", "answers": {key: {"type": "noul", "noul": p}},
              "usage": {"input_tokens", "output_tokens", "cost"?}}

The state object: `original_question`, `previously_retrieved_evidence` ([{title, passage}],
plus `previous_jev_score` at full precision in the final round, with `evidence_score_note`).
Two payload styles (SPEC §3 "Scoring"):
  inline   — every question is self-contained: {"question", "candidate_title",
             "candidate_passage"} and its "criteria" {"true", "false"}.
  stateful — the state adds `candidate_passages` ({"1": {title, passage}, ...}, numbered
             within the request), `candidate_question` and `candidate_criteria`; every
             question names its passage: {"question", "candidate_number": n}.
The wording (question, criteria, score note) is a named template (`instructions`).

>>> body = build_request("m", "Who directed Glass Harbour?", [{"unit_id": 7, "title": "Glass Harbour",
...                      "text": "A film."}], [], "stateful")
>>> list(body), list(body["questions"])
(['model', 'state', 'questions'], ['candidate_7'])
>>> list(json.loads(body["state"]))
['original_question', 'previously_retrieved_evidence', 'candidate_passages', 'candidate_question', 'candidate_criteria']
"""

from __future__ import annotations

import functools
import json
import math
import threading
from typing import Any

from workbench.judges.jev.errors import JEVError, JEVPayloadError
from workbench.judges.jev.instructions import DEFAULT_INSTRUCTIONS, Template, get_instructions
from workbench.judges.jev.tokens import count_tokens, remember_count

INSTRUCTION_VERSION = DEFAULT_INSTRUCTIONS  # the default template's name (its name and text hash are in every key)
PAYLOAD_STYLES = ("inline", "stateful")
MAX_REQUEST_TOKENS = 64_000  # a new request starts above this many tokens (SPEC §3b)
MAX_ITEM_TOKENS = 32_000  # the state plus one question: a candidate over it is an error
STATE_OVERHEAD = 1_024  # tokens added to a request's state in its cost
QUESTION_OVERHEAD = 64  # tokens added to each question
MAX_QUESTIONS = None  # no cap on the questions of a request (the reference has none)


# ---- token estimates -----------------------------------------------------------------------
def estimate_tokens(text: str) -> int:
    """A deliberately generous token estimate: 4 ASCII characters, or 1 other character, per token
    (what the local judge server reports as usage; batching counts o200k tokens, `count_tokens`).

    >>> estimate_tokens("abcdefgh"), estimate_tokens("北京大学")
    (2, 4)
    """
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def request_tokens(body: dict) -> int:
    """A request's cost in the batching rule: its state's o200k tokens + 1,024, plus each
    question's tokens + 64."""
    return (
        count_tokens(body["state"])
        + STATE_OVERHEAD
        + sum(count_tokens(_dumps(q)) + QUESTION_OVERHEAD for q in body["questions"].values())
    )


def estimate_request_tokens(body: dict) -> int:
    """Input tokens of one request body by the batching rule (`request_tokens`)."""
    return request_tokens(body)


# A stateful state's tokens from its parts, exactly: o200k's pre-tokenizer always cuts before the
# digits of a passage's number ("...},"12":{...": the quote before them ends a run of punctuation,
# and no piece joins punctuation to a digit) and after the `"}},"` that closes the passages (a
# letter follows), so the count of the whole is the sum of the counts of the pieces between those
# cuts: the text before the first number, each number, each entry up to the next cut, the rest.
# tests/test_jev_cpu.py checks the sum against counting the whole on the 2Wiki requests and on
# passages that end in punctuation, spaces, escapes, digits, CJK and emoji.
_PASSAGES = '"candidate_passages":{"'
_MARK = _PASSAGES + '1":null},"'


def state_frame(state: dict) -> tuple[str, str]:
    """(head, tail) of a stateful state's JSON text: before its first passage's number, and after the
    `"}},"` that closes its passages."""
    text = _dumps({**state, "candidate_passages": {"1": None}})
    at = text.index(_MARK)  # once only: inside a JSON string every quote is escaped
    return text[: at + len(_PASSAGES)], text[at + len(_MARK) :]


# What json.dumps(s, ensure_ascii=False) returns for a str s (JSONEncoder.encode calls it, and so
# does the C encoder of a dict's strings): called directly, no encoder is set up per call, and a
# str is encoded once for the pieces below (~3,400 passages a 30-question run, issue 33)
_json_string = json.encoder.encode_basestring


@functools.lru_cache(maxsize=4_096)
def _strings(title: str, passage: str) -> tuple[str, str] | None:
    """title and passage as JSON strings (None unless both are str: then `_dumps` encodes them)."""
    if type(title) is not str or type(passage) is not str:
        return None
    return _json_string(title), _json_string(passage)


@functools.lru_cache(maxsize=4_096)
def _entry_pieces(title: str, passage: str) -> tuple[str, str]:
    """A passage's state entry after its number, `":{"title":...,"passage":...}`, and the same
    text escaped as in the body, where the state is a JSON string. A passage comes back in later
    rounds and requests (~3 times per 2Wiki question): its JSON is made once, and a request's
    state and body are joined from these pieces (escaping maps each character on its own, so the
    escaped join is the escaped whole; tests/test_jev_plan_cost.py checks both against `_dumps`)."""
    strings = _strings(title, passage)
    if strings is None:
        entry = _dumps({"1": {"title": title, "passage": passage}})[3:-1]
    else:
        entry = '":{"title":' + strings[0] + ',"passage":' + strings[1] + "}"
    return entry, _json_string(entry)[1:-1]


@functools.lru_cache(maxsize=4_096)
def item_json(title: str, passage: str) -> str:
    """`[title, passage]` as canonical JSON: a candidate's part of its judgment's cache key."""
    strings = _strings(title, passage)
    if strings is None:
        return json.dumps([title, passage], ensure_ascii=False, separators=(",", ":"))
    return "[" + strings[0] + "," + strings[1] + "]"


@functools.lru_cache(maxsize=16_384)
def _entry_tokens(title: str, passage: str, last: bool) -> int:
    """Tokens of a passage's entry from after its number to the next cut: `":{"title":...}` and
    `,"` before the next number, or `},"` closing the passages."""
    return count_tokens(_entry_pieces(title, passage)[0] + ('},"' if last else ',"'))


@functools.lru_cache(maxsize=16_384)
def _passage_tokens(title: str, passage: str) -> int:
    """Tokens of a passage numbered alone, `{"1":{"title":...,"passage":...}}` (a candidate's share
    of a state in the one-question limit)."""
    return count_tokens(_dumps({"1": {"title": title, "passage": passage}}))


_QUESTIONS: dict[str, list[int]] = {}  # a template's question text -> costs of questions 1..n, summed
_QUESTIONS_LOCK = threading.Lock()


def _numbered_questions(t: Template, n: int) -> int:
    """The summed cost (tokens + 64 each) of the stateful questions numbered 1..n, as
    `request_tokens` counts a body's questions."""
    sums = _QUESTIONS.get(t.question)
    if sums is None or len(sums) <= n:
        with _QUESTIONS_LOCK:
            sums = list(_QUESTIONS.get(t.question, [0]))
            while len(sums) <= n:
                q = _question({}, len(sums), "stateful", t)
                sums.append(sums[-1] + count_tokens(_dumps(q)) + QUESTION_OVERHEAD)
            _QUESTIONS[t.question] = sums
    return sums[n]


def state_tokens(frame: tuple[str, str], candidates: list[dict]) -> int:
    """o200k tokens of the stateful state holding `candidates` (numbered 1..), without building it:
    equal to `count_tokens` of the body's `state` (`state_frame` of its base state)."""
    head, tail = frame
    n = len(candidates)
    return (
        count_tokens(head)
        + count_tokens(tail)
        + sum(count_tokens(str(k)) for k in range(1, n + 1))
        + sum(_entry_tokens(c["title"], c["text"], k == n) for k, c in enumerate(candidates, start=1))
    )


class PlannedBody(dict):
    """A request body as `plan_requests` made it, with `tokens`: its cost by the batching rule,
    known from the packing (equal to `request_tokens` of the body), so sending it counts nothing
    again; and, stateful, `escaped_state`: its state as the body's JSON holds it, joined from
    the passages' pieces (`_entry_pieces`). Compared and copied as the plain dict it is."""

    __slots__ = ("escaped_state", "questions_json", "tokens")
    tokens: int
    escaped_state: str | None
    questions_json: str | None  # stateful: `_dumps` of its questions, joined from one template


def encode_request(body: dict) -> tuple[bytes, int]:
    """(the body as sent, its tokens by the batching rule)."""
    if type(body) is not PlannedBody:
        return _dumps(body).encode("utf-8"), request_tokens(body)
    if body.escaped_state is None:
        return _dumps(body).encode("utf-8"), body.tokens
    questions = body.questions_json if body.questions_json is not None else _dumps(body["questions"])
    text = (
        f'{{"model":{_dumps(body["model"])},"state":"{body.escaped_state}",'
        f'"questions":{questions}}}'
    )  # _dumps(body): its three members in this order, the state escaped from its pieces
    return text.encode("utf-8"), body.tokens


# ---- payloads ------------------------------------------------------------------------------
def context_items(context: list[dict]) -> list[dict]:
    """What is sent of each evidence item: title, passage and (final round) its earlier score
    at full precision."""
    out = []
    for c in context:
        item: dict[str, Any] = {"title": c["title"], "passage": c["text"]}
        if c.get("previous_score") is not None:
            item["previous_jev_score"] = float(c["previous_score"])
        out.append(item)
    return out


def base_state(question: str, context: list[dict], style: str, instructions: str | Template | None = None) -> dict:
    """The state object of every request for (question, context), before candidates are added."""
    if style not in PAYLOAD_STYLES:
        raise JEVPayloadError(f"payload style {style!r}: expected one of {', '.join(PAYLOAD_STYLES)}")
    t = get_instructions(instructions)
    items = context_items(context)
    state: dict[str, Any] = {"original_question": question, "previously_retrieved_evidence": items}
    if any("previous_jev_score" in i for i in items):
        state["evidence_score_note"] = t.evidence_score_note
    if style == "stateful":
        state["candidate_passages"] = {}
        state["candidate_question"] = t.question
        state["candidate_criteria"] = t.criteria()
    return state


def question_key(candidate: dict, position: int) -> str:
    """The question key of a candidate: candidate_<unit id> (its 1-based position if it has none)."""
    uid = candidate.get("unit_id")
    return f"candidate_{position if uid is None else uid}"


def _question(candidate: dict, number: int, style: str, t: Template) -> dict:
    if style == "inline":
        return {
            "type": "noul",
            "instructions": {
                "question": t.question,
                "candidate_title": candidate["title"],
                "candidate_passage": candidate["text"],
            },
            "criteria": t.criteria(),
        }
    return {"type": "noul", "instructions": {"question": t.question, "candidate_number": number}}


def _body(
    model: str,
    state: dict,
    candidates: list[dict],
    style: str,
    t: Template,
    positions: list[int],
    tokens: int | None = None,
    frames: tuple[tuple[str, str], tuple[str, str]] | None = None,
) -> dict:
    """One body: `state` (a base state, copied) with `candidates` numbered 1.. in it (a
    PlannedBody if its `tokens` are given). `frames`: the stateful state's `state_frame` and the
    same escaped, to join the state from its pieces instead of encoding it whole."""
    state = dict(state)
    questions: dict[str, dict] = {}
    text = escaped = None
    if style == "stateful" and frames is not None:
        (head, tail), (ehead, etail) = frames
        parts, eparts = [head], [ehead]
        last = len(candidates)
        for n, c in enumerate(candidates, start=1):
            entry, eentry = _entry_pieces(c["title"], c["text"])
            parts += (str(n), entry, '},"' if n == last else ',"')
            eparts += (str(n), eentry, '},\\"' if n == last else ',\\"')
        parts.append(tail)
        eparts.append(etail)
        text, escaped = "".join(parts), "".join(eparts)
    elif style == "stateful":
        state["candidate_passages"] = {
            str(n): {"title": c["title"], "passage": c["text"]} for n, c in enumerate(candidates, start=1)
        }
    for n, (c, pos) in enumerate(zip(candidates, positions), start=1):
        key = question_key(c, pos)
        if key in questions:
            raise JEVPayloadError(
                f"two candidates of one request have the question key {key!r} (the same unit id); "
                f"give every candidate of a round its own unit_id"
            )
        questions[key] = _question(c, n, style, t)
    if text is None:
        text = _dumps(state)
    if tokens is None:
        return {"model": model, "state": text, "questions": questions}
    body = PlannedBody(model=model, state=text, questions=questions)
    body.tokens, body.escaped_state = tokens, escaped
    body.questions_json = _stateful_questions_json(questions, t) if escaped is not None else None
    return body


def _stateful_questions_json(questions: dict[str, dict], t: Template) -> str | None:
    """`_dumps(questions)` of a stateful body, each question joined from the template's encoded
    text and its number (~100 questions a request, all the same but for the number), or None if
    a question key is no str (then `_dumps` encodes them)."""
    if type(t.question) is not str or not all(type(k) is str for k in questions):
        return None
    head = '{"type":"noul","instructions":{"question":' + _json_string(t.question) + ',"candidate_number":'
    return (
        "{"
        + ",".join(
            f"{_json_string(k)}:{head}{q['instructions']['candidate_number']:d}}}}}" for k, q in questions.items()
        )
        + "}"
    )


def build_request(
    model: str,
    question: str,
    candidates: list[dict],
    context: list[dict],
    style: str,
    instructions: str | Template | None = None,
) -> dict:
    """One request body judging `candidates` in order (question keys candidate_<unit id>)."""
    t = get_instructions(instructions)
    state = base_state(question, context, style, t)
    return _body(model, state, candidates, style, t, list(range(1, len(candidates) + 1)))


def plan_requests(
    model: str,
    question: str,
    candidates: list[dict],
    context: list[dict],
    style: str,
    *,
    max_tokens: int = MAX_REQUEST_TOKENS,
    max_item_tokens: int = MAX_ITEM_TOKENS,
    max_questions: int | None = MAX_QUESTIONS,
    instructions: str | Template | None = None,
) -> list[tuple[list[int], dict]]:
    """The reference's batching (SPEC §3b): candidates packed in order, a request's cost its
    state's tokens + 1,024 plus each question's + 64, a new request once the next candidate
    would take it above `max_tokens`; a stateful request (whose state holds its passages) is
    halved recursively (first half: the shorter) while its state's cost plus its largest
    question's cost exceeds `max_item_tokens` or its cost exceeds `max_tokens`. Returns
    [(candidate indices, body)]. Checked against the reference's own requests on the 100 2Wiki
    dev questions (600 rounds, both styles, with its wording): the same requests, split alike.

    A candidate that cannot fit in a request on its own is an error, never truncated.
    `max_questions` (None: no cap, as the reference) optionally caps the questions per request.

    >>> cands = [{"unit_id": i, "title": f"T{i}", "text": "word " * 400} for i in range(6)]
    >>> [idx for idx, _ in plan_requests("m", "Q?", cands, [], "stateful", max_item_tokens=2500)]
    [[0], [1, 2], [3], [4, 5]]
    """
    t = get_instructions(instructions)
    state = base_state(question, context, style, t)
    state_text = _dumps(state)
    # The base state's count decides only what its bound (a token is at least one UTF-8 byte)
    # cannot: counted when a decision needs it, or for an inline request's cost
    state_bound = len(state_text.encode("utf-8")) + STATE_OVERHEAD
    exact: list[int] = []

    def state_cost() -> int:
        if not exact:
            exact.append(count_tokens(state_text) + STATE_OVERHEAD)
        return exact[0]

    if style == "stateful":  # every question the same text (it names "candidate 1" here); counted once
        qcost = [count_tokens(_dumps(_question({}, 1, style, t))) + QUESTION_OVERHEAD] * len(candidates)
    else:
        qcost = [count_tokens(_dumps(_question(c, 1, style, t))) + QUESTION_OVERHEAD for c in candidates]
    for i, c in enumerate(candidates):
        if style == "stateful":  # what it adds to the state: its numbered passage, `{"1":{...}}`
            # counted only when it could matter: a token is at least one UTF-8 byte, and a
            # character at most 6 bytes of JSON (\u001f); 31 bytes of JSON around the texts
            most = qcost[i] + 6 * (len(c["title"]) + len(c["text"])) + 31
            if state_bound + most <= max_item_tokens or state_cost() + most <= max_item_tokens:
                continue
            alone = state_cost() + qcost[i] + _passage_tokens(c["title"], c["text"])
        else:
            alone = state_cost() + qcost[i]
        if alone > max_item_tokens:
            raise JEVPayloadError(
                f"candidate {c.get('unit_id', i)!r} ({c.get('title', '')!r}) costs {alone} tokens with the state "
                f"(question and evidence), over the {max_item_tokens}-token limit of one question; it is not "
                f"truncated — shorten the unit (re-index with smaller units) or reduce the context size"
            )
    groups: list[list[int]] = []
    n = len(candidates)
    if state_bound + sum(qcost) <= max_tokens and (max_questions is None or n <= max_questions):
        groups = [list(range(n))] if n else []  # what packing by the exact count gives: no cut anywhere
    else:
        current: list[int] = []
        used = state_cost()
        for i in range(n):
            full = max_questions is not None and len(current) >= max_questions
            if current and (used + qcost[i] > max_tokens or full):
                groups.append(current)
                current, used = [], state_cost()
            current.append(i)
            used += qcost[i]
        if current:
            groups.append(current)

    def body(idx: list[int], tokens: int, frames=None) -> dict:
        return _body(model, state, [candidates[i] for i in idx], style, t, [i + 1 for i in idx], tokens, frames)

    if style != "stateful":
        return [(g, body(g, state_cost() + sum(qcost[i] for i in g))) for g in groups]

    frame = state_frame(state)
    frames = (frame, (_dumps(frame[0])[1:-1], _dumps(frame[1])[1:-1]))

    def split(idx: list[int]) -> list[tuple[list[int], dict]]:
        s = state_tokens(frame, [candidates[i] for i in idx]) + STATE_OVERHEAD
        total = s + sum(qcost[i] for i in idx)
        if len(idx) > 1 and (s + max(qcost[i] for i in idx) > max_item_tokens or total > max_tokens):
            mid = len(idx) // 2
            return split(idx[:mid]) + split(idx[mid:])
        # its cost as `request_tokens` counts it: each question by its own number
        b = body(idx, s + _numbered_questions(t, len(idx)), frames)  # sending it reads this (PlannedBody)
        remember_count(b["state"], s - STATE_OVERHEAD)  # and counting its state again reads this
        return [(idx, b)]

    return [p for g in groups for p in split(g)]


# ---- answers -------------------------------------------------------------------------------
def parse_answer(raw: bytes | str, keys: list[str], where: str, scrub=None) -> tuple[list[float], dict, str | None]:
    """Validate a service answer: strict JSON (no NaN or Infinity, no repeated member), every
    question answered and none that was not asked, type noul, value in [0, 1].
    Returns (probabilities in key order, usage, model). `scrub(text)` (the client's) removes
    the API key from every message and from the model name, whatever the server echoed.

    usage is {"input_tokens", "output_tokens"} (plus "cost" when the answer has one), each a
    count or None when the answer's value is missing, fractional, negative or not a number:
    unknown, never a number to add up (the judge counts such requests as `usage_unknown`).

    >>> parse_answer(b'{"answers": {"c1": {"type": "noul", "noul": 0.25}},'
    ...              b' "usage": {"input_tokens": 80, "output_tokens": 2.0}}', ["c1"], "test")
    ([0.25], {'input_tokens': 80, 'output_tokens': None}, None)
    >>> parse_answer(b'{"answers": {"c1": {"type": "noul", "noul": 1}, "c9": {"type": "noul", "noul": 0}}}',
    ...              ["c1"], "test")
    Traceback (most recent call last):
    ...
    workbench.judges.jev.errors.JEVError: test: 1 answer(s) for questions never asked ('c9')
    """
    if scrub is None:
        return _parse_answer(raw, keys, where)
    try:
        out, usage, model = _parse_answer(raw, keys, where)
    except JEVError as exc:
        text = scrub(str(exc))  # scrubbed whole, then shortened: a cut key could not be found any more
        error = type(exc)(text if len(text) <= 600 else text[:600] + " ...")
    else:
        return out, usage, (None if model is None else scrub(model))
    raise error  # outside the handler: the unscrubbed original is not kept as __context__


def _parse_answer(raw: bytes | str, keys: list[str], where: str) -> tuple[list[float], dict, str | None]:
    def no_constant(name: str):  # NaN, Infinity, -Infinity: Python reads them, JSON has none
        raise ValueError(f"{name} is not a JSON value")

    def members(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            names = [k for k, _ in pairs]
            twice = next(k for i, k in enumerate(names) if k in names[:i])
            raise ValueError(f"member {twice!r} appears twice in one object")
        return obj

    try:
        data = json.loads(raw, parse_constant=no_constant, object_pairs_hook=members)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        why: object = "nested too deeply" if isinstance(exc, RecursionError) else getattr(exc, "msg", exc)
        raise JEVError(f"{where}: the answer is not JSON ({why}); it starts {text[:80]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("answers"), dict):
        raise JEVError(f'{where}: the answer has no "answers" object')
    answers = data["answers"]
    missing = [k for k in keys if k not in answers]
    if missing:
        raise JEVError(f"{where}: {len(missing)} of {len(keys)} questions unanswered ({', '.join(missing[:5])})")
    asked = set(keys)
    extra = [k for k in answers if k not in asked]
    if extra:  # an answer nobody asked for: the server mixed up questions, or answers another request
        shown = ", ".join(map(repr, extra[:5])) + (", ..." if len(extra) > 5 else "")  # shortened once scrubbed
        raise JEVError(f"{where}: {len(extra)} answer(s) for questions never asked ({shown})")
    out = []
    for k in keys:
        a = answers[k]
        if not isinstance(a, dict) or a.get("type") != "noul":
            got = a.get("type") if isinstance(a, dict) else type(a).__name__
            raise JEVError(f"{where}: answer {k!r} has type {got!r}, expected 'noul'")
        p = a.get("noul")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0.0 <= p <= 1.0:
            raise JEVError(f"{where}: answer {k!r} is {p!r}, not a probability in [0, 1]")
        out.append(float(p))
    raw_usage = data.get("usage")
    raw_usage = raw_usage if isinstance(raw_usage, dict) else {}
    usage: dict = {}
    for name in ("input_tokens", "output_tokens"):  # a count: a non-negative integer (12.0 is not one)
        v = raw_usage.get(name)
        usage[name] = v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
    if "cost" in raw_usage:  # optional (a provider's extension); if given, a non-negative number
        v = raw_usage["cost"]
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        usage["cost"] = float(v) if number and math.isfinite(v) and v >= 0 else None
    model = data.get("model") if isinstance(data.get("model"), str) else None
    return out, usage, model
