"""Issue 34, items 1, 2 and 7a: a file is ours by provenance (its folder's record holds its name, size
and sha256, written by the command that wrote it), never by its look; every output's place is checked
before any work; every file a judge spec, a template, a variant or a teacher names is an input.
Real files and real `sag2wb` runs (in this process, or real processes where two write at once)."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import safeio
from workbench.cli.io_roles import IO_ROLE, option_name
from workbench.judges.learned import default_model_path
from workbench.runs.resume import trace_file_name

from .conftest import REPO
from .reliability_world import env, eval_args, make_world, one_line_error, sag2wb

RECORD = safeio.OUTPUTS_RECORD
KEY = "jev-judgment-v2:"


def run(*args):
    try:
        return sag2wb(*args)
    except SystemExit as exc:  # argparse's own refusals
        return subprocess.CompletedProcess(list(args), exc.code, "", "")


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# ---- our own files of every kind, each written by the real command (twice: a rerun replaces them) ----
@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("made")
    world = make_world(root / "w")
    e = root / "e"
    args = eval_args(world, e / "out.json", "--run", e / "run.trec", "--qrels", e / "gold.qrels")
    args += ("--trace-dir", e / "traces")
    for _ in range(2):  # the rerun replaces every file it wrote, without --force
        assert run(*args).returncode == 0
    a = root / "a"
    ablate = ("ablate", "--db", world["db"], "--questions", world["q"], "--judge", "lexical", "--quiet")
    for _ in range(2):
        assert run(*ablate, "--out", a / "abl.json").returncode == 0
    c = root / "c"
    convert = ("convert", "--to", "beir", "--corpus", world["corpus"], "--questions", world["q"], "--out", c)
    for _ in range(2):
        assert run(*convert).returncode == 0
    seed = root / "seed.jsonl"
    seed.write_text("".join(json.dumps({"key": KEY + f"{i:064x}", "p": 0.5, "model": "m"}) + "\n" for i in range(3)))
    assert run("cache", "import", "--cache-dir", root / "cache", "--file", seed).returncode == 0
    for _ in range(2):
        assert run("cache", "export", "--cache-dir", root / "cache", "--file", root / "export.jsonl").returncode == 0
    for _ in range(2):
        assert run("index", world["corpus"], "--db", root / "ix.sqlite").returncode == 0
    return {
        "world": world,
        "root": root,
        "out.json": e / "out.json",
        "run.trec": e / "run.trec",
        "gold.qrels": e / "gold.qrels",
        "trace": e / "traces" / trace_file_name("q1"),
        "abl.json": a / "abl.json",
        "abl.md": a / "abl.md",
        "abl.html": a / "abl.html",
        "corpus.jsonl": c / "corpus.jsonl",
        "export.jsonl": root / "export.jsonl",
        "ix.sqlite": root / "ix.sqlite",
        "model": default_model_path(),
        "cache": root / "cache",
    }


def _eval(m, out, *extra):
    return eval_args(m["world"], out, *extra)


def _ablate(m, out):
    w = m["world"]
    return ("ablate", "--db", w["db"], "--questions", w["q"], "--judge", "lexical", "--quiet", "--out", out)


def _fit(m, out):
    w = m["world"]
    return ("fit-judge", "--db", w["db"], "--questions", w["q"], "--no-model", "--quiet", "--out", out)


def _search(m, *extra):
    return ("search", "--db", m["world"]["db"], "glass", "--judge", "lexical", *extra)


# (command, option) -> (the artefact placed, its path under the option's folder t, the command line
# for the case folder d and the option's folder t)
CASES = {
    ("eval", "--out"): ("out.json", "o.json", lambda m, d, t: _eval(m, t / "o.json")),
    ("eval", "--run"): ("run.trec", "r.trec", lambda m, d, t: _eval(m, d / "o.json", "--run", t / "r.trec")),
    ("eval", "--qrels"): ("gold.qrels", "g.qrels", lambda m, d, t: _eval(m, d / "o.json", "--qrels", t / "g.qrels")),
    ("eval", "--trace-dir"): (
        "trace",
        f"t/{trace_file_name('q1')}",
        lambda m, d, t: _eval(m, d / "o.json", "--trace-dir", t / "t"),
    ),
    ("eval", "--cache-dir"): ("export.jsonl", "jc", lambda m, d, t: _eval(m, d / "o.json", "--cache-dir", t / "jc")),
    ("ablate", "--out"): ("abl.json", "b.json", lambda m, d, t: _ablate(m, t / "b.json")),
    ("ablate", "--out .md"): ("abl.md", "b.md", lambda m, d, t: _ablate(m, t / "b.json")),
    ("ablate", "--out .html"): ("abl.html", "b.html", lambda m, d, t: _ablate(m, t / "b.json")),
    ("ablate", "--cache-dir"): (
        "export.jsonl",
        "jc",
        lambda m, d, t: (*_ablate(m, d / "b.json"), "--cache-dir", t / "jc"),
    ),
    ("search", "--cache-dir"): ("export.jsonl", "jc", lambda m, d, t: _search(m, "--cache-dir", t / "jc")),
    ("fit-judge", "--out"): ("model", "J.json", lambda m, d, t: _fit(m, t / "J.json")),
    ("convert", "--out"): (
        "corpus.jsonl",
        "beir/corpus.jsonl",
        lambda m, d, t: ("convert", "--to", "beir", "--corpus", m["world"]["corpus"], "--out", t / "beir"),
    ),
    ("cache", "--file"): (
        "export.jsonl",
        "x.jsonl",
        lambda m, d, t: ("cache", "export", "--cache-dir", m["cache"], "--file", t / "x.jsonl"),
    ),
    ("cache", "--cache-dir"): (
        "export.jsonl",
        "cc",
        lambda m, d, t: ("cache", "import", "--cache-dir", t / "cc", "--file", m["export.jsonl"]),
    ),
    ("index", "--db"): (
        "ix.sqlite",
        "i.sqlite",
        lambda m, d, t: ("index", m["world"]["corpus"], "--db", t / "i.sqlite"),
    ),
    ("demo", "--db"): ("ix.sqlite", "i.sqlite", lambda m, d, t: ("demo", "--db", t / "i.sqlite")),
    # a page of ours at the path: ablate's HTML table stands in (any HTML page sag2wb did not record there)
    ("report", "--out"): ("abl.html", "p.html", lambda m, d, t: ("report", m["trace"], "--out", t / "p.html")),
    ("embed", "--cache-dir"): (
        "export.jsonl",
        "ec",
        lambda m, d, t: ("embed", "--db", m["world"]["db"], "--quiet", "--cache-dir", t / "ec"),
    ),
}


def output_options() -> set[tuple[str, str]]:
    """Every (command, option) whose parser action has the role "output"."""
    from workbench.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        (name, option_name(a))
        for name, p in sub.choices.items()
        for a in p._actions
        if getattr(a, IO_ROLE, None) == "output"
    }


def test_the_cases_cover_every_output_option_of_every_command():
    assert output_options() <= {(c, o.split()[0]) for c, o in CASES}, output_options() - set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: " ".join(c))
def test_a_users_file_in_our_format_at_any_output_is_kept(made, tmp_path, case):
    """The user's copy of exactly what sag2wb writes there, at the path an output option names:
    refused before any work, one line naming the option and the file, kept byte for byte."""
    artefact, where, argv = CASES[case]
    d = tmp_path / "case"
    target = d / where
    target.parent.mkdir(parents=True)
    shutil.copyfile(made[artefact], target)
    before = digest(d)
    r = run(*argv(made, d, d))
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = one_line_error(r, case[1].split()[0], str(target))
    assert "exists" in line or "is a file" in line, line
    assert digest(d) == before  # nothing replaced, nothing written beside it (no record, no resume file)


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: " ".join(c))
def test_every_output_checks_its_folder_before_any_work(made, tmp_path, case):
    """An output whose folder cannot be made (a file is in its way) is refused before the first question."""
    _, _, argv = CASES[case]
    d = tmp_path / "case"
    d.mkdir()
    (d / "afile").write_text("mine")
    r = run(*argv(made, d, d / "afile"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    one_line_error(r, case[1].split()[0], "afile")
    assert sorted(p.name for p in d.iterdir()) == ["afile"] and (d / "afile").read_text() == "mine"


CONVERTED = [
    ("beir", "corpus.jsonl"),
    ("beir", "queries.jsonl"),
    ("beir", "qrels/test.tsv"),
    ("workbench", "corpus.json"),
    ("workbench", "questions.jsonl"),
    ("trec", "topics.tsv"),
    ("trec", "qrels.txt"),
    ("trec", "run.trec"),
]


@pytest.mark.parametrize("to, name", CONVERTED)
def test_convert_keeps_the_users_file_of_every_name_it_writes(made, tmp_path, to, name):
    """The user's own topics.tsv, qrels.txt, corpus.jsonl ... (here: exactly what convert writes)."""
    w = made["world"]
    sources = ("--questions", w["q"]) + (("--results", made["out.json"]) if to == "trec" else ("--corpus", w["corpus"]))
    assert run("convert", "--to", to, *sources, "--out", tmp_path / "ours").returncode == 0
    mine = tmp_path / "mine" / name
    mine.parent.mkdir(parents=True)
    shutil.copyfile(tmp_path / "ours" / name, mine)
    before = digest(tmp_path / "mine")
    r = run("convert", "--to", to, *sources, "--out", tmp_path / "mine")
    assert r.returncode == 2
    one_line_error(r, f"--out {mine} exists", "not recorded as written by sag2wb", "--force")
    assert digest(tmp_path / "mine") == before
    assert run("convert", "--to", to, *sources, "--out", tmp_path / "ours").returncode == 0  # its own: replaced


