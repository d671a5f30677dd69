"""`sag2wb ablate`: the paper's comparison rows on one questions file, with paired intervals."""

from __future__ import annotations

import html
import json
import sys
import time
from pathlib import Path

from workbench import safeio
from workbench.cli.errors import CLIError
from workbench.cli.io_roles import declare_run_options, path_option
from workbench.cli.options import add_output_options, add_parallel_options, add_run_options, judge_spec, run_params
from workbench.cli.outputs import ABLATION_TABLE_MARKER, json_default, write
from workbench.cli.status import report_failures, run_work
from workbench.feedback.graph import GraphParams, corpus_graph
from workbench.index.corpora import check_gold, load_questions
from workbench.index.store import Index
from workbench.judges.registry import auto_reason, resolve_judge
from workbench.metrics import is_missing
from workbench.runs.experiment import Experiment, paper_ablation
from workbench.runs.options import RunOptions
from workbench.runs.results import REFERENCE_ROW, ROW_DEFINITIONS, ablation_markdown, ablation_report
from workbench.runs.resume import is_our_result, naming_path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ablate", help="the paper's rows, B.1-B.3 (H=0/1/2, no-context, matched budget, final-only, RM3, GAR-BM25)"
    )
    path_option(p, "--db", role="input", required=True, help="the index (`sag2wb index`)")
    path_option(
        p, "--questions", role="input", required=True, help="questions with gold: .jsonl, a BEIR or TREC folder"
    )
    path_option(
        p,
        "--out",
        role="output",
        required=True,
        help="OUT.json; OUT.md and OUT.html are written beside it (resume file: OUT.json.partial.jsonl)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table on the terminal")
    add_output_options(p)
    add_run_options(p, rounds=False)  # H=0, 1 and 2 are read off the same H=2 trajectories
    add_parallel_options(p)
    p.set_defaults(func=cmd_ablate)


def _resume_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def declare_io(args, io) -> None:
    """OUT.json, OUT.md, OUT.html and the resume file, against the index and the questions."""
    out = Path(args.out)
    if out.suffix in (".md", ".html"):
        raise CLIError(f"--out {out}: give the .json name; the .md and .html tables are written beside it")
    io.input("--db", args.db)
    io.input("--questions", args.questions)
    io.output("--out", out, ours=lambda p: is_our_result(p, "ablate"))
    io.output("--out", out.with_suffix(".md"))  # the tables: replaced only when recorded as ours
    io.output("--out", out.with_suffix(".html"))
    io.resume("--out", _resume_path(out))
    declare_run_options(args, io)


def cmd_ablate(args) -> int:
    """`sag2wb ablate --db DB --questions Q --judge J --out OUT.json`: the paper's comparisons.

    Writes OUT.json (rows, intervals, notes, per-question metrics), OUT.md and OUT.html (a
    B.1-like table), each atomically; per-question results go to OUT.json.partial.jsonl as
    they come, so an interrupted or failed run resumes (the file is removed once every
    question completed and OUT.json is written).
    """
    if args.judge == "bm25":
        raise CLIError("the ablation compares judged policies: give --judge lexical, oracle, jev or FILE.py:NAME")
    out = Path(args.out)
    md_path, html_path = out.with_suffix(".md"), out.with_suffix(".html")
    index = Index(args.db)
    if args.judge in (None, "auto") and not getattr(args, "quiet", False):
        print(auto_reason(index), file=sys.stderr)  # what auto picked here, and why
    args.judge = resolve_judge(args.judge, index)  # auto: the corpus's default judge
    questions = load_questions(args.questions)
    check_gold(questions, set(index.documents.values()), args.questions)
    no_gold = [q.id for q in questions if not q.gold]
    if no_gold:
        raise CLIError(
            f"{args.questions}: {len(no_gold)} question(s) have no gold labels (supporting_titles), "
            f"which the ablation's metrics need: {', '.join(no_gold[:5])}{' ...' if len(no_gold) > 5 else ''}"
        )
    params = run_params(args).replace(H=2)
    # GAR-BM25's corpus graph: built (or read) once here, before any worker starts
    corpus_graph(index, GraphParams(field_weights=params.field_weights), progress=not args.quiet)
    resume = _resume_path(out)
    with naming_path(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        for name in (out.name, md_path.name, html_path.name):
            safeio.clean_stale_temps(out.parent, name)  # left by a writer killed mid-write
    t0 = time.perf_counter()
    experiment = Experiment(
        index,
        questions,
        paper_ablation(params, judge_spec(args, index), feedback=True),  # JEV's options: in the spec
        RunOptions(resume_path=resume, progress=not args.quiet, keep_going=args.keep_going),
    )
    results, code = run_work(args, resume, lambda executor: experiment.run(executor=executor))
    if code is not None:
        return code
    seconds = time.perf_counter() - t0
    if not results.question_ids:
        report_failures(results.failures, len(questions), "no question completed: nothing written")
        return safeio.EXIT_FAILED
    report = ablation_report(results, args.judge)
    report.update(
        {
            "db": str(args.db),
            "questions_file": str(args.questions),
            "index": index.meta.get("fingerprint"),
            "params": params.to_dict(),
            "seconds": round(seconds, 2),
            "stats": results.stats,
            "per_question": [
                {k: (None if is_missing(v) else v) for k, v in r.items()}
                for r in results.frame(extras=True).to_dict(orient="records")
            ],
        }
    )
    title = f"SAG2 ablation: {Path(args.questions).name}, judge {args.judge}"
    html_text = (
        f"<!doctype html><meta charset='utf-8'><title>SAG2 ablation</title>"
        f"<h1>{html.escape(title)}</h1>"
        + (f"<p><b>Note:</b> {html.escape(report['note'])}.</p>" if report.get("note") else "")
        + (f"<p><b>Figures over {html.escape(report['scope'])}.</b></p>" if report.get("scope") else "")
        + results.to_html_table(REFERENCE_ROW, "R@10", ROW_DEFINITIONS)
        + "\n"
        + ABLATION_TABLE_MARKER
        + "\n"
    )
    by = "ablate --out"
    write(out, json.dumps(report, ensure_ascii=False, indent=1, default=json_default, allow_nan=False), by)
    write(md_path, ablation_markdown(results, report, title) + "\n" + ABLATION_TABLE_MARKER + "\n", by)
    write(html_path, html_text, by)
    if not results.failures:
        resume.unlink(missing_ok=True)
    if not args.quiet:
        print(results.to_markdown(REFERENCE_ROW, "R@10"))
        mb = report.get("matched_budget")
        if mb and mb["questions_with_too_few_matches"]:
            print(
                f"matched-budget: {mb['questions_with_too_few_matches']} question(s) with too few BM25 matches "
                f"({mb['missing_judgments']} judgments short)"
            )
    print(
        f"ablation ({args.judge}, {len(results.question_ids)} of {len(questions)} questions) in {seconds:.1f} s -> "
        f"{out}, {md_path.name}, {html_path.name}"
    )
    if results.failures:
        return report_failures(results.failures, len(questions), results.scope)
    return safeio.EXIT_OK
