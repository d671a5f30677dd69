#!/usr/bin/env python3
"""Run the published SAG2 reference (PyPI ``zleap-sag2``) as a black box.

Test-only comparison tool. It must be run with the interpreter of a separate virtualenv
that has ``zleap-sag2`` installed (see benchmarks/REFERENCE.md), e.g.::

    /work/refvenv/bin/python benchmarks/reference_adapter.py \
        --corpus ../shared/data/2wiki/corpus.json \
        --questions ../shared/data/2wiki/questions-dev.jsonl \
        --judge hash --out /work/refout/2wiki-hash.json

It is never imported by the workbench package or its tests. It only uses the reference's
public API (engine, config, options, the benchmark corpus helper) and its documented
``scorer=`` hook: our deterministic judge is supplied as the engine's scoring client, so
the hosted decision service is never contacted. Each question is searched exactly as the
questions file writes it (`request_as_given`: the request model would strip it).

Judges (from tests/comparison_judges.py, plus two local ones):
  bm25              no judge: the ranking is the first-round lexical candidate list
  oracle            1.0 if the candidate's title is a supporting title of the question
  hash              comparison_judges.hash_judge (context-dependent)
  hash_context_free comparison_judges.hash_judge_context_free
  jev               the reference's OWN JEV client (no scorer= hook) calls --jev-url, e.g.
                    `sag2wb judge-server --judge data-hash`; --payload-style inline|stateful.
                    The client is configured the reference's documented way: DECISION_ENDPOINT,
                    DECISION_API_KEY, DECISION_PAYLOAD_STYLE (and DECISION_MODEL with --jev-model)
                    in the environment, read by EngineConfig.from_env(). Its calls are recorded
                    by wrapping the public JevClient.score (the original runs unchanged).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "tests"))

import comparison_judges  # noqa: E402  (tests/comparison_judges.py: a plain module, stdlib only)

try:
    from zleap.sag2 import (
        DataEngine,
        EngineConfig,
        JevClient,
        RelationalConfig,
        SearchOptions,
        SearchRequest,
        SearchScope,
    )
    from zleap.sag2 import (
        __version__ as REF_VERSION,
    )
    from zleap.sag2.benchmark import corpus_chunks
except ImportError as exc:  # pragma: no cover - environment guard
    sys.exit(
        f"reference_adapter: cannot import zleap.sag2 ({exc}); run this script with the "
        "interpreter of the reference virtualenv, e.g. /work/refvenv/bin/python"
    )

DATA_SOURCE = "bench"
MAX_RANKING = 100
JUDGE_MODEL = "local-deterministic-judge"


# --------------------------------------------------------------------------- judges
def oracle_judge_for(supporting_titles):
    gold = set(supporting_titles)

    def oracle(question, candidates, context):
        return [1.0 if c["title"] in gold else 0.0 for c in candidates]

    return oracle


def zero_judge(question, candidates, context):
    return [0.0 for _ in candidates]


JUDGES = {
    "hash": comparison_judges.hash_judge,
    "hash_context_free": comparison_judges.hash_judge_context_free,
}


class RecordingScorer:
    """Scoring client handed to the reference engine via ``DataEngine(scorer=...)``.

    The engine calls ``await score(question, candidates, evidence)`` once per scored
    round and expects ``(scored_candidates, usage)`` back, where each scored candidate is
    the incoming candidate mapping plus a ``jev_score`` in [0, 1]. We translate the
    engine's candidate/evidence mappings into the workbench judge signature, call the
    judge, and keep a record of every call (pool order, context, scores)."""

    def __init__(self):
        self.judge = zero_judge
        self.calls: list[dict] = []

    def reset(self, judge):
        self.judge = judge
        self.calls = []

    async def score(self, query, candidates, evidence):
        cands = [{"title": c["title"], "text": c["content"]} for c in candidates]
        context = []
        for item in evidence:
            entry = {"title": item["title"], "text": item["content"]}
            if "previous_jev_score" in item:
                entry["previous_score"] = item["previous_jev_score"]
            context.append(entry)
        scores = [float(s) for s in self.judge(query, cands, context)]
        if len(scores) != len(cands):
            raise ValueError("judge returned the wrong number of scores")
        self.calls.append(
            {
                "query": query,
                "pool": [(c["id"], c.get("chunk_id"), c["title"]) for c in candidates],
                "context": [(e["id"], e["title"], e.get("previous_jev_score")) for e in evidence],
                "scores": scores,
            }
        )
        scored = [{**c, "jev_score": s, "jev_model": JUDGE_MODEL} for c, s in zip(candidates, scores)]
        usage = {
            "requests": 1,
            "judgments": len(candidates),
            "input_tokens": 0,
            "output_tokens": 0,
            "batches": [],
        }
        return scored, usage


class ReferenceJevRecorder:
    """Records what the reference's own JEV client was asked and answered, per scored round.

    The engine builds its JevClient from ``EngineConfig.jev`` and awaits
    ``score(query, candidates, evidence) -> (scored, usage)``; we wrap that public method on
    the class, call the original unchanged and keep the same record RecordingScorer keeps,
    plus the client's own request count (``usage["requests"]``)."""

    def __init__(self):
        self.calls: list[dict] = []
        self.requests = 0
        self.original = JevClient.score
        recorder = self

        async def score(client, query, candidates, evidence):
            scored, usage = await recorder.original(client, query, candidates, evidence)
            by_id = {c["id"]: c.get("jev_score") for c in scored}
            recorder.calls.append(
                {
                    "query": query,
                    "pool": [(c["id"], c.get("chunk_id"), c["title"]) for c in candidates],
                    "context": [(e["id"], e["title"], e.get("previous_jev_score")) for e in evidence],
                    "scores": [float(by_id[c["id"]]) for c in candidates],
                    "requests": int((usage or {}).get("requests") or 0),
                }
            )
            recorder.requests += int((usage or {}).get("requests") or 0)
            return scored, usage

        JevClient.score = score

    def reset(self, judge=None):
        self.calls = []


