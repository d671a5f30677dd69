"""What our JEV client sends: the reference's layout (SPEC §3b), its batching by o200k token
counts, and the decision instructions as a named, versioned parameter (issue 20, item 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.judges import FunctionJudge, jev
from workbench.judges.jev import payload
from workbench.judges.jev.server import JudgeServer
from workbench.judges.jev.tokens import count_tokens
from workbench.judges.registry import JudgeSpec

REFERENCE_PYTHON = os.environ.get("SAG2WB_REFERENCE_PYTHON") or str(
    Path(__file__).parent.parent / ".venv-reference" / "bin" / "python"
)
CANDS = [{"unit_id": 10 + i, "title": f"Town {i}", "text": f"Town {i} lies on the river Vell."} for i in range(5)]
CONTEXT = [
    {"unit_id": 3, "title": "Vell", "text": "The Vell is a river.", "previous_score": 0.12345678901234567},
    {"unit_id": 4, "title": "Harbour", "text": "A film.", "previous_score": 0.9},
]


def body_of(style, cands=CANDS, context=CONTEXT, **kw):
    return jev.build_request("typesafe/jev-1.13", "Which town is on the Vell?", cands, context, style, **kw)


# ---- the layout, field by field --------------------------------------------------------------
@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_body_state_and_question_keys_are_the_references(style):
    body = body_of(style)
    assert list(body) == ["model", "state", "questions"]
    assert isinstance(body["state"], str)  # a JSON string encoding an object
    assert body["state"] == json.dumps(json.loads(body["state"]), ensure_ascii=False, separators=(",", ":"))
    state = json.loads(body["state"])
    expected = ["original_question", "previously_retrieved_evidence", "evidence_score_note"]
    if style == "stateful":
        expected += ["candidate_passages", "candidate_question", "candidate_criteria"]
    assert list(state) == expected
    assert [list(e) for e in state["previously_retrieved_evidence"]] == [["title", "passage", "previous_jev_score"]] * 2
    # full float precision, as the reference sends it (we used to round to 4 digits)
    assert state["previously_retrieved_evidence"][0]["previous_jev_score"] == 0.12345678901234567
    assert '"previous_jev_score":0.12345678901234566' in body["state"] or "0.12345678901234567" in body["state"]
    assert list(body["questions"]) == [f"candidate_{c['unit_id']}" for c in CANDS]
    for n, (c, q) in enumerate(zip(CANDS, body["questions"].values()), start=1):
        if style == "stateful":
            assert list(q) == ["type", "instructions"] and list(q["instructions"]) == ["question", "candidate_number"]
            assert q["instructions"]["candidate_number"] == n
            assert state["candidate_passages"][str(n)] == {"title": c["title"], "passage": c["text"]}
            assert list(state["candidate_criteria"]) == ["true", "false"]
        else:
            assert list(q) == ["type", "instructions", "criteria"] and list(q["criteria"]) == ["true", "false"]
            assert list(q["instructions"]) == ["question", "candidate_title", "candidate_passage"]
            assert (q["instructions"]["candidate_title"], q["instructions"]["candidate_passage"]) == (
                c["title"],
                c["text"],
            )
        assert q["type"] == "noul"


def test_first_round_has_no_scores_and_no_note():
    state = json.loads(body_of("stateful", context=[{"unit_id": 1, "title": "A", "text": "a"}])["state"])
    assert state["previously_retrieved_evidence"] == [{"title": "A", "passage": "a"}]
    assert "evidence_score_note" not in state


def test_a_repeated_unit_id_in_one_request_is_an_error():
    with pytest.raises(jev.JEVPayloadError, match="candidate_10"):
        body_of("inline", cands=[CANDS[0], {**CANDS[1], "unit_id": 10}])


# ---- batching --------------------------------------------------------------------------------
def cost(body):
    return payload.request_tokens(body)


def test_inline_packing_starts_a_new_request_above_the_budget_and_has_no_question_cap():
    cands = [{"unit_id": i, "title": f"T{i}", "text": "word " * 300} for i in range(400)]
    plans = jev.plan_requests("m", "Q?", cands, [], "inline")
    assert [i for idx, _ in plans for i in idx] == list(range(400))  # in order, all of them
    assert len(plans) > 1 and max(len(idx) for idx, _ in plans) > 64  # no 64-question cap
    for k, (idx, body) in enumerate(plans):
        assert cost(body) <= 64_000
        if k + 1 < len(plans):  # it was closed because the next candidate would take it over
            nxt = jev.build_request("m", "Q?", [cands[i] for i in idx] + [cands[plans[k + 1][0][0]]], [], "inline")
            assert cost(nxt) > 64_000


def test_stateful_requests_are_halved_while_state_and_largest_question_exceed_32000():
    cands = [{"unit_id": i, "title": f"T{i}", "text": "word " * 900} for i in range(100)]
    plans = jev.plan_requests("m", "Q?", cands, [], "stateful")
    assert [i for idx, _ in plans for i in idx] == list(range(100))
    sizes = [len(idx) for idx, _ in plans]
    assert sizes == [25, 25, 25, 25]  # 100 -> 50 + 50 -> 4 x 25 (~900 tokens a passage)
    for _, body in plans:
        s = count_tokens(body["state"]) + payload.STATE_OVERHEAD
        largest = max(count_tokens(payload._dumps(q)) for q in body["questions"].values()) + payload.QUESTION_OVERHEAD
        assert s + largest <= 32_000
        # numbered within its request
        assert [q["instructions"]["candidate_number"] for q in body["questions"].values()] == list(
            range(1, len(body["questions"]) + 1)
        )


@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_a_candidate_too_large_alone_is_an_error_naming_it(style):
    big = {"unit_id": 4242, "title": "Enormous", "text": "lorem ipsum " * 20_000}
    with pytest.raises(jev.JEVPayloadError, match=r"candidate 4242 \('Enormous'\) costs \d+ tokens.*not truncated"):
        jev.plan_requests("m", "Q?", [CANDS[0], big], [], style)


def test_token_counts_are_o200k():
    # o200k_base facts (tiktoken's encoding): a special token's text counts as ordinary text
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("<|endoftext|>") > 1


# ---- the instructions: named, versioned, selectable, in the key ----------------------------
def test_the_default_template_and_a_file_template(tmp_path):
    default = jev.get_instructions(None)
    assert default.name == jev.DEFAULT_INSTRUCTIONS == "sag2-evidence-v2"
    toml = tmp_path / "variant.toml"
    toml.write_text(
        textwrap.dedent(
            """
            name = "variant-v1"
            question = "Is the candidate needed?"
            evidence_score_note = "Earlier scores are hints."
            [criteria]
            true = "Needed."
            false = "Not needed."
            """
        ),
        encoding="utf-8",
    )
    t = jev.get_instructions(str(toml))
    assert (t.name, t.question, t.criteria()) == (
        "variant-v1",
        "Is the candidate needed?",
        {"true": "Needed.", "false": "Not needed."},
    )
    state = json.loads(body_of("stateful", instructions=str(toml))["state"])
    assert state["candidate_question"] == t.question and state["evidence_score_note"] == t.evidence_score_note
    assert t.key != default.key
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"question": "q", "criteria": {"true": "t"}, "evidence_score_note": "n"}))
    with pytest.raises(jev.JEVInputError, match=r"bad.json: field 'criteria.false'"):
        jev.get_instructions(str(bad))
    with pytest.raises(jev.JEVInputError, match="not a registered template"):
        jev.get_instructions("no-such-template")


def test_instructions_are_a_judge_option_and_reach_the_request(tmp_path, capsys):
    spec = JudgeSpec.parse("jev:instructions=sag2-evidence-v2")
    assert spec.get("instructions") == "sag2-evidence-v2"
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps(
            {
                "name": "mine-v1",
                "question": "MY QUESTION",
                "criteria": {"true": "y", "false": "n"},
                "evidence_score_note": "s",
            }
        ),
        encoding="utf-8",
    )
    srv = JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half"), keep_bodies=10).start()
    try:
        judge = jev.make_jev_judge(srv.url, cache_dir=tmp_path / "c", instructions=str(mine))
        assert judge.judge("Q?", CANDS[:2], []) == [0.5, 0.5]
        assert json.loads(srv.bodies[-1]["state"])["candidate_question"] == "MY QUESTION"
        assert "mine-v1" in judge.key
        judge.close()
        # another template: other keys, so nothing is replayed across wordings
        other = jev.make_jev_judge(srv.url, cache_dir=tmp_path / "c")
        before = srv.requests
        other.judge("Q?", CANDS[:2], [])
        assert srv.requests == before + 1
        other.close()
    finally:
        srv.stop()


# ---- the reference as a black box -------------------------------------------------------------
@pytest.mark.reference
def test_reference_token_counter_agrees_with_ours():
    texts = [c["text"] for c in CANDS] + [body_of("stateful")["state"], "日本語 🎉 <|endoftext|>", "  \n\t x" * 50]
    code = (
        "import json,sys\nfrom zleap.sag2._decision_encoding import decision_encoding\n"
        "e=decision_encoding()\nprint(json.dumps([len(e.encode_ordinary(t)) for t in json.load(sys.stdin)]))"
    )
    if not Path(REFERENCE_PYTHON).exists():
        pytest.skip("no reference interpreter (SAG2WB_REFERENCE_PYTHON)")
    out = subprocess.run(
        [REFERENCE_PYTHON, "-c", code], input=json.dumps(texts), capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == [count_tokens(t) for t in texts]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
