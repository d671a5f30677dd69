"""`sag2wb report TRACE --out PAGE.html [--db DB]`: one self-contained HTML page of a kept
trajectory (docs/reports.md): open it from a file, no kernel, no install, no network."""

from __future__ import annotations

from workbench import safeio
from workbench.cli.io_roles import path_option
from workbench.index.store import Index
from workbench.report import read_trace, write_trajectory_page


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="a self-contained HTML page of a trace (no kernel, no network)")
    path_option(
        p,
        "input",
        role="input",
        metavar="INPUT",
        help="a trace: an `eval --trace-dir` file, the dashboard's trace JSON export, or Trace.to_json()",
    )
    path_option(p, "--out", role="output", required=True, metavar="PAGE.html", help="the page to write")
    path_option(
        p,
        "--db",
        role="input",
        default=None,
        help="the index the trace was made on: passage texts (marked) and terms as the text writes them",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out file that sag2wb did not write")
    p.set_defaults(func=cmd_report)


def declare_io(args, io) -> None:
    io.input("INPUT", args.input)
    io.input("--db", args.db)
    io.output("--out", args.out)


def cmd_report(args) -> int:
    trace = read_trace(args.input)
    index = Index(args.db) if args.db else None
    try:
        # main checked --out before any work (declare_io); called without main, it is checked here
        force = True if getattr(args, "io", None) is not None else args.force
        path = write_trajectory_page(trace, args.out, index, force=force, source=args.input, record="report --out")
    finally:
        if index is not None:
            index.close()
    print(f"wrote {path}")
    return safeio.EXIT_OK