def is_loopback_url(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


def reference_jev_config(args, db_path):
    """The reference's engine config with its JEV client pointed at --jev-url, set up the way the
    reference documents (DECISION_* environment variables, EngineConfig.from_env)."""
    if not args.jev_url:
        sys.exit("reference_adapter: --judge jev needs --jev-url URL")
    if not os.environ.get("DECISION_API_KEY"):
        if not is_loopback_url(args.jev_url):
            sys.exit("reference_adapter: --jev-url is not a loopback URL; set DECISION_API_KEY")
        # a local judge server needs no key, but the reference's config requires one: a placeholder
        os.environ["DECISION_API_KEY"] = "local-judge-server-no-key"
    os.environ["DECISION_ENDPOINT"] = args.jev_url
    os.environ["DECISION_PAYLOAD_STYLE"] = args.payload_style
    if args.jev_model:
        os.environ["DECISION_MODEL"] = args.jev_model
    config = EngineConfig.from_env()
    if config.jev is None:
        sys.exit("reference_adapter: EngineConfig.from_env() did not pick up the DECISION_* settings")
    return config.model_copy(update={"relational": RelationalConfig(provider="sqlite", path=str(db_path))})


# --------------------------------------------------------------------------- helpers
def request_as_given(question: str, scope, options):
    """The search request for `question` exactly as the data set writes it (surrounding whitespace
    included). The request model's validation strips the query (found as a black box), so the
    request is validated as usual (its checks and defaults hold, an empty question is refused)
    and then copied with the query as given: `model_copy(update=...)` does not validate again.
    BM25, a `scorer=` judge and the reference's own JEV client then all receive it untrimmed."""
    return SearchRequest(query=question, scope=scope, options=options).model_copy(update={"query": question})


def dedupe(seq):
    seen, out = set(), []
    for x in seq:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def metrics(questions, results):
    r5 = r10 = ae10 = 0.0
    n = 0
    for q, res in zip(questions, results):
        gold = set(q.get("supporting_titles") or [])
        if not gold:
            continue
        n += 1
        ranking = res["ranking"]
        r5 += len(gold & set(ranking[:5])) / len(gold)
        r10 += len(gold & set(ranking[:10])) / len(gold)
        ae10 += 1.0 if gold <= set(ranking[:10]) else 0.0
    if not n:
        return {"R@5": None, "R@10": None, "AE@10": None, "questions": 0}
    return {
        "R@5": round(100 * r5 / n, 4),
        "R@10": round(100 * r10 / n, 4),
        "AE@10": round(100 * ae10 / n, 4),
        "questions": n,
    }


def build_rounds(trace, calls, doc_title, unit_title, max_hops):
    """Turn the reference's per-search trace plus our recorded judge calls into the
    adapter's per-round records. Stop reasons are *inferred* here (the reference does
    not record one); see REFERENCE.md."""
    rounds: dict[int, dict] = {}
    order: list[int] = []
    calls_iter = iter(calls)

    def get(hop):
        if hop not in rounds:
            rounds[hop] = {"round": hop}
            order.append(hop)
        return rounds[hop]

    for entry in trace:
        hop = entry.get("hop")
        stage = entry.get("stage")
        rec = get(hop)
        if stage in ("bm25", "expansion"):
            doc_ids = entry.get("candidate_document_ids") or []
            unit_ids = entry.get("candidate_ids") or []
            rec["candidates"] = [doc_title(d) for d in doc_ids]
            rec["candidate_units"] = list(unit_ids)
            rec["terms"] = list(entry.get("terms") or [])
            details = []
            for t in entry.get("term_scores") or []:
                details.append(
                    {
                        "term": t.get("term"),
                        "kind": t.get("kind"),
                        "surface": t.get("name"),
                        "priority": t.get("score"),
                        "unweighted": t.get("unweighted_score"),
                        "tf": t.get("term_frequency"),
                        "df": t.get("document_frequency"),
                        "connection": t.get("query_context_score"),
                        "seed_weight": t.get("seed_weight"),
                        "seed_score": t.get("seed_jev_score"),
                        "seed": doc_title(t.get("seed_document_id")),
                    }
                )
            if hop:
                rec["term_details"] = details
                queries = []
                for qd in entry.get("expansion_queries") or []:
                    queries.append(
                        {
                            "term": qd.get("term"),
                            "match": qd.get("match_expression"),
                            "retrieved": qd.get("retrieved_count"),
                            # [title, rank in this term's own list, BM25 score as
                            # reported by the reference (negative: lower is better)]
                            "selected": [
                                [
                                    doc_title(s.get("document_id")),
                                    s.get("bm25_rank"),
                                    s.get("bm25_score"),
                                ]
                                for s in qd.get("selected") or []
                            ],
                        }
                    )
                rec["term_queries"] = queries
                if queries:
                    rec["ranking_expression"] = (entry.get("expansion_queries") or [{}])[0].get("ranking_expression")
            rec["stop"] = None
            if not doc_ids:
                if hop == 0:
                    rec["stop"] = "no_candidates"
                elif not rec["terms"]:
                    rec["stop"] = "no_terms"
                else:
                    rec["stop"] = "no_candidates"
        elif stage == "jev":
            call = next(calls_iter, None)
            if call is not None:
                rec["pool"] = [title for _, _, title in call["pool"]]
                rec["pool_units"] = [uid for uid, _, _ in call["pool"]]
                rec["context"] = [title for _, title, _ in call["context"]]
                rec["context_units"] = [uid for uid, _, _ in call["context"]]
                if any(prev is not None for _, _, prev in call["context"]):
                    rec["context_previous_scores"] = [prev for _, _, prev in call["context"]]
                rec["scores"] = {}
                for (_, _, title), s in zip(call["pool"], call["scores"]):
                    rec["scores"].setdefault(title, s)
            rec["ranked_after"] = [unit_title(s["id"]) for s in entry.get("scores") or []]
            rec["ranked_after_units"] = [s["id"] for s in entry.get("scores") or []]
            rec["carried_seed_count"] = entry.get("carried_seed_count")
            rec["protected_count"] = entry.get("protected_bm25_count")
            rec.setdefault("stop", None)
    out = [rounds[h] for h in order]
    if not out:
        # the reference returns an empty result and an empty trace when the question
        # has no usable token (observed); nothing was retrieved or scored
        out = [{"round": 0, "candidates": [], "terms": [], "stop": "no_query_tokens"}]
    # The round-0 query expression is not traced as such, but every expansion round's
    # ranking expression ends with it, parenthesised, after the OR of the term matches.
    for rec in out:
        expr, queries = rec.get("ranking_expression"), rec.get("term_queries") or []
        if expr and queries:
            head = " OR ".join(q["match"] for q in queries) + " OR ("
            if expr.startswith(head) and expr.endswith(")"):
                first = out[0]
                first["query_expression"] = expr[len(head) : -1]
                first["query_tokens"] = [
                    m.replace('""', '"') for m in re.findall(r'"((?:[^"]|"")*)"', first["query_expression"])
                ]
                break
    if out:
        last = out[-1]
        if last.get("stop") is None and "pool" in last:
            # the trace simply ends after a scored round: either the round budget is
            # exhausted, or (inferred) no further retrieval was attempted.
            last["stop"] = "max_rounds" if last["round"] >= max_hops else "no_seeds"
    return out


# --------------------------------------------------------------------------- main
async def run(args):
    corpus = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    questions = [
        json.loads(line) for line in Path(args.questions).read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if args.limit:
        questions = questions[: args.limit]

    # document ids in the reference's trace are 1-based corpus positions
    def doc_title(doc_id):
        if doc_id is None:
            return None
        return corpus[int(doc_id) - 1]["title"].strip()

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sag2ref-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db_path = workdir / "sag2.sqlite"
    if args.judge == "jev":
        config = reference_jev_config(args, db_path)
        scorer = ReferenceJevRecorder()
        engine_scorer = None  # the engine's own JEV client does the scoring
    else:
        config = EngineConfig(relational=RelationalConfig(provider="sqlite", path=str(db_path)))
        scorer = engine_scorer = RecordingScorer()
    # bm25: the zero judge still lets the engine run one (discarded) expansion round, only
    # so that its trace reveals the round-0 query expression; the ranking is C0 as traced.
    max_hops = 1 if args.judge == "bm25" else args.max_hops

    results = []
    async with DataEngine(config, data_source_id=DATA_SOURCE, scorer=engine_scorer) as engine:
        t0 = time.perf_counter()
        # SPEC: one unit per benchmark passage. The reference's benchmark helper splits
        # passages longer than its default size unless told otherwise, so by default we
        # pass a size above the longest passage (--chunk-chars N restores a split).
        chunk_chars = args.chunk_chars or (max((len(d["text"].strip()) for d in corpus), default=0) + 1)
        chunk_set = corpus_chunks(corpus, DATA_SOURCE, chunk_chars=chunk_chars)
        ref = await engine.index(chunk_set)
        index_seconds = time.perf_counter() - t0
        unit_title = {}  # reference unit id -> passage title (filled from its outputs)
        chunk_unit = {}  # reference chunk id (hash) -> unit id used in its trace
        print(
            f"index: {len(chunk_set.chunks)} units from {len(corpus)} passages in "
            f"{index_seconds:.2f}s (reused={ref.reused}) at {db_path}",
            file=sys.stderr,
        )
        scope = SearchScope(data_source_ids=(DATA_SOURCE,))
        options = SearchOptions(top_k=MAX_RANKING, max_hops=max_hops)
        search_seconds = []
        for number, q in enumerate(questions, 1):
            if args.judge == "oracle":
                judge = oracle_judge_for(q.get("supporting_titles") or [])
            elif args.judge == "bm25":
                judge = zero_judge
            elif args.judge == "jev":
                judge = None
            else:
                judge = JUDGES[args.judge]
            scorer.reset(judge)
            t1 = time.perf_counter()
            result = await engine.search(request_as_given(q["question"], scope, options))
            search_seconds.append(time.perf_counter() - t1)
            trace = [dict(t) for t in result.trace]
            for call in scorer.calls:
                for uid, chunk_id, title in call["pool"]:
                    unit_title[uid] = title
                    chunk_unit[chunk_id] = uid
            # unit ids seen only in the trace (never scored) map through their document id
            for entry in trace:
                for uid, did in zip(entry.get("candidate_ids") or [], entry.get("candidate_document_ids") or []):
                    unit_title.setdefault(uid, doc_title(did))
            rounds = build_rounds(trace, scorer.calls, doc_title, lambda u: unit_title.get(u), max_hops)
            if args.judge == "bm25":
                rounds = rounds[:1]
                first = rounds[0] if rounds else {}
                ranking = dedupe(first.get("candidates") or [])[:MAX_RANKING]
                judgments = 0
                for r in rounds:  # the placeholder scoring pass is not a judge
                    for key in (
                        "pool",
                        "pool_units",
                        "context",
                        "scores",
                        "ranked_after",
                        "ranked_after_units",
                        "context_units",
                        "carried_seed_count",
                        "protected_count",
                    ):
                        r.pop(key, None)
                    if r.get("stop") in (None, "max_rounds"):
                        r["stop"] = "bm25_only"
            else:
                ranking = dedupe(h.title.strip() for h in result.chunks)[:MAX_RANKING]
                judgments = sum(len(c["pool"]) for c in scorer.calls)
            results.append(
                {
                    "_id": q.get("_id"),
                    "question": q["question"],
                    "ranking": ranking,
                    "judgments": judgments,
                    "ranking_units": [chunk_unit.get(h.chunk_id, h.chunk_id) for h in result.chunks]
                    if args.judge != "bm25"
                    else [],
                    "final_scores": {h.title.strip(): h.score for h in result.chunks if h.score is not None}
                    if args.judge != "bm25"
                    else {},
                    "rounds": rounds,
                    # the question each judge call received, distinct, in order (none for bm25)
                    "judge_questions": dedupe(c["query"] for c in scorer.calls) if args.judge != "bm25" else [],
                    **({"requests": sum(c["requests"] for c in scorer.calls)} if args.judge == "jev" else {}),
                }
            )
            if args.progress and number % args.progress == 0:
                print(
                    f"{number}/{len(questions)} questions, {sum(search_seconds):.1f}s searching",
                    file=sys.stderr,
                )

    out = {
        "implementation": f"zleap-sag2 {REF_VERSION}",
        "judge": args.judge,
        "corpus": str(args.corpus),
        "questions_file": str(args.questions),
        "parameters": options.model_dump(),
        "index": {
            "passages": len(corpus),
            "units": len(chunk_set.chunks),
            "chunk_chars": args.chunk_chars or None,
            "seconds": round(index_seconds, 3),
            "reused": bool(ref.reused),
            "database_bytes": os.path.getsize(db_path) if db_path.exists() else None,
        },
        "search_seconds": {
            "total": round(sum(search_seconds), 3),
            # the first search also materializes the reference's in-memory lexical index
            "first": round(search_seconds[0], 3) if search_seconds else None,
            "rest_mean": round(sum(search_seconds[1:]) / (len(search_seconds) - 1), 4)
            if len(search_seconds) > 1
            else None,
            "mean": round(sum(search_seconds) / len(search_seconds), 4) if search_seconds else None,
            "median": round(statistics.median(search_seconds), 4) if search_seconds else None,
            "per_question": [round(s, 5) for s in search_seconds],
        },
        "metrics": metrics(questions, results),
        "questions": results,
    }
    if args.judge == "jev":
        out["jev"] = {
            "url": args.jev_url,
            "payload_style": config.jev.payload_style,
            "model": config.jev.model,
            "requests": scorer.requests,
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    m = out["metrics"]
    print(
        f"{out['implementation']} judge={args.judge} n={m['questions']} "
        f"R@5={m['R@5']} R@10={m['R@10']} AE@10={m['AE@10']} "
        f"judgments={sum(r['judgments'] for r in results)} "
        + (f"requests={scorer.requests} style={args.payload_style} " if args.judge == "jev" else "")
        + f"index={index_seconds:.2f}s search={sum(search_seconds):.1f}s -> {args.out}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="corpus.json: list of {title, text}")
    parser.add_argument("--questions", required=True, help="questions .jsonl")
    parser.add_argument("--judge", required=True, choices=["bm25", "oracle", "hash", "hash_context_free", "jev"])
    parser.add_argument("--jev-url", default=None, help="--judge jev: the JEV endpoint the reference's client calls")
    parser.add_argument("--payload-style", choices=["inline", "stateful"], default="stateful", help="--judge jev")
    parser.add_argument("--jev-model", default=None, help="--judge jev: model name (default: the reference's)")
    parser.add_argument("--out", required=True, help="output JSON path")
    parser.add_argument("--limit", type=int, default=0, help="first N questions only")
    parser.add_argument(
        "--workdir",
        default=None,
        help="directory for the reference's SQLite index (reused when it already holds "
        "the same corpus); default: a fresh temporary directory",
    )
    parser.add_argument(
        "--chunk-chars",
        type=int,
        default=0,
        help="split passages longer than N characters into several units, as the "
        "reference's benchmark helper does by default with N=2200; default 0: one unit "
        "per passage (SPEC §2)",
    )
    parser.add_argument("--max-hops", type=int, default=2, help="expansion rounds H [2]")
    parser.add_argument("--progress", type=int, default=10, help="report every N questions")
    args = parser.parse_args(argv)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