def test_eval_writes_run_and_qrels_into_new_folders_and_leaves_no_resume_file(made, tmp_path):
    out = tmp_path / "o.json"
    r = run(*eval_args(made["world"], out, "--run", tmp_path / "new" / "a.trec", "--qrels", tmp_path / "n2" / "g"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "new" / "a.trec").stat().st_size > 0 and (tmp_path / "n2" / "g").stat().st_size > 0
    assert out.exists() and not (tmp_path / "o.json.partial.jsonl").exists()
    assert safeio.ours(tmp_path / "new" / "a.trec") and safeio.ours(tmp_path / "n2" / "g")


# ---- the record itself, attacked -------------------------------------------------------------------
def _own_result(made, tmp_path) -> tuple[Path, tuple]:
    out = tmp_path / "o.json"
    args = eval_args(made["world"], out)
    assert run(*args).returncode == 0
    return out, args


DAMAGES = {
    "garbage": lambda p: p.write_bytes(b"\x00\xffnot a record\n"),
    "empty": lambda p: p.write_bytes(b""),
    "deep": lambda p: p.write_text("[" * 100000 + "]" * 100000 + "\n"),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
    "a link": lambda p: (p.rename(p.with_name("elsewhere.jsonl")), p.symlink_to(p.with_name("elsewhere.jsonl"))),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_record_makes_nothing_ours(made, tmp_path, damage):
    out, args = _own_result(made, tmp_path)
    record = tmp_path / RECORD
    DAMAGES[damage](record)
    before = out.read_bytes()
    r = run(*args)
    assert r.returncode == 2
    one_line_error(r, f"--out {out}", "is damaged", "--force")
    assert out.read_bytes() == before
    if damage == "a folder":  # not even --force writes over a folder in the record's place
        assert run(*args, "--force").returncode == 2
        return
    assert run(*args, "--force").returncode == 0  # the record starts anew
    assert safeio.read_records(tmp_path).problem is None and run(*args).returncode == 0
    if damage == "a link":
        assert (tmp_path / "elsewhere.jsonl").is_file()  # the link is replaced, never its target


def test_a_deleted_record_makes_our_files_the_users(made, tmp_path):
    out, args = _own_result(made, tmp_path)
    (tmp_path / RECORD).unlink()
    before = out.read_bytes()
    one_line_error(run(*args), f"--out {out} exists", "not recorded as written by sag2wb", "--force")
    assert out.read_bytes() == before


@pytest.mark.parametrize("edit", ["appended", "same size"])
def test_a_file_edited_after_we_wrote_it_is_the_users(made, tmp_path, edit):
    out, args = _own_result(made, tmp_path)
    data = out.read_bytes()
    out.write_bytes(data + b"\n" if edit == "appended" else data.replace(b'"R@10"', b'"R@1x"', 1))
    assert out.stat().st_size == len(data) + (edit == "appended")
    edited = out.read_bytes()
    one_line_error(run(*args), "changed after sag2wb wrote it")
    assert out.read_bytes() == edited


@pytest.mark.parametrize("option", ["--out", "--run", "--qrels"])
def test_the_record_is_never_an_output(made, tmp_path, option):
    _own_result(made, tmp_path)
    before = (tmp_path / RECORD).read_bytes()
    target = tmp_path / RECORD
    extra = () if option == "--out" else (option, target)
    args = eval_args(made["world"], target if option == "--out" else tmp_path / "o.json", *extra, "--force")
    one_line_error(run(*args), f"{option} {target} is sag2wb's record")
    assert (tmp_path / RECORD).read_bytes() == before


def test_a_symlink_at_an_output_is_the_users_and_force_replaces_only_the_link(made, tmp_path):
    mine = tmp_path / "mine.trec"
    shutil.copyfile(made["run.trec"], mine)
    link = tmp_path / "r.trec"
    link.symlink_to(mine)
    before = mine.read_bytes()
    args = eval_args(made["world"], tmp_path / "o.json", "--run", link)
    one_line_error(run(*args), f"--run {link} exists", "symbolic link")
    assert run(*args, "--force").returncode == 0
    assert mine.read_bytes() == before and not link.is_symlink() and safeio.ours(link)
    dangling = tmp_path / "d.trec"
    dangling.symlink_to(tmp_path / "nowhere")
    one_line_error(run(*eval_args(made["world"], tmp_path / "o2.json", "--run", dangling)), "symbolic link")


def test_one_commands_file_is_not_anothers(made, tmp_path):
    """A result eval wrote is recorded as eval's: ablate (or --run) over it needs --force."""
    out, _ = _own_result(made, tmp_path)
    before = out.read_bytes()
    one_line_error(run(*_ablate(made, out)), "sag2wb wrote it as eval --out, not as ablate --out")
    one_line_error(run(*eval_args(made["world"], tmp_path / "p.json", "--run", out)), "not as eval --run")
    assert out.read_bytes() == before


WRITER = """
import sys
from pathlib import Path
from workbench import safeio
folder, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    safeio.atomic_write_text(folder / f"{tag}-{i}.txt", f"{tag} {i}\\n" * (i + 1), record=tag)
"""


@pytest.mark.slow
def test_two_commands_writing_into_one_folder_keep_each_others_records(tmp_path):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, "60"], env=env(), stderr=subprocess.PIPE)
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
    records = safeio.read_records(tmp_path)
    assert records.problem is None and len(records.files) == 120
    assert all(safeio.ours(tmp_path / f"{t}-{i}.txt", by=t) for t in "ab" for i in range(60))


