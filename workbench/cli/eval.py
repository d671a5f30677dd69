"""`sag2wb eval`: a questions file through one configuration; resumable, with TREC/ir_measures extras."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from workbench import safeio
from workbench.cli import eval_estimate
from workbench.cli.io_roles import declare_run_options, path_option
from workbench.cli.options import (
    add_ecosystem_options,
    add_output_options,
    add_parallel_options,
    add_run_options,
    jev_options,
    run_params,
    with_timeout,
)
from workbench.cli.outputs import write
from workbench.cli.printing import fmt
from workbench.cli.status import report_failures, run_work
from workbench.index.corpora import check_gold, load_questions
from workbench.index.store import Index
from workbench.judges.registry import JudgeSpec, auto_reason, resolve_judge
from workbench.measures import eval_extras
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions
from workbench.runs.resume import is_our_result, naming_path, trace_file_name
from workbench.runs.tasks import require_gold
from workbench.safeio import OutputError, check_name


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="evaluate over a questions file")
    path_option(p, "--db", role="input", required=True, help="the index (`sag2wb index`)")
    path_option(
        p, "--questions", role="input", required=True, help="questions .jsonl, a BEIR or TREC folder, or irds:NAME"
    )
    path_option(
        p,
        "--out",
        role="output",
        required=True,
        help="the result JSON (resume file beside it: OUT.partial.jsonl)",
    )
    path_option(p, "--trace-dir", role="output", default=None, help="write each question's full trace as JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_output_options(p)
    add_ecosystem_options(p)
    add_run_options(p)
    add_parallel_options(p)
    eval_estimate.add_options(p)
    p.set_defaults(func=cmd_eval)


def declare_io(args, io) -> None:
    if getattr(args, "estimate", False):  # reads only, writes nothing (cli/eval_estimate.py)
        return eval_estimate.declare_io(args, io)
    io.input("--db", args.db)
    io.input("--questions", args.questions)
    out = io.output("--out", args.out, ours=lambda p: is_our_result(p, "eval"))
    io.resume("--out", resume_path(out))
    if args.run:
        io.output("--run", args.run)
    if args.qrels:
        io.output("--qrels", args.qrels)
    if args.trace_dir:
        io.output("--trace-dir", args.trace_dir, kind="dir")
    if args.split is not None:
        check_name("--split", args.split)
    declare_run_options(args, io)


def resume_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def _is_trace(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and {"question", "rounds", "final_ranking"} <= set(data)


def check_trace_files(trace_dir, questions, force: bool) -> None:
    """The trace files this run will write: an existing one sag2wb did not record writing there
    (`safeio.not_ours`), or that is no trace, is refused; so is a damaged record of the folder."""
    folder = Path(trace_dir)
    if force or not folder.is_dir():
        return
    records = safeio.read_records(folder)  # read once, not once per question
    if records.problem:
        raise OutputError(
            f"--trace-dir {trace_dir}: sag2wb's record of the files it wrote there, {records.path}, is damaged "
            f"({records.problem}); move it aside, or pass --force to start it anew"
        )
    present = set(p.name for p in folder.iterdir())  # one listing, not a stat per question
    for q in questions:
        name = trace_file_name(q.id)
        if name in present:
            reason = safeio.not_ours(folder / name, records, "trace") or (
                None if _is_trace(folder / name) else "not a trace"
            )
            if reason:
                raise OutputError(
                    f"--trace-dir {trace_dir}: {folder / name} exists and is not a trace sag2wb wrote ({reason}); "
                    f"choose another folder, or pass --force to replace it"
                )


def cmd_eval(args) -> int:
    if eval_estimate.estimating(args):  # JEV's cost predicted offline: nothing sent or written
        return eval_estimate.cmd_estimate(args)
    out = Path(args.out)
    index = Index(args.db)
    questions = load_questions(args.questions, split=args.split)
    if args.trace_dir:
        check_trace_files(args.trace_dir, questions, args.force)
    check_gold(questions, set(index.documents.values()), args.questions)
    if args.judge in (None, "auto") and not getattr(args, "quiet", False):
        print(auto_reason(index), file=sys.stderr)  # what auto picked here, and why
    args.judge = resolve_judge(args.judge, index)  # auto: the corpus's default judge
    require_gold(questions, args.judge, args.questions)
    params = run_params(args)
    resume = resume_path(out)
    with naming_path(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        safeio.clean_stale_temps(out.parent, out.name)  # left by a writer killed mid-write
    result, code = run_work(
        args,
        resume,
        lambda executor: evaluate(
            index,
            questions,
            # FILE.py:NAME: --judge-timeout in its spec, for every worker; jev: its options in its spec
            JudgeSpec.parse(with_timeout(args, args.judge), **jev_options(args)),
            params,
            RunOptions(
                progress=not args.quiet,
                resume_path=resume,
                trace_dir=args.trace_dir,
                keep_going=args.keep_going,
                executor=executor,
                label=args.judge,  # the result names the judge as given
            ),
        ),
    )
    if code is not None:
        return code
    extras = _eval_extras(args, result, questions)
    data = result.to_dict()
    if args.trace_dir:  # `sag2wb compare` finds the traces from the result file (relative, so both can move)
        data["config"] = {
            **data["config"],
            "trace_dir": os.path.relpath(Path(args.trace_dir).resolve(), out.parent.resolve()),
        }
    write(out, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False), record="eval --out")
    if not result.failures:
        resume.unlink(missing_ok=True)  # failed questions are retried by the next run, the rest resumed
    m, s = data["metrics"], data["stats"]
    usage = (
        (
            f"  requests {s.get('requests', 0)}  tokens in/out {s.get('input_tokens', 0)}/{s.get('output_tokens', 0)}"
            f"  cost {s.get('cost', 0)}"
            # answers without valid usage are in no total: the totals are then unknown, not these numbers
            + (
                f" + unknown ({s['usage_unknown']} answered requests reported no valid usage)"
                if s.get("usage_unknown")
                else ""
            )
        )
        if "requests" in s
        else ""
    )
    scope = f"  ({m['scope']})" if "scope" in m else ""
    print(
        f"{args.judge}: R@5 {fmt(m['R@5'])}  R@10 {fmt(m['R@10'])}  AE@10 {fmt(m['AE@10'])}  "
        f"questions {m['questions']}  judgments {m['judgments']}{usage}{scope}  -> {out}"
    )
    for line in extras:
        print(line)
    if result.failures:
        return report_failures(result.failures, len(questions), m["scope"])
    return safeio.EXIT_OK


def _eval_extras(args, result, questions) -> list[str]:
    """--run / --qrels / --measure (workbench/measures.py)."""
    if not (args.run or args.qrels or args.measure):
        return []
    return eval_extras(
        result,
        questions,
        run=args.run,
        qrels=args.qrels,
        measures=args.measure,
        tag=args.judge,
        inputs=[args.db, args.questions],
        out=args.out,
        force=args.force,
    )
