"""Compare whole SAG2 trajectories with an independent implementation's output.

The other side's output comes from `benchmarks/reference_adapter.py` (see REFERENCE.md):
per question, per round: candidates (retrieval order), selected terms (priority order),
pool, context, scores, the round's ranking, and the final ranking after diversity.
This script runs the workbench with the same deterministic judge and reports every
difference, field by field, so each can be explained.

    python benchmarks/compare_reference.py --corpus ../shared/data/2wiki/corpus.json \
        --questions ../shared/data/2wiki/questions-dev.jsonl --judge hash \
        --reference /work/refout/2wiki-hash.json [--db /tmp/2wiki.sqlite] [--json diff.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))  # comparison_judges.py (test-only judges)
import comparison_judges  # noqa: E402

from workbench.engine import Run  # noqa: E402
from workbench.index.corpora import load_corpus, load_questions  # noqa: E402
from workbench.index.store import open_or_build  # noqa: E402
from workbench.judges import FunctionJudge, OracleJudge  # noqa: E402
from workbench.params import Params  # noqa: E402

FIELDS = [
    ("candidates", "candidates"),
    ("terms", "terms"),
    ("pool", "pool"),
    ("context", "context"),
    ("ranking", "ranked_after"),
]


def our_rounds(trace) -> list[dict]:
    """The CLI's per-round record, plus each round's ranking (the other side lists it)."""
    return [
        {**summary, "ranking": trace.titles(r.ranking) if r.scored else [], "scored": r.scored}
        for summary, r in zip(trace.summary()["rounds"], trace.rounds)
    ]


def first_difference(a: list, b: list):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    if len(a) != len(b):
        return min(len(a), len(b)), a[len(b) :][:1], b[len(a) :][:1]
    return None


def compare(trace, ref_q: dict) -> list[dict]:
    diffs = []
    ours = our_rounds(trace)
    theirs = ref_q.get("rounds", [])
    if len(ours) != len(theirs):
        diffs.append({"field": "rounds", "ours": len(ours), "theirs": len(theirs)})
    for o, t in zip(ours, theirs):
        for mine, other in FIELDS:
            if other not in t:
                continue
            a, b = o[mine], t[other]
            if mine == "ranking":
                if not o["scored"]:
                    continue
                b = b[: trace.params.B]  # the other side lists the whole scored pool; SPEC keeps the first B
            if a != b:
                diffs.append(
                    {
                        "round": o["round"],
                        "field": mine,
                        "first": first_difference(a, b),
                        "ours_len": len(a),
                        "theirs_len": len(b),
                    }
                )
        if "scores" in t and o["scored"]:
            common = set(o["scores"]) & set(t["scores"])
            bad = [k for k in common if o["scores"][k] != t["scores"][k]]
            if bad:
                diffs.append({"round": o["round"], "field": "scores", "units": bad[:5]})
    final_ours = trace.documents()
    if final_ours[:10] != ref_q["ranking"][:10]:
        diffs.append({"field": "final top 10", "first": first_difference(final_ours[:10], ref_q["ranking"][:10])})
    elif final_ours != ref_q["ranking"][: len(final_ours)]:
        diffs.append({"field": "final ranking", "first": first_difference(final_ours, ref_q["ranking"])})
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--reference", required=True, help="the adapter's OUT.json")
    ap.add_argument("--judge", choices=["hash", "hash_context_free", "oracle"], required=True)
    ap.add_argument("--db", default=None)
    ap.add_argument("--json", default=None, help="write every difference here")
    args = ap.parse_args(argv)

    ref = json.loads(Path(args.reference).read_text(encoding="utf-8"))
    ref_by_id = {q["_id"]: q for q in ref["questions"]}
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "compare.sqlite"
    index, _ = open_or_build(load_corpus(args.corpus), db, source=args.corpus)
    questions = [q for q in load_questions(args.questions) if q.id in ref_by_id]
    fn = {"hash": comparison_judges.hash_judge, "hash_context_free": comparison_judges.hash_judge_context_free}
    t0 = time.perf_counter()
    all_diffs, identical, counts = {}, 0, Counter()
    for q in questions:
        judge = OracleJudge(q.gold) if args.judge == "oracle" else FunctionJudge(fn[args.judge], args.judge)
        trace = Run(index, q, Params(), judge).run()
        diffs = compare(trace, ref_by_id[q.id])
        if diffs:
            all_diffs[q.id] = diffs
            for d in diffs:
                counts[(d.get("round"), d["field"])] += 1
        else:
            identical += 1
    elapsed = time.perf_counter() - t0
    print(
        f"{len(questions)} questions, judge {args.judge}: {identical} identical trajectories "
        f"(every round's candidates, terms, pool, context, scores, ranking and the final ranking); "
        f"{len(all_diffs)} with differences  [{elapsed:.1f} s]"
    )
    for (rnd, field), n in sorted(counts.items(), key=lambda x: (str(x[0][0]), x[0][1])):
        print(f"  round {rnd}: {field}: {n} questions")
    for qid, diffs in list(all_diffs.items())[:10]:
        print(f"  {qid}: {json.dumps(diffs, ensure_ascii=False)[:400]}")
    if args.json:
        Path(args.json).write_text(json.dumps(all_diffs, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0 if not all_diffs else 1


if __name__ == "__main__":
    sys.exit(main())
