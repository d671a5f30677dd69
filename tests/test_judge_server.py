"""The local Jev-compatible server: the SAG2 layouts (the reference's, ours), generic Jev questions,
the data-hash judge, error shapes, served judges, fault specs."""

from __future__ import annotations

import json
import re
from argparse import Namespace

import httpx
import pytest

from tests import comparison_judges
from tests.comparison_judges import hash_judge
from workbench.index.store import Index
from workbench.index.units import Unit
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.reading import RequestError, read_payload, read_request
from workbench.judges.jev.served import DataHashJudge, choice_confidence, score_confidence
from workbench.judges.jev.server import FAULTS, JudgeServer, make_server_judge, parse_fault
from workbench.judges.lexical import LexicalJudge
from workbench.judgment import JudgeError

QUESTION = "Which town is on the Vell?"
CANDIDATES = [
    {"unit_id": i, "title": t, "text": f"{t} lies on the river Vell.", "document": t}
    for i, t in enumerate(["Ardmore", "Brask", "Coln"])
]
PREVIOUS = 0.123456789012345  # full precision must survive the wire
CONTEXT = [{"unit_id": 10, "title": "Vell", "text": "The Vell flows past Ardmore.", "previous_score": PREVIOUS}]
ASK = "Is this candidate needed?"  # our own instruction wording: the server never reads it


def reference_body(style, question=QUESTION, candidates=CANDIDATES, context=CONTEXT, *, ask=ASK, as_string=True):
    """A request laid out as the authors' client lays it out (SPEC §3b), built here by hand."""
    state: dict = {
        "original_question": question,
        "previously_retrieved_evidence": [
            {"title": c["title"], "passage": c["text"], **({"previous_jev_score": c["previous_score"]})}
            if c.get("previous_score") is not None
            else {"title": c["title"], "passage": c["text"]}
            for c in context
        ],
    }
    questions = {}
    if style == "stateful":
        state["candidate_passages"] = {
            str(n): {"title": c["title"], "passage": c["text"]} for n, c in enumerate(candidates, 1)
        }
        state["candidate_question"] = ask
        for n, c in enumerate(candidates, 1):
            questions[f"candidate_{c['unit_id']}"] = {
                "type": "noul",
                "instructions": {"question": ask, "candidate_number": n},
            }
    else:
        for c in candidates:
            questions[f"candidate_{c['unit_id']}"] = {
                "type": "noul",
                "instructions": {"question": ask, "candidate_title": c["title"], "candidate_passage": c["text"]},
                "criteria": {"true": "needed", "false": "not needed"},
            }
    return {"model": "local-model", "state": json.dumps(state) if as_string else state, "questions": questions}


@pytest.fixture
def hash_server():
    srv = JudgeServer(make_server_judge("hash", None)).start()
    yield srv
    srv.stop()


def noul(data, keys):
    return [data["answers"][k]["noul"] for k in keys]


@pytest.mark.parametrize("as_string", [True, False])
@pytest.mark.parametrize("style", ["inline", "stateful"])
def test_reads_the_reference_layout(hash_server, style, as_string):
    body = reference_body(style, as_string=as_string)
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 200, r.text
    data = r.json()
    keys = ["candidate_0", "candidate_1", "candidate_2"]
    assert data["model"] == "local-model" and list(data["answers"]) == keys
    assert all(a["type"] == "noul" for a in data["answers"].values())
    # the hash judge reads the previous score: equal floats mean it arrived at full precision
    assert noul(data, keys) == hash_judge(QUESTION, CANDIDATES, CONTEXT)
    usage = data["usage"]
    assert isinstance(usage["input_tokens"], int) and usage["input_tokens"] > 0 and usage["output_tokens"] == 3


@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_reads_what_our_client_builds(hash_server, style):
    body = jev.build_request("local-model", QUESTION, CANDIDATES, CONTEXT, style)
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 200, r.text
    assert noul(r.json(), list(body["questions"])) == hash_judge(QUESTION, CANDIDATES, CONTEXT)


def workbench_body(style):
    """The workbench's first layout (string instructions ending in the candidate's JSON)."""
    state: dict = {"task": "t", "question": QUESTION}
    state["context"] = [{"title": c["title"], "text": c["text"], "tentative_score": 0.8} for c in CONTEXT]
    questions = {}
    if style == "stateful":
        state["candidates"] = [
            {"number": n, "title": c["title"], "text": c["text"]} for n, c in enumerate(CANDIDATES, 1)
        ]
        for n in range(1, 4):
            questions[f"c{n}"] = {"type": "noul", "instructions": f"words\n{json.dumps({'candidate': n})}"}
    else:
        for n, c in enumerate(CANDIDATES, 1):
            passage = json.dumps({"title": c["title"], "text": c["text"]})
            questions[f"c{n}"] = {"type": "noul", "instructions": f"words\n{passage}"}
    return {"model": "m", "state": state, "questions": questions}


