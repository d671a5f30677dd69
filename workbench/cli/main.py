"""`sag2wb`: index a corpus, search, evaluate, run the demo (and the JEV/ablation commands).

    sag2wb demo
    sag2wb index CORPUS --db DB
    sag2wb search --db DB "question" --judge lexical --explain
    sag2wb eval --db DB --questions Q.jsonl --judge oracle --out OUT.json [--run OUT.trec --measure nDCG@10]
    sag2wb convert --corpus corpus.json --questions Q.jsonl --to beir --out DIR
"""
from __future__ import annotations

import argparse
import errno
import html
import json
import os
import sqlite3
import sys
import time
from importlib import resources
from pathlib import Path

from workbench import safeio
from workbench.index.corpora import CorpusError, check_gold, load_questions
from workbench.runs.evaluation import QuestionFailed, is_our_result, load_resume, naming_path, require_gold
from workbench.runs.experiment import ExperimentError
from workbench.index.store import Index, IndexProblem, open_or_build
from workbench.judgment import JudgeError
from workbench.metrics import is_missing
from workbench.judges import JudgeSpec, default_judge, resolve_judge
from workbench.params import Params, ParamsError
from workbench.terms import TermWeightingError

# The bundled sample corpora are package data: the checkout's sample_corpora/ installs as the
# package workbench.sample_corpora (pyproject.toml), so `sag2wb demo` runs from any folder
# after a plain `pip install` (a regular package on disk: its files are a real folder).
SAMPLE_CORPORA = Path(resources.files("workbench.sample_corpora"))
SAMPLE_DOCS = SAMPLE_CORPORA / "internal_docs"
SAMPLE_DOCS_QUESTIONS = SAMPLE_CORPORA / "internal_docs.questions.jsonl"


class CLIError(Exception):
    pass


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", default="auto",
                   help="auto, bm25, lexical, lexical-bridge, semantic[:gamma=G,signals=model+coverage+bridge], oracle "
                        "(needs gold), jev, or FILE.py:NAME (default auto: semantic for passage corpora, lexical for "
                        "a folder of files; docs/judges.md)")
    p.add_argument("--rounds", type=int, default=None, help="expansion rounds H (0-2)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="any Params field, e.g. --param L=10 --param field_weights=2,2,1 --param term_weighting=no_idf")
    p.add_argument("--judge-timeout", dest="run_judge_timeout", default=None, metavar="SECONDS",
                   help="time limit per call of a FILE.py:NAME judge (default $SAG2WB_JUDGE_TIMEOUT or 60; 0: none)")
    g = p.add_argument_group("JEV (hosted judge)")
    g.add_argument("--jev-endpoint", default=None, help="typesafe, openrouter, or a full URL")
    g.add_argument("--jev-model", default=None)
    g.add_argument("--payload-style", choices=["inline", "stateful"], default="stateful")
    g.add_argument("--cache-dir", default=None, help="judgment cache folder (diskcache)")
    g.add_argument("--cache-only", action="store_true", help="replay: answer from the cache, fail on a miss")


def _add_ecosystem_options(p: argparse.ArgumentParser) -> None:
    from workbench.measures import measure_name

    g = p.add_argument_group("IR toolbox (docs/ecosystem.md)")
    g.add_argument("--split", default=None, help="the qrels split when --questions is a BEIR folder (default: test)")
    g.add_argument("--run", default=None, metavar="OUT.trec", help="also write the rankings as a TREC run")
    g.add_argument("--qrels", default=None, metavar="OUT.qrels", help="also write the gold as TREC qrels")
    g.add_argument("--measure", action="append", default=[], type=measure_name, metavar="NAME",
                   help="an ir_measures measure to add, e.g. nDCG@10, RR (repeatable; needs ir_measures)")


def _params(args) -> Params:
    params = Params().with_assignments(args.param)
    if args.rounds is not None:
        params = params.replace(H=args.rounds)
    return params


def _judge_spec(args, index) -> JudgeSpec:
    """--judge as a value: `auto` resolved for this index, JEV's options attached."""
    spec = JudgeSpec.parse(args.judge).resolve(index)
    return spec.with_options(**_jev_options(args)) if spec.name == "jev" else spec


def _jev_options(args) -> dict:
    if JudgeSpec.parse(args.judge).name != "jev":
        return {}
    return {"endpoint": args.jev_endpoint, "model": args.jev_model, "payload_style": args.payload_style,
            "cache_dir": args.cache_dir, "cache_only": args.cache_only}


def _add_parallel_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("many questions at once (results identical to a sequential run; docs/experiments.md)")
    g.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="questions at once on threads, for judges that wait (default 8 for jev, else 1)")
    g.add_argument("--processes", type=int, default=None, metavar="N",
                   help="a pool of N processes, for judges that compute (lexical, FILE.py:NAME)")
    g.add_argument("--dask", default=None, metavar="SCHEDULER_ADDRESS",
                   help="run on a Dask cluster, e.g. tcp://10.0.0.5:8786 (pip install 'sag2-workbench[dask]')")


