"""A local Noul-compatible server that answers with any workbench judge, with injectable faults.

    sag2wb judge-server --judge lexical --db 2wiki.sqlite --port 8765
    sag2wb judge-server --judge hash --delay-ms 200 --fault 429 --fault 500x5

>>> server = JudgeServer(LexicalJudge(index)).start()     # 127.0.0.1, a free port   # doctest: +SKIP
>>> server.add_fault("429", retry_after=1)                # the next request gets a 429  # doctest: +SKIP
>>> judge = make_jev_judge(endpoint=server.url, cache_dir=tmp)                          # doctest: +SKIP
>>> server.stop()                                                                        # doctest: +SKIP

It reads the requests `workbench.jev` builds (both payload styles; `jev.read_payload`)
and answers `{"model", "answers": {key: {"type": "noul", "noul": p}}, "usage": ...}`, where
input_tokens is the same estimate the client uses. It ignores the Authorization header
unless `require_key` is set, and never logs or stores it.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .jev import estimate_tokens, read_payload
from .judges import validate_scores

REPO_ROOT = Path(__file__).resolve().parent.parent
HASH_JUDGES = {"hash": "hash_judge", "hash-context-free": "hash_judge_context_free"}

# What each fault does to one request (see `add_fault`).
FAULTS = {
    "429": "HTTP 429 with Retry-After (retry_after seconds, default 0)",
    "408": "HTTP 408", "499": "HTTP 499", "500": "HTTP 500", "502": "HTTP 502", "503": "HTTP 503",
    "400": "HTTP 400", "404": "HTTP 404",
    "401": "HTTP 401 (bad key)", "403": "HTTP 403 (key lacks access)",
    "slow": "answer correctly after `delay` seconds (default 5): past a short client timeout",
    "disconnect": "close the connection without answering",
    "malformed": "HTTP 200 with a body that is not JSON",
    "missing": "HTTP 200 with the last question's answer left out",
    "out-of-range": "HTTP 200 with the first answer 1.5",
    "wrong-type": "HTTP 200 with the first answer of type 'choice'",
}


@dataclass
class Fault:
    kind: str
    retry_after: float | None = None
    delay: float = 5.0


class JudgeServer:
    """A ThreadingHTTPServer on `host:port` (port 0: a free one) serving `judge` over HTTP."""

    def __init__(self, judge, host: str = "127.0.0.1", port: int = 0, *, delay: float = 0.0,
                 model: str | None = None, require_key: str | None = None):
        self.judge = judge
        self.delay = float(delay)
        self.model = model
        self._require_key = require_key
        self.faults: deque[Fault] = deque()
        self.lock = threading.Lock()
        self.requests = 0  # POSTs received (including faulted ones)
        self.questions = 0  # questions answered successfully
        self.bodies: list[dict] = []  # parsed request bodies (never headers)
        self.request_received = threading.Event()
        server = self

        class Handler(_Handler):
            owner = server

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.httpd.server_address[0]}:{self.port}/v1/systemone"

    def add_fault(self, kind: str, times: int = 1, *, retry_after: float | None = None, delay: float = 5.0) -> "JudgeServer":
        """Queue a fault for the next `times` requests (faults apply in the order queued)."""
        if kind not in FAULTS:
            raise ValueError(f"fault {kind!r}: expected one of {', '.join(FAULTS)}")
        with self.lock:
            for _ in range(times):
                self.faults.append(Fault(kind, retry_after, delay))
        return self

    def start(self) -> "JudgeServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="judge-server",
                                        daemon=True)
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
        """Judge a parsed request body; ValueError names what is wrong with it."""
        question, candidates, context, keys = read_payload(body)
        scores = validate_scores(getattr(self.judge, "name", "judge"), self.judge.judge(question, candidates, context),
                                 len(candidates))
        answers = {k: {"type": "noul", "noul": s} for k, s in zip(keys, scores)}
        usage = {"input_tokens": estimate_tokens(json.dumps({"state": body["state"], "questions": body["questions"]},
                                                            ensure_ascii=False, separators=(",", ":"))),
                 "output_tokens": len(keys), "cost": 0.0}
        model = self.model or body.get("model") or "local"
        return {"model": model, "answers": answers, "usage": usage}


class _Handler(BaseHTTPRequestHandler):
    owner: JudgeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet: tests and benchmarks read the counters instead
        pass

    def _send(self, status: int, payload, headers: dict | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout, cancel)
            pass

    def do_GET(self):
        server = self.owner
        self._send(200, {"judge": getattr(server.judge, "name", "judge"), "requests": server.requests})

    def do_POST(self):
        server = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        with server.lock:
            server.requests += 1
            fault = server.faults.popleft() if server.faults else None
        server.request_received.set()
        if server._require_key is not None and self.headers.get("Authorization") != f"Bearer {server._require_key}":
            return self._send(401, {"error": "invalid API key"})
        if fault is not None:
            if fault.kind == "disconnect":
                self.close_connection = True
                self.connection.close()
                return
            if fault.kind == "429":
                ra = "0" if fault.retry_after is None else f"{fault.retry_after:g}"
                return self._send(429, {"error": "rate limited"}, {"Retry-After": ra})
            if fault.kind.isdigit():
                return self._send(int(fault.kind), {"error": f"injected fault {fault.kind}"})
            if fault.kind == "slow":
                time.sleep(fault.delay)
            if fault.kind == "malformed":
                return self._send(200, b'{"model": "local", "answers": {')
        if server.delay:
            time.sleep(server.delay)
        try:
            body = json.loads(raw)
            out = server.answer(body)
        except (ValueError, KeyError, TypeError) as exc:
            return self._send(400, {"error": f"unusable request: {exc}"})
        except Exception as exc:  # the judge failed: a server error the client may retry
            return self._send(500, {"error": f"judge failed: {type(exc).__name__}: {exc}"})
        with server.lock:
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
    hash, hash-context-free, or FILE.py:NAME."""
    from .judges import FunctionJudge, JudgeError, make_judge

    if spec in HASH_JUDGES:
        from .terms import load_python_object

        fn = load_python_object(f"{REPO_ROOT / 'benchmarks' / 'comparison_judges.py'}:{HASH_JUDGES[spec]}", "judge")
        return FunctionJudge(fn, name=spec)
    if spec in ("jev", "oracle"):
        raise JudgeError(f"judge-server cannot serve {spec!r}: {'it would call itself' if spec == 'jev' else 'it needs gold labels'}")
    index = None
    if db is not None:
        from .index import Index

        index = Index(db)
    elif spec in ("lexical", "lexical-bridge") or spec.split(":")[0] == "semantic":
        raise JudgeError(f"judge-server --judge {spec} needs an index: --db DB")
    return make_judge(spec, index)


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


def serve_main(args) -> int:
    """`sag2wb judge-server`: serve until interrupted."""
    from .judges import JudgeError

    judge = make_server_judge(args.judge, args.db)
    server = JudgeServer(judge, args.host, args.port, delay=getattr(args, "delay_ms", 0) / 1000.0)
    for text in getattr(args, "fault", None) or []:
        try:
            kind, n, opts = parse_fault(text)
        except ValueError as exc:
            raise JudgeError(str(exc)) from None
        server.add_fault(kind, n, **opts)
    print(f"serving judge {getattr(judge, 'name', args.judge)!r} at {server.url} "
          f"(any path; use --jev-endpoint {server.url})", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.httpd.server_close()
    return 0
