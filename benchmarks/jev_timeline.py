"""Where the wall time of `sag2wb eval --judge jev --concurrency N` goes (issue 33): one run with
timestamps from every process (the caller and its forked workers), then a summary on stdout.

    .venv/bin/python benchmarks/jev_timeline.py --db DB --questions Q.jsonl --endpoint URL [--concurrency 16]
        [--tree TREE] [--events OUT.jsonl] [--no-run EVENTS.jsonl]

Events (CLOCK_MONOTONIC, shared by the processes; per process one file, appended line by line):
    process start, worker start (`_serve`), each task (`run_remote`) start/end on its thread with the
    thread's CPU, each judge round as the question thread sees it (`CachedJudge.judge`), each request
    when the event loop hands it to an HTTP thread, when that thread sends it and gets the answer,
    and when the loop takes the answer. The summary: the phases (start to first request, the last
    request to exit), requests in flight over time, the hops' delays (loop -> HTTP thread, HTTP
    thread -> loop -> question thread), and each question thread's time waiting for a runnable
    slot (its wall between waits minus its CPU: the GIL or a core). Prints, no asserts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Installed in the eval process before the CLI runs; forked workers inherit the patches.
RUNNER = r"""
import os, sys, threading, time, json
sys.path.insert(0, os.getcwd())
OUT = sys.argv.pop(1)
_files = {}
def ev(kind, **kw):
    pid = os.getpid()
    f = _files.get(pid)
    if f is None:
        f = _files[pid] = open(f"{OUT}.{pid}", "a", buffering=1)
    kw.update(t=time.monotonic(), pid=pid, th=threading.current_thread().name, cpu=time.thread_time(), kind=kind)
    f.write(json.dumps(kw) + "\n")
ev("process start")
if os.environ.get("JEV_TL_PRE"):  # an experiment: modules the workers import, imported before they fork
    import importlib
    for m in os.environ["JEV_TL_PRE"].split(","):
        importlib.import_module(m)
import workbench.judges.jev.client as client
import workbench.judges.cached as cached
import workbench.executors.pools as pools
import workbench.executors.workers as workers
post = client.JEVClient.post
async def timed_post(self, body, keys, content=None):
    ev("post", rid=id(content))
    try:
        return await post(self, body, keys, content)
    finally:
        ev("answered", rid=id(content))
client.JEVClient.post = timed_post
http_post = client._HTTPThreads.post
async def timed_http_post(self, url, content, *a, **kw):
    ev("queued", size=len(content), rid=id(content))
    return await http_post(self, url, content, *a, **kw)
client._HTTPThreads.post = timed_http_post
class TimedHTTP:
    def __init__(self, http):
        self.http = http
    def post(self, url, content, **kw):
        ev("http sent", rid=id(content))
        try:
            return self.http.post(url, content=content, **kw)
        finally:
            ev("http answered", rid=id(content))
    def close(self):
        self.http.close()
init = client._HTTPThreads.__init__
def timed_init(self, *a, **kw):
    ev("http client")
    init(self, *a, **kw)
    ev("http client ready")
    self.http = TimedHTTP(self.http)
client._HTTPThreads.__init__ = timed_init
judge = cached.CachedJudge.judge
def timed_judge(self, *a, **kw):
    ev("round")
    try:
        return judge(self, *a, **kw)
    finally:
        ev("round end")
cached.CachedJudge.judge = timed_judge
import workbench.judges.jev.judge as jj
inner = jj.JEVJudge.judge
def timed_inner(self, *a, **kw):
    ev("inner")
    try:
        return inner(self, *a, **kw)
    finally:
        ev("inner end")
jj.JEVJudge.judge = timed_inner
one = jj.JEVJudge._one_request
async def timed_one(self, *a, **kw):
    ev("one")
    return await one(self, *a, **kw)
jj.JEVJudge._one_request = timed_one
serve = pools._serve
def timed_serve(*a, **kw):
    ev("worker start")
    if os.environ.get("JEV_TL_SWITCH"):  # an experiment: the GIL's switch interval in the workers
        sys.setswitchinterval(float(os.environ["JEV_TL_SWITCH"]))
    return serve(*a, **kw)