def _run_work(args, resume, work):
    """`work(executor)` on the executor the options ask for: (its result, None), or (None, the
    exit code) when a question failed or Ctrl-C stopped it (finished questions stay in `resume`)."""
    from workbench.executors import make_executor

    executor = make_executor(args.concurrency, args.processes, args.dask, judge=args.judge)
    try:
        return work(executor), None
    except QuestionFailed as exc:
        return None, _failed(args, exc, resume)
    except KeyboardInterrupt:
        return None, _interrupted(args, resume)
    finally:
        executor.close()


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep-going", action="store_true",
                   help="go on after a failed question; metrics cover the completed ones only (exit 3)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out file that is not a sag2wb result")


def _check_outputs(args, paths, inputs) -> None:
    """Refuse, before any work, outputs that are inputs of this command or files that are not
    ours (--force allows the latter), and a folder we cannot write in."""
    for path, ours in paths:
        safeio.check_output(path, inputs=inputs, ours=ours, force=args.force)
    out = Path(paths[0][0])
    folder = out.parent if str(out.parent) else Path(".")
    existing = next((d for d in [folder, *folder.parents] if d.exists()), Path("."))
    if not existing.is_dir():
        raise safeio.InputError(f"--out {out}: {existing} is a file, not a folder; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise safeio.InputError(f"--out {out}: cannot write in {existing} (read-only or no permission); "
                                f"choose a writable folder")


def _write(path: Path, text: str) -> None:
    """Atomic write (temp file, fsync, rename): a kill or a full disk leaves the old file whole."""
    with naming_path(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        safeio.atomic_write_text(path, text)


def _json_default(v):
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def _failed(args, exc: QuestionFailed, resume: Path) -> int:
    """Exit 1 at the first failed question: say which, where, why, and what is kept."""
    kept = len(load_resume(resume))
    print(f"sag2wb {args.command}: error: {exc}", file=sys.stderr)
    print(f"sag2wb {args.command}: no results written; {kept} finished record(s) kept in {resume}: fix the cause "
          f"and rerun the same command to resume (or pass --keep-going to skip failing questions)", file=sys.stderr)
    return safeio.EXIT_FAILED


def _interrupted(args, resume: Path) -> int:
    kept = len(load_resume(resume))
    print(f"sag2wb {args.command}: interrupted; {kept} finished record(s) kept in {resume}: "
          f"rerun the same command to resume", file=sys.stderr)
    return safeio.EXIT_INTERRUPTED


def _report_failures(failures: list[dict], total: int, scope: str) -> int:
    """--keep-going's closing lines: how many failed, the first errors; exit 3."""
    print(f"{len(failures)} of {total} questions failed; {scope}", file=sys.stderr)
    for f in failures[:3]:
        where = f"configuration {f['config']!r}, " if f.get("config") else ""
        at = f" round {f['round']}" if f.get("round") is not None else ""
        print(f"  {where}question {f['question']!r}{at}: {f['error']}", file=sys.stderr)
    if len(failures) > 3:
        print(f"  ... and {len(failures) - 3} more (listed under \"failures\" in the JSON)", file=sys.stderr)
    return safeio.EXIT_PARTIAL


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.2f} MiB"