@pytest.mark.parametrize("style", ["inline", "stateful"])
def test_still_reads_the_workbench_first_layout(hash_server, style):
    r = httpx.post(hash_server.url, json=workbench_body(style))
    expected = hash_judge(QUESTION, CANDIDATES, [{**CONTEXT[0], "previous_score": 0.8}])
    assert r.status_code == 200 and noul(r.json(), ["c1", "c2", "c3"]) == expected


def test_read_payload_moved_to_the_server_side():
    question, candidates, context, keys = read_payload(reference_body("stateful"))
    assert question == QUESTION and [c["title"] for c in candidates] == ["Ardmore", "Brask", "Coln"]
    assert context[0]["previous_score"] == PREVIOUS and keys == ["candidate_0", "candidate_1", "candidate_2"]
    # a candidate that is also in the context gets the same synthetic unit id
    _, cands, ctx, _ = read_payload(reference_body("inline", context=[{**CANDIDATES[0], "previous_score": None}]))
    assert cands[0]["unit_id"] == ctx[0]["unit_id"] and cands[1]["unit_id"] != ctx[0]["unit_id"]
    assert jev.read_payload is read_payload


def _state(body):
    return json.loads(body["state"])


def _with_state(body, **changes):
    state = {**_state(body), **changes}
    return {**body, "state": json.dumps({k: v for k, v in state.items() if v is not None})}


MISSING = object()


@pytest.mark.parametrize(
    "change, where",
    [
        # evidence under another name: never read as "no context"
        (lambda b: _with_state(b, previously_retrieved_evidence=None, evidence=[]), "state.evidence"),
        (lambda b: _with_state(b, previously_retrieved_evidence=None), "state.previously_retrieved_evidence"),
        (
            lambda b: _with_state(b, previously_retrieved_evidence=[{"title": "Vell", "text": "..."}]),
            "state.previously_retrieved_evidence[0].passage",
        ),
        (
            lambda b: _with_state(
                b, previously_retrieved_evidence=[{"title": "V", "passage": "p", "previous_jev_score": "0.5"}]
            ),
            "state.previously_retrieved_evidence[0].previous_jev_score",
        ),
        (lambda b: _with_state(b, previously_retrieved_evidence={}), "state.previously_retrieved_evidence"),
        (lambda b: _with_state(b, original_question=7), "state.original_question"),
        (lambda b: _with_state(b, candidate_passages=None), "state.candidate_passages"),
        (
            lambda b: _with_state(b, candidate_passages={"1": {"title": "A", "text": "x"}}),
            "state.candidate_passages.1.passage",
        ),
        (
            lambda b: _with_state(b, candidate_passages={"one": {"title": "A", "passage": "x"}}),
            "state.candidate_passages.one",
        ),
        (
            lambda b: _with_state(b, candidate_passages={"1": {"title": "A", "passage": "x"}}),
            "questions.candidate_1.instructions.candidate_number",
        ),
        (
            lambda b: {**b, "questions": {"candidate_0": {"type": "noul", "instructions": "Candidate 1?"}}},
            "questions.candidate_0.instructions",
        ),
        (
            lambda b: {**b, "questions": {"candidate_0": {"type": "noul", "instructions": {"question": "?"}}}},
            "questions.candidate_0.instructions",
        ),
        (
            lambda b: {**b, "questions": {"x": {"type": "choice", "instructions": "?", "criteria": {"a": None}}}},
            "questions.x.type",
        ),
    ],
)
def test_a_sag2_field_it_cannot_find_is_a_422_naming_it(hash_server, change, where):
    r = httpx.post(hash_server.url, json=change(reference_body("stateful")))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail[0]["msg"].startswith(where + ":"), detail
    assert detail[0]["loc"][0] == "body" and isinstance(detail[0]["type"], str)


def test_an_inline_candidate_without_its_passage_is_a_422(hash_server):
    body = reference_body("inline")
    del body["questions"]["candidate_1"]["instructions"]["candidate_passage"]
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["msg"].startswith(
        "questions.candidate_1.instructions.candidate_passage: missing"
    )


