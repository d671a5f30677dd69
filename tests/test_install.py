"""A plain `pip install .` (not -e) works outside the checkout (issue 21).

The wheel is built from a copy of the checkout's sources (building in the checkout would leave
build/ there, and setuptools ships whatever stale files an old build/lib still holds), then
installed with --no-deps into a fresh venv whose dependencies come from this test's own venv
(a .pth line: nothing is downloaded), and `sag2wb demo` runs there from a folder outside the
checkout. The checkout is never on that interpreter's path, so a module or data file missing
from the wheel fails here instead of being found in the working tree.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.install

PACKAGE_DIRS = {"workbench": "workbench", "widgets": "widgets", "sample_corpora": "workbench/sample_corpora"}
NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".sag2wb", "*.sqlite")


def _run(args, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def _checkout_files(folder: str) -> list[str]:
    """The files of one package folder of the checkout, as paths relative to the checkout."""
    skip = {"__pycache__", ".ipynb_checkpoints", ".sag2wb"}
    return sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / folder).rglob("*")
        if p.is_file() and not skip & set(p.relative_to(REPO).parts) and p.suffix not in (".pyc", ".sqlite")
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("install")
    src = work / "src"
    src.mkdir()
    for item in REPO.iterdir():  # the top-level files (pyproject.toml, README.md) and the package folders
        if item.is_file():
            shutil.copy2(item, src / item.name)
    for folder in PACKAGE_DIRS:
        shutil.copytree(REPO / folder, src / folder, ignore=NOT_SOURCES)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", work / "dist", src], timeout=300)
    (wheel,) = (work / "dist").glob("sag2_workbench-*.whl")

    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # the dependencies: this venv's site-packages, after the new venv's own (a path line in a
    # .pth is added to sys.path without running that folder's .pth files, so this venv's
    # editable finder for the checkout is not installed there)
    (purelib / "test-venv-dependencies.pth").write_text("".join(p + "\n" for p in site.getsitepackages()))
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--quiet", wheel])
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SAG2WB_DEMO_DB", "VIRTUAL_ENV")}
    return {"wheel": wheel, "venv": venv, "python": python, "cwd": elsewhere, "env": env}


def test_the_wheel_holds_every_module_and_data_file_of_the_checkout(installed):
    with zipfile.ZipFile(installed["wheel"]) as z:
        shipped = set(z.namelist())
    for folder, target in PACKAGE_DIRS.items():
        expected = [target + f[len(folder) :] for f in _checkout_files(folder)]
        assert expected, folder
        missing = [f for f in expected if f not in shipped]
        assert not missing, (
            f"not in the wheel (add the package to [tool.setuptools] packages or a glob to "
            f"package-data in pyproject.toml): {missing}"
        )


def test_sag2wb_demo_runs_from_the_installed_package_outside_the_checkout(installed):
    script = installed["venv"] / "bin" / "sag2wb"
    proc = _run([script, "demo"], cwd=installed["cwd"], env=installed["env"], timeout=300)
    out = proc.stdout
    # the index goes where the README says: .sag2wb/ in the current folder
    assert out.startswith("built .sag2wb/internal_docs.sqlite (24 units, 19 files of the bundled internal docs)"), out
    assert (installed["cwd"] / ".sag2wb" / "internal_docs.sqlite").is_file()
    assert "  1. " in out and " 10. " in out and "*gold*" in out, out  # a ranking of the flagship question
    for name in ("bm25", "lexical", "semantic", "oracle"):
        assert f"\n{name:9s} on 9 sample questions: R@5 " in out, out


def test_the_installed_package_reads_its_files_from_the_venv_not_the_checkout(installed):
    probe = (
        "import importlib, importlib.resources as r, json, sys, widgets, workbench\n"
        "cli = importlib.import_module('workbench.cli.paths')\n"
        "print(json.dumps({'workbench': workbench.__file__, 'widgets': widgets.__file__,"
        " 'corpora': str(r.files('workbench.sample_corpora')), 'demo_docs': str(cli.SAMPLE_DOCS),"
        " 'demo_questions': str(cli.SAMPLE_DOCS_QUESTIONS), 'path': sys.path}))\n"
    )
    where = json.loads(_run([installed["python"], "-c", probe], cwd=installed["cwd"], env=installed["env"]).stdout)
    venv = installed["venv"].resolve()
    for name in ("workbench", "widgets", "corpora", "demo_docs", "demo_questions"):
        path = Path(where[name]).resolve()
        assert path.is_relative_to(venv) and not path.is_relative_to(REPO), (name, path)
    assert Path(where["demo_docs"]).is_dir() and Path(where["demo_questions"]).is_file()
    assert not any(p and Path(p).resolve() == REPO for p in where["path"]), where["path"]