def cmd_index(args) -> int:
    from workbench.index.update import update_folder, update_passages

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
    from workbench.engine import Run

    if args.top < 1:
        raise CLIError(f"--top {args.top}: give a number of results of at least 1")
    index = Index(args.db)
    spec = _judge_spec(args, index)
    args.judge = str(spec)
    params = _params(args)
    if spec.kind.needs_gold:
        raise CLIError(f"the {spec} judge needs gold labels: use `sag2wb eval` with a questions file")
    judge = spec.build(index)
    trace = Run(index, args.question, params, judge).run()
    _print_ranking(trace, index, args.top)
    if args.explain:
        _explain(trace)
    if trace.rounds and trace.rounds[-1].error:
        print(f"\nstopped at round {trace.rounds[-1].round}: {trace.rounds[-1].error}", file=sys.stderr)
        return 1
    return 0


def cmd_eval(args) -> int:
    from workbench.runs.evaluation import evaluate

    out = Path(args.out)
    extra_outputs = [(Path(p), None) for p in (args.run, args.qrels) if p]  # TREC files: checked before any work too
    _check_outputs(args, [(out, lambda p: is_our_result(p, "eval")), *extra_outputs], [args.questions, args.db])
    index = Index(args.db)
    questions = load_questions(args.questions, split=args.split)
    check_gold(questions, set(index.documents.values()), args.questions)
    args.judge = resolve_judge(args.judge, index)  # auto: the corpus's default judge
    require_gold(questions, args.judge, args.questions)
    params = _params(args)
    resume = out.with_name(out.name + ".partial.jsonl")
    with naming_path(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        safeio.clean_stale_temps(out.parent, out.name)  # left by a writer killed mid-write
    result, code = _run_work(args, resume, lambda executor: evaluate(
        index, questions, args.judge, params, progress=not args.quiet, resume_path=resume, trace_dir=args.trace_dir,
        keep_going=args.keep_going, executor=executor, **_jev_options(args)))
    if code is not None:
        return code
    extras = _eval_extras(args, result, questions)
    data = result.to_dict()
    _write(out, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False))
    if not result.failures:
        resume.unlink(missing_ok=True)  # failed questions are retried by the next run, the rest resumed
    m, s = data["metrics"], data["stats"]
    usage = (f"  requests {s.get('requests', 0)}  tokens in/out {s.get('input_tokens', 0)}/{s.get('output_tokens', 0)}"
             f"  cost {s.get('cost', 0)}") if "requests" in s else ""
    scope = f"  ({m['scope']})" if "scope" in m else ""
    print(f"{args.judge}: R@5 {_fmt(m['R@5'])}  R@10 {_fmt(m['R@10'])}  AE@10 {_fmt(m['AE@10'])}  "
          f"questions {m['questions']}  judgments {m['judgments']}{usage}{scope}  -> {out}")
    for line in extras:
        print(line)
    if result.failures:
        return _report_failures(result.failures, len(questions), m["scope"])
    return safeio.EXIT_OK


def _eval_extras(args, result, questions) -> list[str]:
    """--run / --qrels / --measure (workbench/measures.py)."""
    if not (args.run or args.qrels or args.measure):
        return []
    from workbench.measures import eval_extras

    return eval_extras(result, questions, run=args.run, qrels=args.qrels, measures=args.measure,
                       tag=args.judge, inputs=[args.db, args.questions], out=args.out)


