"""`sag2wb eval --judge jev ... --estimate`: what the run would send to JEV and cost, predicted
offline (workbench/judges/jev/estimate.py); nothing is sent, read from the key, or written."""

from __future__ import annotations

import sys

from workbench import safeio
from workbench.cli.io_roles import path_option
from workbench.cli.options import number, run_params
from workbench.index.corpora import check_gold, load_questions
from workbench.index.store import Index
from workbench.judges.jev.estimate import DEFAULT_PROXY, estimate_cost, price_for, proxy_spec
from workbench.judges.registry import JudgeSpec
from workbench.runs.tasks import require_gold
from workbench.safeio import InputError

# options that write or need a finished run: --estimate has neither, so they are refused
WRITES = (("trace_dir", "--trace-dir"), ("run", "--run"), ("qrels", "--qrels"), ("measure", "--measure"))


def add_options(p) -> None:
    """The estimate's options on `sag2wb eval`."""
    g = p.add_argument_group("cost estimate before spending (--judge jev; docs/jev.md)")
    g.add_argument(
        "--estimate",
        action="store_true",
        help="predict JEV's requests, tokens and cost for these questions (nothing sent, no key, nothing written; "
        "--out is neither checked nor written)",
    )
    g.add_argument(
        "--estimate-proxy",
        default=None,
        metavar="JUDGE",
        help=f"the offline judge whose trajectories are counted (default {DEFAULT_PROXY})",
    )
    g.add_argument(
        "--price-in", type=number(float, minimum=0), default=None, metavar="USD", help="USD per million input tokens"
    )
    g.add_argument(
        "--price-out", type=number(float, minimum=0), default=None, metavar="USD", help="USD per million output tokens"
    )
    path_option(
        g, "--price", role="input", default=None, metavar="FILE", help="a price table JSON (default: the shipped one)"
    )


def declare_io(args, io) -> None:
    """--estimate reads its inputs and writes nothing: the given outputs are not checked."""
    io.input("--db", args.db)
    io.input("--questions", args.questions)
    io.input("--cache-dir", args.cache_dir)  # read only: never created, never written
    io.input("--price", args.price)
    io.options.add("--out")  # declared, not checked: the command line is the run's, minus --estimate
    for dest, option in WRITES:
        if getattr(args, dest, None):
            raise InputError(
                f"{option}: --estimate runs no JEV trajectory and writes nothing; drop {option}, "
                f"or drop --estimate to run the evaluation"
            )


def estimating(args) -> bool:
    """Whether this is an estimate; the estimate's options without --estimate are refused (they
    would do nothing)."""
    if getattr(args, "estimate", False):
        return True
    options = (("estimate_proxy", "--estimate-proxy"), ("price_in", "--price-in"), ("price_out", "--price-out"))
    given = [o for d, o in (*options, ("price", "--price")) if getattr(args, d, None) is not None]
    if given:
        raise InputError(f"{given[0]}: only used with --estimate; add --estimate, or drop {given[0]}")
    return False


def cmd_estimate(args) -> int:
    spec = JudgeSpec.parse(args.judge)
    if spec.name != "jev":
        raise InputError(
            f"--estimate predicts what --judge jev would spend; got --judge {args.judge}: pass --judge jev "
            f"(the proxy judge is --estimate-proxy, default {DEFAULT_PROXY})"
        )
    proxy = proxy_spec(args.estimate_proxy)
    price = price_for_args(args)
    index = Index(args.db)
    questions = load_questions(args.questions, split=args.split)
    check_gold(questions, set(index.documents.values()), args.questions)
    if proxy.kind.needs_gold:
        require_gold(questions, str(proxy), args.questions)
    est = estimate_cost(
        index,
        questions,
        params=run_params(args),
        proxy=proxy,
        endpoint=args.jev_endpoint,
        model=args.jev_model,
        payload_style=args.payload_style,
        instructions=args.jev_instructions or spec.get("instructions"),
        cache_dir=args.cache_dir,
        cache_only=args.cache_only,
        progress=not args.quiet,
    )
    print(est.table(price))
    print(f"(estimated in {est.seconds:.1f} s; --out {args.out} not written)", file=sys.stderr)
    return safeio.EXIT_OK


def price_for_args(args):
    from workbench.judges.jev.client import resolve_endpoint

    _, model, _, _ = resolve_endpoint(args.jev_endpoint, args.jev_model)
    return price_for(model, price_in=args.price_in, price_out=args.price_out, table_path=args.price)