pools._serve = timed_serve
run_remote = workers.run_remote
def timed_run_remote(recipe, payload, task, key):
    ev("task", key=str(key))
    try:
        return run_remote(recipe, payload, task, key)
    finally:
        ev("task end", key=str(key))
workers.run_remote = timed_run_remote
pools.run_remote = timed_run_remote
import workbench.runs.tasks as tasks
tasks.run_remote = timed_run_remote
import atexit
atexit.register(lambda: ev("exit"))
sys.argv = ["sag2wb", *sys.argv[1:]]
from workbench.cli.main import main
code = main()
ev("main returned")
sys.exit(code)
"""


def run(args, events: Path) -> float:
    cache = tempfile.mkdtemp(prefix="jev-timeline-")
    cmd = [sys.executable, "-c", RUNNER, str(events), "eval", "--db", str(args.db), "--questions", str(args.questions),
           "--out", f"{cache}/out.json", "--force", "--quiet", "--concurrency", str(args.concurrency), "--judge", "jev",
           "--jev-endpoint", args.endpoint, "--cache-dir", f"{cache}/cache"]  # fmt: skip
    t0 = __import__("time").monotonic()
    subprocess.run(cmd, cwd=args.tree, check=True, stdout=subprocess.DEVNULL)
    return t0


def load(events: Path) -> list[dict]:
    rows = []
    for p in events.parent.glob(events.name + ".*"):
        rows += [json.loads(x) for x in p.read_text().splitlines()]
    return sorted(rows, key=lambda r: r["t"])


def summary(rows: list[dict]) -> None:
    t0 = min(r["t"] for r in rows)
    parent = next(r["pid"] for r in rows if r["kind"] == "process start")

    def at(kind, pid=None, last=False):
        ts = [r["t"] - t0 for r in rows if r["kind"] == kind and (pid is None or r["pid"] == pid)]
        return (max(ts) if last else min(ts)) if ts else float("nan")

    pids = sorted(
        {r["pid"] for r in rows}, key=lambda p: at("process start", p) if p == parent else at("worker start", p)
    )
    print(f"processes: {len(pids)} (caller {parent})")
    for p in pids:
        who = "caller" if p == parent else "worker"
        tasks = [r for r in rows if r["pid"] == p and r["kind"] == "task"]
        print(
            f"  {who} {p}: start {at('process start' if p == parent else 'worker start', p):.2f}  "
            f"first task {at('task', p):.2f}  first request {at('http sent', p):.2f}  "
            f"last answer {at('http answered', p, last=True):.2f}  last task end {at('task end', p, last=True):.2f}  "
            f"tasks {len(tasks)}"
        )
    print(f"  caller: main returned {at('main returned'):.2f}  exit {at('exit'):.2f}")
    # requests in flight (on the wire: HTTP thread sent -> answered), per 0.25 s
    sent = sorted(r["t"] - t0 for r in rows if r["kind"] == "http sent")
    done = sorted(r["t"] - t0 for r in rows if r["kind"] == "http answered")
    end = max(done)
    step = 0.25
    line = []
    for k in range(int(end / step) + 1):
        t = k * step
        line.append(sum(1 for s in sent if s <= t) - sum(1 for d in done if d <= t))
    print(f"requests: {len(sent)}; in flight every {step} s from 0: {line}")
    wire = sum(done) - sum(sent)  # unpaired, but the sums are the total time on the wire
    print(
        f"  wire time total {wire:.1f} s (mean {wire / len(sent) * 1000:.0f} ms/request), "
        f"mean in flight between the first send and the last answer {wire / (end - sent[0]):.1f}"
    )
    for p in pids[1:]:  # each worker's start: its HTTP client, its first judge calls and requests
        start = at("worker start", p)
        calls = sorted(r["t"] - t0 - start for r in rows if r["pid"] == p and r["kind"] == "inner")[:8]
        sends = sorted(r["t"] - t0 - start for r in rows if r["pid"] == p and r["kind"] == "http sent")[:8]
        if calls and sends:
            print(
                f"  worker {p} from its start: HTTP client ready +{at('http client ready', p) - start:.2f} s, "
                f"judge calls 1st/8th +{calls[0]:.2f}/+{calls[-1]:.2f} s, requests sent 1st/8th "
                f"+{sends[0]:.2f}/+{sends[-1]:.2f} s"
            )
    # per question thread: rounds (wait for the judge) and the gaps between them (CPU work)
    threads: dict = {}
    for r in rows:
        if r["kind"] in ("round", "round end", "task", "task end"):
            threads.setdefault((r["pid"], r["th"]), []).append(r)
    gaps_wall = gaps_cpu = waits = 0.0
    rounds = []
    for evs in threads.values():
        for a, b in itertools.pairwise(evs):
            if a["kind"] == "round" and b["kind"] == "round end":
                waits += b["t"] - a["t"]
                rounds.append(b["t"] - a["t"])
            elif a["kind"] in ("task", "round end") and b["kind"] in ("round", "task end"):
                gaps_wall += b["t"] - a["t"]
                gaps_cpu += b["cpu"] - a["cpu"]
    print(
        f"question threads: {len(threads)}; rounds {len(rounds)}, judge call median "
        f"{statistics.median(rounds) * 1000:.0f} ms (total {waits:.1f} s); work between rounds: wall "
        f"{gaps_wall:.1f} s, own CPU {gaps_cpu:.1f} s, so waiting for the GIL or a core {gaps_wall - gaps_cpu:.1f} s"
    )
    # the tail: when each slot's last task ended
    ends = sorted(
        max(r["t"] for r in evs if r["kind"] == "task end") - t0
        for evs in threads.values()
        if any(r["kind"] == "task end" for r in evs)
    )
    print(f"slots' last task end: {[round(x, 2) for x in ends]}")
    tasks = sorted(r["t"] - t0 for r in rows if r["kind"] == "task")
    print(f"task starts (last 16): {[round(x, 2) for x in tasks[-16:]]}")


def hops(rows: list[dict]) -> None:
    """Per request (paired by its body's id within a process): the loop's post -> queued for an HTTP
    thread -> sent -> answered -> the loop has it; per judge call: the question thread's wait."""
    by = {}
    for r in rows:
        if "rid" in r:
            by.setdefault((r["pid"], r["rid"]), {}).setdefault(r["kind"], r["t"])
    legs = {"post->queued": [], "queued->http sent": [], "wire": [], "http answered->loop": []}
    for e in by.values():
        if len(e) == 5:
            legs["post->queued"].append(e["queued"] - e["post"])
            legs["queued->http sent"].append(e["http sent"] - e["queued"])
            legs["wire"].append(e["http answered"] - e["http sent"])
            legs["http answered->loop"].append(e["answered"] - e["http answered"])
    for k, v in legs.items():
        v.sort()
        if v:
            print(f"  {k}: median {v[len(v) // 2] * 1000:.1f} ms, p90 {v[int(len(v) * 0.9)] * 1000:.1f} ms, "
                  f"mean {sum(v) / len(v) * 1000:.1f} ms (n {len(v)})")  # fmt: skip
    threads = {}
    for r in rows:
        if r["kind"] in ("round", "inner", "inner end", "round end"):
            threads.setdefault((r["pid"], r["th"]), []).append(r)
    pre, inner, post = [], [], []
    for evs in threads.values():
        for a, b, c, d in zip(evs, evs[1:], evs[2:], evs[3:]):
            if (a["kind"], b["kind"], c["kind"], d["kind"]) == ("round", "inner", "inner end", "round end"):
                pre.append(b["t"] - a["t"])
                inner.append(c["t"] - b["t"])
                post.append(d["t"] - c["t"])
    for name, v in (("cache's work before the requests", pre), ("the JEV judge's call", inner),
                    ("cache's work after", post)):  # fmt: skip
        v.sort()
        if v:
            print(f"  {name}: median {v[len(v) // 2] * 1000:.1f} ms, mean {sum(v) / len(v) * 1000:.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path)
    ap.add_argument("--questions", type=Path)
    ap.add_argument("--endpoint")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--events", type=Path)
    ap.add_argument("--no-run", type=Path, help="summarise these events instead of running")
    args = ap.parse_args()
    if args.no_run:
        summary(load(args.no_run))
        hops(load(args.no_run))
        return 0
    events = args.events or Path(tempfile.mkdtemp(prefix="jev-timeline-")) / "events"
    events.parent.mkdir(parents=True, exist_ok=True)
    run(args, events)
    print(f"events: {events}.*")
    summary(load(events))
    hops(load(events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
