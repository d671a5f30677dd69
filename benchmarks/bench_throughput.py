"""Many questions at once: sequential vs threads vs processes vs Dask, side by side (prints, no asserts).

    .venv/bin/python benchmarks/bench_throughput.py [--data ../shared/data] [--questions 100] [--repeats 3]
        [--lexical-repeats 9]

(a) JEV: the 2Wiki dev questions against `sag2wb judge-server --judge hash --delay-ms 200`
    (a separate process), sequential vs --concurrency 16; fresh caches every run.
(b) the lexical judge: sequential (one process) vs a pool of 2 processes (`--processes 2`),
    first as `sag2wb eval` runs without --traces (workers send records; the pool is started
    inside each timed run), then keeping every trace: the pool's time includes starting it
    (cold) and, separately, a second run on it (warm).
(c) a 2-worker Dask LocalCluster: the lexical run, and a JEV run with one worker killed
    (SIGKILL) when the first result arrives; both compared with the sequential results.

Runs alternate (sequential, parallel, sequential, ...) so each ratio is measured in the
same minutes; the figures are medians. "identical" compares every question's record and
trace JSON with `stats` excluded. The machine is shared: say how loaded it was.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import data_arg, need
from workbench.executors import Dask, Processes, Threads
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index
from workbench.judges import JudgmentMemo
from workbench.judges.registry import JudgeSpec
from workbench.runs.evaluation import evaluate
from workbench.runs.options import Hooks, RunOptions


def fingerprint(result) -> str:
    """Everything that must be identical: records and traces, without stats."""
    body = {
        "records": result.records,
        "failures": result.failures,
        "traces": {k: json.loads(t.to_json(stats=False)) for k, t in result.traces.items()},
    }
    return json.dumps(body, sort_keys=True)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ratio_spread(base: list, par: list) -> str:
    """Each repeat's own ratio (its two runs were minutes apart at most): range and median."""
    ratios = [b / p for b, p in zip(base, par)]
    return f"per repeat {min(ratios):.2f}-{max(ratios):.2f}x, median {statistics.median(ratios):.2f}x"


def start_server(delay_ms: int):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "judge-server",
            "--judge",
            "hash",
            "--port",
            str(port),
            "--delay-ms",
            str(delay_ms),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    proc.stdout.readline()  # "serving judge ..." once it listens
    return proc, f"http://127.0.0.1:{port}/v1/systemone"


