"""`sag2wb report TRACE --db DB --vary L=5,10,20 --vary H=0,1,2 --judge lexical,learned --out PAGE.html`:
the trace's question re-run over a grid of parameters and judges, one page that switches
between the variants instantly and says what changed on each switch (docs/reports.md)."""

from __future__ import annotations

import sys

from workbench import safeio
from workbench.cli.io_roles import checked_before_work, judge_files, param_files
from workbench.cli.options import number
from workbench.index.store import Index
from workbench.report import read_trace
from workbench.report.variants import (
    MAX_MIB,
    MAX_VARIANTS,
    check_limits,
    read_grid,
    run_grid,
    split_judges,
    write_variants_page,
)


def add_vary_arguments(p) -> None:
    """The grid's options on `sag2wb report`'s parser."""
    g = p.add_argument_group("explorable variants (a grid re-run on --db; docs/reports.md)")
    g.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="a parameter and its values for the grid, e.g. --vary L=5,10,20 --vary H=0,1,2 "
        "(field_weights: values separated by ';'); the rest are the trace's",
    )
    g.add_argument(
        "--judge",
        action="append",
        default=[],
        metavar="J1,J2",
        help="the grid's judges, e.g. --judge lexical,learned (default: the trace's judge)",
    )
    g.add_argument(
        "--max-variants",
        type=number(int, minimum=1),
        default=MAX_VARIANTS,
        help=f"refuse a grid of more variants (default {MAX_VARIANTS})",
    )
    g.add_argument(
        "--max-mib",
        type=number(float, above=0),
        default=MAX_MIB,
        help=f"refuse a grid whose page is estimated larger, in MiB (default {MAX_MIB:g})",
    )


def wants_vary(args) -> bool:
    """`report`'s parser gives both options (add_vary_arguments); a Namespace built by hand may not."""
    options = vars(args)
    return bool(options.get("vary") or options.get("judge"))


def declare_vary_io(args, io) -> None:
    """The files the grid's judges and term weightings name are inputs (never written over)."""
    if not wants_vary(args):
        return
    for text in split_judges(args.judge):
        for path in judge_files(text):
            io.input("--judge", path)
    for text in args.vary:
        name, _, values = text.partition("=")
        if name.strip() == "term_weighting":
            for path in param_files(f"term_weighting={v}" for v in values.split(",")):
                io.input("--vary", path)


def run_vary(args) -> int:
    """Read and check the grid, refuse it over its limits, run it, write the page."""
    if not args.db:
        raise safeio.InputError("--vary/--judge: give --db DB, the index the trace was made on (the grid runs there)")
    trace = read_trace(args.input)
    index = Index(args.db)
    try:
        from workbench.report.trajectory import check_index

        check_index(trace, index)
        grid = read_grid(args.vary, args.judge, trace, index)
        estimate = check_limits(grid, trace, index, args.max_variants, args.max_mib)
        print(f"{grid.count} variants (page estimated at {estimate / 2**20:.1f} MiB): running", file=sys.stderr)
        run = run_grid(grid, trace, index, progress=sys.stderr.isatty())
        force = checked_before_work(args) or args.force  # main checked --out before any work
        path, size = write_variants_page(run, trace, index, args.out, force=force, source=args.input)
    finally:
        index.close()
    asked, reused = run.memo.misses, run.memo.hits
    print(f"wrote {path}: {grid.count} variants, {size / 2**20:.2f} MiB; {asked} judgments asked, {reused} reused")
    return safeio.EXIT_OK
