"""Benchmark: the paper's ablation (bm25, H=0/1/2, no-context, matched-budget, final-only)
over the 100 2Wiki dev questions with offline judges. Prints wall time and the B.1-like
table per judge; no assertions (target: ≤ 2 minutes per judge on the project machines).

    python benchmarks/bench_ablate.py                       # oracle and lexical
    python benchmarks/bench_ablate.py --judges lexical --db /tmp/2wiki.sqlite

The index is built once (if --db does not exist) from ../shared/data/2wiki/corpus.json.
Each judge's run starts from a cold in-process judgment memo (no resume file).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workbench.index.corpora import check_gold, load_corpus, load_questions  # noqa: E402
from workbench.index.store import Index  # noqa: E402
from workbench.judges import JudgmentMemo  # noqa: E402
from workbench.params import Params  # noqa: E402
from workbench.runs.experiment import Experiment, paper_ablation  # noqa: E402
from workbench.runs.options import RunOptions  # noqa: E402
from workbench.runs.results import REFERENCE_ROW, ablation_markdown, ablation_report  # noqa: E402

SHARED = Path(os.environ.get("SAG2WB_SHARED_DATA", REPO.parent / "shared" / "data"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(SHARED / "2wiki" / "corpus.json"))
    ap.add_argument("--questions", default=str(SHARED / "2wiki" / "questions-dev.jsonl"))
    ap.add_argument("--db", default="/tmp/sag2wb-bench/2wiki.sqlite")
    ap.add_argument("--judges", default="oracle,lexical")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)

    db = Path(args.db)
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        Index.build(load_corpus(args.corpus), db, source=args.corpus)
        print(f"built {db} in {time.perf_counter() - t0:.2f} s")
    index = Index(db)
    questions = load_questions(args.questions)
    check_gold(questions, set(index.documents.values()), args.questions)
    print(
        f"{index}; {len(questions)} questions from {args.questions}; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}\n"
    )

    for judge in [j.strip() for j in args.judges.split(",") if j.strip()]:
        memo = JudgmentMemo()
        t0 = time.perf_counter()
        results = Experiment(
            index, questions, paper_ablation(Params(), judge), RunOptions(memo=memo, progress=args.progress)
        ).run()
        seconds = time.perf_counter() - t0
        report = ablation_report(results, judge)
        calls = memo.hits + memo.misses
        print(
            f"== judge {judge}: 7 rows x {len(questions)} questions in {seconds:.1f} s "
            f"(judgments asked {calls:,}: {memo.misses:,} computed, {memo.hits:,} shared between rows)"
        )
        print(ablation_markdown(results, report, f"2Wiki dev ({len(questions)} questions), judge {judge}"))
        c = results.compare("H=1", "H=0")
        print(
            f"H=1 vs H=0: {c['difference']:+.2f} R@10 [{c['low']:.2f}, {c['high']:.2f}]; "
            f"no-context vs {REFERENCE_ROW}: {results.compare('no-context', REFERENCE_ROW)['difference']:+.2f}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
