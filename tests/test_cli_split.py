"""The CLI's shared code, one concern a module (issue 35 item 5): --judge-timeout travels inside the
judge's spec to worker processes (no environment variable), the judge layer keeps plain functions
while the command modules read the options, and no module is left behind that re-exports them."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from tests.conftest import FILM_WORLD, REPO, build_index
from workbench.cli.main import main
from workbench.judges.jev.server import build_server

SLEEPY = "import time\n\n\ndef judge(question, candidates, context):\n    time.sleep(60)\n"
QUESTION = {"_id": "q1", "question": "Where was the director of Glass Harbour born?", "supporting_titles": ["Tessaly"]}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["eval", "ablate"])
def test_judge_timeout_reaches_process_workers_inside_the_spec(tmp_path, monkeypatch, capsys, command):
    """A FILE.py:NAME judge that sleeps past --judge-timeout in a --processes 2 worker is stopped
    with the named timeout error; the user's own $SAG2WB_JUDGE_TIMEOUT (300 s here) is neither
    what the worker applied nor overwritten, so the limit came in the spec."""
    index = build_index(tmp_path, FILM_WORLD)
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps({**QUESTION, "_id": f"q{i}"}) for i in range(2)) + "\n", encoding="utf-8")
    (tmp_path / "sleepy.py").write_text(SLEEPY, encoding="utf-8")
    monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", "300")
    rc = main(
        [
            command,
            "--db",
            str(index.path),
            "--questions",
            str(questions),
            "--out",
            str(tmp_path / "out.json"),
            "--judge",
            f"{tmp_path / 'sleepy.py'}:judge",
            "--judge-timeout",
            "0.5",
            "--processes",
            "2",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1, err  # safeio.EXIT_FAILED: the question's judge failed
    assert "sleepy.py:judge' did not answer within its time limit of 0.5 s" in err, err
    assert "Traceback" not in err
    assert os.environ["SAG2WB_JUDGE_TIMEOUT"] == "300"


@pytest.mark.parametrize("value", ["soon", "-1", "inf"])
def test_a_bad_judge_timeout_is_one_line_before_any_work(tmp_path, capsys, value, monkeypatch):
    monkeypatch.delenv("SAG2WB_JUDGE_TIMEOUT", raising=False)
    index = build_index(tmp_path, FILM_WORLD)
    rc = main(["search", "--db", str(index.path), "film", "--judge", "lexical", "--judge-timeout", value])
    err = capsys.readouterr().err
    assert rc == 2 and err == (
        f"sag2wb search: error: --judge-timeout={value!r}: expected a number of seconds"
        f"{' >= 0' if value != 'soon' else ''} (0 or none: no limit)\n"
    )
    assert "SAG2WB_JUDGE_TIMEOUT" not in os.environ


def test_the_judge_server_is_built_from_named_parameters():
    """What `sag2wb judge-server` serves, made without an argparse Namespace."""
    server = build_server("hash", port=0, delay_ms=250, faults=["500x2", "429:1"], judge_timeout="2")
    try:
        assert (server.judge.name, server.judge.timeout, server.delay) == ("hash", 2.0, 0.25)
        assert [f.kind for f in server.faults] == ["500", "500", "429"] and server.faults[-1].retry_after == 1.0
    finally:
        server.httpd.server_close()


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every `from module import name` in a file, function-local ones too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


@pytest.mark.slow
def test_no_shared_cli_module_is_left_and_no_private_name_is_imported():
    """cli/common.py is gone; nothing imports it, and the CLI imports no private name."""
    assert not (REPO / "workbench" / "cli" / "common.py").exists()
    sources = [p for d in ("workbench", "widgets", "tests", "benchmarks") for p in (REPO / d).rglob("*.py")]
    assert [str(p) for p in sources if ("workbench.cli", "common") in _imports(p)] == []
    assert [str(p) for p in sources if any(m == "workbench.cli.common" for m, _ in _imports(p))] == []
    private = [
        (p.name, m, n)
        for p in sorted((REPO / "workbench" / "cli").glob("*.py"))
        for m, n in _imports(p)
        if n.startswith("_") and n != "annotations"
    ]
    assert private == []


def test_the_judge_layer_holds_no_namespace_handlers():
    """embed_main, cache_main and serve_main took an argparse Namespace; their commands read the options now."""
    for module in ("embeddings.py", "jev/cache.py", "jev/server.py", "jev/__init__.py"):
        text = (REPO / "workbench" / "judges" / module).read_text(encoding="utf-8")
        assert [w for w in ("embed_main", "cache_main", "serve_main", "(args)", "args.") if w in text] == [], module
