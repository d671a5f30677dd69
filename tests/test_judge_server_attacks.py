"""Issue 34, the judge server's side: every request gets an answer, a status and the error shape,
never a dropped connection, a traceback or a guess. A real `sag2wb judge-server` process on
127.0.0.1 and raw sockets (docs/reliability-judges.md lists every case)."""

from __future__ import annotations

import json
import selectors
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.conftest import REPO
from workbench.judges import jev
from workbench.judges.jev.server_limits import MAX_JUDGE_CALLS, MAX_JUDGED_CHARACTERS

READ_TIMEOUT = 1.0  # seconds: --read-timeout of the server under test


@pytest.fixture(scope="module")
def server():
    """`sag2wb judge-server --judge data-hash` (it hashes every text it is sent) with a 1 s read timeout."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "judge-server",
            "--judge",
            "data-hash",
            "--port",
            "0",
            "--read-timeout",
            str(READ_TIMEOUT),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    banner = proc.stdout.readline()
    assert "serving judge 'data-hash' at http://127.0.0.1:" in banner, banner + proc.stderr.read()
    yield int(banner.split("http://127.0.0.1:")[1].split("/")[0])
    proc.terminate()
    stderr = proc.communicate(timeout=30)[1]
    assert "Traceback" not in stderr and "failed:" not in stderr, stderr  # no handler error, whatever was sent


def exchange(port: int, data: bytes, guard: float = 30.0) -> bytes:
    """Send raw bytes on a new connection, then read until the server closes (`guard` only stops a hang)."""
    with socket.create_connection(("127.0.0.1", port), timeout=guard) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


def answers(raw: bytes) -> list[tuple[int, dict]]:
    """Every (status, JSON body) in a stream of HTTP/1.1 answers; a body that is not JSON fails the test."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        assert headers["content-type"] == "application/json", head
        out.append((int(lines[0].split()[1]), json.loads(rest[:length])))
        raw = rest[length:]
    return out


def post(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )


def state_text(**fields) -> str:
    state = {"original_question": "Who directed Glass Harbour?", "previously_retrieved_evidence": []}
    state["candidate_passages"] = {"1": {"title": "Glass Harbour", "passage": "A film."}}
    return json.dumps({**state, **fields})


NOUL = '{"type": "noul", "instructions": {"question": "Needed?", "candidate_number": 1}}'


def body_with(state: str, questions: str = '{"candidate_1": ' + NOUL + "}") -> bytes:
    return ('{"model": "m", "state": ' + json.dumps(state) + ', "questions": ' + questions + "}").encode()


def workbench_body(reference: str) -> bytes:
    state = {"task": "t", "question": "q", "candidates": [{"number": 1, "title": "T", "text": "x"}]}
    question = {"type": "noul", "instructions": "Needed?\n" + reference}
    return json.dumps({"model": "m", "state": state, "questions": {"c1": question}}).encode()


