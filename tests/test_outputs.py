"""One output contract for every command that writes (issue 22) and the CLI's options (issue 24):
real files, real `sag2wb` invocations (in this process, or a real process for the full disk)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import types
from importlib import import_module, metadata
from pathlib import Path

import pytest

from workbench import safeio
from workbench.cli.io_roles import IO_ROLE, path_option
from workbench.runs.resume import trace_file_name

from .conftest import REPO
from .reliability_world import env, eval_args, one_line_error, sag2wb

cli_main = import_module("workbench.cli.main")  # the module (workbench.cli's `main` is its function)
ENCYCLOPEDIA = REPO / "sample_corpora" / "encyclopedia"


def run(*args):
    """`sag2wb ARGS` in this process; argparse's own refusals (SystemExit) become an exit code."""
    try:
        return sag2wb(*args)
    except SystemExit as exc:
        return subprocess.CompletedProcess(list(args), exc.code, "", "")


def digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its sha256: equal digests mean nothing was touched."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """The encyclopedia as a user keeps it: extra fields url/note in corpus.json, reviewer in questions."""
    folder = tmp_path / "mine"
    folder.mkdir()
    corpus = json.loads((ENCYCLOPEDIA / "corpus.json").read_text(encoding="utf-8"))
    for d in corpus:
        d.update(url="https://example.org/" + d["title"], note="checked")
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False, indent=1), encoding="utf-8")
    lines = []
    for line in (ENCYCLOPEDIA / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        q["reviewer"] = "ana"
        lines.append(json.dumps(q, ensure_ascii=False))
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# ---- data loss 1: convert into the input's own folder ---------------------------------------------
def test_convert_into_the_inputs_folder_keeps_the_users_files(user_folder):
    before = digest(user_folder)
    args = ("convert", "--to", "workbench", "--corpus", user_folder / "corpus.json")
    args += ("--questions", user_folder / "questions.jsonl", "--out", user_folder)
    refused = run(*args)
    assert refused.returncode == 2
    one_line_error(refused, f"--out {user_folder} holds an input", "--force")
    # --force writes beside inputs, never over one: corpus.json is the input itself
    forced = run(*args, "--force")
    assert forced.returncode == 2
    one_line_error(forced, "corpus.json is an input of this command (--corpus")
    assert digest(user_folder) == before
    corpus = json.loads((user_folder / "corpus.json").read_text(encoding="utf-8"))
    assert corpus[0]["url"].startswith("https://example.org/") and corpus[0]["note"] == "checked"
    assert '"reviewer": "ana"' in (user_folder / "questions.jsonl").read_text(encoding="utf-8")
    assert not [p for p in user_folder.iterdir() if p.name.startswith(".")]  # no temp file left


def test_convert_replaces_its_own_files_and_refuses_the_users(tmp_path, user_folder):
    out = tmp_path / "beir"
    args = ("convert", "--to", "beir", "--corpus", user_folder / "corpus.json")
    args += ("--questions", user_folder / "questions.jsonl", "--out", out)
    assert run(*args).returncode == 0
    assert run(*args).returncode == 0  # a rerun replaces what convert wrote
    (out / "queries.jsonl").write_text("my own queries\n")
    refused = run(*args)
    assert refused.returncode == 2
    one_line_error(refused, f"--out {out / 'queries.jsonl'} exists and is not a result written by sag2wb", "--force")
    assert (out / "queries.jsonl").read_text() == "my own queries\n"
    assert run(*args, "--force").returncode == 0
    assert (out / "queries.jsonl").read_text().startswith('{"_id"')
    # a folder where convert writes a file, a file where it writes a folder
    (out / "qrels" / "test.tsv").unlink()
    (out / "qrels" / "test.tsv").mkdir()
    one_line_error(run(*args, "--force"), "test.tsv is a directory; give a file path")
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("notes")
    one_line_error(run(*args[:-1], not_a_folder), f"--out {not_a_folder} is a file, not a directory")
    assert not_a_folder.read_text() == "notes"


@pytest.mark.parametrize("split", ["../../victim", "/tmp/victim", "a/b", "..", "", "x\0y"])
def test_split_is_a_name_never_a_path(tmp_path, user_folder, split):
    victim = tmp_path / "victim.tsv"
    victim.write_text("precious\n")
    out = tmp_path / "deep" / "er" / "beir"
    r = run("convert", "--to", "beir", "--questions", user_folder / "questions.jsonl", "--out", out, "--split", split)
    assert r.returncode == 2
    one_line_error(r, "--split", "give a plain name")
    assert victim.read_text() == "precious\n" and not out.exists()


def test_split_is_checked_by_the_library_too(tmp_path, user_folder):
    from workbench.formats import convert

    with pytest.raises(safeio.OutputError, match=re.escape("--split '../x': give a plain name")):
        convert("beir", tmp_path / "b", questions=user_folder / "questions.jsonl", split="../x")


# ---- data loss 3 and 4: eval --run / --qrels ------------------------------------------------------
@pytest.mark.parametrize("option", ["--run", "--qrels"])
def test_eval_run_and_qrels_never_replace_a_users_file(world, option):
    notes = world["root"] / "notes.txt"
    notes.write_text("my notes\n")
    out = world["root"] / "out.json"
    refused = run(*eval_args(world, out, option, notes))
    assert refused.returncode == 2
    line = one_line_error(refused, f"{option} {notes} exists and is not a result written by sag2wb", "--force")
    assert "--out" not in line  # names the option the user gave
    assert notes.read_bytes() == b"my notes\n" and not out.exists()  # refused before any work
    assert run(*eval_args(world, out, option, notes, "--force")).returncode == 0
    assert notes.read_text() != "my notes\n"
    assert run(*eval_args(world, out, option, notes)).returncode == 0  # now ours: a rerun replaces it


def test_eval_run_over_the_resume_file_is_refused(world):
    out = world["root"] / "out.json"
    resume = world["root"] / "out.json.partial.jsonl"
    resume.write_text('{"partial": 1}\n')
    for forced in ((), ("--force",)):
        r = run(*eval_args(world, out, "--run", resume, *forced))
        assert r.returncode == 2
        one_line_error(r, f"--run {resume} is the resume file of --out")
    assert resume.read_text() == '{"partial": 1}\n' and not out.exists()


def test_outputs_that_are_inputs_or_each_other(world):
    out = world["root"] / "out.json"
    for option, target, says in (
        ("--run", world["q"], "is an input of this command (--questions"),
        ("--qrels", world["db"], "is an input of this command (--db"),
        ("--run", out, "is also --out"),
    ):
        r = run(*eval_args(world, out, option, target, "--force"))
        assert r.returncode == 2
        one_line_error(r, f"{option} {target} {says}")
    r = run(*eval_args(world, out, "--run", world["root"] / "x.trec", "--qrels", world["root"] / "x.trec"))
    one_line_error(r, "--qrels", "is also --run")
    assert not out.exists()


def test_a_file_inside_an_input_folder_is_never_replaced(world, tmp_path, user_folder):
    beir = tmp_path / "beir"
    assert run("convert", "--to", "beir", "--questions", user_folder / "questions.jsonl", "--out", beir).returncode == 0
    before = digest(beir)
    db = tmp_path / "enc.sqlite"
    assert run("index", ENCYCLOPEDIA / "corpus.json", "--db", db).returncode == 0
    args = ("eval", "--db", db, "--questions", beir, "--judge", "oracle", "--quiet", "--out", tmp_path / "o.json")
    r = run(*args, "--run", beir / "queries.jsonl", "--force")
    assert r.returncode == 2
    one_line_error(r, "--run", "is inside the input folder --questions", "exists")
    assert digest(beir) == before


def test_trace_dir_refuses_a_file_and_a_foreign_file_at_a_trace_name(world):
    out = world["root"] / "out.json"
    one_line_error(run(*eval_args(world, out, "--trace-dir", world["q"])), "--trace-dir", "is an input of this command")
    traces = world["root"] / "traces"
    traces.mkdir()
    foreign = traces / trace_file_name("q1")
    foreign.write_text("not a trace")
    r = run(*eval_args(world, out, "--trace-dir", traces))
    assert r.returncode == 2
    one_line_error(r, "--trace-dir", "is not a trace sag2wb wrote")
    assert foreign.read_text() == "not a trace" and not out.exists()
    foreign.unlink()
    assert run(*eval_args(world, out, "--trace-dir", traces)).returncode == 0
    assert run(*eval_args(world, out, "--trace-dir", traces)).returncode == 0  # our traces are replaced


def test_ablate_and_cache_export_declare_their_outputs(world, tmp_path):
    abl = world["root"] / "abl.json"
    (world["root"] / "abl.html").mkdir()
    ablate = ("ablate", "--db", world["db"], "--questions", world["q"], "--judge", "lexical", "--quiet")
    one_line_error(run(*ablate, "--out", abl), "--out", "abl.html is a directory")
    before = world["q"].read_bytes()
    one_line_error(run(*ablate, "--out", world["q"], "--force"), f"--out {world['q']} is an input of this command")
    assert world["q"].read_bytes() == before
    cache = tmp_path / "cache"
    cache.mkdir()
    r = run("cache", "export", "--cache-dir", cache, "--file", tmp_path)
    assert r.returncode == 2
    one_line_error(r, f"--file {tmp_path} is a directory")


def test_option_is_named_and_never_a_temp_file(tmp_path):
    """An OSError inside an atomic write names the user's file, not `.sag2wb-tmp-...`."""
    target = tmp_path / "out.txt"
    with pytest.raises(OSError) as info, safeio.atomic_writer(target) as f:
        f.write("x")
        raise OSError(28, "No space left on device")
    assert info.value.filename == str(target)
    assert not any(p.name.startswith(safeio.TEMP_PREFIX) for p in tmp_path.iterdir())


