"""Whole trajectories of a question set as canonical trace JSON, one line per question and
judge, to compare two versions of the engine or two postings modes byte for byte.

    python benchmarks/dump_trajectories.py --corpus ../shared/data/2wiki/corpus.json \
        --questions ../shared/data/2wiki/questions-dev.jsonl --out before.jsonl [--max-postings 0]
    cmp before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))  # comparison_judges.py (test-only judges)
import comparison_judges  # noqa: E402

from workbench.engine import Run  # noqa: E402
from workbench.index.corpora import load_corpus, load_questions  # noqa: E402
from workbench.index.store import Index  # noqa: E402
from workbench.judges import FunctionJudge, OracleJudge  # noqa: E402
from workbench.judges.lexical import LexicalJudge
from workbench.params import Params  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--db", default=None, help="an index of the corpus to use instead of building one")
    ap.add_argument("--max-postings", type=int, default=None, help="Index(max_postings=...) (0: FTS5's bm25)")
    args = ap.parse_args()
    questions = load_questions(args.questions)
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "index.sqlite"
    if not args.db:
        Index.build(load_corpus(args.corpus), db).close()
    index = Index(db) if args.max_postings is None else Index(db, max_postings=args.max_postings)
    judges = {"hash": FunctionJudge(comparison_judges.hash_judge, "hash"), "lexical": LexicalJudge(index)}
    with open(args.out, "w", encoding="utf-8") as out:
        for q in questions:
            for name, judge in [*judges.items(), ("oracle", OracleJudge(q.gold))]:
                trace = Run(index, q, Params(), judge).run()
                out.write(trace.to_json(stats=False) + "\n")
    print(f"{len(questions)} questions x {len(judges) + 1} judges -> {args.out}")


if __name__ == "__main__":
    main()
