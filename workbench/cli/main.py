"""`sag2wb`: index a corpus, search, evaluate, run the demo (and the JEV/ablation commands).

sag2wb demo
sag2wb index CORPUS --db DB
sag2wb search --db DB "question" --judge lexical --explain
sag2wb eval --db DB --questions Q.jsonl --judge oracle --out OUT.json [--run OUT.trec --measure nDCG@10]
sag2wb convert --corpus corpus.json --questions Q.jsonl --to beir --out DIR
"""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import sys
from importlib import metadata

from workbench import safeio
from workbench.cli.errors import os_error_message, sqlite_error_message
from workbench.cli.io_roles import declare_and_check
from workbench.cli.options import Parser, check_numbers, timeout_option

# The commands in the order of `sag2wb --help`; each is the module workbench.cli.<name, "-" as "_">,
# whose `add_parser(sub)` adds that one command. A module is imported only when its command is
# built: `sag2wb index ...` builds and imports `index` alone (the others cost ~0.5 s of imports).
COMMANDS: tuple = (
    "demo",
    "index",
    "search",
    "eval",
    "compare",
    "report",
    "convert",
    "judge-server",
    "cache",
    "embed",
    "ablate",
    "dashboard",
    "fit-judge",
)

# What main says in one line, exit 2 (safeio.EXIT_USAGE), as (module, class). They are looked up
# when one is raised, among the modules imported by then: a module never imported raised none of its
# errors, and importing them all (the runs package, the engine) would cost every command's start.
USAGE_ERRORS = (
    ("workbench.index.units", "CorpusError"),
    ("workbench.index.schema", "IndexProblem"),
    ("workbench.params", "ParamsError"),
    ("workbench.judgment", "JudgeError"),
    ("workbench.terms", "TermWeightingError"),
    ("workbench.cli.errors", "CLIError"),
    ("workbench.runs.records", "ExperimentError"),
    ("workbench.safeio", "InputError"),
)
QUESTION_FAILED = (("workbench.runs.records", "QuestionFailed"),)


def imported(classes) -> tuple[type[BaseException], ...]:
    """The exception classes of `classes` ((module, name) pairs) whose modules are imported."""
    found = []
    for where, name in classes:
        module = sys.modules.get(where)
        found.append(getattr(module, name, None))
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))


def version() -> str:
    try:
        return metadata.version("sag2-workbench")
    except metadata.PackageNotFoundError:  # a checkout used without installing
        return "unknown (not installed)"


def command_module(command):
    """The module of a command of COMMANDS (a name), imported now; any other entry is taken as the module."""
    if isinstance(command, str):
        return importlib.import_module(f"workbench.cli.{command.replace('-', '_')}")
    return command


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `sag2wb` parser; each command module gives `add_parser(sub)` and, when it writes,
    `declare_io(args, io)` (workbench/safeio.py: Outputs), which main checks before the command.
    `command`: a name of COMMANDS, the only command then added (what `main` parses when the
    arguments begin with it: that command's parser is the same, its module the only one imported)."""
    parser = Parser(prog="sag2wb", description="SAG2 Workbench: embedding-free multi-hop retrieval")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True)
    for entry in COMMANDS if command is None else [command]:
        module = command_module(entry)
        before = set(sub.choices)
        module.add_parser(sub)
        for name in set(sub.choices) - before:  # its parser and module, for the output check
            sub.choices[name].set_defaults(_module=module, _parser=sub.choices[name])
    return parser


def main(argv=None) -> int:
    """Run one command; every failure ends in one line on stderr and an exit code
    (safeio: 1 a question failed, 2 bad input or environment, 3 --keep-going with failures,
    130 interrupted), never a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # a command named first is parsed by a parser of it alone; anything else (--help, --version,
    # no command, an unknown one) by the whole parser, whose messages list every command
    first = argv[0] if argv and isinstance(argv[0], str) and argv[0] in COMMANDS else None
    args = build_parser(first).parse_args(argv)
    prefix = f"sag2wb {args.command}: error:"
    try:
        timeout_option(args)  # --judge-timeout checked now; it travels inside the judge's spec (options.py)
        check_numbers(args, args._parser)  # inf, nan, out of range: a named error, never a failing run
        # every output checked before any work; the command may declare more and check again
        args.io = declare_and_check(args, args._parser, args._module)
        return args.func(args)
    except imported(QUESTION_FAILED) as exc:  # a caller that did not handle it itself (search, demo)
        print(f"{prefix} {exc}", file=sys.stderr)
        return safeio.EXIT_FAILED
    except imported(USAGE_ERRORS) as exc:
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