@pytest.mark.parametrize(
    "body, where, status",
    [
        (b"not json", "the body is not JSON", 422),
        (b'{"model": "m", "state": "s", "questions": {', "the body is not JSON", 422),
        (b"[1, 2]", "the body must be a JSON object", 422),
        (b"\xff\xfe", "not UTF-8", 422),
        (b'{"model": "m", "state": NaN, "questions": {"q": {"type": "noul"}}}', "NaN is not a JSON value", 422),
        (b'{"model": "m", "state": "s"}', "questions: missing", 422),
        (b'{"model": "m", "questions": {"q": {"type": "noul"}}}', "state: missing", 422),
        (b'{"state": "s", "questions": {"q": {"type": "noul"}}}', "model: missing", 422),
        (b'{"model": "m", "state": null, "questions": {"q": {"type": "noul"}}}', "state: must be a string", 422),
        (b'{"model": "m", "state": "s", "questions": {}}', "questions: must hold at least one", 422),
        (b'{"model": "m", "state": "s", "questions": {"q": {"instructions": "?"}}}', "questions.q.type: missing", 422),
        (b'{"model": "m", "state": "s", "questions": {"q": {"type": "boolean"}}}', "questions.q.type: 'boolean'", 422),
        (
            b'{"model": "m", "state": "s", "questions": {"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}}}',
            "questions.q.criteria: must be an array",
            422,
        ),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply", 422),
    ],
)
def test_malformed_requests_get_a_named_4xx(hash_server, body, where, status):
    r = httpx.post(hash_server.url, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status and r.headers["Content-Type"] == "application/json", r.text
    assert any(where in d["msg"] for d in r.json()["detail"]), r.text


def test_generic_jev_questions_are_answered(hash_server):
    """State as string, object, array; structured text; any ids; unknown fields ignored."""
    questions = {
        "🎯 ticket-1.x": {"type": "noul", "instructions": {"task": "refund?", "include": ["refunds"]}},
        "team": {
            "type": "choice",
            "instructions": ["Route it.", "One team."],
            "criteria": {"Billing": {"owns": ["refunds"]}, "Technical": None, "환불": "돈"},
        },
        "anger": {"type": "score", "instructions": "How angry?", "criteria": ["Calm", {"label": "Angry"}, "Furious"]},
        "bare": {"type": "noul", "criteria": {"false": "no"}},
    }
    # (a state with "task" and "question" whose questions name no candidate is a generic one too)
    for state in ("Charged twice.", {"subject": "Charged", "n": 3}, ["a", "b"], {"task": "triage", "question": "?"}):
        r = httpx.post(hash_server.url, json={"model": "jev-latest", "state": state, "questions": questions, "seed": 7})
        assert r.status_code == 200, r.text
        data = r.json()
        assert set(data) == {"model", "answers", "usage"} and list(data["answers"]) == list(questions)
        assert 0 <= data["answers"]["🎯 ticket-1.x"]["noul"] <= 1
        team = data["answers"]["team"]
        probs = list(team["probabilities"].values())
        assert list(team["probabilities"]) == ["Billing", "Technical", "환불"] and sum(probs) == pytest.approx(1)
        assert team["choice"] == max(team["probabilities"], key=team["probabilities"].get)
        assert team["confidence"] == pytest.approx(choice_confidence(probs))
        anger = data["answers"]["anger"]
        p = [anger["probabilities"][str(i)] for i in range(3)]
        assert anger["legend"] == {"0": "Calm", "1": '{"label":"Angry"}', "2": "Furious"}
        assert anger["score"] == pytest.approx(sum(i * x for i, x in enumerate(p)))
        assert anger["confidence"] == pytest.approx(score_confidence(p)) and sum(p) == pytest.approx(1)


def test_generic_answers_do_not_depend_on_ids_batch_or_order(hash_server):
    one = {"type": "choice", "instructions": "Team?", "criteria": {"Billing": None, "Sales": None}}
    other = {"type": "noul", "instructions": "Urgent?"}

    def ask(questions):
        return httpx.post(hash_server.url, json={"model": "m", "state": "s", "questions": questions}).json()["answers"]

    alone = ask({"a": one})["a"]
    assert ask({"zz renamed": one})["zz renamed"] == alone
    assert ask({"b": other, "a": one})["a"] == alone


def test_models_endpoint_and_error_shapes(hash_server):
    base = hash_server.url.rsplit("/", 1)[0]
    models = httpx.get(base + "/models").json()["models"]
    assert [m["name"] for m in models] == ["jev-latest", "local"]
    assert all(isinstance(m[k], str) for m in models for k in ("name", "description", "release_date"))
    hash_server.add_fault("404").add_fault("429")
    body = reference_body("inline")
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 404 and r.json() == {"detail": {"error_type": "not_found", "message": "injected fault 404"}}
    assert httpx.post(hash_server.url, json=body).json()["detail"]["error_type"] == "rate_limit_error"
    with JudgeServer(make_server_judge("hash", None), require_key="k", model="jev-9") as srv:
        r = httpx.post(srv.url, json=body)
        assert r.status_code == 401 and r.json()["detail"]["error_type"] == "authentication_error"
        ok = httpx.post(srv.url, json=body, headers={"Authorization": "Bearer k"})
        assert ok.status_code == 200 and ok.json()["model"] == "jev-9"
        assert [m["name"] for m in httpx.get(srv.url.rsplit("/", 1)[0] + "/models").json()["models"]] == ["jev-9"]


# ---- the data-hash judge -------------------------------------------------------------------------
@pytest.fixture
def data_hash_server():
    srv = JudgeServer(make_server_judge("data-hash", None)).start()
    yield srv
    srv.stop()


def _answers(srv, body):
    r = httpx.post(srv.url, json=body)
    assert r.status_code == 200, r.text
    return r.json()["answers"]


def test_data_hash_reads_the_data_not_the_wording(data_hash_server):
    for style in ("inline", "stateful"):
        base = _answers(data_hash_server, reference_body(style))
        # other instruction wording, other notes and criteria, other question ids: the same answers
        reworded = reference_body(style, ask="Another wording entirely.")
        reworded["questions"] = {f"q{i}": q for i, q in enumerate(reworded["questions"].values())}
        state = _state(reworded)
        state["candidate_criteria"] = {"true": "x", "false": "y"} if style == "stateful" else None
        reworded = _with_state(reworded, **state)
        assert list(_answers(data_hash_server, reworded).values()) == list(base.values())
        # the data: the question, the evidence's title, passage and previous score (at full precision)
        for changed in (
            reference_body(style, question=QUESTION + " "),
            reference_body(style, context=[{**CONTEXT[0], "previous_score": PREVIOUS + 1e-15}]),
            reference_body(style, context=[{**CONTEXT[0], "text": "The Vell flows past Brask."}]),
            reference_body(style, context=[]),
        ):
            got = _answers(data_hash_server, changed)
            assert all(got[k] != base[k] for k in base), style


@pytest.mark.slow
def test_data_hash_stateful_depends_on_the_batch_and_position_inline_does_not(data_hash_server):
    first = CANDIDATES[:1]
    key = "candidate_0"
    alone = {s: _answers(data_hash_server, reference_body(s, candidates=first))[key] for s in ("inline", "stateful")}
    in_batch = {s: _answers(data_hash_server, reference_body(s))[key] for s in ("inline", "stateful")}
    last = {
        s: _answers(data_hash_server, reference_body(s, candidates=CANDIDATES[::-1]))[key]
        for s in ("inline", "stateful")
    }
    assert alone["inline"] == in_batch["inline"] == last["inline"]
    assert len({alone["stateful"]["noul"], in_batch["stateful"]["noul"], last["stateful"]["noul"]}) == 3
    assert alone["inline"] != alone["stateful"]
    # what our client sends for the same data gets the same answers
    for style in ("inline", "stateful"):
        ours = _answers(data_hash_server, jev.build_request("m", QUESTION, CANDIDATES, CONTEXT, style))
        assert list(ours.values()) == list(_answers(data_hash_server, reference_body(style)).values())


def test_data_hash_in_process_equals_served():
    sag = read_request(reference_body("stateful")).sag
    assert sag is not None and sag.positions == [1, 2, 3] and len(sag.batch) == 3
    judge = DataHashJudge()
    assert judge.judge_sag(sag) != judge.judge(sag.question, sag.candidates, sag.context)
    with pytest.raises(RequestError, match=re.escape("state.candidate_passages: missing")):
        read_request(_with_state(reference_body("stateful"), candidate_passages=None))


# ---- served judges, faults, CLI ------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, test_only",
    [("hash", comparison_judges.hash_judge), ("hash-context-free", comparison_judges.hash_judge_context_free)],
)
def test_the_built_in_hash_judges_score_as_the_comparison_judges(name, test_only):
    """The server's own copies (an installed server has no tests folder) give the same floats."""
    served = make_server_judge(name, None)
    for context in (
        [],
        CONTEXT,
        [{**CONTEXT[0], "previous_score": None}, {"title": "Ardmore", "previous_score": 0.25}],
    ):
        for question in ("Which town is on the Vell?", "Wer wohnt in Köln?"):
            assert served.judge(question, CANDIDATES, context) == test_only(question, CANDIDATES, context)


