"""The README's `python -m pytest` is the fast set; `-m "browser or reference or install or slow"` (what
.ci/run runs after it) selects exactly the long sets (pyproject.toml's addopts; docs/architecture.md "Tests")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO

LONG = "browser or reference or install or slow"
# one file of each long set (a whole-file mark) and a fast file
FILES = [
    "tests/test_install.py",
    "tests/browser/test_report_browser.py",
    "tests/test_text.py",
    "notebooks/02_stepping.ipynb",
]


def collected(*args) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args, *FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {line for line in proc.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def default_and_long() -> tuple[set[str], set[str]]:
    return collected(), collected("-m", LONG)


@pytest.mark.slow
def test_the_default_run_leaves_every_long_set_out(default_and_long):
    default = default_and_long[0]
    assert default and not any(t.startswith(("tests/test_install.py", "tests/browser/")) for t in default)
    assert not any("2wiki" in t for t in default)  # test_text.py's whole-corpus checks are `slow`
    assert not any(t.startswith("notebooks/") for t in default)  # a notebook is `slow` (conftest.py)


@pytest.mark.slow
def test_the_long_run_is_exactly_what_the_default_leaves_out(default_and_long):
    default, long = default_and_long
    assert any(t.startswith("tests/test_install.py") for t in long)
    assert any(t.startswith("tests/browser/") for t in long)
    assert any("2wiki" in t for t in long) and not default & long
    assert any(t.startswith("notebooks/02_stepping.ipynb::") for t in long)