DIGITS_5000 = "9" * 5000
LONE = "\\ud800"  # a JSON escape of half a surrogate pair
MALFORMED = {
    # Python's int-digit limit raised inside the JSON reader: the connection closed with no answer
    "5000-digit integer": (
        b'{"model": "m", "state": "s", "questions": {"q": {"type": "noul", "n": ' + DIGITS_5000.encode() + b"}}}",
        ["body"],
        "the body holds an integer of 5000 digits",
    ),
    "5000-digit integer in the state string": (
        body_with(state_text()[:-1] + ', "n": ' + DIGITS_5000 + "}"),
        ["body", "state"],
        "state: holds an integer of 5000 digits",
    ),
    # a state string that opens an object but is not JSON was judged as plain text (guessed data)
    "state string that is malformed JSON": (
        body_with(state_text()[:-40]),
        ["body", "state"],
        "state: is not JSON",
    ),
    "state string nested too deeply": (
        body_with('{"original_question": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ["body", "state"],
        "state: is JSON nested too deeply",
    ),
    # json keeps the last of two equal keys: a repeated question id got one silent answer
    "question id repeated": (
        body_with(state_text(), '{"candidate_1": ' + NOUL + ', "candidate_1": ' + NOUL + "}"),
        ["body", "questions", "candidate_1"],
        "questions.candidate_1: is named twice in one object",
    ),
    "key repeated in the state string": (
        body_with(state_text()[:-1] + ', "original_question": "Who wrote it?"}'),
        ["body", "state", "original_question"],
        "state.original_question: is named twice",
    ),
    "top-level key repeated": (
        b'{"model": "m", "model": "n", "state": "s", "questions": {"q": {"type": "noul"}}}',
        ["body", "model"],
        "model: is named twice",
    ),
    # a lone surrogate cannot be encoded to UTF-8: it was a 500 "judge failed"
    "lone surrogate in a passage": (
        body_with(
            state_text(),
            '{"c": {"type": "noul", "instructions": {"question": "?", "candidate_title": "T", '
            '"candidate_passage": "A ' + LONE + ' film."}}}',
        ),
        ["body", "questions", "c", "instructions", "candidate_passage"],
        "questions.c.instructions.candidate_passage: holds a lone UTF-16 surrogate",
    ),
    "lone surrogate in the state string": (
        body_with(state_text(original_question="Who " + LONE + "?").replace("\\\\ud800", "\\ud800")),
        ["body", "state", "original_question"],
        "state.original_question: holds a lone UTF-16 surrogate",
    ),
    "lone surrogate in a key": (
        b'{"model": "m", "state": "s", "questions": {"' + LONE.encode() + b'": {"type": "noul"}}}',
        ["body", "questions"],
        "questions: a key holds a lone UTF-16 surrogate",
    ),
    # float() of a 400-digit integer overflows: it was a 500 "judge failed"
    "400-digit previous_jev_score": (
        body_with(
            state_text(previously_retrieved_evidence=[{"title": "t", "passage": "p", "previous_jev_score": 10**400}])
        ),
        ["body", "state", "previously_retrieved_evidence", 0, "previous_jev_score"],
        "previous_jev_score: must be a finite number, not an integer of 401 digits",
    ),
    "number out of a float's range": (
        b'{"model": "m", "state": {"x": 1e400}, "questions": {"q": {"type": "noul"}}}',
        ["body"],
        "the body is not JSON: the number 1e400 is out of a float's range",
    ),
    "NaN in the state string": (
        body_with(state_text()[:-1] + ', "candidate_question": NaN}'),
        ["body", "state"],
        "state: is not JSON: NaN is not a JSON value",
    ),
    # a list where the workbench layout's candidate reference is meant: unhashable, a 500
    "list where a candidate reference is meant": (
        workbench_body('{"candidate": [1]}'),
        ["body", "questions", "c1", "instructions"],
        'its last line names "candidate" an array, not a number',
    ),
    "candidate number of 5000 digits": (
        body_with(state_text(candidate_passages={DIGITS_5000: {"title": "T", "passage": "x"}})),
        ["body", "state", "candidate_passages", DIGITS_5000],
        "a candidate's key must be its number",
    ),
    "null where an evidence item is meant": (
        body_with(state_text(previously_retrieved_evidence=[None])),
        ["body", "state", "previously_retrieved_evidence", 0],
        "must be an object, not null",
    ),
    "null where the questions are meant": (
        b'{"model": "m", "state": "s", "questions": null}',
        ["body", "questions"],
        "questions: must be an object of questions, not null",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_body_it_cannot_read_rightly_is_a_422_naming_where(server, name):
    body, loc, says = MALFORMED[name]
    [(status, data)] = answers(exchange(server, post(body)))
    assert status == 422, data
    assert [d["loc"] for d in data["detail"]] == [loc] and says in data["detail"][0]["msg"], data
    assert data["detail"][0]["type"] in ("json_invalid", "int_type", "float_type", "int_parsing", "dict_type")


HTTP_ERRORS = {
    "not a request line": (b"GARBAGE\r\n\r\n", [400]),
    "another method": (b"PUT /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", [405]),
    "an unknown HTTP version": (b"POST /v1/systemone HTTP/9.9\r\nHost: x\r\n\r\n", [505]),
    "a request line over 64 KiB": (b"GET /" + b"x" * (65_537 - 5), [414]),  # all read: no reset
    "over 100 headers": (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n", [431]),
    # a Content-Length shorter than the body: the rest is read as the next request
    "a Content-Length too short": (
        b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}and the rest\r\n\r\n",
        [422, 400],
    ),
}


@pytest.mark.parametrize("name", list(HTTP_ERRORS))
def test_http_level_errors_are_answered_in_the_error_shape(server, name):
    """http.server's own errors were an HTML page (and 501 for another method)."""
    data, statuses = HTTP_ERRORS[name]
    got = answers(exchange(server, data))
    assert [status for status, _ in got] == statuses, got
    for status, body in got:
        detail = body["detail"]
        if status == 422:
            assert detail[0]["loc"][:1] == ["body"]
        else:
            assert isinstance(detail["error_type"], str) and isinstance(detail["message"], str), body


def trickle(port: int, head: bytes, data: bytes, connections: int, gap: float) -> list[tuple[bytes, int]]:
    """Open `connections` connections at once, send `head` on each, then `data` one byte every `gap`
    seconds until the server answers; returns each connection's (answer, bytes of `data` it had sent)."""
    sel = selectors.DefaultSelector()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(connections)]
    for s in socks:
        s.sendall(head)
    sent = dict.fromkeys(socks, 0)
    answer = dict.fromkeys(socks, b"")
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    open_ = set(socks)
    while open_:
        for key, _ in sel.select(timeout=gap):
            s = key.fileobj
            chunk = s.recv(65536)
            answer[s] += chunk
            if not chunk:
                sel.unregister(s)
                open_.discard(s)
        for s in list(open_):
            if answer[s] or sent[s] == len(data):
                continue
            try:
                s.sendall(data[sent[s] : sent[s] + 1])
                sent[s] += 1
            except OSError:
                pass
        if all(sent[s] == len(data) for s in open_):
            break  # the whole request went out: the server never stopped the trickle
    for s in socks:
        s.close()
    return [(answer[s], sent[s]) for s in socks]


GENERIC = b'{"model": "m", "state": "s", "questions": {"q": {"type": "noul"}}}'
SLOW = {  # (sent at once, trickled)
    "the request line": (b"", b"POST /v1/systemone?" + b"x" * 60 + b" HTTP/1.1\r\n\r\n"),
    "the headers": (b"", b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"x" * 60 + b"\r\n\r\n"),
    "the body": (post(GENERIC + b" " * 60)[: -len(GENERIC) - 60], GENERIC + b" " * 60),
}


@pytest.mark.slow
@pytest.mark.parametrize("part", list(SLOW))
def test_a_request_trickled_in_gets_a_408_at_the_deadline(server, part):
    """Slowloris: 20 connections each sending a byte every 0.25 s (a 1 s per-read timeout never
    fires) get a 408 at the 1 s whole-request deadline, long before their request (60+ bytes, 15+ s)
    is sent; a request on another connection is answered meanwhile."""
    head, data = SLOW[part]
    ok: list[httpx.Response] = []

    def one_ordinary_request():
        time.sleep(0.3)  # once the trickles have begun
        ok.append(httpx.post(f"http://127.0.0.1:{server}/v1/systemone", content=GENERIC, timeout=30))

    t = threading.Thread(target=one_ordinary_request)
    t.start()
    results = trickle(server, head, data, connections=20, gap=0.25)
    t.join()
    assert ok and ok[0].status_code == 200  # served while 20 connections trickled
    for answer, sent in results:
        assert sent < len(data), "the whole request was sent: no deadline"
        [(status, body)] = answers(answer)
        assert status == 408 and body["detail"]["error_type"] == "request_timeout", body
        assert f"did not arrive within {READ_TIMEOUT:g} s (--read-timeout)" in body["detail"]["message"]


@pytest.mark.slow
def test_ten_thousand_candidates_are_answered_within_the_client_timeout(server):
    """Stateful: the data-hash judge hashed the whole batch once per candidate (157 s for 10,000
    measured; the client gives up at 60 s). Now the batch is hashed once."""
    cands = [{"unit_id": i, "title": f"T{i}", "text": f"Passage {i} on the Vell."} for i in range(10_000)]
    body = jev.build_request("m", "Which town is on the Vell?", cands, [], "stateful")
    r = httpx.post(f"http://127.0.0.1:{server}/v1/systemone", json=body, timeout=60)
    assert r.status_code == 200 and len(r.json()["answers"]) == 10_000


@pytest.mark.parametrize(
    "state, questions, says",
    [
        ("s", MAX_JUDGE_CALLS + 1, f"limit of {MAX_JUDGE_CALLS} per request"),
        ("x" * 1_000_000, MAX_JUDGED_CHARACTERS // 1_000_000 + 1, f"limit of {MAX_JUDGED_CHARACTERS} per request"),
    ],
)
@pytest.mark.slow
def test_a_generic_request_over_the_work_limit_is_a_413_saying_the_limit(server, state, questions, says):
    """A generic question is judged with the whole state as its passage: the cost is calls x state."""
    body = {"model": "m", "state": state, "questions": {f"q{i}": {"type": "noul"} for i in range(questions)}}
    r = httpx.post(f"http://127.0.0.1:{server}/v1/systemone", json=body, timeout=60)
    assert r.status_code == 413 and r.json()["detail"]["error_type"] == "request_too_large", r.text
    assert says in r.json()["detail"]["message"]