def children_cpu() -> float:
    """User + system CPU seconds of this process's exited (waited-for) children."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cores"


def main() -> int:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the JEV and Dask comparisons (minutes each)")
    ap.add_argument(
        "--lexical-repeats",
        type=int,
        default=9,
        help="repeats of the lexical comparisons: seconds each, and their ratio swings most with the "
        "machine's load, so more of them steady the median",
    )
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--db", default=None, help="an existing 2Wiki index (default: build one in a temp folder)")
    ap.add_argument("--skip", action="append", default=[], choices=["jev", "lexical", "dask"])
    args = ap.parse_args()
    data = need(Path(args.data) / "2wiki")
    tmp = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    if args.db:
        index = Index(args.db)
    else:
        t, index = timed(lambda: Index.build(load_corpus(data / "corpus.json"), tmp / "2wiki.sqlite"))
        print(f"index: {index.N} units built in {t:.1f} s")
    questions = load_questions(data / "questions-dev.jsonl")[: args.questions]
    n = len(questions)
    print(
        f"{n} 2Wiki dev questions; {args.repeats} repeats (JEV, Dask), {args.lexical_repeats} (lexical); {load_line()}"
    )
    evaluate(
        index, questions, "lexical", options=RunOptions(progress=False)
    )  # warm-up: this process's index caches and jieba
    rows = []

    # (a) JEV: a judge that waits
    if "jev" not in args.skip:
        server, url = start_server(200)
        try:

            def jev_run(executor, k):
                opts = {"endpoint": url, "cache_dir": str(tmp / f"cache-{k}"), "timeout": 60}
                options = RunOptions(progress=False, keep_traces=True, executor=executor)
                return evaluate(index, questions, JudgeSpec.parse("jev", **opts), options=options)

            seq_t, par_t, same, requests = [], [], [], None
            for r in range(args.repeats):
                t, base = timed(lambda: jev_run(None, f"seq{r}"))
                seq_t.append(t)
                t, par = timed(lambda: jev_run(Threads(args.concurrency), f"par{r}"))
                par_t.append(t)
                same.append(fingerprint(par) == fingerprint(base))
                requests = base.stats.get("requests")
                print(
                    f"  (a) repeat {r + 1}: sequential {seq_t[-1]:.1f} s, concurrency {args.concurrency} "
                    f"{par_t[-1]:.1f} s, identical {same[-1]}",
                    flush=True,
                )
            rows.append(
                (
                    f"(a) JEV, 200 ms server: sequential vs --concurrency {args.concurrency}",
                    statistics.median(seq_t),
                    statistics.median(par_t),
                    all(same),
                    f"{requests} requests per run; " + ratio_spread(seq_t, par_t),
                )
            )
        finally:
            server.terminate()
            server.wait()

    # (b) lexical: a judge that computes
    if "lexical" not in args.skip:
        # as `sag2wb eval --processes 2` runs without --traces: workers send records, not traces
        rec_seq, rec_pool, rec_same = [], [], []
        for r in range(args.lexical_repeats):
            t, base = timed(lambda: evaluate(index, questions, "lexical", options=RunOptions(progress=False)))
            rec_seq.append(t)
            pool = Processes(2)
            try:
                t, got = timed(
                    lambda: evaluate(index, questions, "lexical", options=RunOptions(progress=False, executor=pool))
                )
                rec_pool.append(t)
            finally:
                pool.close(wait=True)
            rec_same.append(fingerprint(got) == fingerprint(base))
            print(
                f"  (b) repeat {r + 1}, records only: 1 process {rec_seq[-1]:.2f} s, 2 processes {rec_pool[-1]:.2f} s "
                f"(pool started inside), identical {rec_same[-1]}",
                flush=True,
            )
        rows.append(
            (
                "(b) lexical, records only (eval without --traces)",
                statistics.median(rec_seq),
                statistics.median(rec_pool),
                all(rec_same),
                ratio_spread(rec_seq, rec_pool),
            )
        )
        seq_t, cold_t, warm_t, same, seq_cpu, pool_cpu = [], [], [], [], [], []
        for r in range(args.lexical_repeats):
            c0 = time.process_time()
            t, base = timed(
                lambda: evaluate(index, questions, "lexical", options=RunOptions(progress=False, keep_traces=True))
            )
            seq_t.append(t)
            seq_cpu.append(time.process_time() - c0)
            pool = Processes(2)
            c0, k0 = time.process_time(), children_cpu()
            try:
                t, cold = timed(
                    lambda: evaluate(
                        index, questions, "lexical", options=RunOptions(progress=False, keep_traces=True, executor=pool)
                    )
                )
                cold_t.append(t)
                t, warm = timed(
                    lambda: evaluate(
                        index, questions, "lexical", options=RunOptions(progress=False, keep_traces=True, executor=pool)
                    )
                )
                warm_t.append(t)
            finally:
                pool.close(wait=True)  # the workers' CPU time is counted once they exited
            # CPU per run of the pool (cold and warm runs together, halved): the caller's + the workers'
            pool_cpu.append(((time.process_time() - c0) / 2, (children_cpu() - k0) / 2))
            same.append(fingerprint(cold) == fingerprint(base) == fingerprint(warm))
            print(
                f"  (b) repeat {r + 1}: 1 process {seq_t[-1]:.1f} s, 2 processes {cold_t[-1]:.1f} s cold / "
                f"{warm_t[-1]:.1f} s warm, identical {same[-1]}; CPU per run: 1 process {seq_cpu[-1]:.2f} s, "
                f"pool {pool_cpu[-1][0]:.2f} s caller + {pool_cpu[-1][1]:.2f} s workers",
                flush=True,
            )
        caller, workers = (statistics.median(x[i] for x in pool_cpu) for i in (0, 1))
        # on an idle 2-core machine the pool's run cannot beat (caller + workers) / 2 CPU seconds
        print(
            f"  (b) CPU medians: 1 process {statistics.median(seq_cpu):.2f} s; pool {caller:.2f} s caller + "
            f"{workers:.2f} s workers -> CPU-bound speed-up on 2 idle cores <= "
            f"{statistics.median(seq_cpu) / ((caller + workers) / 2):.2f}x",
            flush=True,
        )
        rows.append(
            (
                "(b) lexical, traces kept: 1 process vs 2 (cold pool)",
                statistics.median(seq_t),
                statistics.median(cold_t),
                all(same),
                ratio_spread(seq_t, cold_t),
            )
        )
        rows.append(
            (
                "(b) lexical, traces kept: 1 process vs 2 (warm pool)",
                statistics.median(seq_t),
                statistics.median(warm_t),
                all(same),
                ratio_spread(seq_t, warm_t),
            )
        )

    # (c) Dask LocalCluster, 2 worker processes
    if "dask" not in args.skip:
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
            ) as cluster,
            Client(cluster) as client,
        ):
            t_seq, base = timed(
                lambda: evaluate(index, questions, "lexical", options=RunOptions(progress=False, keep_traces=True))
            )
            t_dask, got = timed(
                lambda: evaluate(
                    index,
                    questions,
                    "lexical",
                    options=RunOptions(progress=False, keep_traces=True, executor=Dask(client)),
                )
            )
            rows.append(
                (
                    "(c) lexical on a 2-worker Dask LocalCluster (first run)",
                    t_seq,
                    t_dask,
                    fingerprint(got) == fingerprint(base),
                    "",
                )
            )
            server, url = start_server(200)
            try:
                opts = {"endpoint": url, "cache_dir": str(tmp / "cache-dask-seq"), "timeout": 60}
                t_seq, base = timed(
                    lambda: evaluate(
                        index,
                        questions,
                        JudgeSpec.parse("jev", **opts),
                        options=RunOptions(progress=False, keep_traces=True),
                    )
                )
                killed = []

                def kill_one(outcome):
                    if killed:
                        return
                    busy = [w for w, keys in client.processing().items() if keys]
                    if busy:
                        pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)

                opts = {**opts, "cache_dir": str(tmp / "cache-dask")}
                t_dask, got = timed(
                    lambda: evaluate(
                        index,
                        questions,
                        JudgeSpec.parse("jev", **opts),
                        options=RunOptions(
                            progress=False,
                            keep_traces=True,
                            memo=JudgmentMemo(),
                            executor=Dask(client),
                            hooks=Hooks(on_arrival=kill_one),
                        ),
                    )
                )
                rows.append(
                    (
                        "(c) JEV on Dask, one worker SIGKILLed mid-run",
                        t_seq,
                        t_dask,
                        fingerprint(got) == fingerprint(base),
                        f"worker killed: {bool(killed)}",
                    )
                )
            finally:
                server.terminate()
                server.wait()

    print(f"\n{'comparison':58s} {'baseline s':>10s} {'parallel s':>10s} {'speed-up':>8s}  identical")
    for name, a, b, same, note in rows:
        print(f"{name:58s} {a:10.1f} {b:10.1f} {a / b:7.2f}x  {same}  {note}")
    print(load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
