"""A local Jev-compatible server that answers with any workbench judge, with injectable faults.

    sag2wb judge-server --judge lexical --db 2wiki.sqlite --port 8765
    sag2wb judge-server --judge data-hash                   # answers: a hash of each candidate's data
    sag2wb judge-server --judge hash --delay-ms 200 --fault 429 --fault 500x5

>>> from workbench.judges import LexicalJudge
>>> from workbench.judges.jev import make_jev_judge
>>> server = JudgeServer(LexicalJudge(enc_index)).start()     # 127.0.0.1, a free port
>>> _ = server.add_fault("429", retry_after=0.1)              # the next request gets a 429
>>> judge = make_jev_judge(endpoint=server.url, cache_dir=tmp / "jev-cache")
>>> judge.judge("Who directed Glass Harbour?", [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."}], [])
[0.69163...]
>>> judge.usage()["retries"], server.requests               # the 429, then the answer
(1, 2)
>>> judge.close(); server.stop()

It accepts any Jev-valid request (`reading.read_request`: state a string, object or array,
structured instructions, any question ids, unknown fields ignored) on any path, answers noul,
choice and score questions (`served`: what a workbench judge means for each), lists its
model at `GET /v1/models`, and refuses an invalid body with 422 `{"detail": [{"loc", "msg",
"type"}]}` naming the field (other errors: `{"detail": {"error_type", "message"}}`). A request
in a SAG2 layout (the authors' client's, or the workbench's first one) is judged as (question,
candidates, context). It ignores the Authorization header unless `require_key` is set, and
never logs or stores it.

Under abuse (docs/reliability-judges.md): a listen backlog of 1024 (many new connections at
once wait instead of failing), a maximum body (413), a Content-Length that is missing (411),
not a number (400) or over the maximum (413, the body is never read), a whole-request read
deadline (headers and body within --read-timeout, however slowly they trickle: 408, then the
connection is closed), a bound on one generic request's judging (413, `server_limits`), every
HTTP-level error (a bad request line, too many headers, another method) in the error shape, and
no request body kept after its answer. A port in use or out of range is a JudgeServerError (one
line, exit 2).
"""

from __future__ import annotations

import errno
import io
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

from workbench.index import Index
from workbench.judges.base import FunctionJudge, check_timeout
from workbench.judges.jev.payload import estimate_tokens
from workbench.judges.jev.reading import RequestError, parse_json, read_request
from workbench.judges.jev.served import DataHashJudge, answer_generic, judge_sag, unit_float
from workbench.judges.jev.server_limits import DeadlineReader, RequestDeadline, TooMuchWork, generic_work_problem
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.safeio import InputError

LISTEN_BACKLOG = 1024  # the default of 5 drops a third of 200 simultaneous new connections (issue 10)
DEFAULT_MAX_BODY = 16 * 2**20  # bytes; a full 32k-token request is well under 1 MiB
DEFAULT_READ_TIMEOUT = 30.0  # seconds a client may take to send a request (and to idle between requests)
_DIGITS = re.compile(r"[0-9]{1,20}")


class JudgeServerError(JudgeError, InputError):
    """The server cannot start: port in use or out of range, host not available (exit 2)."""


# ---- built-in judges for load tests: no index, no model, deterministic ---------------------------
# The same scores as tests/comparison_judges.py's judges of the same names (test_judge_server
# checks that they agree), kept here so that an installed server needs no checkout.
_unit_float = unit_float  # sha256, 53 bits: exact on every platform


def hash_judge(question: str, candidates: list[dict], context: list[dict]) -> list[float]:
    """Pseudo-random scores that depend on the context's titles and previous scores."""
    context_key = "|".join(f"{item['title']}={item.get('previous_score')!r}" for item in context)
    return [_unit_float(question, c["title"], context_key) for c in candidates]


def hash_judge_context_free(question: str, candidates: list[dict], context: list[dict]) -> list[float]:
    """The same, ignoring the context."""
    return [_unit_float(question, c["title"]) for c in candidates]


