"""The local Noul-compatible server: wire format, served judges, fault specs, bad requests."""

from __future__ import annotations

import json
from argparse import Namespace

import httpx
import pytest

from tests import comparison_judges
from tests.comparison_judges import hash_judge
from workbench.index.corpora import Unit
from workbench.index.store import Index
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.server import FAULTS, JudgeServer, make_server_judge, parse_fault
from workbench.judges.lexical import LexicalJudge
from workbench.judgment import JudgeError

CANDIDATES = [
    {"unit_id": i, "title": t, "text": f"{t} lies on the river Vell.", "document": t}
    for i, t in enumerate(["Ardmore", "Brask", "Coln"])
]
CONTEXT = [{"unit_id": 10, "title": "Vell", "text": "The Vell flows past Ardmore.", "previous_score": 0.8}]


@pytest.fixture
def hash_server():
    srv = JudgeServer(make_server_judge("hash", None)).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_serves_the_hash_judge_over_the_wire_format(hash_server, style):
    body = jev.build_request("local-model", "Which town is on the Vell?", CANDIDATES, CONTEXT, style)
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 200
    data = r.json()
    assert data["model"] == "local-model" and set(data["answers"]) == {"c1", "c2", "c3"}
    assert all(a["type"] == "noul" for a in data["answers"].values())
    expected = hash_judge("Which town is on the Vell?", CANDIDATES, CONTEXT)
    assert [data["answers"][k]["noul"] for k in ("c1", "c2", "c3")] == pytest.approx(expected)
    assert data["usage"]["input_tokens"] == jev.estimate_request_tokens(body) and data["usage"]["output_tokens"] == 3


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
        body = jev.build_request("m", "Which town is on the Vell?", CANDIDATES, [{**CONTEXT[0]}], "stateful")
        got = httpx.post(srv.url, json=body).json()["answers"]
    expected = LexicalJudge(index).judge("Which town is on the Vell?", CANDIDATES, CONTEXT)
    assert [got[k]["noul"] for k in ("c1", "c2", "c3")] == pytest.approx(expected)


def test_bad_requests_get_400_naming_the_problem(hash_server):
    r = httpx.post(hash_server.url, content=b"not json")
    assert r.status_code == 400
    r = httpx.post(hash_server.url, json={"model": "m", "state": {"question": "q"}, "questions": {}})
    assert r.status_code == 400 and '"questions" must be a non-empty JSON object' in r.json()["error"]
    body = jev.build_request("m", "q", CANDIDATES[:1], [], "stateful")
    body["state"]["candidates"] = []
    r = httpx.post(hash_server.url, json=body)
    assert r.status_code == 400 and "candidate 1 is not in state.candidates" in r.json()["error"]
    assert httpx.get(hash_server.url).json()["requests"] == 3


def test_faults_apply_in_order_then_normal_service(hash_server):
    hash_server.add_fault("429", retry_after=2).add_fault("503").add_fault("malformed")
    body = jev.build_request("m", "q", CANDIDATES[:1], [], "inline")
    r1 = httpx.post(hash_server.url, json=body)
    assert r1.status_code == 429 and r1.headers["Retry-After"] == "2"
    assert httpx.post(hash_server.url, json=body).status_code == 503
    r3 = httpx.post(hash_server.url, json=body)
    assert r3.status_code == 200 and pytest.raises(json.JSONDecodeError, r3.json)
    assert httpx.post(hash_server.url, json=body).json()["answers"]["c1"]["type"] == "noul"
    with pytest.raises(ValueError, match="expected one of"):
        hash_server.add_fault("teapot")


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
        ["judge-server", "--judge", "hash", "--port", "0", "--delay-ms", "200", "--fault", "429:1", "--fault", "500x5"]
    )
    assert isinstance(args, Namespace) and args.delay_ms == 200 and args.fault == ["429:1", "500x5"]


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
            body = jev.build_request("m", "q", CANDIDATES[:1], [], "stateful")
            assert httpx.post(srv.url, json=body).status_code == 200
        finally:
            _Handler.setup = original
    assert handlers and handlers[0] != 0