def test_lexical_judge_over_http_equals_in_process(tmp_path):
    units = [Unit(c["title"], "", c["text"], c["title"], "inline", "") for c in CANDIDATES + CONTEXT]
    index = Index.build(units, tmp_path / "i.sqlite")
    with pytest.raises(JudgeError, match="needs an index: --db DB"):
        make_server_judge("lexical", None)
    with JudgeServer(make_server_judge("lexical", str(index.path))) as srv:
        got = _answers(srv, reference_body("stateful"))
        generic = _answers(
            srv,
            {
                "model": "m",
                "state": "Ardmore lies on the Vell.",
                "questions": {"q": {"type": "noul", "instructions": "Ardmore?"}},
            },
        )
    expected = LexicalJudge(index).judge(QUESTION, CANDIDATES, CONTEXT)
    assert [got[f"candidate_{i}"]["noul"] for i in range(3)] == pytest.approx(expected)
    passage = [{"unit_id": 1, "title": "", "text": "Ardmore lies on the Vell.", "document": ""}]
    assert generic["q"]["noul"] == pytest.approx(LexicalJudge(index).judge("Ardmore?", passage, [])[0])


def test_faults_apply_in_order_then_normal_service(hash_server):
    hash_server.add_fault("429", retry_after=2).add_fault("503").add_fault("malformed")
    body = reference_body("inline")
    r1 = httpx.post(hash_server.url, json=body)
    assert r1.status_code == 429 and r1.headers["Retry-After"] == "2"
    assert httpx.post(hash_server.url, json=body).status_code == 503
    r3 = httpx.post(hash_server.url, json=body)
    assert r3.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r3.json()
    assert httpx.post(hash_server.url, json=body).json()["answers"]["candidate_0"]["type"] == "noul"
    assert httpx.get(hash_server.url).json()["requests"] == 4
    with pytest.raises(ValueError, match="expected one of"):
        hash_server.add_fault("teapot")


