"""A pool worker's JEV judge sets its HTTP client up when the worker builds it, beside the first
questions' work, not at its first request (issue 33: httpx's import delayed every first request)."""

import time

from workbench.executors import recipe_for
from workbench.executors.workers import WorkerEnv
from workbench.judges.jev.server import JudgeServer, make_server_judge
from workbench.judges.registry import JudgeSpec


def wait_for(condition, seconds=10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_worker_judge_starts_its_client_before_any_request(enc_db, enc_index, tmp_path):
    with JudgeServer(make_server_judge("hash", str(enc_db))) as server:
        env = WorkerEnv(recipe_for(enc_index, 2), None)
        spec = JudgeSpec.parse("jev", endpoint=server.url, cache_dir=str(tmp_path / "cache"), timeout=20)
        judge = env.judge(spec)
        try:
            client = judge.client
            assert client is not None and client.counters["http_requests"] == 0
            # the loop thread builds the client (its HTTP threads) without being asked for a request
            assert wait_for(lambda: client._http is not None)
            assert len(client._http.threads) == client.concurrency == 10  # the worker's share of 20, of 2 slots
            assert server.requests == 0 and client.counters["http_requests"] == 0
            # and the first request uses that same client
            http = client._http
            cand = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film.", "document": "Glass Harbour"}]
            assert len(judge.judge("Who directed Glass Harbour?", cand, [])) == 1
            assert client._http is http and server.requests == 1
        finally:
            env.close()


def test_replay_judge_has_no_client_to_start(enc_db, enc_index, tmp_path):
    from workbench.judges.jev.cache import open_store

    open_store(tmp_path / "cache").close()  # an empty judgment store: replay needs one
    env = WorkerEnv(recipe_for(enc_index, 2), None)
    judge = env.judge(JudgeSpec.parse("jev", cache_dir=str(tmp_path / "cache"), cache_only=True))
    try:
        assert judge.client is None and judge.inner._loop is None  # nothing started
    finally:
        env.close()


IMPORTS = """
import sys
from workbench.judges.jev.client import JEVClient
before = "httpx" in sys.modules or "httpcore" in sys.modules
JEVClient("http://127.0.0.1:9/v1/systemone")  # no request: nothing listens there
print(before, "httpx" in sys.modules, "httpcore" in sys.modules, "httpx._main" in sys.modules)
"""


def test_a_live_client_imports_httpx_when_made_so_forked_workers_inherit_it():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "True", "False"]  # httpx's CLI module still left out
