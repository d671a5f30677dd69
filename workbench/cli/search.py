"""`sag2wb search`: ask one question; print the ranking and, with --explain, each round's seeds and terms."""

from __future__ import annotations

import sys

from workbench.cli.errors import CLIError
from workbench.cli.io_roles import declare_run_options, path_option
from workbench.cli.options import add_run_options, judge_spec, number, run_params
from workbench.cli.printing import explain, print_ranking
from workbench.engine import Run
from workbench.index.store import Index


def add_parser(sub) -> None:
    p = sub.add_parser("search", help="ask one question")
    path_option(p, "--db", role="input", required=True, help="the index (`sag2wb index`)")
    p.add_argument("question", help="the question, in quotes")
    p.add_argument("--explain", action="store_true", help="print each round's seeds and terms")
    p.add_argument("--top", type=number(int, minimum=1), default=10, help="how many results to print (default 10)")
    add_run_options(p)
    p.set_defaults(func=cmd_search)


def declare_io(args, io) -> None:
    io.input("--db", args.db)
    declare_run_options(args, io)


def cmd_search(args) -> int:
    if args.top < 1:
        raise CLIError(f"--top {args.top}: give a number of results of at least 1")
    index = Index(args.db)
    spec = judge_spec(args, index)
    args.judge = str(spec)
    params = run_params(args)
    if spec.kind.needs_gold:
        raise CLIError(f"the {spec} judge needs gold labels: use `sag2wb eval` with a questions file")
    judge = spec.build(index)
    trace = Run(index, args.question, params, judge).run()
    print_ranking(trace, index, args.top)
    if args.explain:
        explain(trace)
    if trace.rounds and trace.rounds[-1].error:
        print(f"stopped at round {trace.rounds[-1].round}: {trace.rounds[-1].error}", file=sys.stderr)  # one line
        return 1
    return 0
