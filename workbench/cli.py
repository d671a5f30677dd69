"""`sag2wb`: index a corpus, search, evaluate, run the demo (and the JEV/ablation commands).

    sag2wb demo
    sag2wb index CORPUS --db DB
    sag2wb search --db DB "question" --judge lexical --explain
    sag2wb eval --db DB --questions Q.jsonl --judge oracle --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .corpora import CorpusError, check_gold, load_questions
from .index import Index, IndexProblem, open_or_build
from .judges import JudgeError
from .params import Params, ParamsError
from .terms import TermWeightingError

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DOCS = REPO_ROOT / "sample_corpora" / "internal_docs"
SAMPLE_DOCS_QUESTIONS = REPO_ROOT / "sample_corpora" / "internal_docs.questions.jsonl"


class CLIError(Exception):
    pass


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", default="lexical",
                   help="bm25, lexical, oracle (needs gold), jev, or FILE.py:NAME (default: lexical)")
    p.add_argument("--rounds", type=int, default=None, help="expansion rounds H (0-2)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="any Params field, e.g. --param L=10 --param field_weights=2,2,1 --param term_weighting=no_idf")
    g = p.add_argument_group("JEV (hosted judge)")
    g.add_argument("--jev-endpoint", default=None, help="typesafe, openrouter, or a full URL")
    g.add_argument("--jev-model", default=None)
    g.add_argument("--payload-style", choices=["inline", "stateful"], default="stateful")
    g.add_argument("--cache-dir", default=None, help="judgment cache folder (diskcache)")
    g.add_argument("--cache-only", action="store_true", help="replay: answer from the cache, fail on a miss")


def _params(args) -> Params:
    params = Params().with_assignments(args.param)
    if args.rounds is not None:
        params = params.replace(H=args.rounds)
    return params


def _jev_options(args) -> dict:
    if args.judge != "jev":
        return {}
    return {"endpoint": args.jev_endpoint, "model": args.jev_model, "payload_style": args.payload_style,
            "cache_dir": args.cache_dir, "cache_only": args.cache_only}


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.2f} MiB"


def cmd_index(args) -> int:
    from .update import update_folder, update_passages

    t0 = time.perf_counter()
    db = Path(args.db)
    corpus = Path(args.corpus)
    if args.add or args.remove:
        if not db.exists():
            raise CLIError(f"{db}: no index to update; build it first with `sag2wb index {args.corpus} --db {db}`")
        Index(db).close()  # a workbench index of this tokenizer, or a named error
        changes = update_passages(db, Path(args.add) if args.add else None, args.remove or ())
        return _report_update(db, changes)
    if corpus.is_dir() and db.exists() and not args.rebuild and _updatable(db):
        return _report_update(db, update_folder(db, corpus))
    # the corpus is streamed into the build (never held whole); a bar shows passages/s on a terminal
    index = Index.build(args.corpus, args.db, source=str(args.corpus), workers=args.workers, progress=None)
    t1 = time.perf_counter()
    print(f"indexed {index.N} units from {index.D} documents of {args.corpus}")
    print(f"time {t1 - t0:.2f} s ({index.N / max(t1 - t0, 1e-9):.0f} passages/s, "
          f"{index.meta.get('chunks', '?')} chunks)")
    print(f"database {db} {_size(db)} ({db.stat().st_size / 1024 / index.N:.2f} KiB per unit)")
    return 0


def _updatable(db: Path) -> bool:
    """An index this workbench can update in place (a folder index of the current format)."""
    try:
        index = Index(db)
    except IndexProblem:
        return False
    try:
        return bool(index.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'files'").fetchone())
    finally:
        index.close()


def _report_update(db: Path, changes) -> int:
    index = Index(db)
    print(f"updated {db}: {changes.summary()}")
    for label, names in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
        if names:
            print(f"  {label}: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''}")
    print(f"now {index.N} units from {index.D} documents; database {_size(db)}")
    return 0


def _print_ranking(trace, index, limit: int, gold=()) -> None:
    scores = trace.final_scores()
    gold = set(gold)
    print(f"question: {trace.question}")
    print(f"judge: {trace.judge}; judgments: {trace.judgments}; stop: {trace.stop}")
    if not trace.final_ranking:
        print("no results: " + (trace.stop or "nothing matched"))
        return
    for i, u in enumerate(trace.final_ranking[:limit], start=1):
        rec = index.unit(u)
        score = scores.get(u)
        where = f"{rec.source} {rec.location}".strip()
        mark = " *gold*" if rec.document in gold else ""
        print(f"{i:3d}. {rec.title}  [{where}]  score={'%.4f' % score if score is not None else 'bm25'}{mark}")


def _explain(trace) -> None:
    for r in trace.rounds:
        print(f"\n-- round {r.round}: {len(r.candidates)} candidates, pool {len(r.pool)}, "
              f"context {len(r.context)}, judgments {r.judgments}" + (f", stop: {r.stop}" if r.stop else ""))
        if r.error:
            print(f"   error: {r.error}")
        if r.seeds:
            print("   seeds: " + "; ".join(f"{trace.units[s.unit_id].title} (score {s.score:.3f}, w {s.weight if s.weight is None else round(s.weight, 3)})" for s in r.seeds))
        sel = sorted((t for t in r.terms if t.selected), key=lambda t: t.order)
        for t in sel:
            res = f" -> {t.resolved!r} ({t.resolution})" if t.resolved and t.resolved != t.term else ""
            print(f"   term {t.order:2d}. {t.term!r}{res}  priority {t.priority:.3f} = (1+ln {t.tf})"
                  f" x idf {t.idf:.3f} x (1+c {t.query_connection:.3f}) x w {t.seed_weight:.3f}"
                  f"  from {trace.units[t.seed].title!r}")


def cmd_search(args) -> int:
    from .engine import Run
    from .judges import make_judge

    index = Index(args.db)
    params = _params(args)
    gold = None
    if args.judge == "oracle":
        raise CLIError("the oracle judge needs gold labels: use `sag2wb eval` with a questions file")
    judge = make_judge(args.judge, index, gold=gold, **_jev_options(args))
    trace = Run(index, args.question, params, judge).run()
    _print_ranking(trace, index, args.top)
    if args.explain:
        _explain(trace)
    if trace.rounds and trace.rounds[-1].error:
        print(f"\nstopped at round {trace.rounds[-1].round}: {trace.rounds[-1].error}", file=sys.stderr)
        return 1
    return 0


def cmd_eval(args) -> int:
    from .evaluate import evaluate

    index = Index(args.db)
    questions = load_questions(args.questions)
    check_gold(questions, set(index.documents.values()), args.questions)
    params = _params(args)
    out = Path(args.out)
    resume = out.with_name(out.name + ".partial.jsonl")
    result = evaluate(index, questions, args.judge, params, progress=not args.quiet, resume_path=resume,
                      trace_dir=args.trace_dir, **_jev_options(args))
    data = result.to_dict()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False), encoding="utf-8")
    resume.unlink(missing_ok=True)
    m, s = data["metrics"], data["stats"]
    usage = (f"  requests {s.get('requests', 0)}  tokens in/out {s.get('input_tokens', 0)}/{s.get('output_tokens', 0)}"
             f"  cost {s.get('cost', 0)}") if "requests" in s else ""
    print(f"{args.judge}: R@5 {m['R@5']:.2f}  R@10 {m['R@10']:.2f}  AE@10 {m['AE@10']:.2f}  "
          f"questions {m['questions']}  judgments {m['judgments']}{usage}  -> {out}")
    return 0


def cmd_demo(args) -> int:
    """Index the bundled docs, walk one cross-file question round by round, then compare
    BM25, SAG2 with the offline lexical judge, and the oracle ceiling on every sample question."""
    from .engine import Run
    from .evaluate import evaluate
    from .judges import LexicalJudge

    db = Path(args.db)
    index, built = open_or_build(SAMPLE_DOCS, db, source="sample_corpora/internal_docs")
    print(f"{'built' if built else 'opened'} {db} ({index.N} units, {index.D} files of the bundled internal docs)\n")
    questions = load_questions(SAMPLE_DOCS_QUESTIONS)
    judge = LexicalJudge(index)
    # docs-02 asks the flagship question in Chinese: only expansion through the identifiers
    # role_id / permission_keys reaches the English gateway file.
    question = next((q for q in questions if q.id == args.question), questions[0])
    trace = Run(index, question, Params(), judge).run()
    _print_ranking(trace, index, 10, question.gold)
    baseline = Run(index, question, Params(), None).run()
    found = lambda t: sorted(set(t.documents()[:10]) & set(question.gold))
    print(f"gold files ({len(question.gold)}): " + ", ".join(sorted(question.gold)))
    print(f"in the top 10: BM25 alone {len(found(baseline))}, SAG2 with the offline lexical judge {len(found(trace))}"
          f" (reached through expansion: {', '.join(sorted(set(found(trace)) - set(found(baseline)))) or 'none'})")
    _explain(trace)
    print("\ngold files in the top 10, per sample question:")
    results = {name: evaluate(index, questions, name, Params(), progress=False) for name in ("bm25", "lexical", "oracle")}
    print(f"  {'question':10s} {'gold':>4s} {'bm25':>5s} {'lexical':>8s} {'oracle':>7s}  question text")
    for i, q in enumerate(questions):
        row = [round(results[n].records[i]["R@10"] * len(q.gold) / 100) for n in results]
        print(f"  {q.id:10s} {len(q.gold):4d} {row[0]:5d} {row[1]:8d} {row[2]:7d}  {q.question[:60]}")
    print()
    for name, result in results.items():
        m = result.metrics
        print(f"{name:8s} on {m['questions']} sample questions: R@5 {m['R@5']:.2f}  R@10 {m['R@10']:.2f}  "
              f"AE@10 {m['AE@10']:.2f}  judgments {m['judgments']}" + ("  (oracle: a ceiling, not a model)" if name == "oracle" else ""))
    return 0


def cmd_judge_server(args) -> int:
    from .judge_server import serve_main

    return serve_main(args)


def cmd_cache(args) -> int:
    from .jev import cache_main

    return cache_main(args)


def cmd_ablate(args) -> int:
    from .experiments import ablate_main

    return ablate_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sag2wb", description="SAG2 Workbench: embedding-free multi-hop retrieval")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="index the bundled docs corpus and walk one multi-hop question (offline)")
    p.add_argument("--db", default=os.environ.get("SAG2WB_DEMO_DB", ".sag2wb/internal_docs.sqlite"))
    p.add_argument("--question", default="docs-02", help="which sample question to walk through (default docs-02)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("index", help="build an index from corpus.json or a folder of .md/.txt")
    p.add_argument("corpus")
    p.add_argument("--db", required=True, help="the index file to write (an existing workbench index is replaced; "
                   "any other file is refused)")
    p.add_argument("--workers", type=int, default=None, help="tokenizing processes (default: up to 2 cores)")
    p.add_argument("--rebuild", action="store_true",
                   help="build anew even when an index of this folder could be updated in place")
    p.add_argument("--add", metavar="FILE", help="update the index: add (or replace, by title) the passages of "
                   "FILE, a JSON list of {\"title\", \"text\"}")
    p.add_argument("--remove", metavar="TITLE", nargs="+", help="update the index: remove the passages with these titles")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="ask one question")
    p.add_argument("--db", required=True)
    p.add_argument("question")
    p.add_argument("--explain", action="store_true", help="print each round's seeds and terms")
    p.add_argument("--top", type=int, default=10)
    _add_run_options(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("eval", help="evaluate over a questions file")
    p.add_argument("--db", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--trace-dir", default=None, help="write each question's full trace as JSON here")
    p.add_argument("--quiet", action="store_true")
    _add_run_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("judge-server", help="serve a workbench judge over the Noul-compatible HTTP interface")
    p.add_argument("--judge", default="lexical")
    p.add_argument("--db", default=None, help="index (needed by the lexical judge)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--delay-ms", type=float, default=0.0, help="answer every request this much later")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[:SECONDS][xTIMES]",
                   help="inject a fault into the next requests, e.g. 429:1, 500x5, slow:3, malformed (see docs/jev.md)")
    p.set_defaults(func=cmd_judge_server)

    p = sub.add_parser("cache", help="export or import the judgments of a JEV cache")
    p.add_argument("action", choices=["export", "import", "stats"])
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--file", default=None, help="the exported JSONL file")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("ablate", help="the paper's comparisons (bm25, H=0/1/2, no-context, matched-budget, final-only)")
    p.add_argument("--db", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    _add_run_options(p)
    p.set_defaults(func=cmd_ablate)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CorpusError, IndexProblem, ParamsError, JudgeError, TermWeightingError, CLIError) as exc:
        print(f"sag2wb {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sag2wb {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
