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

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from workbench.engine import Run
from workbench.judges import (
    FunctionJudge, JudgeError, JudgeTimeout, JudgeTimeoutSetting, JudgmentMemo, judge_timeout_from_env,
    load_function_judge,
)
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