@pytest.mark.slow
def test_two_evals_into_one_folder_both_rerun(made, tmp_path):
    w = made["world"]
    argv = [
        [sys.executable, "-m", "workbench.cli", *map(str, eval_args(w, tmp_path / f"{n}.json", "--run", tmp_path / n))]
        for n in ("x", "y")
    ]
    procs = [subprocess.Popen(a, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for a in argv]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    for n in ("x", "y"):
        assert safeio.ours(tmp_path / f"{n}.json", by="eval --out") and safeio.ours(tmp_path / n, by="eval --run")


def test_a_kill_between_the_record_and_the_rename_leaves_the_old_file_ours(tmp_path):
    """The record is written before the rename: a crash in between leaves the old file whole and ours."""
    target = tmp_path / "out.json"
    safeio.atomic_write_text(target, "old", record="t")
    code = (
        "import os, sys\nfrom workbench import safeio\n"
        "os.replace = lambda *a: os.kill(os.getpid(), 9)\n"
        f"safeio.atomic_write_text({str(target)!r}, 'new', record='t')\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env(), timeout=60)
    assert target.read_text() == "old" and safeio.ours(target, by="t")


# ---- 7a: every file a judge spec, a template, a variant or a teacher names is an input --------------
def _inputs(tmp_path: Path, made) -> dict[str, Path]:
    model = tmp_path / "J.json"
    shutil.copyfile(default_model_path(), model)
    judge = tmp_path / "judge.py"
    judge.write_text("def score(question, candidates, context):\n    return [0.5 for _ in candidates]\n")
    template = tmp_path / "T.json"
    template.write_text(json.dumps({"name": "mine-v1", "question": "Needed?", "true": "yes", "false": "no"}))
    variant = tmp_path / "v.py"
    variant.write_text("def weigh(tf, df, N, **kw):\n    return 1.0\n")
    return {"model": model, "judge": judge, "template": template, "variant": variant, "cache": made["cache"]}


def _7a_cases():
    def ev(m, f, out_option, out, judge):
        w = m["world"]
        base = ["eval", "--db", w["db"], "--questions", w["q"], "--quiet", "--force", "--judge", judge]
        return [*base, "--out", out] if out_option == "--out" else [*base, "--out", f["o"], out_option, out]

    w = lambda m: m["world"]  # noqa: E731
    return {
        "eval --judge learned:J --out J": (
            "model",
            lambda m, f: ev(m, f, "--out", f["model"], f"learned:{f['model']}"),
        ),
        "eval --judge FILE.py:NAME --run FILE.py": (
            "judge",
            lambda m, f: ev(m, f, "--run", f["judge"], f"{f['judge']}:score"),
        ),
        "eval --jev-instructions T --qrels T": (
            "template",
            lambda m, f: [*ev(m, f, "--qrels", f["template"], "jev"), "--jev-instructions", f["template"]],
        ),
        "eval --judge jev:instructions=T --out T": (
            "template",
            lambda m, f: ev(m, f, "--out", f["template"], f"jev:instructions={f['template']}"),
        ),
        "eval --param term_weighting=V.py:weigh --out V.py": (
            "variant",
            lambda m, f: [
                *ev(m, f, "--out", f["variant"], "lexical"),
                *("--param", f"term_weighting={f['variant']}:weigh"),
            ],
        ),
        "ablate --judge learned:J --out J": (
            "model",
            lambda m, f: [
                *("ablate", "--db", w(m)["db"], "--questions", w(m)["q"], "--quiet", "--force"),
                *("--judge", f"learned:{f['model']}", "--out", f["model"]),
            ],
        ),
        "fit-judge --teacher learned:J --out J": (
            "model",
            lambda m, f: [*_fit(m, f["model"]), "--force", "--teacher", f"learned:{f['model']}"],
        ),
        "fit-judge --teacher FILE.py:NAME --out FILE.py": (
            "judge",
            lambda m, f: [*_fit(m, f["judge"]), "--force", "--teacher", f"{f['judge']}:score"],
        ),
        "fit-judge --teacher cache:DIR --out DIR/cache.db": (
            "cache",
            lambda m, f: [*_fit(m, f["cache"] / "cache.db"), "--force", "--teacher", f"cache:{f['cache']}"],
        ),
    }


CASES_7A = _7a_cases()


@pytest.mark.parametrize("case", sorted(CASES_7A))
def test_force_never_replaces_a_file_a_judge_spec_names(made, tmp_path, case):
    files = _inputs(tmp_path, made)
    files["o"] = tmp_path / "o.json"
    which, argv = CASES_7A[case]
    watched = files[which]
    before = digest(watched) if watched.is_dir() else watched.read_bytes()
    r = run(*argv(made, files))
    assert r.returncode == 2, (r.stdout, r.stderr)
    one_line_error(r, "is an input of this command" if which != "cache" else "is inside the input folder --teacher")
    assert (digest(watched) if watched.is_dir() else watched.read_bytes()) == before
    assert not files["o"].exists()


def test_the_shipped_model_behind_auto_and_learned_is_an_input():
    from workbench.cli.io_roles import judge_files

    assert judge_files("auto") == judge_files("learned") == [default_model_path()]
    assert judge_files("lexical") == [] and judge_files("bm25") == []


def test_the_record_is_small_readable_json_lines(made):
    lines = (made["root"] / "e" / RECORD).read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"sag2wb": "outputs", "version": 1}
    entries = [json.loads(x) for x in lines[1:]]
    assert {e["by"] for e in entries} == {"eval --out", "eval --run", "eval --qrels"}
    assert all(set(e) == {"name", "size", "sha256", "by"} for e in entries)
    assert REPO.exists()
