"""Local engine overhead on 2Wiki with an instant judge, re-runs from cached judgments, and
memory. Prints figures; asserts nothing.

    python benchmarks/bench_engine.py [--data ../shared/data] [--db /tmp/2wiki.sqlite]

Figures: per-question wall time of all rounds (retrieval, term selection, pools, context,
ranking, diversity, trace) with a cheap judge (a hash of title and context), and the same
less the judge function's own time (the local overhead: what an instant judge would cost);
the same questions re-run as new Runs sharing the judgment memo (no judge call); a
`Run.rerun` from round 2 with a changed parameter; resident memory.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need, peak_rss_mib, rss_mib  # noqa: E402

import comparison_judges  # noqa: E402

from workbench.corpora import load_corpus, load_questions  # noqa: E402
from workbench.engine import Run  # noqa: E402
from workbench.index import open_or_build  # noqa: E402
from workbench.judges import FunctionJudge, JudgmentMemo  # noqa: E402
from workbench.params import Params  # noqa: E402


def ms(xs):
    return f"median {statistics.median(xs) * 1000:.1f} ms, p90 {sorted(xs)[int(0.9 * len(xs)) - 1] * 1000:.1f} ms, mean {statistics.mean(xs) * 1000:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    rss_start = rss_mib()
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "2wiki.sqlite"
    index, built = open_or_build(load_corpus(corpus), db)
    judge_seconds = [0.0]

    def timed_hash_judge(question, candidates, context):
        t = time.perf_counter()
        try:
            return comparison_judges.hash_judge(question, candidates, context)
        finally:
            judge_seconds[0] += time.perf_counter() - t

    judge = FunctionJudge(timed_hash_judge, "hash")
    memo = JudgmentMemo()
    Run(index, "warm up the tokenizer and collator", Params(), judge).run()  # one-off process start-up
    rss_ready = rss_mib()

    first, overhead, again, rerun, rounds = [], [], [], [], []
    runs = []
    for q in questions:
        judge_seconds[0] = 0.0
        t = time.perf_counter()
        run = Run(index, q, Params(), judge, memo=memo)
        trace = run.run()
        first.append(time.perf_counter() - t)
        overhead.append(first[-1] - judge_seconds[0])
        rounds.append(len(trace.rounds))
        runs.append(run)
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

    print(f"index: {db} ({index.N} units){' built now' if built else ''}")
    print(f"first run of each question (all rounds, hash judge included): {ms(first)}; rounds per question: "
          f"{statistics.mean(rounds):.2f}")
    print(f"local overhead per question (the same runs less the judge function's own time): {ms(overhead)}")
    print(f"same questions again from cached judgments (new Run, shared memo; judgments asked of the judge: "
          f"{again_calls}): {ms(again)}")
    print(f"Run.rerun from round 2 with incoming_limit=30 (rounds 0-1 kept; new judgments: "
          f"{memo.misses - calls_before - again_calls}): {ms(rerun)}")
    print(f"resident memory: start {rss_start:.0f} MiB, index open + warm-up {rss_ready:.0f} MiB, "
          f"after {len(questions) * 3} runs {rss_mib():.0f} MiB (peak {peak_rss_mib():.0f} MiB)")


if __name__ == "__main__":
    main()
