"""The JEV client's CPU work (issue 33): a request's state counted from its parts, exactly; every
text tokenized once however often it is planned and sent; cache keys as they always were."""

from __future__ import annotations

import hashlib
import json

import pytest

from workbench.judges.jev import cache, o200k_kernel, payload, tokens
from workbench.judges.jev.instructions import get_instructions

PASSAGES = [
    ("Glass Harbour", "Glass Harbour is a 1961 drama film directed by Mara Quell. It was shot in Vellor."),
    ("Mara Quell", "Mara Quell was a film director. She was born in Tessaly and studied painting."),
    ("北京大学", "北京大学创建于1898年，初名京师大学堂。"),
    ("Tessaly", "Tessaly is a river town known for bridges"),
]
# how a passage or title may end where the state's JSON goes on: punctuation that joins the
# closing `"},"`, spaces, escapes, digits, CJK, emoji, a combining mark, nothing at all
ENDINGS = ["", ".", "!?)", " ", "  \t", "\n", '"', "\\", "1920", "12345", "京", "😀", "é", "e\u0301", "'s", "/", "}"]


def candidates(ending: str, n: int = 7) -> list[dict]:
    out = []
    for i in range(n):
        title, text = PASSAGES[i % len(PASSAGES)]
        if i % 3 == 1:
            title += ending
        out.append({"unit_id": 100 + i, "title": title, "text": text + ending * (1 + i % 2)})
    return out


@pytest.mark.parametrize("ending", ENDINGS, ids=[repr(e) for e in ENDINGS])
@pytest.mark.parametrize("final_round", [False, True], ids=["no-scores", "with-scores"])
def test_state_tokens_equal_counting_the_whole_state(ending, final_round):
    t = get_instructions(None)
    context = [
        {
            "title": "Ostrow" + ending,
            "text": "Ostrow is a port city" + ending,
            "previous_score": 0.25 if final_round else None,
        }
    ]
    for question in ("Who directed Glass Harbour?", "  padded" + ending):
        state = payload.base_state(question, context, "stateful", t)
        frame = payload.state_frame(state)
        for n in (1, 2, 7):
            cands = candidates(ending, n)
            body = payload._body("m", state, cands, "stateful", t, list(range(1, n + 1)))
            assert payload.state_tokens(frame, cands) == tokens._count(body["state"])


def test_a_round_is_tokenized_once(monkeypatch):
    """Planning and sending a round tokenizes each passage once and never the whole state; the
    same round again tokenizes nothing. (Before: every state twice, each passage three times.)"""
    seen: list[str] = []
    encoding = tokens._encoding()

    class Recording:
        def encode_ordinary(self, text):
            seen.append(text)
            return encoding.encode_ordinary(text)

        def count(self, text):
            seen.append(text)
            return encoding.count(text)

    monkeypatch.setattr(tokens, "_encoding", Recording)
    kernel_count = o200k_kernel.count

    def recording_kernel(lib, text):  # the compiled counter, where there is one
        seen.append(text)
        return kernel_count(lib, text)

    monkeypatch.setattr(o200k_kernel, "count", recording_kernel)
    for memo in ("_count_short", "_long", "_entry_tokens", "_passage_tokens"):  # nothing remembered yet
        for module in (tokens, payload):
            if hasattr(module, memo):
                cleared = getattr(module, memo)
                getattr(cleared, "cache_clear", getattr(cleared, "clear", None))()
    cands = [
        {"unit_id": i, "title": f"Unit {i} {title}", "text": f"{text} Entry {i}."}
        for i, (title, text) in enumerate(PASSAGES * 10)
    ]
    plans = payload.plan_requests("m", "Who directed Glass Harbour?", cands, [], "stateful")
    sent = [payload.encode_request(body) for _, body in plans]
    for text in seen:  # never a whole state: no text tokenized holds two passages
        assert sum(c["text"] in text for c in cands) <= 1, text[:200]
    for c in cands:  # and each passage is in one text only (its entry in a state)
        assert sum(c["text"] in text for text in seen) == 1, c["title"]
    seen.clear()
    again = payload.plan_requests("m", "Who directed Glass Harbour?", cands, [], "stateful")
    assert [payload.encode_request(body) for _, body in again] == sent
    assert seen == []


@pytest.mark.parametrize("ending", [".", '"\\', "京😀", "\x00\n"], ids=repr)
@pytest.mark.parametrize("style", ["stateful", "inline"])
def test_cache_keys_are_unchanged(style, ending):
    """The keys an existing cache holds: sha256 of the canonical JSON, then "\\n" and the position
    (stateful) or the candidate (inline), computed here as the first format-2 client did."""
    cands = candidates(ending, 5)  # keys are joined from each candidate's JSON: escapes included
    context = [{"title": "Ostrow", "text": "A port.", "previous_score": 0.5}]
    t = get_instructions(None)
    shared = {
        "endpoint_family": "openrouter",
        "model": "typesafe/jev-1.13",
        "instructions": t.key,
        "payload_style": style,
        "question": "Q?",
        "evidence": [{"title": "Ostrow", "passage": "A port.", "previous_jev_score": 0.5}],
    }

    def canon(obj):
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    items = [[c["title"], c["text"]] for c in cands]
    if style == "stateful":
        head = canon({**shared, "batch": items})
        expected = [hashlib.sha256(f"{head}\n{n}".encode()).hexdigest() for n in range(1, 6)]
    else:
        expected = [hashlib.sha256(f"{canon(shared)}\n{canon(item)}".encode()).hexdigest() for item in items]
    got = cache.request_keys("openrouter", "typesafe/jev-1.13", None, style, "Q?", context, cands)
    assert got == [cache.CACHE_KEY_PREFIX + e for e in expected]
