"""Benchmark: the paper's R@k against ir_measures' and pt.Experiment's on the 100 2Wiki dev
questions (bm25, lexical and oracle judges), and the time the PyTerrier wrapper adds. Prints
figures; no assertions (tests/test_formats.py and tests/test_pyterrier.py hold the checks).

    python benchmarks/bench_ecosystem.py [--data ../shared/data] [--db /tmp/sag2wb-bench/2wiki.sqlite] [--repeats 3]

Each timing repeat runs the same configuration through `evaluate` and through
`SAG2Retriever.transform`, each from a cold judgment memo. The two take turns, so they share
the machine's load at the time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pyterrier as pt  # noqa: E402
from _common import data_arg, need  # noqa: E402
from pyterrier.measures import R  # noqa: E402

from workbench.index.corpora import load_corpus, load_questions  # noqa: E402
from workbench.index.store import Index  # noqa: E402
from workbench.measures import per_question, qrels_frame, topics_frame  # noqa: E402
from workbench.pyterrier import BM25Retriever, SAG2Retriever  # noqa: E402
from workbench.runs.evaluation import evaluate  # noqa: E402
from workbench.runs.options import RunOptions  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arg(ap)
    ap.add_argument("--db", default="/tmp/sag2wb-bench/2wiki.sqlite")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    db = Path(args.db)
    wiki = Path(args.data) / "2wiki"
    index = Index(db) if db.exists() else Index.build(load_corpus(need(wiki / "corpus.json")), db)
    questions = load_questions(need(wiki / "questions-dev.jsonl"))
    topics, qrels = topics_frame(questions), qrels_frame(questions)
    print(f"{len(questions)} questions, index {db}")
    print(
        f"{'judge':8s} {'ours R@5':>9s} {'irm R@5':>9s} {'pt R@5':>9s} {'ours R@10':>10s} {'irm R@10':>9s} "
        f"{'pt R@10':>9s} {'values differing':>20s}"
    )
    for judge in ("bm25", "lexical", "oracle"):
        result = evaluate(index, questions, judge, options=RunOptions(progress=False))
        irm = per_question(result.records, questions, ["R@5", "R@10"])
        differ = sum(abs(irm[r["_id"]][m] * 100 - r[m]) > 1e-9 for r in result.records for m in ("R@5", "R@10"))
        system = BM25Retriever(index) if judge == "bm25" else SAG2Retriever(index, judge, qrels=qrels)
        table = pt.Experiment([system], topics, qrels, eval_metrics=[R @ 5, R @ 10])
        mean = lambda m: sum(r[m] for r in result.records) / len(result.records)  # noqa: E731
        irm_mean = lambda m: 100 * sum(v[m] for v in irm.values()) / len(irm)  # noqa: E731
        print(
            f"{judge:8s} {mean('R@5'):9.4f} {irm_mean('R@5'):9.4f} {100 * table['R@5'][0]:9.4f} "
            f"{mean('R@10'):10.4f} {irm_mean('R@10'):9.4f} {100 * table['R@10'][0]:9.4f} {differ:20d}"
        )

    evaluate_times, transform_times = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        evaluate(index, questions, "lexical", options=RunOptions(progress=False))
        t1 = time.perf_counter()
        SAG2Retriever(index, "lexical").transform(topics)
        t2 = time.perf_counter()
        evaluate_times.append(t1 - t0)
        transform_times.append(t2 - t1)
    e, t = statistics.median(evaluate_times), statistics.median(transform_times)
    print(
        f"lexical, 100 questions, median of {args.repeats}: evaluate {e:.2f} s, SAG2Retriever.transform {t:.2f} s "
        f"({t / e:.2f}x); runs evaluate {', '.join(f'{x:.2f}' for x in evaluate_times)}, "
        f"transform {', '.join(f'{x:.2f}' for x in transform_times)}; JVM started: {pt.java.started()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
