"""The sag2wb command-line contract."""

import json
import os
import socket
import subprocess
import sys

import pytest

from workbench.cli.main import main

from .conftest import BRIDGE_WORLD, shared_data


@pytest.fixture
def corpus(tmp_path):
    f = tmp_path / "corpus.json"
    f.write_text(json.dumps([{"title": t, "text": x} for t, x in BRIDGE_WORLD]))
    q = tmp_path / "q.jsonl"
    q.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {
                    "_id": "q1",
                    "type": "bridge",
                    "question": "Where was the director of Glass Harbour born?",
                    "supporting_titles": ["Glass Harbour", "Mara Quell", "Tessaly"],
                },
                {
                    "_id": "q2",
                    "type": "bridge",
                    "question": "Which band is from Ostrow?",
                    "supporting_titles": ["Glass Harbor (band)"],
                },
            ]
        )
    )
    db = tmp_path / "ix.sqlite"
    assert main(["index", str(f), "--db", str(db)]) == 0
    return f, q, db


def test_index_prints_units_time_and_size(corpus, capsys, tmp_path):
    f, _, _ = corpus
    assert main(["index", str(f), "--db", str(tmp_path / "again.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "indexed 8 units" in out and "time " in out and "MiB" in out and "KiB per unit" in out


def test_eval_contract(corpus, tmp_path):
    _, q, db = corpus
    out = tmp_path / "out.json"
    assert (
        main(
            [
                "eval",
                "--db",
                str(db),
                "--questions",
                str(q),
                "--judge",
                "oracle",
                "--out",
                str(out),
                "--param",
                "s=1",
                "--param",
                "L=6",
                "--param",
                "p=1",
                "--quiet",
                "--trace-dir",
                str(tmp_path / "traces"),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert set(data["metrics"]) == {"R@5", "R@10", "AE@10", "questions", "judgments"}
    q1 = data["questions"][0]
    assert q1["_id"] == "q1" and set(q1["ranking"][:3]) == {"Glass Harbour", "Mara Quell", "Tessaly"}
    assert [r["round"] for r in q1["rounds"]] == [0, 1, 2]
    assert set(q1["rounds"][1]) >= {"round", "candidates", "terms", "pool", "context", "scores", "stop"}
    assert q1["rounds"][1]["candidates"] == ["Mara Quell"] and "mara quell" in q1["rounds"][1]["terms"]
    from workbench.runs.resume import trace_file_name

    assert (tmp_path / "traces" / trace_file_name("q1")).exists() and trace_file_name("q1").startswith("q1-")
    assert not (tmp_path / "out.json.partial.jsonl").exists()


def test_eval_bm25_has_no_judgments(corpus, tmp_path):
    _, q, db = corpus
    out = tmp_path / "bm25.json"
    assert main(["eval", "--db", str(db), "--questions", str(q), "--judge", "bm25", "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["metrics"]["judgments"] == 0


def test_search_explain(corpus, capsys):
    _, _, db = corpus
    assert (
        main(
            [
                "search",
                "--db",
                str(db),
                "Where was the director of Glass Harbour born?",
                "--judge",
                "lexical",
                "--explain",
                "--param",
                "s=1",
                "--param",
                "L=6",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "1. " in out and "[corpus.json item" in out and "round 1" in out and "term  1." in out


def test_search_punctuation_only_question(corpus, capsys):
    _, _, db = corpus
    assert main(["search", "--db", str(db), "?!", "--judge", "bm25"]) == 0
    assert "no results: empty question" in capsys.readouterr().out


def test_function_judge_from_file(corpus, tmp_path, capsys):
    _, _, db = corpus
    (tmp_path / "j.py").write_text(
        "def judge(question, candidates, context):\n"
        "    return [0.9 if c['title'] == 'Glass Harbor (band)' else 0.2 for c in candidates]\n"
    )
    assert main(["search", "--db", str(db), "glass", "--judge", f"{tmp_path / 'j.py'}:judge"]) == 0
    out = capsys.readouterr().out
    assert f"judge: {tmp_path / 'j.py'}:judge; judgments: " in out
    ranked = [line.strip() for line in out.splitlines() if line.startswith("  ") and "score=" in line]
    # BM25 alone puts "Glass Harbour" first (the last lines check it); the file's judge puts the band first,
    # and every printed score is one it gave
    assert ranked[0] == "1. Glass Harbor (band)  [corpus.json item 3]  score=0.9000"
    assert len(ranked) > 1 and all(line.endswith("score=0.2000") for line in ranked[1:])
    assert main(["search", "--db", str(db), "glass", "--judge", "bm25"]) == 0
    assert "  1. Glass Harbour  [corpus.json item 0]  score=bm25" in capsys.readouterr().out


@pytest.mark.parametrize(
    "judge, message",
    [
        ("nonsense", "unknown judge 'nonsense'; valid judges: bm25, lexical, oracle"),
        ("missing.py:judge", "no such file"),
    ],
)
def test_bad_judges_are_named(corpus, capsys, judge, message):
    _, _, db = corpus
    assert main(["search", "--db", str(db), "glass", "--judge", judge]) == 2
    assert message in capsys.readouterr().err


def test_bad_function_file_and_param(corpus, tmp_path, capsys):
    _, _q, db = corpus
    (tmp_path / "broken.py").write_text("def judge(:\n")
    assert main(["search", "--db", str(db), "glass", "--judge", f"{tmp_path / 'broken.py'}:judge"]) == 2
    assert "failed to load: SyntaxError" in capsys.readouterr().err
    assert main(["search", "--db", str(db), "glass", "--param", "H=3"]) == 2
    assert "H (expansion rounds) must be 0, 1 or 2" in capsys.readouterr().err
    assert main(["search", "--db", str(db), "glass", "--param", "term_weighting=nope"]) == 2
    assert "registered:" in capsys.readouterr().err


def test_malformed_corpus_leaves_no_database(tmp_path, capsys):
    f = tmp_path / "bad.json"
    f.write_text('[{"title": "A"}]')
    assert main(["index", str(f), "--db", str(tmp_path / "x.sqlite")]) == 2
    assert 'item 0: missing "text"' in capsys.readouterr().err
    assert not (tmp_path / "x.sqlite").exists()


# Loaded by every Python process started with it on PYTHONPATH (site imports `sitecustomize`):
# an audit hook that refuses every Internet-family connection, UDP send and host-name lookup,
# loopback included, and logs each attempt. Audit hooks cannot be removed, and every socket
# the standard library, httpx or urllib makes goes through these events.
NO_NETWORK = """
import os, socket, sys

_LOG = os.environ["SAG2WB_TEST_NET_LOG"]
_INET = (socket.AF_INET, socket.AF_INET6)


def _refuse(event, args):
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        if args[0].family not in _INET:
            return  # AF_UNIX: local IPC between processes, not the network
        what = repr(args[1]) if len(args) > 1 else ""
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                   "socket.gethostbyaddr", "socket.getnameinfo"):
        what = repr(args[0])
    else:
        return
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {event} {what}\\n")
    raise ConnectionRefusedError(f"network blocked by the test: {event} {what}")


sys.addaudithook(_refuse)
"""


def _offline_env(tmp_path):
    site = tmp_path / "no-network"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_NETWORK)
    log = tmp_path / "network-attempts.log"
    log.write_text("")
    paths = [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "SAG2WB_TEST_NET_LOG": str(log)}, log


def test_the_network_block_refuses_connections_and_lookups(tmp_path):
    """The block the demo test relies on: in a child process, a connection to a server that is
    listening on loopback, and a name lookup, both fail and are logged."""
    env, log = _offline_env(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        probe = (
            "import socket\n"
            f"try:\n    socket.socket().connect(('127.0.0.1', {port}))\n"
            "except ConnectionRefusedError as e:\n    print('refused:', e)\n"
            "try:\n    socket.getaddrinfo('example.com', 80)\n"
            "except ConnectionRefusedError as e:\n    print('refused:', e)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("refused: network blocked by the test") == 2, proc.stdout
    attempts = log.read_text().splitlines()
    assert any(f"socket.connect ('127.0.0.1', {port})" in a for a in attempts)
    assert any("socket.getaddrinfo 'example.com'" in a for a in attempts)


@pytest.mark.slow
def test_demo_runs_offline_on_the_bundled_corpus(tmp_path):
    env, log = _offline_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "demo", "--db", str(tmp_path / "demo.sqlite")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "After login" in proc.stdout and "R@10" in proc.stdout and "oracle" in proc.stdout
    # every judge ran (the semantic one with its model), with the network refused, and nothing
    # even tried to reach it
    for name in ("bm25", "lexical", "semantic", "oracle"):
        assert f"\n{name:9s} on " in proc.stdout, proc.stdout
    assert log.read_text() == ""


@pytest.mark.slow
def test_bm25_baseline_on_2wiki_dev_matches_the_reference_figures(tmp_path):
    db = tmp_path / "2wiki.sqlite"
    assert main(["index", str(shared_data("2wiki", "corpus.json")), "--db", str(db)]) == 0
    out = tmp_path / "bm25.json"
    assert (
        main(
            [
                "eval",
                "--db",
                str(db),
                "--questions",
                str(shared_data("2wiki", "questions-dev.jsonl")),
                "--judge",
                "bm25",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    m = json.loads(out.read_text())["metrics"]
    assert (m["R@5"], m["R@10"], m["AE@10"], m["questions"]) == (66.25, 68.25, 34.0, 100)
    out = tmp_path / "oracle.json"
    assert (
        main(
            [
                "eval",
                "--db",
                str(db),
                "--questions",
                str(shared_data("2wiki", "questions-dev.jsonl")),
                "--judge",
                "oracle",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    m = json.loads(out.read_text())["metrics"]
    assert (m["R@5"], m["R@10"], m["AE@10"]) == (97.75, 97.75, 93.0)