def test_a_failing_judge_is_a_500_not_a_traceback():
    def broken(q, c, x):
        raise RuntimeError("boom")

    with JudgeServer(FunctionJudge(broken, name="broken")) as srv:
        r = httpx.post(srv.url, json=reference_body("inline"))
    assert r.status_code == 500 and r.json()["detail"] == {
        "error_type": "internal_error",
        "message": "judge failed: RuntimeError: boom",
    }


def test_fault_specs():
    assert parse_fault("500x5") == ("500", 5, {})
    assert parse_fault("429:1.5") == ("429", 1, {"retry_after": 1.5})
    assert parse_fault("slow:3x2") == ("slow", 2, {"delay": 3.0})
    assert parse_fault("out-of-range") == ("out-of-range", 1, {})
    with pytest.raises(ValueError, match="unknown kind"):
        parse_fault("boom")
    with pytest.raises(ValueError, match="expected KIND"):
        parse_fault("500xmany")
    assert {"429", "500", "slow", "malformed", "missing", "out-of-range", "401"} <= set(FAULTS)


def test_cannot_serve_jev_or_oracle():
    for spec in ("jev", "oracle"):
        with pytest.raises(JudgeError, match="cannot serve"):
            make_server_judge(spec, None)


def test_cli_parser_accepts_server_options():
    from workbench.cli.main import build_parser

    args = build_parser().parse_args(
        [
            "judge-server",
            "--judge",
            "data-hash",
            "--port",
            "0",
            "--delay-ms",
            "200",
            "--fault",
            "429:1",
            "--fault",
            "500x5",
        ]
    )
    assert isinstance(args, Namespace) and args.delay_ms == 200 and args.fault == ["429:1", "500x5"]
    assert isinstance(make_server_judge(args.judge, None), DataHashJudge)


def test_answers_leave_without_waiting_for_nagle():
    """Headers and body are two writes: with Nagle on, the body waited for the client's
    delayed ACK (~18 ms per request measured; a 100-question JEV run went from 20.8 s to
    9.4 s against a zero-delay server once it was off)."""
    import socket

    from workbench.judges.jev.server import _Handler

    assert _Handler.disable_nagle_algorithm is True
    with JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half")) as srv:
        handlers = []
        original = _Handler.setup

        def spy(self):
            original(self)
            handlers.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        _Handler.setup = spy
        try:
            assert httpx.post(srv.url, json=reference_body("stateful", candidates=CANDIDATES[:1])).status_code == 200
        finally:
            _Handler.setup = original
    assert handlers and handlers[0] != 0
