"""The JEV cost estimate (`sag2wb eval --judge jev ... --estimate`) against real runs through a
local `sag2wb judge-server` on 2Wiki dev: requests, judgments and input tokens, per question and
in total (prints a markdown table for docs/jev.md; no asserts).

    .venv/bin/python benchmarks/bench_estimate.py [--data ../shared/data/2wiki] [--db DB]
        [--proxy learned] [--servers data-hash semantic] [--style stateful] [--concurrency 8]

1. The estimate: the questions run with the proxy judge, every round's requests counted.
2. Per served judge: `sag2wb judge-server --judge J` and `sag2wb eval --judge jev` against it
   (an empty cache, --trace-dir), both real processes.
3. The run's per-question counts: its traces' rounds replayed through the same counter (the
   stats of a trace are not per question under --concurrency > 1, the judge's counters being
   shared), checked against the run's own totals (requests, judgments_sent,
   estimated_input_tokens) before anything is printed.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.engine import context_items, judge_items  # noqa: E402
from workbench.index.corpora import load_questions  # noqa: E402
from workbench.index.store import Index  # noqa: E402
from workbench.judges.jev.client import resolve_endpoint  # noqa: E402
from workbench.judges.jev.estimate import RequestCounter, estimate_cost, price_for  # noqa: E402
from workbench.judges.jev.judge import JEVJudge  # noqa: E402
from workbench.trace import Trace  # noqa: E402

SAG2WB = str(Path(sys.executable).with_name("sag2wb"))
NAMES = ("requests", "judgments", "input_tokens")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count_trace(counter: RequestCounter, index: Index, trace: Trace) -> dict:
    """The requests a trace's scored rounds took (an empty cache): each round's call rebuilt as the
    engine made it (the pool less its pins; the context with its previous scores)."""
    for r in trace.rounds:
        if not r.scored:
            continue
        todo = [e.unit_id for e in r.pool if e.unit_id not in set(r.pinned)]
        if todo:
            counter.count(trace.question, judge_items(index, todo), context_items(index, r.context))
    return counter.take()


def real_run(args, db: Path, questions: Path, judge: str, work: Path) -> tuple[dict, dict, float]:
    """(the run's stats, its traces by question id, seconds) against a served `judge`."""
    port = free_port()
    cmd = [SAG2WB, "judge-server", "--judge", judge, "--port", str(port)]
    if judge in ("lexical", "semantic", "learned"):
        cmd += ["--db", str(db)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        if "serving" not in line:
            raise SystemExit(f"judge-server {judge} did not start: {line}")
        out, traces = work / f"run-{judge}.json", work / f"traces-{judge}"
        t0 = time.perf_counter()
        subprocess.run(
            [SAG2WB, "eval", "--db", str(db), "--questions", str(questions), "--judge", "jev",
             "--jev-endpoint", f"http://127.0.0.1:{port}/v1/systemone", "--payload-style", args.style,
             "--cache-dir", str(work / f"cache-{judge}"), "--trace-dir", str(traces), "--out", str(out),
             "--concurrency", str(args.concurrency), "--quiet"],
            check=True,
        )  # fmt: skip
        seconds = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=30)
    stats = json.loads(out.read_text())["stats"]
    by_id = {}
    for f in traces.glob("*.json"):
        t = Trace.from_json(f.read_text(encoding="utf-8"))
        by_id[t.question_id] = t
    return stats, by_id, seconds


def spread(ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
    return f"{statistics.median(ratios):.2f} ({q[0]:.2f}–{q[-1]:.2f}; {min(ratios):.2f}–{max(ratios):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "2wiki"))
    ap.add_argument("--db", default=None, help="an index of the corpus (default: built in a temporary folder)")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--proxy", default="learned")
    ap.add_argument("--servers", nargs="+", default=["data-hash", "semantic"])
    ap.add_argument("--style", default="stateful", choices=["stateful", "inline"])
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    data = Path(args.data)
    work = Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    db = Path(args.db) if args.db else work / "2wiki.sqlite"
    if not args.db:
        Index.build(data / "corpus.json", db)
    index = Index(db)
    qfile = work / "questions.jsonl"
    lines = (data / "questions-dev.jsonl").read_text(encoding="utf-8").splitlines()[: args.questions]
    qfile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    questions = load_questions(qfile)
    endpoint = "http://127.0.0.1:1/v1/systemone"  # the loopback family and model jev-latest, as the runs below
    est = estimate_cost(
        index, questions, proxy=args.proxy, endpoint=endpoint, payload_style=args.style, cache_dir=work / "none"
    )
    price = price_for("typesafe/jev-1.13")
    intervals = est.intervals(price)
    predicted = dict(zip(est.questions, est.per_question))
    totals = est.totals()
    print(f"estimate: proxy {args.proxy}, {len(questions)} questions, {args.style}, {est.seconds:.1f} s")
    print(f"  totals {totals}; 95% intervals " + ", ".join(f"{k} {intervals[k]}" for k in NAMES))
    print(f"  cost at {price.model}'s table price: ${sum(est.values(price)['cost']):.4f} {intervals['cost']}")
    url, model, family, _ = resolve_endpoint(endpoint, None)
    planner = JEVJudge(None, url=url, model=model, family=family, payload_style=args.style)
    rows = []
    for judge in args.servers:
        stats, traces, seconds = real_run(args, db, qfile, judge, work)
        counter = RequestCounter(None, planner, None)
        actual = {qid: count_trace(counter, index, traces[qid]) for qid in est.questions}
        check = {k: sum(a[k] for a in actual.values()) for k in NAMES}
        run_totals = {
            "requests": stats["requests"], "judgments": stats["judgments_sent"],
            "input_tokens": stats["estimated_input_tokens"],
        }  # fmt: skip
        if check != run_totals:
            raise SystemExit(f"replayed traces {check} differ from the run's counters {run_totals}: not comparable")
        print(f"server {judge}: run {seconds:.1f} s (--concurrency {args.concurrency}); totals {run_totals}")
        for k in NAMES:
            ratios = [predicted[q][k] / actual[q][k] for q in est.questions if actual[q][k]]
            lo, hi = intervals[k]
            inside = "yes" if lo <= run_totals[k] <= hi else "no"
            rows.append(
                f"| {judge} | {k.replace('_', ' ')} | {totals[k]:,} | {run_totals[k]:,} | "
                f"{totals[k] / run_totals[k]:.3f} | {spread(ratios)} | [{lo:,.0f}, {hi:,.0f}] {inside} |"
            )
    print()
    print(
        "| server judge | count | estimate | run | total ratio | per question: median (10–90%; min–max) | "
        "estimate's 95% interval, holds the run? |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
