"""The option groups the commands share, numbers within bounds, the one-line parser, and the
parameters and judge (`JudgeSpec`) that the run options describe."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from workbench.cli.errors import CLIError
from workbench.cli.io_roles import option_name, path_option

# The judges, the measures and the parameters are imported where they are used: a command that
# has no run options (`index`) starts without them (~0.4 s of imports).
if TYPE_CHECKING:
    from workbench.judges.registry import JudgeSpec
    from workbench.params import Params


def number(kind=float, *, minimum=None, above=None, maximum=None):
    """argparse `type=` for a numeric option. It converts; the CLI's main then refuses, in one
    line naming the option (exit 2), values that would make every call fail: inf, nan, or
    outside [minimum, maximum] (`above`: strictly greater) -- `check_numbers`."""

    def parse(text: str):
        try:
            return kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected {'a whole number' if kind is int else 'a number'}"
            ) from None

    parse.__name__ = kind.__name__
    parse.sag2wb_bounds = (minimum, above, maximum)  # type: ignore[attr-defined, unused-ignore]
    return parse


def number_problem(value, minimum=None, above=None, maximum=None) -> str | None:
    """What is wrong with `value` for these bounds, or None.

    >>> number_problem(float("inf"), minimum=0), number_problem(-5.0, minimum=0), number_problem(70000, 0, None, 65535)
    ('expected a finite number', 'expected a number >= 0', 'expected 0-65535')
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "expected a finite number"
    low_ok = (minimum is None or value >= minimum) and (above is None or value > above)
    if low_ok and (maximum is None or value <= maximum):
        return None
    if minimum is not None and maximum is not None:
        return f"expected {minimum}-{maximum}"
    if not low_ok:
        return f"expected a number >= {minimum}" if minimum is not None else f"expected a number > {above}"
    return f"expected a number <= {maximum}"


def check_numbers(args, parser: argparse.ArgumentParser) -> None:
    """Every numeric option of the command against its bounds (`number`), before any work."""
    for action in parser._actions:
        bounds = getattr(action.type, "sag2wb_bounds", None)
        value = getattr(args, action.dest, None)
        if bounds is None or value is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            problem = number_problem(v, *bounds)
            if problem:
                shown = format(v, "g") if isinstance(v, float) else str(v)
                raise CLIError(f"{option_name(action)} {shown}: {problem}")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the house rule for every failure), exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_run_options(p: argparse.ArgumentParser, *, rounds: bool = True) -> None:
    from workbench.judges.registry import judge_help

    p.add_argument(
        "--judge",
        default="auto",
        help=judge_help(),
    )
    if rounds:
        p.add_argument(
            "--rounds", type=number(int, minimum=0, maximum=2), default=None, help="expansion rounds H (0-2)"
        )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any Params field, e.g. --param L=10 --param field_weights=2,2,1 --param term_weighting=no_idf",
    )
    p.add_argument(
        "--judge-timeout",
        dest="run_judge_timeout",
        default=None,
        metavar="SECONDS",
        help="time limit per call of a FILE.py:NAME judge (default $SAG2WB_JUDGE_TIMEOUT or 60; 0: none)",
    )
    g = p.add_argument_group("JEV (hosted judge)")
    g.add_argument("--jev-endpoint", default=None, help="typesafe, openrouter, or a full URL")
    g.add_argument("--jev-model", default=None, help="the model the JEV endpoint should use (default: the endpoint's)")
    g.add_argument(
        "--payload-style",
        choices=["inline", "stateful"],
        default="stateful",
        help="stateful: passages sent once and then named; inline: every request carries them (default stateful)",
    )
    g.add_argument(
        "--jev-instructions",
        default=None,
        metavar="NAME|FILE",
        help="the decision instructions: a registered template (default sag2-evidence-v2) or a .json/.toml file",
    )
    path_option(g, "--cache-dir", role="output", default=None, help="judgment cache folder (diskcache)")
    g.add_argument("--cache-only", action="store_true", help="replay: answer from the cache, fail on a miss")


def add_ecosystem_options(p: argparse.ArgumentParser) -> None:
    from workbench.measures import measure_name

    g = p.add_argument_group("IR toolbox (docs/ecosystem.md)")
    g.add_argument("--split", default=None, help="the qrels split when --questions is a BEIR folder (default: test)")
    path_option(
        g, "--run", role="output", default=None, metavar="OUT.trec", help="also write the rankings as a TREC run"
    )
    path_option(
        g, "--qrels", role="output", default=None, metavar="OUT.qrels", help="also write the gold as TREC qrels"
    )
    g.add_argument(
        "--measure",
        action="append",
        default=[],
        type=measure_name,
        metavar="NAME",
        help="an ir_measures measure to add, e.g. nDCG@10, RR (repeatable; needs ir_measures)",
    )