def cmd_convert(args) -> int:
    from workbench.formats import convert

    written = convert(args.to, args.out, corpus=args.corpus, questions=args.questions, split=args.split,
                      results=args.results, run=args.run, tag=args.tag)
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_demo(args) -> int:
    """Index the bundled docs, walk one cross-file question round by round, then compare
    BM25, SAG2 with the offline lexical and semantic judges, and the oracle ceiling on every sample question."""
    from workbench.engine import Run
    from workbench.runs.evaluation import evaluate

    db = Path(args.db)
    index, built = open_or_build(SAMPLE_DOCS, db, source="sample_corpora/internal_docs")
    print(f"{'built' if built else 'opened'} {db} ({index.N} units, {index.D} files of the bundled internal docs)\n")
    questions = load_questions(SAMPLE_DOCS_QUESTIONS)
    judge_name = default_judge(index)  # lexical here: docs/judges.md
    judge = JudgeSpec.parse(judge_name).build(index)
    # docs-02 asks the flagship question in Chinese: only expansion through the identifiers
    # role_id / permission_keys reaches the English gateway file.
    question = next((q for q in questions if q.id == args.question), questions[0])
    trace = Run(index, question, Params(), judge).run()
    _print_ranking(trace, index, 10, question.gold)
    baseline = Run(index, question, Params(), None).run()
    found = lambda t: sorted(set(t.documents()[:10]) & set(question.gold))
    print(f"gold files ({len(question.gold)}): " + ", ".join(sorted(question.gold)))
    print(f"in the top 10: BM25 alone {len(found(baseline))}, SAG2 with the offline {judge_name} judge {len(found(trace))}"
          f" (reached through expansion: {', '.join(sorted(set(found(trace)) - set(found(baseline)))) or 'none'})")
    _explain(trace)
    print("\ngold files in the top 10, per sample question:")
    names = ("bm25", "lexical", "semantic", "oracle")
    results = {name: evaluate(index, questions, name, Params(), progress=False) for name in names}
    print(f"  {'question':10s} {'gold':>4s} {'bm25':>5s} {'lexical':>8s} {'semantic':>9s} {'oracle':>7s}  question text")
    for i, q in enumerate(questions):
        row = [round(results[n].records[i]["R@10"] * len(q.gold) / 100) for n in results]
        print(f"  {q.id:10s} {len(q.gold):4d} {row[0]:5d} {row[1]:8d} {row[2]:9d} {row[3]:7d}  {q.question[:60]}")
    print()
    for name, result in results.items():
        m = result.metrics
        print(f"{name:9s} on {m['questions']} sample questions: R@5 {m['R@5']:.2f}  R@10 {m['R@10']:.2f}  "
              f"AE@10 {m['AE@10']:.2f}  judgments {m['judgments']}" + ("  (oracle: a ceiling, not a model)" if name == "oracle" else ""))
    return 0


def cmd_judge_server(args) -> int:
    from workbench.judges.jev.server import serve_main

    return serve_main(args)


def cmd_cache(args) -> int:
    from workbench.judges.jev.cache import cache_main

    return cache_main(args)


def cmd_embed(args) -> int:
    from workbench.judges.embeddings import embed_main

    return embed_main(args)


ABLATION_TABLE_MARKER = "<!-- written by sag2wb ablate -->"  # lets a rerun recognise (and replace) its own .md/.html


def _our_table(path) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            return ABLATION_TABLE_MARKER.encode() in f.read()
    except OSError:
        return False


