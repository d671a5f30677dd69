"""The package's shape (issue 21), checked by the tools that own each rule: import-linter for
the layer order (function-local imports included), ruff for lint and format at one line
length, mypy for types, and no module over 600 lines. Each runs on the checkout as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

BIN = Path(sys.executable).parent
SOURCES = ["workbench", "widgets", "tests", "benchmarks", "conftest.py"]


def _tool(name: str, *args: str) -> subprocess.CompletedProcess:
    exe = BIN / name
    if not exe.exists():
        pytest.fail(f"{name} is not installed in {BIN}: install the dev extra (pip install -e '.[dev]')")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_layers_have_no_upward_imports():
    proc = _tool("lint-imports")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout, proc.stdout


def test_ruff_finds_nothing():
    proc = _tool("ruff", "check", "--output-format", "concise", *SOURCES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_is_formatted():
    proc = _tool("ruff", "format", "--check", *SOURCES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_finds_no_type_errors():
    proc = _tool("mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(REPO)): n
        for d in ("workbench", "widgets")
        for p in (REPO / d).rglob("*.py")
        if (n := p.read_text(encoding="utf-8").count("\n")) > 600
    }
    assert long == {}, long


@pytest.mark.slow
def test_the_layer_contract_can_fail(tmp_path):
    """The contract is not vacuous: an index module importing the runs layer breaks it."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "workbench", copy / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "widgets", copy / "widgets", ignore=shutil.ignore_patterns("__pycache__", "*.js"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    upward = copy / "workbench" / "index" / "units.py"
    upward.write_text(upward.read_text(encoding="utf-8") + "\n\ndef _late():\n    import workbench.runs  # noqa\n")
    proc = subprocess.run(
        [str(BIN / "lint-imports")],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(copy), "PATH": str(BIN)},
    )
    assert proc.returncode != 0 and "workbench.index.units -> workbench.runs" in proc.stdout, proc.stdout
