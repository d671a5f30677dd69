"""Issue 10, judge side: judges and the judge server under abuse, with real processes, real
files and a real server on 127.0.0.1 (docs/reliability-judges.md lists every case).

  - a function judge that never answers ends with a JudgeError naming it and its limit;
  - JEV: a refused key in a many-request round, and a server that echoes the key;
  - corrupt or misplaced JEV caches, `cache export` / `cache import` edge files;
  - `sag2wb judge-server`: 200 concurrent connections, bounded memory, bad Content-Length,
    half-sent requests, ports in use or out of range.

$SAG2WB_RELIABILITY_CONNECTIONS sets the concurrent-connection count (default 200).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from workbench import jev
from workbench.engine import Run
from workbench.judges import (
    FunctionJudge, JudgeError, JudgeTimeout, JudgeTimeoutSetting, JudgmentMemo, judge_timeout_from_env,
    load_function_judge,
)
from workbench.judge_server import JudgeServer
from workbench.params import Params
from workbench.safeio import InputError
from workbench.trace import STOP_JUDGE_ERROR

from .conftest import FILM_WORLD, build_index

REPO = Path(__file__).resolve().parent.parent
CANDIDATE = {"unit_id": 1, "title": "Glass Harbour", "text": "A film.", "document": "Glass Harbour"}


def sag2wb(*args, env=None, timeout=60, cwd=None) -> subprocess.CompletedProcess:
    """The real CLI in a child process (bounded by `timeout`, so a hang fails the test)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or REPO)


# ---- 1. function judges get a time limit per call -------------------------------------------
def test_a_judge_past_its_limit_fails_naming_itself_and_the_limit():
    release = threading.Event()

    def stuck(question, candidates, context):
        release.wait(30)  # "forever", but the test lets it go at the end
        return [0.5] * len(candidates)

    judge = FunctionJudge(stuck, name="stuck", timeout=0.2)
    try:
        with pytest.raises(JudgeTimeout, match=r"judge 'stuck' did not answer within its time limit of 0.2 s"):
            JudgmentMemo().judge(judge, "q?", [CANDIDATE], [])
    finally:
        release.set()


def test_within_the_limit_answers_and_errors_pass_through_unchanged():
    judge = FunctionJudge(lambda q, c, x: [0.25] * len(c), name="quarter", timeout=5)
    assert judge.judge("q?", [CANDIDATE, CANDIDATE], []) == [0.25, 0.25]

    def broken(question, candidates, context):
        raise KeyError("title")

    with pytest.raises(JudgeError, match=r"judge 'broken' raised KeyError: 'title'"):
        JudgmentMemo().judge(FunctionJudge(broken, timeout=5), "q?", [CANDIDATE], [])


def test_the_limit_is_not_part_of_the_judge_key():
    fn = lambda q, c, x: [0.5] * len(c)  # noqa: E731
    assert FunctionJudge(fn, "f", timeout=1).key == FunctionJudge(fn, "f", timeout=None).key == "function:f"


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv("SAG2WB_JUDGE_TIMEOUT", raising=False)
    assert judge_timeout_from_env() == 60.0 and FunctionJudge(len).timeout == 60.0
    monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", "2.5")
    assert FunctionJudge(len).timeout == 2.5
    for off in ("0", "none"):
        monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", off)
        assert FunctionJudge(len).timeout is None
    for bad in ("soon", "-1", "inf"):
        monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", bad)
        with pytest.raises(JudgeTimeoutSetting, match=r"\$SAG2WB_JUDGE_TIMEOUT=.*expected a number of seconds"):
            FunctionJudge(len)
    assert issubclass(JudgeTimeoutSetting, InputError)  # bad input: the CLI's exit 2


def test_no_limit_calls_in_the_callers_thread():
    seen = []
    FunctionJudge(lambda q, c, x: seen.append(threading.current_thread()) or [0.1], timeout=0).judge("q", [CANDIDATE], [])
    assert seen == [threading.current_thread()]


