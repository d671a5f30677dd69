"""Local engine overhead on 2Wiki with an instant judge, re-runs from cached judgments, and
memory. Prints figures; asserts nothing.

    python benchmarks/bench_engine.py [--data ../shared/data] [--db /tmp/2wiki.sqlite]
        [--processes 5] [--reference-python /path/to/refvenv/bin/python]

Figures: per-question wall time of all rounds (retrieval, term selection, pools, context,
ranking, diversity, trace) with a cheap judge (a hash of title and context), and the same
less the judge function's own time (the local overhead: what an instant judge would cost).
These "first run" figures come from --processes fresh processes, one after another, each
opening the index and running the 100 dev questions once: this machine's speed drifts by
up to 2x from minute to minute, so every process's median is printed, not one number.
With --reference-python (or SAG2WB_REFERENCE_PYTHON), the reference implementation runs
the same questions with the same judge between our processes, for a same-minutes ratio.
Then, in this process: the questions re-run as new Runs sharing the judgment memo (no
judge call); a `Run.rerun` from round 2 with a changed parameter; resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need, peak_rss_mib, rss_mib

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))  # comparison_judges.py (test-only judges)
import comparison_judges

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index, open_or_build
from workbench.judges import FunctionJudge, JudgmentMemo
from workbench.params import Params


def ms(xs):
    p90 = sorted(xs)[int(0.9 * len(xs)) - 1]
    median, mean = statistics.median(xs), statistics.mean(xs)
    return f"median {median * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, mean {mean * 1000:.1f} ms"


def timed_hash_judge():
    """The hash judge, and a counter of the seconds spent inside it."""
    spent = [0.0]

    def judge(question, candidates, context):
        t = time.perf_counter()
        try:
            return comparison_judges.hash_judge(question, candidates, context)
        finally:
            spent[0] += time.perf_counter() - t

    return FunctionJudge(judge, "hash"), spent


def first_runs(index, questions, memo=None):
    """Each question once, in a process that has run one warm-up question: wall seconds,
    seconds less the judge's own, rounds, and the runs."""
    judge, spent = timed_hash_judge()
    Run(index, "warm up the tokenizer and collator", Params(), judge).run()  # one-off process start-up
    first, overhead, rounds, runs = [], [], [], []
    for q in questions:
        spent[0] = 0.0
        t = time.perf_counter()
        run = Run(index, q, Params(), judge, memo=memo if memo is not None else JudgmentMemo())
        trace = run.run()
        first.append(time.perf_counter() - t)
        overhead.append(first[-1] - spent[0])
        rounds.append(len(trace.rounds))
        runs.append(run)
    return first, overhead, rounds, runs, judge


def child(args) -> None:
    index = Index(args.db)
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    first, overhead, _rounds, _, _ = first_runs(index, questions)
    print(json.dumps({"first": first, "overhead": overhead}))


def reference_median(python: str, data: Path, workdir: Path) -> float | None:
    """The reference implementation's median seconds per question (hash judge)."""
    out = workdir / "reference.json"
    done = subprocess.run(
        [
            python,
            str(Path(__file__).resolve().parent / "reference_adapter.py"),
            "--corpus",
            str(data / "2wiki" / "corpus.json"),
            "--questions",
            str(data / "2wiki" / "questions-dev.jsonl"),
            "--judge",
            "hash",
            "--workdir",
            str(workdir / "reference-index"),
            "--out",
            str(out),
            "--progress",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"reference run failed: {done.stderr.strip()[-300:]}")
        return None
    return json.loads(out.read_text())["search_seconds"]["median"]


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--db", default=None)
    ap.add_argument("--processes", type=int, default=5, help="fresh processes for the first-run figure [5]")
    ap.add_argument(
        "--reference-python",
        default=os.environ.get("SAG2WB_REFERENCE_PYTHON"),
        help="interpreter with zleap-sag2, to time the reference between our processes",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    rss_start = rss_mib()
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "2wiki.sqlite"
    index, built = open_or_build(load_corpus(corpus), db)
    print(f"index: {db} ({index.N} units){' built now' if built else ''}")

    work = Path(tempfile.mkdtemp(prefix="sag2wb-bench-"))
    medians, reference = [], []
    for i in range(args.processes):
        if args.reference_python:
            ref = reference_median(args.reference_python, Path(args.data), work)
            if ref is not None:
                reference.append(ref)
                print(f"  reference implementation, same judge, just before: median {ref * 1000:.1f} ms per question")
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--db", str(db), "--data", args.data],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(done.stdout.strip().splitlines()[-1])
        medians.append(statistics.median(got["overhead"]))
        print(
            f"  process {i + 1}: first run of each question: {ms(got['first'])} (hash judge included); "
            f"local overhead {ms(got['overhead'])}"
        )
    if medians:
        print(
            f"local overhead per question (all rounds, instant judge), median over questions, in "
            f"{len(medians)} fresh processes: {', '.join(f'{m * 1000:.1f}' for m in medians)} ms "
            f"(median {statistics.median(medians) * 1000:.1f} ms, best {min(medians) * 1000:.1f} ms)"
        )
    if reference:
        ratios = [r / m for r, m in zip(reference, medians)]
        print(
            f"reference implementation in the same minutes: {', '.join(f'{r * 1000:.1f}' for r in reference)} ms "
            f"per question; it needs {min(ratios):.1f}-{max(ratios):.1f}x our time"
        )

    memo = JudgmentMemo()
    first, overhead, rounds, runs, judge = first_runs(index, questions, memo)
    rss_ready = rss_mib()
    print(
        f"this process, first runs: {ms(first)}; less the judge: {ms(overhead)}; rounds per question: "
        f"{statistics.mean(rounds):.2f}"
    )
    again, rerun = [], []
    calls_before = memo.misses
    for q in questions:
        t = time.perf_counter()
        Run(index, q, Params(), judge, memo=memo).run()
        again.append(time.perf_counter() - t)
    again_calls = memo.misses - calls_before
    for run in runs:
        t = time.perf_counter()
        run.rerun(params=run.params.replace(incoming_limit=30)).run()
        rerun.append(time.perf_counter() - t)

    print(
        f"same questions again from cached judgments (new Run, shared memo; judgments asked of the judge: "
        f"{again_calls}): {ms(again)}"
    )
    print(
        f"Run.rerun from round 2 with incoming_limit=30 (rounds 0-1 kept; new judgments: "
        f"{memo.misses - calls_before - again_calls}): {ms(rerun)}"
    )
    print(
        f"resident memory: start {rss_start:.0f} MiB, after the first {len(questions)} runs {rss_ready:.0f} MiB, "
        f"after {len(questions) * 3} runs {rss_mib():.0f} MiB (peak {peak_rss_mib():.0f} MiB)"
    )


if __name__ == "__main__":
    main()
