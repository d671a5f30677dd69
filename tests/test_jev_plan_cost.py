"""A planned request's cost and packing without recounting (issue 33): the tokenizer's own count
equals the length of its encoding; a PlannedBody's `tokens` equal counting the body as sent
(`request_tokens`' rule, computed here straight from the text); packing that skips the base
state's count where its byte bound decides gives the requests exact packing gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_jev_cpu import ENDINGS, PASSAGES
from workbench.judges.jev import payload, tokens
from workbench.judges.jev.instructions import get_instructions

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "2wiki" / "corpus.json"
SPECIAL = ["<|endoftext|>", "a<|endofprompt|>b", "<|fim_prefix|>x", "", " ", "\n\n\n", "1234567", "\x00\x1f", "'s 'S"]


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def test_count_is_the_length_of_the_encoding():
    enc = tokens._encoding()
    texts = [t for title, text in PASSAGES for t in (title, text)] + ENDINGS + SPECIAL
    assert [tokens._count(t) for t in texts] == [len(enc.encode_ordinary(t)) for t in texts]
    assert tokens._count("<|endoftext|>") > 1  # special-token text is ordinary text


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.exists(), reason="no 2Wiki corpus in ../shared/data")
def test_count_is_the_length_of_the_encoding_on_2wiki():
    enc = tokens._encoding()
    texts = [t for unit in json.loads(CORPUS.read_text()) for t in (unit["title"], unit["text"])]
    assert [enc.count(t) for t in texts] == [len(enc.encode_ordinary(t)) for t in texts]


def cands(n: int) -> list[dict]:
    out = []
    for i in range(n):
        title, text = PASSAGES[i % len(PASSAGES)]
        ending = ENDINGS[i % len(ENDINGS)]
        out.append({"unit_id": 1000 + i, "title": title + ending, "text": f"{text} Entry {i}.{ending}" * (1 + i % 3)})
    return out


def counted(body: dict) -> int:
    """A body's cost by the batching rule, every text counted from scratch."""
    return (
        tokens._count(body["state"])
        + payload.STATE_OVERHEAD
        + sum(tokens._count(dumps(q)) + payload.QUESTION_OVERHEAD for q in body["questions"].values())
    )


def exact_groups(state: dict, cs: list[dict], style: str, max_tokens: int, max_questions) -> list[list[int]]:
    """Packing in order by the base state's exact count (what plan_requests did before)."""
    t = get_instructions(None)
    state_cost = tokens._count(dumps(state)) + payload.STATE_OVERHEAD
    if style == "stateful":
        qcost = [tokens._count(dumps(payload._question({}, 1, style, t))) + payload.QUESTION_OVERHEAD] * len(cs)
    else:
        qcost = [tokens._count(dumps(payload._question(c, 1, style, t))) + payload.QUESTION_OVERHEAD for c in cs]
    groups: list[list[int]] = []
    current: list[int] = []
    used = state_cost
    for i in range(len(cs)):
        full = max_questions is not None and len(current) >= max_questions
        if current and (used + qcost[i] > max_tokens or full):
            groups.append(current)
            current, used = [], state_cost
        current.append(i)
        used += qcost[i]
    return groups + ([current] if current else [])


LIMITS = [  # (max_tokens, max_item_tokens, max_questions): none binding, tokens, questions, splits
    (payload.MAX_REQUEST_TOKENS, payload.MAX_ITEM_TOKENS, None),
    (3_000, payload.MAX_ITEM_TOKENS, None),
    (payload.MAX_REQUEST_TOKENS, payload.MAX_ITEM_TOKENS, 4),
    (payload.MAX_REQUEST_TOKENS, 2_500, None),
]


@pytest.mark.parametrize("style", ["stateful", "inline"])
@pytest.mark.parametrize("limits", LIMITS, ids=["none", "max-tokens", "max-questions", "item-split"])
@pytest.mark.parametrize("n", [1, 9, 40])
def test_planned_cost_and_packing(style, limits, n):
    max_tokens, max_item, max_questions = limits
    context = [{"title": "Ostrow.", "text": "Ostrow is a port city」", "previous_score": 0.25}]
    cs = cands(n)
    plans = payload.plan_requests(
        "m", "Who directed Glass Harbour?", cs, context, style,
        max_tokens=max_tokens, max_item_tokens=max_item, max_questions=max_questions,
    )  # fmt: skip
    for _, body in plans:
        assert type(body) is payload.PlannedBody
        assert body.tokens == counted(body)
        content, estimate = payload.encode_request(body)
        assert (content, estimate) == (dumps(dict(body)).encode(), counted(body))
        assert payload.encode_request(dict(body)) == (content, estimate)  # a plain dict: counted
    state = payload.base_state("Who directed Glass Harbour?", context, style, get_instructions(None))
    groups = exact_groups(state, cs, style, max_tokens, max_questions)
    got = [idx for idx, _ in plans]
    if style == "inline" or (max_item == payload.MAX_ITEM_TOKENS and max_tokens == payload.MAX_REQUEST_TOKENS):
        assert got == groups  # no stateful split on top of the packing
    else:
        assert [i for g in got for i in g] == list(range(n))
        assert all(any(set(g) <= set(h) for h in groups) for g in got)  # splits within the packed groups
    if max_tokens == 3_000 and n == 40:
        assert len(groups) > 1  # the limit binds: the exact packing was exercised


def test_questions_past_999_are_counted_by_their_numbers():
    """Stateful questions are numbered 1..n; past 999 a number is two pieces: the planned cost
    counts each question's own text, as sending it always did."""
    cs = [{"unit_id": i, "title": f"T{i}", "text": "x"} for i in range(1200)]
    (idx, body), *rest = payload.plan_requests("m", "Q?", cs, [], "stateful", max_tokens=10**9, max_item_tokens=10**9)
    assert rest == [] and len(idx) == 1200
    assert body.tokens == counted(body)
    one = tokens._count(dumps(payload._question({}, 1, "stateful", get_instructions(None))))
    assert body.tokens != tokens._count(body["state"]) + payload.STATE_OVERHEAD + 1200 * (one + 64)


@pytest.mark.parametrize("ending", [*ENDINGS, "\x00\x1f\x7f", "\u2028"], ids=repr)
def test_a_state_joined_from_pieces_is_the_state_encoded_whole(ending):
    """A planned stateful body's state (joined from each passage's JSON) and its bytes as sent
    (the state escaped from pieces) equal encoding the body whole, as build_request does."""
    context = [{"title": "Ostrow" + ending, "text": "A port" + ending, "previous_score": 0.5}]
    cs = [{**c, "title": c["title"] + ending, "text": c["text"] + '"\\' + ending} for c in cands(12)]
    question = 'Who "directed" it?' + ending
    plans = payload.plan_requests("m", question, cs, context, "stateful", max_item_tokens=2_200)
    assert len(plans) > 1
    for idx, body in plans:
        whole = payload.build_request("m", question, [cs[i] for i in idx], context, "stateful")
        whole["questions"] = {f"candidate_{1000 + i}": q for i, q in zip(idx, whole["questions"].values())}
        assert body["state"] == whole["state"]
        assert body.escaped_state == dumps(body["state"])[1:-1]
        assert payload.encode_request(body)[0] == dumps(whole).encode()