HASH_JUDGES = {"hash": hash_judge, "hash-context-free": hash_judge_context_free}
SERVED_JUDGES = ("data-hash", *HASH_JUDGES)  # served without an index (and lexical, semantic, ... with one)

# What each fault does to one request (see `add_fault`).
FAULTS = {
    "429": "HTTP 429 with Retry-After (retry_after seconds, default 0)",
    "408": "HTTP 408",
    "499": "HTTP 499",
    "500": "HTTP 500",
    "502": "HTTP 502",
    "503": "HTTP 503",
    "400": "HTTP 400",
    "404": "HTTP 404",
    "401": "HTTP 401 (bad key)",
    "403": "HTTP 403 (key lacks access)",
    "slow": "answer correctly after `delay` seconds (default 5): past a short client timeout",
    "disconnect": "close the connection without answering",
    "malformed": "HTTP 200 with a body that is not JSON",
    "missing": "HTTP 200 with the last question's answer left out",
    "out-of-range": "HTTP 200 with the first answer 1.5",
    "wrong-type": "HTTP 200 with the first answer of type 'choice'",
}


_FAULT_ERROR_TYPES = {
    "408": "request_timeout",
    "499": "client_closed_request",
    "500": "internal_error",
    "502": "bad_gateway",
    "503": "overloaded_error",
    "400": "invalid_request_error",
    "404": "not_found",
    "401": "authentication_error",
    "403": "permission_error",
}


