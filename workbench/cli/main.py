"""`sag2wb`: index a corpus, search, evaluate, run the demo (and the JEV/ablation commands).

sag2wb demo
sag2wb index CORPUS --db DB
sag2wb search --db DB "question" --judge lexical --explain
sag2wb eval --db DB --questions Q.jsonl --judge oracle --out OUT.json [--run OUT.trec --measure nDCG@10]
sag2wb convert --corpus corpus.json --questions Q.jsonl --to beir --out DIR
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from importlib import metadata

from workbench import safeio
from workbench.cli import (
    ablate,
    cache,
    compare,
    convert,
    dashboard,
    demo,
    embed,
    eval,
    fit_judge,
    index,
    judge_server,
    report,
    search,
)
from workbench.cli.errors import CLIError, os_error_message, sqlite_error_message
from workbench.cli.io_roles import declare_and_check
from workbench.cli.options import Parser, check_numbers, timeout_option
from workbench.index.schema import IndexProblem
from workbench.index.units import CorpusError
from workbench.judgment import JudgeError
from workbench.params import ParamsError
from workbench.runs.records import ExperimentError, QuestionFailed
from workbench.terms import TermWeightingError

# the order of `sag2wb --help`
COMMANDS = (
    demo,
    index,
    search,
    eval,
    compare,
    report,
    convert,
    judge_server,
    cache,
    embed,
    ablate,
    dashboard,
    fit_judge,
)


def version() -> str:
    try:
        return metadata.version("sag2-workbench")
    except metadata.PackageNotFoundError:  # a checkout used without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The `sag2wb` parser; each command module gives `add_parser(sub)` and, when it writes,
    `declare_io(args, io)` (workbench/safeio.py: Outputs), which main checks before the command."""
    parser = Parser(prog="sag2wb", description="SAG2 Workbench: embedding-free multi-hop retrieval")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        before = set(sub.choices)
        command.add_parser(sub)
        for name in set(sub.choices) - before:  # its parser and module, for the output check
            sub.choices[name].set_defaults(_module=command, _parser=sub.choices[name])
    return parser


def main(argv=None) -> int:
    """Run one command; every failure ends in one line on stderr and an exit code
    (safeio: 1 a question failed, 2 bad input or environment, 3 --keep-going with failures,
    130 interrupted), never a traceback."""
    args = build_parser().parse_args(argv)
    prefix = f"sag2wb {args.command}: error:"
    try:
        timeout_option(args)  # --judge-timeout checked now; it travels inside the judge's spec (options.py)
        check_numbers(args, args._parser)  # inf, nan, out of range: a named error, never a failing run
        # every output checked before any work; the command may declare more and check again
        args.io = declare_and_check(args, args._parser, args._module)
        return args.func(args)
    except QuestionFailed as exc:  # a caller that did not handle it itself (search, demo)
        print(f"{prefix} {exc}", file=sys.stderr)
        return safeio.EXIT_FAILED
    except (
        CorpusError,
        IndexProblem,
        ParamsError,
        JudgeError,
        TermWeightingError,
        CLIError,
        ExperimentError,
        safeio.InputError,
    ) as exc:
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
