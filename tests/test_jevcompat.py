"""`sag2wb judge-server` against the ecosystem's conformance suite, `jevcompat` 0.1.1 (PyPI, MIT;
48 rules, 33 MUST / 15 SHOULD, on POST /v1/systemone and GET /v1/models): no MUST fails, and no
SHOULD fails either. The rules it cannot exercise here are exactly the ones docs/jev.md lists.

The suite runs as a black box over HTTP against a real server on 127.0.0.1: once through its
command line (`jevcompat test URL --json`), and through its runner for each served judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from workbench.index.store import Index
from workbench.index.units import Unit
from workbench.judges.jev.server import JudgeServer, make_server_judge

jevcompat_runner = pytest.importorskip("jevcompat.runner", reason="jevcompat is in the dev extra")

KEY = "jevcompat-test-key"
# The rules that cannot be exercised against this server (docs/jev.md, "Conformance"):
NOT_EXERCISED = {
    # the server answers every model name, so no error other than a 422 is ever produced
    "errors.shape",
}
WITHOUT_KEY = NOT_EXERCISED | {"auth.bearer", "auth.missing", "auth.invalid"}  # auth off: nothing to refuse
WITH_KEY = NOT_EXERCISED | {"auth.ignored-when-off"}  # auth on: the other of the two auth MUSTs applies
SHOULD_FAILURES: set[str] = set()  # none (docs/jev.md)


def failing(report, level):
    return {r.id for r in report.results if r.level == level and r.status == "fail"}


def skipped(report):
    return {r.id for r in report.results if r.status == "skip"}


def explain(report) -> str:
    lines = [f"verdict {report.verdict}; aborted {report.aborted}; errors {report.case_errors}"]
    for r in report.results:
        if r.status == "fail":
            lines += [f"{r.level} {r.id}: {f.message[:300]}" for f in r.findings[:2]]
    return "\n".join(lines)


def judge_for(name, tmp_path):
    if name != "lexical":
        return make_server_judge(name, None)
    passages = [("Billing", "Refunds, invoices and charges."), ("Support", "Bugs and outages of the service.")]
    units = [Unit(t, "", x, t, "inline", "") for t, x in passages]
    return make_server_judge("lexical", str(Index.build(units, tmp_path / "i.sqlite").path))


@pytest.mark.slow
@pytest.mark.parametrize("name, key", [("hash", None), ("data-hash", KEY), ("lexical", None)])
def test_no_must_fails_and_no_should_fails(tmp_path, name, key):
    pytest.importorskip("typesafe_sdk", reason="jevcompat's drop-in check needs the official SDK (its dependency)")
    with JudgeServer(judge_for(name, tmp_path), require_key=key) as srv:
        report = jevcompat_runner.run(f"http://127.0.0.1:{srv.port}", key=key, timeout=60)
    assert failing(report, "MUST") == set(), explain(report)
    assert failing(report, "SHOULD") == SHOULD_FAILURES, explain(report)
    assert skipped(report) == (WITH_KEY if key else WITHOUT_KEY), explain(report)
    assert report.verdict == "conformant" and not report.inconclusive, explain(report)
    must = report.summary()["MUST"]
    assert must["failed"] == 0 and must["passed"] == 32  # 33 MUSTs, one of the two auth ones applies


@pytest.mark.slow
def test_the_command_line_says_conformant(tmp_path):
    pytest.importorskip("typesafe_sdk", reason="jevcompat's drop-in check needs the official SDK (its dependency)")
    """`sag2wb judge-server --judge data-hash --port 0` in its own process, `jevcompat test URL --json` in another."""
    out = tmp_path / "jevcompat.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "judge-server", "--judge", "data-hash", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        banner = server.stdout.readline()
        assert "at http://127.0.0.1:" in banner, banner + server.stderr.read()
        port = int(banner.split("http://127.0.0.1:")[1].split("/")[0])
        r = subprocess.run(
            [sys.executable, "-m", "jevcompat.cli", "test", f"http://127.0.0.1:{port}", "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NO_COLOR": "1"},
        )
    finally:
        server.terminate()
        stderr = server.communicate(timeout=30)[1]
    assert "Traceback" not in stderr, stderr
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]  # 0: conformant
    report = json.loads(out.read_text())
    summary = report.get("summary", report)
    assert summary["verdict"] == "conformant", r.stdout[-3000:]
    assert summary["MUST"]["failed"] == 0 and summary["SHOULD"]["failed"] == 0
