"""The JEV client's CPU against the in-process lexical judge on the same questions, and the
client's --concurrency scaling against a slow server (prints, no asserts; issue 33).

    .venv/bin/python benchmarks/bench_jev_cpu.py --db DB [--data ../shared/data/2wiki] [--questions 30]
        [--repeat 3] [--part cpu|concurrency|both] [--delay-ms 200] [--concurrency 16]

cpu: `sag2wb judge-server --judge lexical` (answers at once) and `sag2wb eval --judge jev`
    against it, an empty cache each time, --concurrency 1; beside it `sag2wb eval --judge lexical`
    in process. Every figure is one process's CPU (user + sys, from wait4 for the eval processes,
    /proc/PID/stat before and after for the server): the client's is the eval process's.
concurrency: a server answering with the built-in hash judge `--delay-ms` late; the same eval at
    --concurrency 1 and N (wall time, and the client's CPU); with --old-tree, that tree's client too
    (alternated, against the same server).
--split: one more eval per tree at --concurrency N, its CPU split by thread (the question threads, the
    JEV client's event loop, its HTTP threads, the main thread: imports, setup, writing the results;
    read from /proc/self/task every 0.1 s, so a thread that ended is counted as last seen) and when
    its first and last requests went out and were answered.
Medians of `--repeat` runs, the two sides alternated so they share the same minutes.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAG2WB = [sys.executable, "-m", "workbench.cli"]  # run in a tree's folder: that tree's code (--old-tree)
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid: int) -> float:
    """user + sys seconds of a live process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_cpu(cmd: list[str], tree: Path = ROOT) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process run to its end."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        assert proc.stderr is not None
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}): {proc.stderr.read().decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


class Server:
    def __init__(self, judge: str, db: Path, delay_ms: int = 0, tree: Path = ROOT):
        self.port = free_port()
        cmd = [*SAG2WB, "judge-server", "--judge", judge, "--db", str(db), "--port", str(self.port)]
        if delay_ms:
            cmd += ["--delay-ms", str(delay_ms)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tree)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "http://" not in line:
            raise SystemExit(f"judge-server {judge} did not start: {line}")
        self.url = f"http://127.0.0.1:{self.port}/v1/systemone"

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


# Runs `sag2wb eval ...` in this process with a poller thread, and prints the CPU of each kind of
# thread (by Python thread name) and the request timeline as one JSON line on stderr at exit.
SPLIT_RUNNER = r"""
import atexit, json, os, sys, threading, time
TICK = os.sysconf("SC_CLK_TCK")
seen, marks, T0 = {}, [], time.perf_counter()
def snap():
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(tid) or seen.get(tid, ("other",))[0]
        seen[tid] = (name, (int(f[11]) + int(f[12])) / TICK)
def poll():
    while True:
        snap()
        time.sleep(0.1)
threading.Thread(target=poll, name="poller", daemon=True).start()
import workbench.judges.jev.client as client
post = client.JEVClient.post
async def timed_post(self, *args, **kwargs):
    marks.append(("sent", time.perf_counter() - T0))
    try:
        return await post(self, *args, **kwargs)
    finally:
        marks.append(("answered", time.perf_counter() - T0))
client.JEVClient.post = timed_post
def report():
    snap()
    kinds = {}
    for name, cpu in seen.values():
        kind = name.split("_")[0].rstrip("-0123456789") if name.startswith(("sag2wb-question", "jev-http")) else name
        kinds[kind] = round(kinds.get(kind, 0) + cpu, 2)
    sent = [t for k, t in marks if k == "sent"]
    answered = [t for k, t in marks if k == "answered"]
    times = {"first sent": min(sent, default=0), "last answered": max(answered, default=0),
             "exit": time.perf_counter() - T0}
    print("SPLIT " + json.dumps({"threads": kinds, "at": {k: round(v, 2) for k, v in times.items()}}), file=sys.stderr)
atexit.register(report)
sys.argv = ["sag2wb", *sys.argv[1:]]
from workbench.cli.main import main
sys.exit(main())
"""


def run_split(cmd: list[str], tree: Path) -> dict:
    """The SPLIT_RUNNER's figures for `cmd` (a `sag2wb` command line: SAG2WB + arguments)."""
    import json

    proc = subprocess.run([sys.executable, "-c", SPLIT_RUNNER, *cmd[len(SAG2WB) :]], cwd=tree, capture_output=True,
                          text=True, check=False)  # fmt: skip
    line = next((x for x in proc.stderr.splitlines() if x.startswith("SPLIT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"split run failed ({proc.returncode}): {proc.stderr[-500:]}")
    return json.loads(line[len("SPLIT ") :])


def eval_cmd(db: Path, questions: Path, out: Path, judge: list[str], concurrency: int) -> list[str]:
    return [*SAG2WB, "eval", "--db", str(db), "--questions", str(questions), "--out", str(out), "--force",
            "--quiet", "--concurrency", str(concurrency), *judge]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "2wiki"))
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--part", choices=("cpu", "concurrency", "both"), default="both")
    ap.add_argument("--delay-ms", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--old-tree", type=Path, help="another checkout (e.g. `git archive HEAD`), measured alongside")
    ap.add_argument("--old-db", type=Path, help="the index built by --old-tree's code (default: --db)")
    ap.add_argument("--split", action="store_true", help="concurrency: also one run at N split by thread")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-jev-cpu-"))
    lines = (Path(args.data) / "questions-dev.jsonl").read_text().splitlines()[: args.questions]
    qfile = tmp / "questions.jsonl"
    qfile.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} dev questions; load average {os.getloadavg()[0]:.1f} at the start")

    def jev(url: str, n: int) -> list[str]:
        cache = tempfile.mkdtemp(prefix="cache-", dir=tmp)
        return ["--judge", "jev", "--jev-endpoint", url, "--cache-dir", cache]

    if args.part in ("cpu", "both"):
        trees = [("this tree", ROOT, args.db)]
        if args.old_tree:
            trees.append(("old tree", args.old_tree, args.old_db or args.db))
        m = statistics.median
        figures: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in trees}
        for i in range(args.repeat):
            for name, tree, db in trees:  # alternated: the same minutes for both
                f = figures[name]
                server = Server("lexical", db, tree=tree)
                try:
                    c, w = run_cpu(eval_cmd(db, qfile, tmp / "lex.json", ["--judge", "lexical"], 1), tree)
                    f.setdefault("lexical", []).append(c)
                    f.setdefault("lexical wall", []).append(w)
                    before = server.cpu()
                    c, w = run_cpu(eval_cmd(db, qfile, tmp / "jev.json", jev(server.url, i), 1), tree)
                    f.setdefault("server", []).append(server.cpu() - before)
                    f.setdefault("client", []).append(c)
                    f.setdefault("client wall", []).append(w)
                finally:
                    server.close()
        for name, _, _ in trees:
            f = figures[name]
            print(
                f"cpu ({name}): lexical in process {m(f['lexical']):.2f} s CPU ({m(f['lexical wall']):.2f} s wall); "
                f"JEV client {m(f['client']):.2f} s CPU ({m(f['client wall']):.2f} s wall), its server "
                f"{m(f['server']):.2f} s CPU; client / lexical {m(f['client']) / m(f['lexical']):.2f}x "
                f"(runs: lexical {[round(x, 2) for x in f['lexical']]}, client {[round(x, 2) for x in f['client']]})"
            )
    if args.part in ("concurrency", "both"):
        server = Server("hash", args.db, args.delay_ms)  # this tree's code, serving both trees' clients
        n = args.concurrency
        trees = [("this tree", ROOT, args.db)] + (
            [("old tree", args.old_tree, args.old_db or args.db)] if args.old_tree else []
        )
        runs: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in trees}
        try:
            for i in range(args.repeat):
                for name, tree, db in trees:  # alternated: the same minutes for both
                    for k in (1, n):
                        before = server.cpu()
                        c, w = run_cpu(eval_cmd(db, qfile, tmp / f"c{k}.json", jev(server.url, i), k), tree)
                        f = runs[name]
                        f.setdefault(f"wall {k}", []).append(w)
                        f.setdefault(f"cpu {k}", []).append(c)
                        f.setdefault(f"served {k}", []).append(server.cpu() - before)
            if args.split:
                for name, tree, db in trees:
                    cmd = eval_cmd(db, qfile, tmp / "split.json", jev(server.url, 0), n)
                    print(f"split ({name}, {n} at once): {run_split(cmd, tree)}")
        finally:
            server.close()
        m = statistics.median
        for name, _, _ in trees:
            f = runs[name]
            print(
                f"concurrency ({name}; {args.delay_ms} ms server, hash judge): 1 at once {m(f['wall 1']):.1f} s wall "
                f"({m(f['cpu 1']):.2f} s CPU, server {m(f['served 1']):.2f} s), {n} at once {m(f[f'wall {n}']):.1f} s "
                f"({m(f[f'cpu {n}']):.2f} s CPU, server {m(f[f'served {n}']):.2f} s): "
                f"{m(f['wall 1']) / m(f[f'wall {n}']):.2f}x (walls 1: {[round(x, 1) for x in f['wall 1']]}, "
                f"{n}: {[round(x, 1) for x in f[f'wall {n}']]}; ratios per repeat: "
                f"{[round(a / b, 2) for a, b in zip(f['wall 1'], f[f'wall {n}'])]})"
            )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
