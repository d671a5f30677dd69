"""A hostile Noul-compatible server on 127.0.0.1 that echoes the Authorization header it gets.

Standard library only, so `benchmarks/reliability_judges.py` can use it against any source
tree. The first path segment picks where the header goes: `nonjson` (a 200 body that is not
JSON), `answer` (as every answer's value), `type` (as every answer's type), `model` (a valid
answer whose model name carries it), `escaped` (JSON \\u escapes), or an HTTP status (in the body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EchoHandler(BaseHTTPRequestHandler):
    """A hostile Noul server: puts the Authorization header it received into its answer.
    The first path segment picks where (see the module docstring)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        key = auth.split(" ", 1)[-1]
        mode = self.path.strip("/").split("/")[0]
        keys = list(json.loads(raw)["questions"])
        status, payload = 200, None
        if mode == "nonjson":
            payload = f"<html>debug: Authorization: {auth}</html>".encode()
        elif mode == "answer":
            payload = {"model": "m", "answers": {k: {"type": "noul", "noul": key} for k in keys}}
        elif mode == "type":
            payload = {"model": "m", "answers": {k: {"type": auth, "noul": 0.5} for k in keys}}
        elif mode == "model":  # a valid answer whose model name carries the key: it must not reach the cache
            payload = {"model": f"echo {auth}", "answers": {k: {"type": "noul", "noul": 0.5} for k in keys}}
        elif mode == "escaped":  # the key spelled with JSON \u escapes: only equal after decoding
            spelled = "".join(f"\\u{ord(ch):04x}" for ch in key)
            payload = (
                '{"model": "'
                + spelled
                + '", "answers": {'
                + ",".join(f'"{k}": {{"type": "noul", "noul": "{spelled}"}}' for k in keys)
                + "}}"
            ).encode()
        else:  # an HTTP status, with the key in the body
            status, payload = int(mode), f"refused {auth}".encode()
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Echo", auth)
        self.end_headers()
        self.wfile.write(data)


def start_echo_server() -> ThreadingHTTPServer:
    """A running echo server on a free port (stop it with .shutdown(); .server_close())."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    return srv
