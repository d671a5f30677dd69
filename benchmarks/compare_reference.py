"""Compare whole SAG2 trajectories with an independent implementation's output.

The other side's output comes from `benchmarks/reference_adapter.py` (see REFERENCE.md):
per question, per round: candidates (retrieval order), selected terms (priority order),
pool, context, scores, the round's ranking, and the final ranking after diversity.
This script runs the workbench with the same deterministic judge and reports every
difference, field by field, so each can be explained.

    python benchmarks/compare_reference.py --corpus ../shared/data/2wiki/corpus.json \
        --questions ../shared/data/2wiki/questions-dev.jsonl --judge hash \
        --reference /work/refout/2wiki-hash.json [--db /tmp/2wiki.sqlite] [--json diff.json]

JEV path (`--judge jev`): both sides call the same JEV endpoint, e.g. `sag2wb judge-server
--judge data-hash`; the adapter ran the reference's own client (`--judge jev --jev-url URL
--payload-style S`), this script runs ours (`--jev-endpoint URL --payload-style S`, a fresh cache
folder per run, so every judgment is asked of the server) and compares whole trajectories.
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
import comparison_judges

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import open_or_build
from workbench.judges import FunctionJudge, OracleJudge
from workbench.judges.jev import make_jev_judge
from workbench.params import Params

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


def asking(fn, asked: list):
    """`fn` as a judge function that also keeps the question of every call in `asked`."""

    def judge(question, candidates, context):
        asked.append(question)
        return fn(question, candidates, context)

    return judge


def first_difference(a: list, b: list):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    if len(a) != len(b):
        return min(len(a), len(b)), a[len(b) :][:1], b[len(a) :][:1]
    return None


def compare(trace, ref_q: dict, question: str | None = None, judge_questions: list | None = None) -> list[dict]:
    """Every difference of our trace from the other side's record of the same question.
    `question`: the question as our side read it, which must be the other side's byte for byte
    (surrounding whitespace included): neither harness trims it, each engine does what it does.
    `judge_questions`: the questions our judge calls received (distinct, in order), compared with
    the ones the other side's judge received (its `judge_questions`, when it records them)."""
    diffs = []
    if question is not None and "question" in ref_q and ref_q["question"] != question:
        diffs.append({"field": "question as given", "ours": question, "theirs": ref_q["question"]})
    theirs_asked = ref_q.get("judge_questions")
    if judge_questions is not None and theirs_asked is not None and list(theirs_asked) != list(judge_questions):
        diffs.append({"field": "judge question", "ours": list(judge_questions), "theirs": list(theirs_asked)})
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
    ap.add_argument("--judge", choices=["hash", "hash_context_free", "oracle", "jev"], required=True)
    ap.add_argument("--jev-endpoint", default=None, help="--judge jev: the endpoint our client calls")
    ap.add_argument("--payload-style", choices=["inline", "stateful"], default=None, help="--judge jev")
    ap.add_argument("--jev-model", default=None, help="--judge jev: model name (default: the one the reference sent)")
    ap.add_argument("--cache-dir", default=None, help="--judge jev: cache folder (default: a fresh empty one)")
    ap.add_argument("--db", default=None)
    ap.add_argument("--json", default=None, help="write every difference here")
    args = ap.parse_args(argv)

    ref = json.loads(Path(args.reference).read_text(encoding="utf-8"))
    ref_by_id = {q["_id"]: q for q in ref["questions"]}
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "compare.sqlite"
    index, _ = open_or_build(load_corpus(args.corpus), db, source=args.corpus)
    questions = [q for q in load_questions(args.questions) if q.id in ref_by_id]
    fn = {"hash": comparison_judges.hash_judge, "hash_context_free": comparison_judges.hash_judge_context_free}
    jev = None
    if args.judge == "jev":
        if not args.jev_endpoint:
            ap.error("--judge jev needs --jev-endpoint URL")
        ref_jev = ref.get("jev") or {}
        style = args.payload_style or ref_jev.get("payload_style") or "stateful"
        if ref_jev.get("payload_style") and ref_jev["payload_style"] != style:
            ap.error(f"--payload-style {style}, but the reference ran {ref_jev['payload_style']}")
        cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="sag2wb-jev-cache-")
        jev = make_jev_judge(
            args.jev_endpoint, args.jev_model or ref_jev.get("model"), payload_style=style, cache_dir=cache_dir
        )
    t0 = time.perf_counter()
    all_diffs, identical, counts = {}, 0, Counter()
    requests = 0
    fn_judge = args.judge in fn
    for q in questions:
        asked: list[str] = []
        if jev is not None:
            judge = jev
        elif args.judge == "oracle":
            judge = OracleJudge(q.gold)
        else:
            judge = FunctionJudge(asking(fn[args.judge], asked), args.judge)
        trace = Run(index, q, Params(), judge).run()
        if jev is not None:
            requests += int(trace.stats.get("requests") or 0)
            if trace.stop == "judge error":
                all_diffs[q.id] = [
                    {"field": "judge error", "ours": next((r.error for r in trace.rounds if r.error), None)}
                ]
                counts[(None, "judge error")] += 1
                continue
        diffs = compare(trace, ref_by_id[q.id], q.question, list(dict.fromkeys(asked)) if fn_judge else None)
        if diffs:
            all_diffs[q.id] = diffs
            for d in diffs:
                counts[(d.get("round"), d["field"])] += 1
        else:
            identical += 1
    elapsed = time.perf_counter() - t0
    if jev is not None:
        jev.close()
        theirs = (ref.get("jev") or {}).get("requests")
        print(f"JEV requests ({style}): ours {requests}, reference {theirs}")
    print(
        f"{len(questions)} questions, judge {args.judge}: {identical} identical trajectories "
        f"(every round's candidates, terms, pool, context, scores, ranking and the final ranking); "
        f"{len(all_diffs)} with differences  [{elapsed:.1f} s]"
    )
    for (rnd, field), n in sorted(counts.items(), key=lambda x: (str(x[0][0]), x[0][1])):
        print(f"  round {rnd}: {field}: {n} questions")
    if all_diffs:
        qid, diffs = next(iter(all_diffs.items()))
        print(f"  first difference: {qid}: {json.dumps(diffs[0], ensure_ascii=False)[:400]}")
    for qid, diffs in list(all_diffs.items())[:10]:
        print(f"  {qid}: {json.dumps(diffs, ensure_ascii=False)[:400]}")
    if args.json:
        Path(args.json).write_text(json.dumps(all_diffs, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0 if not all_diffs else 1


if __name__ == "__main__":
    sys.exit(main())
