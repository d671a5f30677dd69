"""`sag2wb compare A.json B.json`: what variant B changed against base A, question by question
(workbench/runs/changes.py): wins/losses/ties, first differing round, terms, seeds, gold, rank moves."""

from __future__ import annotations

import json

from workbench import safeio
from workbench.cli.options import number
from workbench.metrics import METRICS
from workbench.runs.changes import compare


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="what a variant changed: two eval results, question by question")
    p.add_argument("base", metavar="A.json", help="the base run: a `sag2wb eval --out` file")
    p.add_argument("variant", metavar="B.json", help="the variant run, on the same questions")
    p.add_argument("--metric", choices=METRICS, default="R@10", help="the metric wins and losses are counted on")
    p.add_argument(
        "--traces-a",
        default=None,
        metavar="DIR",
        help="A's `eval --trace-dir` folder: which term brought each passage in, terms as the text writes them",
    )
    p.add_argument("--traces-b", default=None, metavar="DIR", help="B's `eval --trace-dir` folder")
    p.add_argument(
        "--top",
        type=number(int, minimum=0),
        default=10,
        metavar="N",
        help="questions listed in detail, largest change first (0: all)",
    )
    p.add_argument("--json", action="store_true", help="print the whole comparison as JSON instead of text")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    if args.top < 0:
        raise safeio.InputError(f"--top must be 0 (all) or more, not {args.top}")
    changes = compare(args.base, args.variant, args.metric, traces_base=args.traces_a, traces_variant=args.traces_b)
    if args.json:
        print(json.dumps(changes.to_dict(), ensure_ascii=False, indent=1, allow_nan=False))
    else:
        print(changes.report(args.top))
    return safeio.EXIT_OK