def cmd_ablate(args) -> int:
    """`sag2wb ablate --db DB --questions Q --judge J --out OUT.json`: the paper's comparisons.

    Writes OUT.json (rows, intervals, notes, per-question metrics), OUT.md and OUT.html (a
    B.1-like table), each atomically; per-question results go to OUT.json.partial.jsonl as
    they come, so an interrupted or failed run resumes (the file is removed once every
    question completed and OUT.json is written).
    """
    from workbench.runs.experiment import (
        REFERENCE_ROW, ROW_DEFINITIONS, Experiment, ablation_markdown, ablation_report, paper_ablation,
    )

    if args.judge == "bm25":
        raise CLIError("the ablation compares judged policies: give --judge lexical, oracle, jev or FILE.py:NAME")
    if args.rounds not in (None, 2):
        raise CLIError("ablate reads H=0, 1 and 2 off the same H=2 trajectories; --rounds is not used")
    out = Path(args.out)
    md_path, html_path = out.with_suffix(".md"), out.with_suffix(".html")
    if out.suffix in (".md", ".html"):
        raise CLIError(f"--out {out}: give the .json name; the .md and .html tables are written beside it")
    _check_outputs(args, [(out, lambda p: is_our_result(p, "ablate")), (md_path, _our_table), (html_path, _our_table)],
                   [args.questions, args.db])
    index = Index(args.db)
    args.judge = resolve_judge(args.judge, index)  # auto: the corpus's default judge
    questions = load_questions(args.questions)
    check_gold(questions, set(index.documents.values()), args.questions)
    no_gold = [q.id for q in questions if not q.gold]
    if no_gold:
        raise CLIError(f"{args.questions}: {len(no_gold)} question(s) have no gold labels (supporting_titles), "
                       f"which the ablation's metrics need: {', '.join(no_gold[:5])}{' ...' if len(no_gold) > 5 else ''}")
    params = _params(args).replace(H=2)
    resume = out.with_name(out.name + ".partial.jsonl")
    with naming_path(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        for name in (out.name, md_path.name, html_path.name):
            safeio.clean_stale_temps(out.parent, name)  # left by a writer killed mid-write
    t0 = time.perf_counter()
    experiment = Experiment(index, questions, paper_ablation(params, _judge_spec(args, index)), resume_path=resume,
                            progress=not args.quiet, keep_going=args.keep_going)  # JEV's options: in the spec
    results, code = _run_work(args, resume, lambda executor: experiment.run(executor=executor))
    if code is not None:
        return code
    seconds = time.perf_counter() - t0
    if not results.question_ids:
        _report_failures(results.failures, len(questions), "no question completed: nothing written")
        return safeio.EXIT_FAILED
    report = ablation_report(results, args.judge)
    report.update({"db": str(args.db), "questions_file": str(args.questions), "index": index.meta.get("fingerprint"),
                   "params": params.to_dict(), "seconds": round(seconds, 2), "stats": results.stats,
                   "per_question": [{k: (None if is_missing(v) else v) for k, v in r.items()}
                                    for r in results.frame(extras=True).to_dict(orient="records")]})
    title = f"SAG2 ablation: {Path(args.questions).name}, judge {args.judge}"
    html_text = (f"<!doctype html><meta charset='utf-8'><title>SAG2 ablation</title>"
                 f"<h1>{html.escape(title)}</h1>"
                 + (f"<p><b>Note:</b> {html.escape(report['note'])}.</p>" if report.get("note") else "")
                 + (f"<p><b>Figures over {html.escape(report['scope'])}.</b></p>" if report.get("scope") else "")
                 + results.to_html(REFERENCE_ROW, "R@10", ROW_DEFINITIONS) + "\n" + ABLATION_TABLE_MARKER + "\n")
    _write(out, json.dumps(report, ensure_ascii=False, indent=1, default=_json_default, allow_nan=False))
    _write(md_path, ablation_markdown(results, report, title) + "\n" + ABLATION_TABLE_MARKER + "\n")
    _write(html_path, html_text)
    if not results.failures:
        resume.unlink(missing_ok=True)
    if not args.quiet:
        print(results.to_markdown(REFERENCE_ROW, "R@10"))
        mb = report.get("matched_budget")
        if mb and mb["questions_with_too_few_matches"]:
            print(f"matched-budget: {mb['questions_with_too_few_matches']} question(s) with too few BM25 matches "
                  f"({mb['missing_judgments']} judgments short)")
    print(f"ablation ({args.judge}, {len(results.question_ids)} of {len(questions)} questions) in {seconds:.1f} s -> "
          f"{out}, {md_path.name}, {html_path.name}")
    if results.failures:
        return _report_failures(results.failures, len(questions), results.scope)
    return safeio.EXIT_OK


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
    _add_output_options(p)
    _add_ecosystem_options(p)
    _add_run_options(p)
    _add_parallel_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("convert", help="write a corpus / questions / eval result as BEIR, TREC or workbench files")
    p.add_argument("--to", required=True, choices=["beir", "workbench", "trec"])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--corpus", default=None, help="corpus.json, a .jsonl corpus, a folder, a BEIR folder or irds:NAME")
    p.add_argument("--questions", default=None, help="questions .jsonl, a BEIR or TREC folder, or irds:NAME")
    p.add_argument("--split", default=None, help="BEIR qrels split to read or write (default: test)")
    p.add_argument("--results", default=None, help="an `sag2wb eval` result JSON, written as a TREC run (--to trec)")
    p.add_argument("--run", default=None, help="a TREC run (any system's), scored with R@5/R@10/AE@10 (--to workbench)")
    p.add_argument("--tag", default=None, help="run tag (default: the result file's name)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("judge-server", help="serve a workbench judge over the Noul-compatible HTTP interface")
    p.add_argument("--judge", default="lexical")
    p.add_argument("--db", default=None, help="index (needed by the lexical judge)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--delay-ms", type=float, default=0.0, help="answer every request this much later")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[:SECONDS][xTIMES]",
                   help="inject a fault into the next requests, e.g. 429:1, 500x5, slow:3, malformed (see docs/jev.md)")
    p.add_argument("--max-body-mb", type=float, default=16.0, help="larger request bodies get 413 (default 16)")
    p.add_argument("--read-timeout", type=float, default=30.0, help="seconds a client may take to send a request")
    p.add_argument("--judge-timeout", default=None, help="seconds per judge call (default $SAG2WB_JUDGE_TIMEOUT or 60; 0: none)")
    p.set_defaults(func=cmd_judge_server)

    p = sub.add_parser("cache", help="export or import the judgments of a JEV cache")
    p.add_argument("action", choices=["export", "import", "stats"])
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--file", default=None, help="the exported JSONL file")
    p.add_argument("--force", action="store_true", help="export: replace an existing file that is not an export")
    p.add_argument("--overwrite", action="store_true", help="import: replace cached judgments the file gives another p")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("embed", help="embed every unit of an index for the semantic judge (once; cached on disk)")
    p.add_argument("--db", required=True)
    p.add_argument("--cache-dir", default=None, help="embedding cache (default $SAG2WB_EMBED_CACHE or ~/.cache/sag2wb/embeddings)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("ablate", help="the paper's comparisons (bm25, H=0/1/2, no-context, matched-budget, final-only)")
    p.add_argument("--db", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    _add_output_options(p)
    _add_run_options(p)
    _add_parallel_options(p)
    p.set_defaults(func=cmd_ablate)
    return parser


OS_HINTS = {
    errno.EACCES: "check its permissions or choose another location",
    errno.EPERM: "check its permissions or choose another location",
    errno.EROFS: "the file system is read-only: choose a writable location",
    errno.ENOENT: "check the path (its folder must exist)",
    errno.EISDIR: "it is a folder: give a file path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.ENOSPC: "the disk is full: free some space and rerun (finished questions are kept for resume)",
    errno.EDQUOT: "the disk quota is exhausted: free some space and rerun",
    errno.EFBIG: "the file grew past this system's file-size limit: raise the limit or choose another location",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter path",
    errno.EEXIST: "a file of that name is in the way of a folder: choose another path",
    errno.EADDRINUSE: "another program listens on that port: choose another --port",
    errno.EADDRNOTAVAIL: "that address is not on this machine: check --host",
}


def os_error_message(exc: OSError) -> str:
    """One line: the path, what went wrong, what to do."""
    what = exc.strerror or str(exc) or type(exc).__name__
    hint = OS_HINTS.get(exc.errno, "check the path and rerun")
    return f"{exc.filename}: {what}; {hint}" if exc.filename is not None else f"{what}; {hint}"


def sqlite_error_message(args, exc: sqlite3.Error) -> str:
    db = getattr(args, "db", None)
    where = f"the database {db}" if db else "a database"
    if "locked" in str(exc):
        return f"{where} is locked by another process ({exc}); wait for it to finish and rerun"
    return (f"{where} cannot be read ({exc}): it is damaged or not a workbench index; "
            f"rebuild it with `sag2wb index CORPUS --db NEW.sqlite`")


def main(argv=None) -> int:
    """Run one command; every failure ends in one line on stderr and an exit code
    (safeio: 1 a question failed, 2 bad input or environment, 3 --keep-going with failures,
    130 interrupted), never a traceback."""
    args = build_parser().parse_args(argv)
    prefix = f"sag2wb {args.command}: error:"
    try:
        if getattr(args, "run_judge_timeout", None) is not None:
            # checked here, passed on through the environment so that worker processes
            # (--processes, --dask) apply the same limit
            from workbench.judges.base import JUDGE_TIMEOUT_VARIABLE, _check_timeout

            _check_timeout(args.run_judge_timeout, "--judge-timeout")
            os.environ[JUDGE_TIMEOUT_VARIABLE] = args.run_judge_timeout
        return args.func(args)
    except QuestionFailed as exc:  # a caller that did not handle it itself (search, demo)
        print(f"{prefix} {exc}", file=sys.stderr)
        return safeio.EXIT_FAILED
    except (CorpusError, IndexProblem, ParamsError, JudgeError, TermWeightingError, CLIError, ExperimentError,
            safeio.InputError) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return safeio.EXIT_USAGE
    except KeyboardInterrupt:
        print(f"sag2wb {args.command}: interrupted", file=sys.stderr)
        return safeio.EXIT_INTERRUPTED
    except sqlite3.Error as exc:
        print(f"{prefix} {sqlite_error_message(args, exc)}", file=sys.stderr)
        return safeio.EXIT_USAGE
    except OSError as exc:
        print(f"{prefix} {os_error_message(exc)}", file=sys.stderr)
        return safeio.EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