# ---- a full disk for convert --------------------------------------------------------------------
def _convert_in_process_limited(tmp_path, out: Path, limit: int) -> subprocess.CompletedProcess:
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from workbench.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    argv = ["convert", "--to", "beir", "--corpus", str(ENCYCLOPEDIA / "corpus.json")]
    argv += ["--questions", str(ENCYCLOPEDIA / "questions.jsonl"), "--out", str(out)]
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, env=env(), cwd=tmp_path
    )


@pytest.mark.slow
def test_convert_on_a_full_disk_names_the_file(tmp_path):
    out = tmp_path / "beir"
    r = _convert_in_process_limited(tmp_path, out, 20_000)  # corpus.jsonl is larger than 20 kB
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line = one_line_error(r, f"--out {out}: could not write {out / 'corpus.jsonl'}", "file-size limit")
    assert "resume" not in line and safeio.TEMP_PREFIX not in line
    assert not list(out.iterdir())  # nothing half-written, no temp file


@pytest.mark.slow
def test_convert_on_a_real_full_tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        out = mnt / "beir"
        r = _convert_in_process_limited(tmp_path, out, 2**40)
        assert r.returncode == 2, r.stderr
        line = one_line_error(r, f"could not write {out / 'corpus.jsonl'}", "the disk is full")
        assert "resume" not in line and safeio.TEMP_PREFIX not in line
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# ---- numbers that make every call fail -----------------------------------------------------------
@pytest.mark.parametrize(
    "args, says",
    [
        (("judge-server", "--judge", "hash", "--delay-ms", "-5"), "--delay-ms -5: expected 0-3600000"),
        (("judge-server", "--judge", "hash", "--read-timeout", "inf"), "--read-timeout inf: expected a finite number"),
        (("judge-server", "--judge", "hash", "--read-timeout", "nan"), "--read-timeout nan: expected a finite number"),
        (("judge-server", "--judge", "hash", "--read-timeout", "0"), "--read-timeout 0: expected a number > 0"),
        (("judge-server", "--judge", "hash", "--max-body-mb", "inf"), "--max-body-mb inf: expected a finite number"),
        (("judge-server", "--judge", "hash", "--max-body-mb", "-1"), "--max-body-mb -1: expected a number > 0"),
        (("search", "--db", "x.sqlite", "q", "--top", "0"), "--top 0: expected a number >= 1"),
        (("embed", "--db", "x.sqlite", "--threads", "0"), "--threads 0: expected a number >= 1"),
        (("index", "c.json", "--db", "x.sqlite", "--workers", "-2"), "--workers -2: expected a number >= 1"),
        (("eval", "--db", "x", "--questions", "q", "--out", "o.json", "--concurrency", "0"), "--concurrency 0"),
        (("eval", "--db", "x", "--questions", "q", "--out", "o.json", "--rounds", "7"), "--rounds 7: expected 0-2"),
    ],
)
@pytest.mark.slow
def test_numbers_that_make_every_call_fail_are_refused_at_start(tmp_path, args, says):
    r = sag2wb(*args, process=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    one_line_error(r, f"sag2wb {args[0]}: error: {says}")
    assert not list(tmp_path.iterdir())  # nothing written, nothing started


@pytest.mark.slow
def test_a_number_that_is_no_number_is_one_line():
    r = sag2wb("judge-server", "--port", "abc", process=True, timeout=60)
    assert r.returncode == 2
    one_line_error(r, "--port", "'abc': expected a whole number")


# ---- the parsers: help, outputs declared, --version, ablate without --rounds ------------------------
def _commands():
    parser = cli_main.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def _options(p: argparse.ArgumentParser):
    return [a for a in p._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


def test_every_option_of_every_command_has_help():
    parser, commands = _commands()
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in commands.items()
        for a in _options(p)
        if not (a.help and a.help.strip() and a.help != argparse.SUPPRESS)
    ]
    assert not missing, missing
    assert all(a.help for a in parser._actions if not isinstance(a, argparse._SubParsersAction))
    cache_help = next(a.help for a in commands["cache"]._actions if "--overwrite" in a.option_strings)
    assert cache_help.endswith("another probability")  # was cut off at "another p"


# options that name a file or folder the command writes: each must carry a role (path_option)
OUTPUT_LIKE = {"out", "run", "qrels", "trace_dir", "file", "db", "cache_dir"}


def test_every_path_option_has_a_role_and_every_writer_declares_its_outputs():
    _, commands = _commands()
    for name, p in commands.items():
        for a in _options(p):
            if a.dest in OUTPUT_LIKE or (a.metavar or "").startswith("OUT"):
                assert getattr(a, IO_ROLE, None) in ("input", "output"), f"{name} {a.option_strings}: no role"
        outputs = [a for a in _options(p) if getattr(a, IO_ROLE, None) == "output"]
        module = p.get_default("_module")
        if outputs:
            assert callable(getattr(module, "declare_io", None)), f"{name} writes but has no declare_io"


def test_a_command_that_forgets_an_output_does_not_run(monkeypatch, tmp_path):
    ran = []

    def add_parser(sub):
        p = sub.add_parser("forgetful", help="writes --out without declaring it")
        path_option(p, "--out", role="output", help="a file")
        p.set_defaults(func=lambda args: ran.append(args) or 0)

    forgetful = types.SimpleNamespace(__name__="forgetful", add_parser=add_parser, declare_io=lambda args, io: None)
    monkeypatch.setattr(cli_main, "COMMANDS", (*cli_main.COMMANDS, forgetful))
    with pytest.raises(RuntimeError, match=re.escape("--out not declared by forgetful.declare_io")):
        cli_main.main(["forgetful", "--out", str(tmp_path / "x")])
    assert not ran


def test_version_comes_from_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as info:
        cli_main.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sag2wb {metadata.version('sag2-workbench')}"


def test_ablate_offers_no_rounds(world):
    _, commands = _commands()
    assert not any("--rounds" in a.option_strings for a in commands["ablate"]._actions)
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        r = run(
            "ablate", "--db", world["db"], "--questions", world["q"], "--out", world["root"] / "a.json", "--rounds", "1"
        )
    assert r.returncode == 2


# ---- the dashboard's exports ----------------------------------------------------------------------
def test_dashboard_export_folder_that_is_a_file_is_refused(tmp_path):
    from widgets.export import _folder

    not_a_folder = tmp_path / "exports"
    not_a_folder.write_text("mine")
    with pytest.raises(safeio.OutputError, match=r"export folder .* is a file, not a directory"):
        _folder(not_a_folder)
    assert not_a_folder.read_text() == "mine"


def test_index_db_that_is_not_an_index_needs_force(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    r = run("index", ENCYCLOPEDIA / "corpus.json", "--db", notes)
    assert r.returncode == 2
    one_line_error(r, f"--db {notes} exists and is not a SAG2 workbench index", "--force")
    assert notes.read_text() == "my notes\n"
    assert run("index", ENCYCLOPEDIA / "corpus.json", "--db", notes, "--force").returncode == 0
    assert notes.read_bytes().startswith(b"SQLite format 3")
    assert run("index", ENCYCLOPEDIA / "corpus.json", "--db", notes).returncode == 0  # now recorded as ours: replaced
    # no temporary build left; the record of what sag2wb wrote here
    assert sorted(p.name for p in tmp_path.iterdir()) == [safeio.OUTPUTS_RECORD, "notes.txt"]
    r = run("index", ENCYCLOPEDIA / "corpus.json", "--db", ENCYCLOPEDIA / "corpus.json", "--force")
    one_line_error(r, "is an input of this command (corpus")


def test_every_numeric_option_is_validated():
    """Plain `type=int` / `type=float` accepts inf, nan and negatives: each goes through `number`."""
    _, commands = _commands()
    plain = [
        f"{name} {a.option_strings}" for name, p in commands.items() for a in _options(p) if a.type in (int, float)
    ]
    assert not plain, plain


def test_an_index_inside_its_corpus_folder_is_ours_to_replace(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "sample_corpora" / "internal_docs", docs)
    for args in ((), ("--rebuild",)):
        assert run("index", docs, "--db", docs / "ix.sqlite", *args).returncode == 0
    (docs / "notes.sqlite").write_text("mine")
    r = run("index", docs, "--db", docs / "notes.sqlite", "--force")
    one_line_error(r, "is inside the input folder corpus", "exists")
    assert (docs / "notes.sqlite").read_text() == "mine"
