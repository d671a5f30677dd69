"""Which path options a command reads and which it writes: the role on each path option, the
check of a command's declared outputs before any work (workbench/safeio.py: Outputs), and the
files the judge options name, which are inputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench import safeio

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


def checked_before_work(args) -> bool:
    """Whether the CLI's main checked the command's outputs already (`declare_and_check`, kept as
    `args.io`); a handler called without main checks them itself."""
    return getattr(args, "io", None) is not None


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


def judge_files(text) -> list[Path]:
    """The files a judge spec names: `FILE.py:NAME`'s source, `learned:J.json` (and the shipped
    model behind `learned` and `auto`), a `jev:instructions=T.json` template. They are inputs of
    the command, so no output (not even with --force) replaces them.

    >>> judge_files("learned:J.json"), judge_files("my.py:score"), judge_files("jev:instructions=t.toml")
    ([PosixPath('J.json')], [PosixPath('my.py')], [PosixPath('t.toml')])
    """
    from workbench.judges.learned import default_model_path
    from workbench.judges.registry import JudgeSpec  # here: the judges package is ~0.1 s of every start

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
