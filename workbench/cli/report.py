"""`sag2wb report INPUT --out PAGE.html [--db DB] [--compare B.json]`: one self-contained HTML page
(docs/reports.md): open it from a file, no kernel, no install, no network. INPUT is a kept trace
(the trajectory page) or an `eval`/`ablate` result file (the experiment page; an eval's recorded
trace folder is found as `sag2wb compare` finds it)."""

from __future__ import annotations

from pathlib import Path

from workbench import safeio
from workbench.cli.io_roles import checked_before_work, path_option
from workbench.cli.report_vary import add_vary_arguments, declare_vary_io, run_vary, wants_vary
from workbench.index.store import Index
from workbench.metrics import METRICS
from workbench.report import read_trace, write_experiment_page, write_trajectory_page
from workbench.report.experiment import PAPER_DATASETS
from workbench.report.results_input import TRAJECTORIES, is_result_file, read_result, recorded_traces


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="a self-contained HTML page of a trace or of results (no kernel, no network)")
    path_option(
        p,
        "input",
        role="input",
        metavar="INPUT",
        help="a trace (an `eval --trace-dir` file, the dashboard's trace JSON export, Trace.to_json()) or an "
        "`eval`/`ablate` out.json (the experiment page)",
    )
    path_option(p, "--out", role="output", required=True, metavar="PAGE.html", help="the page to write")
    path_option(
        p,
        "--db",
        role="input",
        default=None,
        help="the index the traces were made on: passage texts (marked) and terms as the text writes them",
    )
    path_option(
        p,
        "--compare",
        role="input",
        default=None,
        metavar="B.json",
        help="a second `eval` result: the page shows what B changed against INPUT, question by question",
    )
    p.add_argument(
        "--trajectories",
        choices=TRAJECTORIES,
        default="auto",
        help="results: auto (the recorded trace folders' trajectories, when kept), all (every question must have "
        "its trace), none (no trajectory in the page)",
    )
    p.add_argument("--metric", choices=METRICS, default="R@10", help="results: the metric of differences and plots")
    p.add_argument(
        "--paper",
        choices=("auto", "none", *PAPER_DATASETS),
        default="auto",
        help="results: the paper's data set whose published figures sit beside ours (auto: from the question ids)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out file that sag2wb did not write")
    add_vary_arguments(p)
    p.set_defaults(func=cmd_report)


def declare_io(args, io) -> None:
    io.input("INPUT", args.input)
    io.input("--db", args.db)
    io.input("--compare", args.compare)
    for option, path in (("INPUT", args.input), ("--compare", args.compare)):
        for trace in recorded_traces(path):  # a kept trace is an input too: never written over
            io.input(f"{option}'s traces", trace)
    io.output("--out", args.out)
    declare_vary_io(args, io)


def cmd_report(args) -> int:
    if wants_vary(args):
        return run_vary(args)
    index = Index(args.db) if args.db else None
    # main checked --out before any work (declare_io); called without main, it is checked here
    force = checked_before_work(args) or args.force
    try:
        if is_result_file(args.input):
            results = [read_result(args.input, "INPUT", args.trajectories)]
            if args.compare:
                results.append(read_result(args.compare, "--compare", args.trajectories))
            path = write_experiment_page(
                results, args.out, index, metric=args.metric, paper=args.paper, force=force, record="report --out"
            )
        else:
            if args.compare:
                raise safeio.InputError(
                    f"--compare {Path(args.compare).name}: compares two results; INPUT {Path(args.input).name} is a "
                    "trace: give INPUT as an `eval` out.json"
                )
            trace = read_trace(args.input)
            path = write_trajectory_page(trace, args.out, index, force=force, source=args.input, record="report --out")
    finally:
        if index is not None:
            index.close()
    print(f"wrote {path}")
    return safeio.EXIT_OK
