"""What the commands share: option groups, the judge and parameters from the options, output checks
and writes, failure reports, and one-line messages for OS and SQLite errors."""

from __future__ import annotations

import argparse
import errno
import math
import sqlite3
import sys
from importlib import resources
from pathlib import Path

from workbench import safeio
from workbench.executors import make_executor
from workbench.judges import JudgeSpec
from workbench.measures import measure_name
from workbench.params import Params
from workbench.runs.evaluation import QuestionFailed, load_resume, naming_path

# The bundled sample corpora are package data: the checkout's sample_corpora/ installs as the
# package workbench.sample_corpora (pyproject.toml), so `sag2wb demo` runs from any folder
# after a plain `pip install` (a regular package on disk: its files are a real folder).
SAMPLE_CORPORA = Path(str(resources.files("workbench.sample_corpora")))
SAMPLE_DOCS = SAMPLE_CORPORA / "internal_docs"
SAMPLE_DOCS_QUESTIONS = SAMPLE_CORPORA / "internal_docs.questions.jsonl"


class CLIError(Exception):
    pass


# ---- declared inputs and outputs (workbench/safeio.py: Outputs) ---------------------------------
IO_ROLE = "sag2wb_io"  # set on an argparse action: "input" or "output"


def path_option(p, *flags, role: str, **kwargs) -> argparse.Action:
    """`p.add_argument(*flags, **kwargs)` for a path, tagged as this command's "input" or
    "output". The CLI's main refuses to run a command whose given output options its
    `declare_io(args, io)` did not declare, and tests/test_outputs.py fails on any path
    option without a role: a new command cannot forget to check what it writes."""
    if role not in ("input", "output"):
        raise ValueError(f"role {role!r}: input or output")
    action = p.add_argument(*flags, **kwargs)
    setattr(action, IO_ROLE, role)
    return action


def output_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if getattr(a, IO_ROLE, None) == "output"]