@dataclass
class Fault:
    kind: str
    retry_after: float | None = None
    delay: float = 5.0


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def handle_error(self, request, client_address):
        """One line on stderr instead of socketserver's traceback (a handler bug, not the client's)."""
        exc = sys.exc_info()[1]
        print(f"judge-server: request from {client_address[0]} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def _bind(host: str, port, handler) -> _Server:
    """The listening server, or a JudgeServerError saying why not (one line, what to do)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise JudgeServerError(f"--port {port}: expected 0-65535 (0: any free port)")
    try:
        return _Server((host, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise JudgeServerError(
                f"--port {port}: already in use on {host} (another judge-server?); stop it, "
                f"choose another --port, or --port 0 for any free port"
            ) from None
        if exc.errno == errno.EACCES:
            raise JudgeServerError(
                f"--port {port}: not allowed on {host} (ports below 1024 need privileges); "
                f"choose a port from 1024 to 65535"
            ) from None
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            raise JudgeServerError(
                f"--host {host}: cannot listen there ({exc.strerror or exc}); "
                f"use 127.0.0.1 or an address of this machine"
            ) from None
        raise JudgeServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class JudgeServer:
    """A ThreadingHTTPServer on `host:port` (port 0: a free one) serving `judge` over HTTP."""

    def __init__(
        self,
        judge,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        delay: float = 0.0,
        model: str | None = None,
        require_key: str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        keep_bodies: int = 0,
    ):
        self.judge = judge
        self.max_body = int(max_body)
        self.keep_bodies = int(keep_bodies)
        self.delay = float(delay)
        self.model = model
        self._require_key = require_key
        self.faults: deque[Fault] = deque()
        self.lock = threading.Lock()
        self.requests = 0  # POSTs received (including faulted ones)
        self.questions = 0  # questions answered successfully
        # the last `keep_bodies` parsed request bodies, for tests (never headers); none by default,
        # so a long-running server's memory does not grow with what it was sent
        self.bodies: deque[dict] = deque(maxlen=self.keep_bodies)
        self.request_received = threading.Event()
        self.started = time.strftime("%Y-%m-%d", time.gmtime())
        server = self

        class Handler(_Handler):
            owner = server
            timeout = read_timeout  # StreamRequestHandler puts it on the socket: half-sent requests end

        self.httpd = _bind(host, port, Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        host = cast(str, self.httpd.server_address[0])  # an AF_INET(6) server: the host is a str
        return f"http://{host}:{self.port}/v1/systemone"

    def add_fault(
        self, kind: str, times: int = 1, *, retry_after: float | None = None, delay: float = 5.0
    ) -> JudgeServer:
        """Queue a fault for the next `times` requests (faults apply in the order queued)."""
        if kind not in FAULTS:
            raise ValueError(f"fault {kind!r}: expected one of {', '.join(FAULTS)}")
        with self.lock:
            for _ in range(times):
                self.faults.append(Fault(kind, retry_after, delay))
        return self

    def start(self) -> JudgeServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="judge-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def answer(self, body: dict) -> dict:
        """Judge a parsed request body; a RequestError (a ValueError) names what is wrong with it, a
        TooMuchWork says which limit a generic request is over."""
        request = read_request(body)
        sag = request.sag
        if sag is not None:
            answers = {k: {"type": "noul", "noul": s} for k, s in zip(sag.keys, judge_sag(self.judge, sag))}
        else:
            problem = generic_work_problem(request.state, request.questions)
            if problem is not None:
                raise TooMuchWork(problem)
            answers = answer_generic(self.judge, request.state, request.questions)
        usage = {
            "input_tokens": estimate_tokens(
                json.dumps(
                    {"state": body["state"], "questions": body["questions"]}, ensure_ascii=False, separators=(",", ":")
                )
            ),
            "output_tokens": len(answers),
            "cost": 0.0,
        }
        return {"model": self.model or request.model or "local", "answers": answers, "usage": usage}

    def models(self) -> dict:
        """`GET /v1/models`: the model this server answers as (the request's own name, echoed, unless
        `model` is set), described by the judge it serves."""
        about = f"sag2wb judge-server serving the workbench judge {getattr(self.judge, 'name', 'judge')!r}"
        names = [self.model] if self.model else ["jev-latest", "local"]
        return {"models": [{"name": n, "description": about, "release_date": self.started} for n in names]}


# HTTP-level errors (http.server's send_error: a bad request line, too many headers, ...) in the Jev shape
_HTTP_ERROR_TYPES = {
    408: "request_timeout",
    413: "request_too_large",
    414: "request_too_large",
    431: "request_too_large",
}


class _Handler(BaseHTTPRequestHandler):
    owner: JudgeServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: with Nagle, the body waited ~20-40 ms for an ACK

    def log_message(self, format, *args):  # quiet: tests and benchmarks read the counters instead
        pass

    def setup(self):
        """The connection's reads go through a DeadlineReader: a whole request (request line, headers,
        body) must arrive within the read timeout, however slowly it trickles in."""
        super().setup()
        self.rfile.close()  # the plain reader http.server made (the socket stays open)
        self.reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self):
        self.reader.start(self.timeout)  # idle time before a keep-alive request counts too
        before = self.reader.received
        self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""  # until parse_request
        try:
            super().handle_one_request()
        except RequestDeadline:  # the request line or headers did not arrive in time
            self.close_connection = True
            if self.reader.received > before:  # part of a request came: say why it is not answered
                self._error(
                    408,
                    "request_timeout",
                    f"the request's headers did not arrive within {self.timeout:g} s (--read-timeout)",
                    close=True,
                )
        except OSError:  # the client reset the connection mid-request: nobody to answer
            self.close_connection = True

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors (400 bad request line, 414, 431, 501 another method) in the Jev
        error shape instead of its HTML page; a method other than GET and POST is a 405."""
        code = int(code)
        if self.request_version == "HTTP/0.9":  # not a request line at all: answer with a status line anyway
            self.request_version = "HTTP/1.1"
        if code == 501:
            code, message = 405, f"method {self.command} is not served: POST a request (GET /v1/models)"
            return self._error(code, "invalid_request_error", message, {"Allow": "GET, POST"}, close=True)
        short = self.responses.get(code, ("error",))[0]
        text = message if message and message != short else f"{short} ({code})"
        self._error(code, _HTTP_ERROR_TYPES.get(code, "invalid_request_error"), text, close=True)

    def _send(self, status: int, payload, headers: dict | None = None, *, close: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        if close:  # the request's body was not (fully) read: the connection cannot carry another request
            self.close_connection = True
            headers = {**(headers or {}), "Connection": "close"}
        try:
            self.connection.settimeout(self.timeout)  # the read deadline may have left it near 0
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout, cancel, reset)
            self.close_connection = True

    def _error(self, status: int, error_type: str, message: str, headers: dict | None = None, *, close=False) -> None:
        """An error in the Jev shape, {"detail": {"error_type", "message"}}."""
        self._send(status, {"detail": {"error_type": error_type, "message": message}}, headers, close=close)

    def _invalid(self, detail: list[dict]) -> None:
        """A body that is not a valid request: 422 {"detail": [{"loc": ["body", ...], "msg", "type"}]}."""
        self._send(422, {"detail": detail})

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering 400/408/411/413 (and closing)."""
        server = self.owner
        if self.headers.get("Transfer-Encoding"):
            self._error(
                411,
                "invalid_request_error",
                "send the body with a Content-Length (chunked bodies are not accepted)",
                close=True,
            )
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            self._error(411, "invalid_request_error", "a POST needs a Content-Length header", close=True)
            return None
        text = values[0].strip()
        if len(set(v.strip() for v in values)) > 1 or not _DIGITS.fullmatch(text):
            shown = ", ".join(repr(v[:30]) for v in values)
            self._error(400, "invalid_request_error", f"Content-Length {shown} is not one number of bytes", close=True)
            return None
        length = int(text)
        if length > server.max_body:
            self._error(
                413,
                "request_too_large",
                f"a body of {length} bytes is over this server's limit of {server.max_body} bytes (--max-body-mb)",
                close=True,
            )
            return None
        try:
            raw = self.rfile.read(length)
        except (RequestDeadline, TimeoutError):
            self._error(
                408,
                "request_timeout",
                f"the body did not arrive within {self.timeout:g} s (--read-timeout)",
                close=True,
            )
            return None
        except OSError:
            self.close_connection = True
            return None
        if len(raw) < length:
            self._error(400, "invalid_request_error", f"the body ended after {len(raw)} of {length} bytes", close=True)
            return None
        return raw

    def do_GET(self):
        server = self.owner
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            return self._send(200, server.models())
        self._send(200, {"judge": getattr(server.judge, "name", "judge"), "requests": server.requests})

    def do_POST(self):
        server = self.owner
        raw = self._read_body()
        if raw is None:
            return
        with server.lock:
            server.requests += 1
            fault = server.faults.popleft() if server.faults else None
        server.request_received.set()
        if server._require_key is not None and self.headers.get("Authorization") != f"Bearer {server._require_key}":
            return self._error(401, "authentication_error", "invalid API key")
        if fault is not None:
            if fault.kind == "disconnect":
                self.close_connection = True
                self.connection.close()
                return
            if fault.kind == "429":
                ra = "0" if fault.retry_after is None else f"{fault.retry_after:g}"
                return self._error(429, "rate_limit_error", "rate limited", {"Retry-After": ra})
            if fault.kind.isdigit():
                return self._error(int(fault.kind), _FAULT_ERROR_TYPES[fault.kind], f"injected fault {fault.kind}")
            if fault.kind == "slow":
                time.sleep(fault.delay)
            if fault.kind == "malformed":
                return self._send(200, b'{"model": "local", "answers": {')
        if server.delay:
            time.sleep(server.delay)
        try:
            # UTF-8 only (json.loads would guess UTF-16 or UTF-32 from bytes); reading.parse_json
            # refuses what json.loads would read wrongly or fail on (NaN, 5000-digit integers, keys
            # named twice, lone surrogates)
            body = parse_json(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return self._invalid([{"loc": ["body"], "msg": f"the body is not UTF-8: {exc}", "type": "json_invalid"}])
        except RequestError as exc:
            return self._invalid(exc.detail())
        del raw  # the parsed body is all we need from here on
        try:
            out = server.answer(body)
        except RequestError as exc:
            return self._invalid(exc.detail())
        except TooMuchWork as exc:
            return self._error(413, "request_too_large", str(exc))
        except RecursionError:
            return self._invalid(
                [{"loc": ["body"], "msg": "the body is JSON nested too deeply", "type": "json_invalid"}]
            )
        except Exception as exc:  # the judge failed: a server error the client may retry
            return self._error(500, "internal_error", f"judge failed: {type(exc).__name__}: {exc}")
        with server.lock:
            if server.keep_bodies:
                server.bodies.append(body)
            if fault is None or fault.kind == "slow":
                server.questions += len(out["answers"])
        if fault is not None:
            keys = list(out["answers"])
            if fault.kind == "missing":
                del out["answers"][keys[-1]]
            elif fault.kind == "out-of-range":
                out["answers"][keys[0]]["noul"] = 1.5
            elif fault.kind == "wrong-type":
                out["answers"][keys[0]]["type"] = "choice"
        self._send(200, out)


def make_server_judge(spec: str, db: str | None):
    """The judge a server serves: lexical, lexical-bridge, semantic[:options] (these need an index),
    data-hash, hash, hash-context-free, or FILE.py:NAME."""
    if spec == "data-hash":
        return DataHashJudge()
    if spec in HASH_JUDGES:
        return FunctionJudge(HASH_JUDGES[spec], name=spec)
    parsed = JudgeSpec.parse(spec)
    if parsed.name == "jev" or parsed.kind.needs_gold:
        raise JudgeError(
            f"judge-server cannot serve {spec!r}: "
            f"{'it would call itself' if parsed.name == 'jev' else 'it needs gold labels'}"
        )
    if db is None and parsed.kind.needs_index:
        raise JudgeError(f"judge-server --judge {spec} needs an index: --db DB")
    return parsed.build(None if db is None else Index(db))


def parse_fault(text: str) -> tuple[str, int, dict]:
    """`KIND`, `KINDxN`, `429:SECONDS` (Retry-After), `slow:SECONDS`; e.g. `500x5`, `429:1x2`."""
    spec, _, times = text.partition("x")
    kind, _, value = spec.partition(":")
    try:
        n = int(times) if times else 1
        opts = {}
        if value:
            opts["retry_after" if kind == "429" else "delay"] = float(value)
    except ValueError:
        raise ValueError(f"--fault {text!r}: expected KIND[:SECONDS][xTIMES]") from None
    if kind not in FAULTS:
        raise ValueError(f"--fault {text!r}: unknown kind; expected one of {', '.join(FAULTS)}")
    return kind, n, opts


def build_server(
    judge: str,
    db: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    delay_ms: float = 0.0,
    faults: list[str] | tuple[str, ...] = (),
    max_body_mb: float = DEFAULT_MAX_BODY / 2**20,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    judge_timeout: float | str | None = None,
) -> JudgeServer:
    """The server `sag2wb judge-server` runs, bound and not yet serving: `judge` by name
    (`make_server_judge`), a function judge's time limit per call (`judge_timeout`: seconds, 0 or
    "none": none; default $SAG2WB_JUDGE_TIMEOUT or 60), and `faults` (`parse_fault`) queued.

    >>> server = build_server("hash", port=0, faults=["500x2"])
    >>> len(server.faults), server.judge.name
    (2, 'hash')
    >>> server.httpd.server_close()
    """
    served = make_server_judge(judge, db)
    if judge_timeout is not None and isinstance(served, FunctionJudge):
        served.timeout = check_timeout(judge_timeout, "judge timeout")
    if not max_body_mb > 0 or not read_timeout > 0:
        raise JudgeServerError("--max-body-mb and --read-timeout must be > 0")
    server = JudgeServer(
        served, host, port, delay=delay_ms / 1000.0, max_body=int(max_body_mb * 2**20), read_timeout=read_timeout
    )
    for text in faults:
        try:
            kind, n, opts = parse_fault(text)
        except ValueError as exc:
            server.httpd.server_close()
            raise JudgeError(str(exc)) from None
        server.add_fault(kind, n, **opts)
    return server