def test_a_run_with_a_stuck_judge_stops_with_a_judge_error(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    release = threading.Event()
    judge = FunctionJudge(lambda q, c, x: release.wait(30) and [0.5] * len(c), name="slowpoke", timeout=0.2)
    try:
        trace = Run(index, "Where was the director of Glass Harbour born?", Params(), judge).run()
    finally:
        release.set()
    assert trace.stop == STOP_JUDGE_ERROR and "'slowpoke' did not answer within its time limit of 0.2 s" in trace.rounds[0].error


SLEEPING_JUDGE = "import time\n\ndef judge(question, candidates, context):\n    time.sleep(10 ** 6)\n"


def test_cli_search_with_a_sleeping_function_judge_ends(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    r = sag2wb("search", "--db", index.path, "Where was the director of Glass Harbour born?",
               "--judge", f"{tmp_path / 'sleepy.py'}:judge", env={"SAG2WB_JUDGE_TIMEOUT": "0.5"})
    assert r.returncode != 0, r.stdout
    assert "sleepy.py:judge' did not answer within its time limit of 0.5 s" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_load_function_judge_takes_a_limit(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    assert load_function_judge(f"{tmp_path / 'sleepy.py'}:judge", timeout=3).timeout == 3


# ---- 2. JEV: a refused key among several requests; a server that echoes the key ------------
SECRET = "sk-test-SECRET-123"
FILM_QUESTION = "Where was the director of Glass Harbour born?"
SIX = [{"unit_id": i, "title": f"Town {i}", "text": f"Town {i} lies on a river.", "document": f"Town {i}"}
       for i in range(6)]


class EchoHandler(BaseHTTPRequestHandler):
    """A hostile Noul server: puts the Authorization header it received into its answer.
    The first path segment picks where (see `ECHO_MODES`)."""

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
            payload = ('{"model": "' + spelled + '", "answers": {' + ",".join(
                f'"{k}": {{"type": "noul", "noul": "{spelled}"}}' for k in keys) + "}}").encode()
        else:  # an HTTP status, with the key in the body
            status, payload = int(mode), f"refused {auth}".encode()
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Echo", auth)
        self.end_headers()
        self.wfile.write(data)


ECHO_MODES = ["nonjson", "answer", "type", "model", "escaped", "400", "401", "403", "500"]


@pytest.fixture
def echo_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def with_key(monkeypatch):
    for name in (*jev.KEY_VARIABLES, "JEV_ENDPOINT", "JEV_MODEL", "SAG2WB_JEV_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JEV_API_KEY", SECRET)


def files_containing(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("status", ["401", "403"])
def test_a_refused_key_in_a_round_of_several_requests_gives_the_key_message(with_key, tmp_path, status):
    server = JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half"), delay=0.3).start()
    server.add_fault(status)  # the first request is refused while five others are still in flight
    judge = jev.make_jev_judge(endpoint=server.url, cache_dir=tmp_path / "cache", max_questions=1, backoff_base=0.01)
    try:
        with pytest.raises(jev.JEVAuthError) as info:
            JudgmentMemo().judge(judge, FILM_QUESTION, SIX, [])
    finally:
        judge.close()
        server.stop()
    message = str(info.value)
    assert f"HTTP {status}: the key from $JEV_API_KEY was refused" in message and "Cancelled" not in message


@pytest.mark.parametrize("mode", ECHO_MODES)
def test_an_echoed_key_reaches_no_message_log_or_cache(with_key, echo_server, tmp_path, caplog, mode):
    caplog.set_level(logging.DEBUG)  # every logger, httpx's included
    judge = jev.make_jev_judge(endpoint=f"{echo_server}/{mode}", cache_dir=tmp_path / "cache", backoff_base=0.01,
                               attempts=2)
    try:
        try:
            outcome = repr(JudgmentMemo().judge(judge, FILM_QUESTION, SIX[:2], []))
        except JudgeError as exc:
            outcome = f"{exc!r} {exc} {exc.__context__!r} {exc.__cause__!r}"
    finally:
        judge.close()
    if mode == "model":
        assert outcome == "[0.5, 0.5]"
        assert {e["model"] for e in map(json.loads, _export(tmp_path))} == {"echo Bearer ***"}
    else:
        assert "JEVError" in outcome or "JEVAuthError" in outcome
    assert SECRET not in outcome and SECRET not in caplog.text
    assert files_containing(tmp_path, SECRET) == []


def _export(tmp_path) -> list[str]:
    jev.export_cache(tmp_path / "cache", tmp_path / "export.jsonl")
    return (tmp_path / "export.jsonl").read_text().splitlines()


def test_an_echoed_key_reaches_no_screen_or_file_through_the_cli(echo_server, tmp_path):
    """Real `sag2wb search` and `sag2wb eval` processes against the echoing server: search every
    output and every file written (out.json, traces, cache, export) for the key."""
    index = build_index(tmp_path, FILM_WORLD)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"_id": "f1", "question": FILM_QUESTION,
                                     "supporting_titles": ["Glass Harbour", "Mara Quell"]}) + "\n")
    env = {"JEV_API_KEY": SECRET, "SAG2WB_JEV_CACHE": str(tmp_path / "default-cache")}
    outputs = []
    for mode in ("nonjson", "401", "answer", "model"):  # every mode runs in-process above
        common = ["--judge", "jev", "--jev-endpoint", f"{echo_server}/{mode}", "--cache-dir", tmp_path / f"cache-{mode}"]
        if mode in ("nonjson", "401"):
            r = sag2wb("search", "--db", index.path, FILM_QUESTION, "--explain", *common, env=env)
            outputs.append((f"search {mode}", r))
        else:
            r = sag2wb("eval", "--db", index.path, "--questions", questions, "--out", tmp_path / f"out-{mode}.json",
                       "--trace-dir", tmp_path / f"traces-{mode}", "--quiet", *common, env=env)
            outputs.append((f"eval {mode}", r))
    r = sag2wb("cache", "export", "--cache-dir", tmp_path / "cache-model", "--file", tmp_path / "model.jsonl", env=env)
    outputs.append(("cache export", r))
    for what, r in outputs:
        assert SECRET not in r.stdout + r.stderr, what
        assert "Traceback" not in r.stderr, (what, r.stderr[-2000:])
    assert dict(outputs)["eval model"].returncode == 0 and "questions 1" in dict(outputs)["eval model"].stdout
    assert list((tmp_path / "traces-model").iterdir())  # traces were written, and are searched below
    assert any("***" in r.stdout + r.stderr for _, r in outputs)  # the echo was seen, and scrubbed
    assert "HTTP 401: the key from $JEV_API_KEY was refused" in dict(outputs)["search 401"].stderr + dict(outputs)["search 401"].stdout
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "cache.db" for p in written) and (tmp_path / "model.jsonl").stat().st_size > 0
    assert files_containing(tmp_path, SECRET) == []