def option_name(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def declare_and_check(args, parser: argparse.ArgumentParser, module) -> safeio.Outputs:
    """Build the command's `Outputs` from its `declare_io(args, io)` and check it before any
    work; a given output option left undeclared is a bug in the command (RuntimeError)."""
    io = safeio.Outputs(force=args.force if hasattr(args, "force") else None, command=args.command)
    declare = getattr(module, "declare_io", None)
    given = [a for a in output_actions(parser) if getattr(args, a.dest, None) not in (None, False, [], "")]
    if declare is not None:
        declare(args, io)
    missing = [option_name(a) for a in given if option_name(a) not in io.options]
    if missing:
        raise RuntimeError(
            f"sag2wb {args.command}: output option(s) {', '.join(missing)} not declared by "
            f"{module.__name__}.declare_io; every output must be checked (workbench/safeio.py: Outputs)"
        )
    io.check()
    return io


# ---- numbers ------------------------------------------------------------------------------------
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
    p.add_argument(
        "--judge",
        default="auto",
        help="auto, bm25, lexical, lexical-bridge, semantic[:gamma=G,signals=model+coverage+bridge], oracle "
        "(needs gold), jev, learned[:J.json], or FILE.py:NAME (default auto: the shipped learned judge, "
        "which won on every held-out check; it says so on stderr; docs/judges.md)",
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


def judge_files(text) -> list[Path]:
    """The files a judge spec names: `FILE.py:NAME`'s source, `learned:J.json` (and the shipped
    model behind `learned` and `auto`), a `jev:instructions=T.json` template. They are inputs of
    the command, so no output (not even with --force) replaces them.

    >>> judge_files("learned:J.json"), judge_files("my.py:score"), judge_files("jev:instructions=t.toml")
    ([PosixPath('J.json')], [PosixPath('my.py')], [PosixPath('t.toml')])
    """
    from workbench.judges.learned import default_model_path

    spec = JudgeSpec.parse(text)
    if spec.name == "function":
        return [Path(str(spec.get("target")).rpartition(":")[0])]
    if spec.name in ("learned", "auto"):
        return [Path(spec.get("path")) if spec.get("path") else default_model_path()]
    if spec.name == "jev" and spec.get("instructions"):
        return template_files(spec.get("instructions"))
    return []


def template_files(which) -> list[Path]:
    """A JEV template given by file (.json/.toml, or any existing path), as the template reader takes it."""
    if not which or not isinstance(which, str):
        return []
    return [Path(which)] if Path(which).suffix.lower() in (".json", ".toml") or Path(which).exists() else []


def param_files(assignments) -> list[Path]:
    """The `--param term_weighting=FILE.py:NAME` variant's source file."""
    files = []
    for text in assignments or ():
        name, _, value = str(text).partition("=")
        path, sep, _ = value.strip().rpartition(":")
        if name.strip() == "term_weighting" and sep and path.endswith(".py"):
            files.append(Path(path))
    return files


def declare_judge_inputs(args, io, option: str = "--judge") -> None:
    """Every file the judge options name, as inputs (`judge_files`, `--jev-instructions`, `--param`)."""
    for path in judge_files(getattr(args, option.lstrip("-").replace("-", "_"), None)):
        io.input(option, path)
    for path in template_files(getattr(args, "jev_instructions", None)):
        io.input("--jev-instructions", path)
    for path in param_files(getattr(args, "param", None)):
        io.input("--param", path)


def declare_run_options(args, io) -> None:
    """The run options' paths: the files the judge options name (inputs) and the JEV judgment
    cache folder (read and written)."""
    declare_judge_inputs(args, io)
    if getattr(args, "cache_dir", None) and getattr(args, "cache_only", False):
        io.input("--cache-dir", args.cache_dir)  # replay only reads it: a read-only copy works
    elif getattr(args, "cache_dir", None):
        io.output("--cache-dir", args.cache_dir, kind="dir")


def run_params(args) -> Params:
    params = Params().with_assignments(args.param)
    if getattr(args, "rounds", None) is not None:
        params = params.replace(H=args.rounds)
    return params


def judge_spec(args, index) -> JudgeSpec:
    """--judge as a value: `auto` resolved for this index, JEV's options attached."""
    spec = JudgeSpec.parse(args.judge).resolve(index)
    return spec.with_options(**jev_options(args)) if spec.name == "jev" else spec


def jev_options(args) -> dict:
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
        help="questions at once on threads, for judges that wait (default 8 for jev, else 1)",
    )
    g.add_argument(
        "--processes",
        type=number(int, minimum=1),
        default=None,
        metavar="N",
        help="a pool of N processes, for judges that compute (lexical, FILE.py:NAME)",
    )
    g.add_argument(
        "--dask",
        default=None,
        metavar="SCHEDULER_ADDRESS",
        help="run on a Dask cluster, e.g. tcp://10.0.0.5:8786 (pip install 'sag2-workbench[dask]')",
    )


def run_work(args, resume, work):
    """`work(executor)` on the executor the options ask for: (its result, None), or (None, the
    exit code) when a question failed or Ctrl-C stopped it (finished questions stay in `resume`)."""
    executor = make_executor(args.concurrency, args.processes, args.dask, judge=args.judge)
    try:
        return work(executor), None
    except QuestionFailed as exc:
        return None, failed(args, exc, resume)
    except KeyboardInterrupt:
        return None, interrupted(args, resume)
    finally:
        executor.close()


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


def write(path: Path, text: str, record: str = "sag2wb") -> None:
    """Atomic write (temp file, fsync, rename): a kill or a full disk leaves the old file whole.
    The file is recorded as ours (`record`: what wrote it), so a rerun may replace it."""
    with naming_path(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        safeio.atomic_write_text(path, text, record=record)


def json_default(v):
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def fmt(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def kept_records(resume: Path) -> str:
    """What a stopped run leaves to resume from, said truly: no resume file is named when none was written."""
    kept = len(load_resume(resume))
    return f"{kept} finished record(s) kept in {resume}" if kept else "no question had finished, so nothing was kept"


def failed(args, exc: QuestionFailed, resume: Path) -> int:
    """Exit 1 at the first failed question: say which, where, why, and what is kept."""
    print(f"sag2wb {args.command}: error: {exc}", file=sys.stderr)
    print(
        f"sag2wb {args.command}: no results written; {kept_records(resume)}: fix the cause "
        f"and rerun the same command to resume (or pass --keep-going to skip failing questions)",
        file=sys.stderr,
    )
    return safeio.EXIT_FAILED


def interrupted(args, resume: Path) -> int:
    print(
        f"sag2wb {args.command}: interrupted; {kept_records(resume)}: rerun the same command to resume",
        file=sys.stderr,
    )
    return safeio.EXIT_INTERRUPTED


def report_failures(failures: list[dict], total: int, scope: str) -> int:
    """--keep-going's closing lines: how many failed, the first errors; exit 3."""
    print(f"{len(failures)} of {total} questions failed; {scope}", file=sys.stderr)
    for f in failures[:3]:
        where = f"configuration {f['config']!r}, " if f.get("config") else ""
        at = f" round {f['round']}" if f.get("round") is not None else ""
        print(f"  {where}question {f['question']!r}{at}: {f['error']}", file=sys.stderr)
    if len(failures) > 3:
        print(f'  ... and {len(failures) - 3} more (listed under "failures" in the JSON)', file=sys.stderr)
    return safeio.EXIT_PARTIAL


def size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.2f} MiB"


def print_ranking(trace, index, limit: int, gold=()) -> None:
    scores = trace.final_scores()
    gold = set(gold)
    print(f"question: {trace.question}")
    print(f"judge: {trace.judge}; judgments: {trace.judgments}; stop: {trace.stop}")
    if not trace.final_ranking:
        print("no results: " + (trace.stop or "nothing matched"))
        return
    for i, u in enumerate(trace.final_ranking[:limit], start=1):
        rec = index.unit(u)
        score = scores.get(u)
        where = f"{rec.source} {rec.location}".strip()
        mark = " *gold*" if rec.document in gold else ""
        print(f"{i:3d}. {rec.title}  [{where}]  score={f'{score:.4f}' if score is not None else 'bm25'}{mark}")


def explain(trace) -> None:
    for r in trace.rounds:
        print(
            f"\n-- round {r.round}: {len(r.candidates)} candidates, pool {len(r.pool)}, "
            f"context {len(r.context)}, judgments {r.judgments}" + (f", stop: {r.stop}" if r.stop else "")
        )
        if r.error:
            print(f"   error: {r.error}")
        if r.seeds:
            print(
                "   seeds: "
                + "; ".join(
                    f"{trace.units[s.unit_id].title} (score {s.score:.3f}, "
                    f"w {s.weight if s.weight is None else round(s.weight, 3)})"
                    for s in r.seeds
                )
            )
        sel = sorted((t for t in r.terms if t.selected), key=lambda t: t.order)
        for t in sel:
            res = f" -> {t.resolved!r} ({t.resolution})" if t.resolved and t.resolved != t.term else ""
            print(
                f"   term {t.order:2d}. {t.term!r}{res}  priority {t.priority:.3f} = (1+ln {t.tf})"
                f" x idf {t.idf:.3f} x (1+c {t.query_connection:.3f}) x w {t.seed_weight:.3f}"
                f"  from {trace.units[t.seed].title!r}"
            )


ABLATION_TABLE_MARKER = "<!-- written by sag2wb ablate -->"  # says so to a reader; replacing is by provenance


OS_HINTS: dict[int | None, str] = {  # keyed by OSError.errno, which may be None
    errno.EACCES: "check its permissions or choose another location",
    errno.EPERM: "check its permissions or choose another location",
    errno.EROFS: "the file system is read-only: choose a writable location",
    errno.ENOENT: "check the path (its folder must exist)",
    errno.EISDIR: "it is a folder: give a file path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.ENOSPC: "the disk is full: free some space and rerun (finished questions are kept for resume)",
    errno.EDQUOT: "the disk quota is exhausted: free some space and rerun",
    errno.EFBIG: "the file grew past this system's file-size limit: raise the limit or choose another location",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter path",
    errno.EEXIST: "a file of that name is in the way of a folder: choose another path",
    errno.EADDRINUSE: "another program listens on that port: choose another --port",
    errno.EADDRNOTAVAIL: "that address is not on this machine: check --host",
}


def os_error_message(exc: OSError) -> str:
    """One line: the path, what went wrong, what to do."""
    what = exc.strerror or str(exc) or type(exc).__name__
    hint = OS_HINTS.get(exc.errno, "check the path and rerun")
    if exc.filename is None:
        return f"{what}; {hint}"
    import os
    import re

    # the user's file, never the temporary one it was being written as
    name = Path(os.fsdecode(exc.filename))
    user = re.fullmatch(r"\.sag2wb-tmp-(.+)\.[^.]+|\.(.+)\.building-\d+", name.name)
    shown = name.with_name(user.group(1) or user.group(2)) if user else exc.filename
    return f"{shown}: {what}; {hint}"


def sqlite_error_message(args, exc: sqlite3.Error) -> str:
    db = getattr(args, "db", None)
    where = f"the database {db}" if db else "a database"
    if "locked" in str(exc):
        return f"{where} is locked by another process ({exc}); wait for it to finish and rerun"
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    # only a damaged file is called damaged: a full disk or a read-only place is not
    if primary == 13 or "disk is full" in str(exc):
        return f"{where} could not be written: the disk is full ({exc}); free some space and rerun"
    if primary == 10:
        return f"{where}: a disk I/O error ({exc}): the disk may be full or failing; free some space and rerun"
    if primary == 8 or "readonly" in str(exc):
        return f"{where} cannot be written: it or its folder is read-only ({exc}); choose a writable location"
    if primary == 14:
        return f"{where} cannot be opened ({exc}); check the path and its permissions"
    if primary not in (11, 26, None):
        return f"{where}: SQLite failed ({exc}); rerun, and if it persists rebuild with `sag2wb index CORPUS --db ...`"
    return (
        f"{where} cannot be read ({exc}): it is damaged or not a workbench index; "
        f"rebuild it with `sag2wb index CORPUS --db NEW.sqlite`"
    )