def run_params(args) -> Params:
    from workbench.params import Params

    params = Params().with_assignments(args.param)
    if getattr(args, "rounds", None) is not None:
        params = params.replace(H=args.rounds)
    return params


def judge_spec(args, index) -> JudgeSpec:
    """--judge as a value: `auto` resolved for this index, JEV's options or the function judge's
    time limit (`with_timeout`) attached."""
    from workbench.judges.registry import JudgeSpec

    spec = JudgeSpec.parse(args.judge).resolve(index)
    if spec.name == "jev":
        return spec.with_options(**jev_options(args))
    return spec.with_options(**timeout_option(args)) if spec.name == "function" else spec


def timeout_option(args) -> dict:
    """--judge-timeout as the function judge's `timeout` option, in seconds (None: no limit), or {}
    when it is not given (the judge then reads $SAG2WB_JUDGE_TIMEOUT, else 60 s). main calls it
    before any work, so a value that is not seconds is one line, exit 2 (JudgeTimeoutSetting).

    >>> from types import SimpleNamespace as Args
    >>> timeout_option(Args(run_judge_timeout="2.5")), timeout_option(Args(run_judge_timeout="0"))
    ({'timeout': 2.5}, {'timeout': None})
    >>> timeout_option(Args(run_judge_timeout=None)), timeout_option(Args())
    ({}, {})
    """
    text = getattr(args, "run_judge_timeout", None)
    if text is None:
        return {}
    from workbench.judges.base import check_timeout

    return {"timeout": check_timeout(text, "--judge-timeout")}


def with_timeout(args, judge: str | JudgeSpec) -> str | JudgeSpec:
    """`judge` with --judge-timeout inside its spec when it is a FILE.py:NAME judge, so the limit
    travels with the spec to every worker (--processes, --dask); any other judge unchanged.

    >>> from types import SimpleNamespace as Args
    >>> with_timeout(Args(run_judge_timeout="3"), "my.py:score")
    JudgeSpec(name='function', options=(('target', 'my.py:score'), ('timeout', 3.0)))
    >>> with_timeout(Args(run_judge_timeout="3"), "lexical"), with_timeout(Args(run_judge_timeout=None), "my.py:f")
    ('lexical', 'my.py:f')
    """
    from workbench.judges.registry import JudgeSpec

    options = timeout_option(args)
    if not options:
        return judge
    spec = JudgeSpec.parse(judge)
    return spec.with_options(**options) if spec.name == "function" else judge


def jev_options(args) -> dict:
    from workbench.judges.registry import JudgeSpec

    if JudgeSpec.parse(args.judge).name != "jev":
        return {}
    options = {
        "endpoint": args.jev_endpoint,
        "model": args.jev_model,
        "payload_style": args.payload_style,
        "cache_dir": args.cache_dir,
        "cache_only": args.cache_only,
    }
    if getattr(args, "jev_instructions", None):  # else the spec's (jev:instructions=...) or the default
        options["instructions"] = args.jev_instructions
    return options


def add_parallel_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("many questions at once (results identical to a sequential run; docs/experiments.md)")
    g.add_argument(
        "--concurrency",
        type=number(int, minimum=1),
        default=None,
        metavar="N",
        help="questions at once on threads, for judges that wait (default 8 for jev, else 1); for jev from 16 "
        "on, over one process per 8, one per core at most (--processes 1: all in this process)",
    )
    g.add_argument(
        "--processes",
        type=number(int, minimum=1),
        default=None,
        metavar="N",
        help="a pool of N processes, for judges that compute (lexical, FILE.py:NAME); with --concurrency C: "
        "C questions at once over N processes, on threads in each (--processes 2 --concurrency 16: 2 x 8)",
    )
    g.add_argument(
        "--dask",
        default=None,
        metavar="SCHEDULER_ADDRESS",
        help="run on a Dask cluster, e.g. tcp://10.0.0.5:8786 (pip install 'sag2-workbench[dask]')",
    )


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="go on after a failed question; metrics cover the completed ones only (exit 3)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace existing output files that sag2wb did not write (inputs and resume files never)",
    )
