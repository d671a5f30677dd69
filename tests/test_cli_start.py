"""A command's start imports its own module only (issue 33): `sag2wb index ...` builds a parser of
`index` alone, which is the whole parser's `index` (the same options, help and messages), and a
no-change update of a folder runs without the other commands, the judges, the runs package or pandas."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib import import_module

import pytest

from tests.conftest import cli_env, sag2wb

cli_main = import_module("workbench.cli.main")  # the module (workbench.cli's `main` is its function)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def described(p: argparse.ArgumentParser) -> list[tuple]:
    """What a parser takes and says: each action's flags, destination, default, type, help and role."""
    return [
        (
            tuple(a.option_strings),
            a.dest,
            repr(a.default),
            getattr(a.type, "__name__", None),
            a.help,
            a.nargs,
            a.required,
            tuple(a.choices or ()),
            getattr(a, "sag2wb_io", None),
        )
        for a in p._actions
    ]


def test_each_name_adds_that_command_alone_in_the_order_of_help():
    whole = subcommands(cli_main.build_parser())
    assert list(whole) == list(cli_main.COMMANDS)  # every command named, none missing, in --help order
    for name in cli_main.COMMANDS:
        alone = subcommands(cli_main.build_parser(name))
        assert list(alone) == [name]
        assert alone[name].format_help() == whole[name].format_help(), name
        assert alone[name].format_usage() == whole[name].format_usage(), name
        assert described(alone[name]) == described(whole[name]), name
        assert alone[name].get_default("_module") is whole[name].get_default("_module")


def test_only_the_errors_of_imported_modules_are_caught_and_each_is_the_class_raised():
    # a name whose module is not imported, or that is not an exception class, is left out
    found = cli_main.imported([("workbench.safeio", "InputError"), ("no.such.module", "X"), ("sys", "path")])
    from workbench.safeio import InputError

    assert found == (InputError,)
    names = {c.__name__ for c in cli_main.imported(cli_main.USAGE_ERRORS)}
    from workbench.runs.records import QuestionFailed  # imports every module USAGE_ERRORS names

    assert names == {name for _, name in cli_main.USAGE_ERRORS}
    assert cli_main.imported(cli_main.QUESTION_FAILED) == (QuestionFailed,)


def test_a_misspelt_command_and_no_command_still_name_every_command(tmp_path, capsys):
    for argv, code in ((["indx", str(tmp_path)], 2), (["--help"], 0)):
        with pytest.raises(SystemExit) as exit_:
            cli_main.main(argv)
        assert exit_.value.code == code
        said = capsys.readouterr()
        for name in cli_main.COMMANDS:
            assert (repr(name) in said.err) if code else (name in said.out), (name, said)


@pytest.mark.slow
def test_a_no_change_update_imports_no_other_command(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nAlpha was founded by Bert.\n", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("Bert was born in Carrow.\n", encoding="utf-8")
    db = tmp_path / "docs.sqlite"
    assert sag2wb("index", folder, "--db", db, cwd=tmp_path).returncode == 0
    code = (
        "import json, sys\nfrom workbench.cli.main import main\nrc = main(sys.argv[1:])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "index", str(folder), "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=cli_env(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    said, last = r.stdout.splitlines()[0], r.stdout.splitlines()[-1]
    assert said.startswith(f"updated {db}: 0 added, 0 changed, 0 removed document(s)"), r.stdout
    rc, modules = json.loads(last)
    assert rc == 0
    others = {f"workbench.cli.{name.replace('-', '_')}" for name in cli_main.COMMANDS} - {"workbench.cli.index"}
    loaded = set(modules)
    assert "workbench.cli.index" in loaded
    assert not loaded & others, loaded & others
    for heavy in ("workbench.judges", "workbench.runs", "workbench.engine", "workbench.measures", "pandas"):
        assert heavy not in loaded, heavy
