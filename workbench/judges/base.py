"""Researchers' function judges, run with a time limit per call on reusable daemon threads."""

from __future__ import annotations

import math
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import cast

from workbench.judges.options import OptionInfo
from workbench.judgment import JudgeError
from workbench.safeio import InputError

DEFAULT_JUDGE_TIMEOUT = 60.0  # seconds per call of a function judge (issue 10: a sleeping judge must not hang a run)
JUDGE_TIMEOUT_VARIABLE = "SAG2WB_JUDGE_TIMEOUT"  # seconds; 0 or "none" turns the limit off


def judge_timeout_from_env(default: float | None = DEFAULT_JUDGE_TIMEOUT) -> float | None:
    """The per-call limit from $SAG2WB_JUDGE_TIMEOUT (seconds; 0 or "none": no limit), else `default`.

    >>> os.environ["SAG2WB_JUDGE_TIMEOUT"] = "5"; judge_timeout_from_env()
    5.0
    >>> os.environ["SAG2WB_JUDGE_TIMEOUT"] = "none"; judge_timeout_from_env() is None
    True
    """
    text = os.environ.get(JUDGE_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return default
    return check_timeout(text, f"${JUDGE_TIMEOUT_VARIABLE}")


def check_timeout(value, where: str) -> float | None:
    """A time limit in seconds from its text or number (0, None, "none", "off": no limit, None);
    anything else names `where` (the option or variable) in a JudgeTimeoutSetting (exit 2).

    >>> check_timeout("2.5", "--judge-timeout"), check_timeout(0, "timeout"), check_timeout("off", "timeout")
    (2.5, None, None)
    >>> check_timeout("soon", "--timeout")
    Traceback (most recent call last):
    ...
    workbench.judges.base.JudgeTimeoutSetting: --timeout='soon': expected a number of seconds (0 or none: no limit)
    """
    if value is None or (isinstance(value, str) and value.lower() in ("none", "off")):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise JudgeTimeoutSetting(f"{where}={value!r}: expected a number of seconds (0 or none: no limit)") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise JudgeTimeoutSetting(f"{where}={value!r}: expected a number of seconds >= 0 (0 or none: no limit)")
    return seconds or None


class JudgeTimeoutSetting(JudgeError, InputError):
    """A judge time limit that is not a number of seconds (bad input: exit 2)."""


class JudgeTimeout(JudgeError):
    """A function judge's call ran past its time limit."""


# the function judge's `timeout` as its kind declares it (judges/registry.py): given beside the
# FILE.py:NAME text (the CLI's --judge-timeout), so the limit travels inside the spec to workers
TIMEOUT_OPTION = OptionInfo(
    "timeout",
    float,
    DEFAULT_JUDGE_TIMEOUT,
    f"seconds per call (0 or none: no limit; not given: ${JUDGE_TIMEOUT_VARIABLE}, else 60)",
    (0, None, True),
    in_text=False,
    none=True,
    read=lambda value: check_timeout(value, "timeout"),
)


class FunctionJudge:
    """A researcher's callable `judge(question, candidates, context) -> list[float]`, with a
    time limit per call: `timeout=` seconds (0/None: none), by default "env": $SAG2WB_JUDGE_TIMEOUT,
    else 60 s. A spec's `timeout` option (the CLI's --judge-timeout) is passed here, so the limit
    travels with the spec to worker processes; the variable is only the user's own default.

    >>> j = FunctionJudge(lambda q, cands, ctx: [0.5] * len(cands), name="half", timeout=5)
    >>> j.judge("q?", [{"unit_id": 1, "title": "t", "text": "x", "document": "t"}], [])
    [0.5]

    The call runs on a daemon thread while the caller waits at most `timeout` seconds. A call
    past the limit raises JudgeError naming the judge and the limit. Python cannot stop a
    thread, so the late call keeps running in the background until it returns on its own (its
    answer is then dropped; it never reaches a trace or a cache), and it does not keep the
    process alive at exit. A judge that can be stuck in C code or holds locks should enforce
    its own timeouts too (e.g. an HTTP timeout).
    """

    def __init__(self, fn: Callable, name: str | None = None, timeout: float | str | None = "env"):
        self.fn = fn
        self.name = name or cast(str, getattr(fn, "__name__", "function"))
        self.key = "function:" + self.name  # the limit never changes an answer: not part of the key
        self.timeout = judge_timeout_from_env() if timeout == "env" else check_timeout(timeout, "judge timeout")
        self._workers = _WorkerPool.for_judge(self)

    def judge(self, question, candidates, context):
        if self.timeout is None:
            return self.fn(question, candidates, context)
        return self._workers.call(self.fn, (question, candidates, context), self.timeout)

    def __getstate__(self):  # threads do not travel: a copy (or another process) starts its own
        return {k: v for k, v in self.__dict__.items() if k != "_workers"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._workers = _WorkerPool.for_judge(self)


class _Worker:
    """A daemon thread that runs calls handed to it, one at a time."""

    def __init__(self, name: str):
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=f"judge {name}", daemon=True).start()

    def _serve(self):
        while (job := self.inbox.get()) is not None:
            fn, args, outcome, done = job
            try:
                outcome.append((True, fn(*args)))
            except BaseException as exc:  # handed to the caller, which re-raises it
                outcome.append((False, exc))
            done.set()
            del job, fn, args, outcome  # hold no question or candidates while idle


class _WorkerPool:
    """Idle workers of one judge, reused (a thread per call would cost ~150 us); a worker whose
    call ran past the limit is retired: it finishes that call on its own, then exits."""

    MAX_IDLE = 8

    def __init__(self, name: str):
        self.name = name
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()

    @classmethod
    def for_judge(cls, judge) -> _WorkerPool:
        pool = cls(judge.name)
        weakref.finalize(judge, pool.close)  # a judge that is dropped lets its idle threads end
        return pool

    def close(self):
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.inbox.put(None)

    def call(self, fn: Callable, args: tuple, seconds: float):
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        worker = worker or _Worker(self.name)
        outcome: list = []
        done = threading.Event()
        worker.inbox.put((fn, args, outcome, done))
        if not done.wait(seconds):
            worker.inbox.put(None)  # retire it once the abandoned call returns (if ever)
            raise JudgeTimeout(
                f"judge {self.name!r} did not answer within its time limit of {seconds:g} s per call; the call is "
                f"abandoned (it may still be running in the background). Raise the limit with "
                f"${JUDGE_TIMEOUT_VARIABLE}=SECONDS (0: no limit) if the judge is just slow"
            )
        with self.lock:
            if len(self.idle) < self.MAX_IDLE:
                self.idle.append(worker)
                worker = None
        if worker is not None:
            worker.inbox.put(None)
        ok, value = outcome[0]
        if ok:
            return value
        raise value


def call_with_time_limit(fn: Callable, args: tuple, seconds: float, name: str):
    """`fn(*args)` on a daemon thread: its result or exception, or a JudgeTimeout after `seconds`.

    >>> call_with_time_limit(sum, ([1, 2],), 5, "sum")
    3
    """
    pool = _WorkerPool(name)
    try:
        return pool.call(fn, args, seconds)
    finally:
        pool.close()
