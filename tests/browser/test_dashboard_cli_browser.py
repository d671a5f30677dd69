"""`sag2wb dashboard` in a real browser: the command (run from the checkout with a relative
corpus path and --question) serves a page that opens on that question with no error, and the
page's kernel ends with the page; a bad --question is refused on the command line by name;
bad input that reaches the notebook (the variables set by hand) is named in the page, not
"error when executing cell [1]".
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import driver

pytestmark = pytest.mark.browser
ROOT = driver.ROOT


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAG2WB_DASHBOARD_")}
    return {**env, "PYTHONPATH": str(ROOT)}


def _serve(argv, cwd: Path, log: Path, env: dict):
    port = driver.free_port()
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [*argv, f"--port={port}"], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    driver.wait_for_port(port, proc, log)
    return proc, f"http://127.0.0.1:{port}/"


def _stop(proc):
    proc.terminate()  # the CLI passes it on to its Voilà process
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _visible_text(page) -> str:
    return page.locator("body").inner_text()


def test_cli_serves_the_chosen_question_from_a_relative_path(browser, tmp_path):
    from playwright.sync_api import expect

    cli = [sys.executable, "-m", "workbench.cli", "dashboard", "sample_corpora/internal_docs"]
    proc, url = _serve([*cli, "--question", "docs-09", "--no-browser"], ROOT, tmp_path / "cli.log", _env())
    try:
        s = driver.Session(browser)
        driver.load_voila(s, url)
        page = s.page
        assert driver.state(page)["question"] == "docs-09"
        expect(page.locator("h1")).to_contain_text("How SAG2 finds the evidence a keyword search misses")
        expect(page.locator(".sag2wb-opening")).to_contain_text("In the top 10 for docs-09")
        text = _visible_text(page)
        assert "外部审计人员" in text  # docs-09's own text is on the page
        assert "error when executing" not in text.lower() and "Traceback" not in text
        assert page.locator(".sag2wb-error").count() == 0
        assert driver.kernel_processes(proc)  # the page's kernel, a grandchild of the command
        s.close()
        deadline = time.monotonic() + 30
        while driver.kernel_processes(proc) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.kernel_processes(proc) == [], "the kernel outlived its page"
    finally:
        _stop(proc)
    assert "docs-09" in (tmp_path / "cli.log").read_text(errors="replace")  # the line it printed


def test_cli_refuses_an_unknown_question_by_name(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "dashboard", "sample_corpora/internal_docs", "--question", "docs-99"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--question 'docs-99': no such question" in done.stderr and "docs-01" in done.stderr


def test_bad_input_in_the_page_names_the_cause(browser, tmp_path):
    from playwright.sync_api import expect

    # what the CLI would refuse, set by hand: the notebook must still name it
    env = {
        **_env(),
        "SAG2WB_DASHBOARD_CORPUS": str(ROOT / "sample_corpora" / "internal_docs"),
        "SAG2WB_DASHBOARD_QUESTION": "docs-99",
    }
    notebook = ROOT / "notebooks" / "dashboard.ipynb"
    argv = [sys.executable, "-m", "widgets.voila", str(notebook), "--no-browser", "--Voila.ip=127.0.0.1"]
    proc, url = _serve([*argv, "--Voila.port_retries=0"], tmp_path, tmp_path / "voila.log", env)
    try:
        s = driver.Session(browser)
        s.page.goto(url, timeout=driver.LOAD_TIMEOUT_MS)
        error = s.page.locator(".sag2wb-error")
        expect(error).to_be_visible(timeout=driver.LOAD_TIMEOUT_MS)
        expect(error).to_contain_text("unknown question 'docs-99'")
        expect(error).to_contain_text("docs-01")
        assert "error when executing" not in _visible_text(s.page).lower()
        s.close()
    finally:
        _stop(proc)
