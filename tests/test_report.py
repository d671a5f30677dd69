"""`sag2wb report`: the self-contained trajectory page. Its data against the trace (terms of
each round, the pool's order, passages), the output contract, bad input as one named line,
nothing of the machine in the page (a JEV judge run with a key set), script-safe data, and
the dashboard's "HTML page" export. The page in a real browser: tests/browser/test_report_browser.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, build_index, sag2wb, sag2wb_here
from workbench.engine import Run
from workbench.index.corpora import load_questions
from workbench.index.store import Index
from workbench.judges import LexicalJudge
from workbench.report import read_data

DOCS = REPO / "sample_corpora" / "internal_docs"
DOCS_QUESTIONS = REPO / "sample_corpora" / "internal_docs.questions.jsonl"
SAG2WB = [sys.executable, "-m", "workbench.cli"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """The docs index, and the trace of docs-02 (Chinese titles; expansion brings two gold files in)."""
    folder = tmp_path_factory.mktemp("report")
    index = Index.build(DOCS, folder / "docs.sqlite")
    question = next(q for q in load_questions(DOCS_QUESTIONS) if q.id == "docs-02")
    trace = Run(index, question, judge=LexicalJudge(index)).run()
    path = folder / "docs-02.trace.json"
    path.write_text(trace.to_json(), encoding="utf-8")
    return {"folder": folder, "index": index, "trace": trace, "path": path}


def page_of(docs, folder, *extra) -> tuple[dict, str]:
    out = folder / "page.html"
    r = sag2wb("report", docs["path"], "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    return read_data(text), text


@pytest.fixture(scope="module")
def docs_page(docs, tmp_path_factory) -> tuple[dict, str]:
    """docs-02's page made with its index: (data block, HTML)."""
    return page_of(docs, tmp_path_factory.mktemp("page"), "--db", docs["index"].path)


def test_each_round_shows_its_selected_terms_and_its_pool_in_ranking_order(docs, docs_page):
    data, _ = docs_page
    trace = docs["trace"]
    assert [r["round"] for r in data["rounds"]] == [r.round for r in trace.rounds]
    for shown, state in zip(data["rounds"], trace.rounds):
        selected = [t.term for t in sorted((t for t in state.terms if t.selected), key=lambda t: t.order)]
        assert [t["term"] for t in shown["terms"] if t["selected"]] == selected
        assert [p["unit_id"] for p in shown["pool"]][: len(state.ranking)] == list(state.ranking)
        assert [s["unit_id"] for s in shown["seeds"]] == [s.unit_id for s in state.seeds]
    assert [r["unit_id"] for r in data["ranking"]] == list(trace.final_ranking[:10])
    units = {p["unit_id"]: p for p in data["passages"]}
    assert set(units) == {e.unit_id for r in trace.rounds for e in r.pool}
    roles = next(p for p in units.values() if p["source"].startswith("zh/roles.md"))
    assert roles["title"] == "角色与权限键（中文）" and roles["gold"] is True
    assert roles["via"][0]["terms"][0]["term"] == "保存"  # the term the trace records first
    assert any(cls == "t" for _, _, cls in roles["marks"]) and roles["text"]
    assert data["opening"][0].startswith("In the top 10 for docs-02: BM25 alone finds 1 of 3")


def test_without_the_index_the_page_has_no_text_and_says_so(docs, tmp_path):
    data, _ = page_of(docs, tmp_path)
    assert data["with_text"] is False and all(p["text"] is None for p in data["passages"])
    assert [t["term"] for t in data["rounds"][1]["terms"] if t["selected"]]  # terms still there


def test_the_page_is_self_contained(docs_page):
    _, text = docs_page
    assert "<script src" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert "connect-src 'none'" in text  # the policy forbids every request the page might try


def test_passage_text_cannot_end_the_data_block(tmp_path):
    nasty = "Harbour notes </script><script>alert(1)</script> <!-- and ]]> end"
    index = build_index(tmp_path, [("Glass Harbour", f"Glass Harbour is a film. {nasty}"), ("Other", "Other text.")])
    trace = Run(index, "Glass Harbour film", judge=LexicalJudge(index)).run()
    (tmp_path / "t.json").write_text(trace.to_json(), encoding="utf-8")
    out = tmp_path / "p.html"
    assert sag2wb("report", tmp_path / "t.json", "--out", out, "--db", index.path).returncode == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("</script>") == 2 and "<!--" not in text
    assert any(nasty in (p["text"] or "") for p in read_data(text)["passages"])


# ---- the output contract --------------------------------------------------------------------
def test_never_writes_over_its_input_or_a_users_file_and_force_replaces_only_the_latter(docs, tmp_path, capsys):
    sag2wb = lambda *a: sag2wb_here(*a)  # noqa: E731
    trace = tmp_path / "t.json"
    trace.write_text(docs["path"].read_text(encoding="utf-8"), encoding="utf-8")
    before = trace.read_bytes()
    r = sag2wb("report", trace, "--out", trace, "--force")
    assert r.returncode == 2 and "is an input of this command" in r.stderr and trace.read_bytes() == before
    mine = tmp_path / "mine.html"
    mine.write_text("my notes", encoding="utf-8")
    r = sag2wb("report", trace, "--out", mine)
    assert r.returncode == 2 and "--force" in r.stderr and mine.read_text(encoding="utf-8") == "my notes"
    assert sag2wb("report", trace, "--out", mine, "--force").returncode == 0 and read_data(mine.read_text("utf-8"))
    assert sag2wb("report", trace, "--out", mine).returncode == 0  # now ours: a rerun replaces it


# ---- bad input: one named line, exit 2 --------------------------------------------------------
def _variants(data: dict) -> dict:
    unknown_field = json.loads(json.dumps(data))
    unknown_field["rounds"][0]["candidates"][0]["relevance_v3"] = 0.5
    old_params = json.loads(json.dumps(data))
    old_params["params"]["beam_width"] = 4
    no_units = {k: v for k, v in data.items() if k != "units"}
    return {
        "a candidate field of another version": (unknown_field, "another format version"),
        "a parameter of another version": (old_params, "another format version"),
        "a trace without units": (no_units, "another format version"),
        "an eval result": ({"sag2wb": {"kind": "eval", "version": 1}, "per_question": []}, "not a trace"),
        "a JSON list": ([1, 2], "not a trace"),
        "some other JSON object": ({"rows": []}, "not a trace"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "a candidate field of another version",
        "a parameter of another version",
        "a trace without units",
        "an eval result",
        "a JSON list",
        "some other JSON object",
        "bad JSON",
        "a missing file",
        "a questions file",
    ],
)
def test_bad_input_is_one_named_line(docs, tmp_path, case, capsys):
    path = tmp_path / "input.json"
    expected = "not a trace"
    if case == "bad JSON":
        path.write_text('{"question": "q", "rounds": [', encoding="utf-8")
        expected = "input.json"
    elif case == "a missing file":
        path = tmp_path / "nowhere.json"
        expected = "no such file"
    elif case == "a questions file":
        path.write_text(DOCS_QUESTIONS.read_text(encoding="utf-8"), encoding="utf-8")
        expected = "input.json"
    else:
        content, expected = _variants(json.loads(docs["path"].read_text(encoding="utf-8")))[case]
        path.write_text(json.dumps(content), encoding="utf-8")
    r = (sag2wb if case == "a missing file" else lambda *a: sag2wb_here(*a))(
        "report", path, "--out", tmp_path / "p.html"
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and expected in lines[0], r.stderr
    assert lines[0].startswith("sag2wb report: error:") and not (tmp_path / "p.html").exists()


def test_an_index_of_another_corpus_is_refused_by_name(docs, tmp_path, capsys):
    other = build_index(tmp_path, [("Glass Harbour", "Glass Harbour is a film.")], name="other.sqlite")
    r = sag2wb_here("report", docs["path"], "--out", tmp_path / "p.html", "--db", other.path)
    assert r.returncode == 2 and "not the index this trace was made on" in r.stderr and "Traceback" not in r.stderr


# ---- nothing of the machine in the page -------------------------------------------------------
def test_a_jev_run_with_a_key_set_leaves_no_key_endpoint_cache_or_path_in_the_page(tmp_path):
    from workbench.judges.jev.server import JudgeServer, make_server_judge

    Index.build(DOCS, tmp_path / "docs.sqlite")
    questions = tmp_path / "q.jsonl"
    questions.write_text(next(line for line in DOCS_QUESTIONS.read_text("utf-8").splitlines() if "docs-02" in line))
    server = JudgeServer(make_server_judge("hash", None)).start()
    key = "sk-report-SECRET-73519"
    env = {**os.environ, "JEV_API_KEY": key, "SAG2WB_JEV_CACHE": str(tmp_path / "jev-cache-default")}
    try:
        r = sag2wb(
            "eval",
            "--db",
            tmp_path / "docs.sqlite",
            "--questions",
            questions,
            "--out",
            tmp_path / "out.json",
            "--trace-dir",
            tmp_path / "traces",
            "--judge",
            "jev",
            "--jev-endpoint",
            server.url,
            "--cache-dir",
            tmp_path / "jev-cache",
            "--quiet",
            env=env,
        )
        assert r.returncode == 0, r.stderr
    finally:
        server.stop()
    trace_file = sorted((tmp_path / "traces").glob("docs-02*.json"))[0]
    data = json.loads(trace_file.read_text(encoding="utf-8"))
    assert "via url:" in data["judge"]  # the trace names the endpoint: the page must not
    data["judge"] += f" with {tmp_path}/models/J.json"  # a judge that names a file by its absolute path
    trace_file.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "page.html"
    r = sag2wb("report", trace_file, "--out", out, "--db", tmp_path / "docs.sqlite", env=env)
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    host_port = server.url.split("//", 1)[1].split("/", 1)[0]
    for leak in (key, host_port, "127.0.0.1", str(tmp_path), "jev-cache", str(Path.home()), os.getcwd(), str(REPO)):
        assert leak not in text, leak
    assert "J.json" in text and read_data(text)["source"] == trace_file.name


# ---- the dashboard's export --------------------------------------------------------------------
def test_the_dashboards_html_page_export_writes_the_page_of_the_shown_trace(docs, tmp_path):
    from widgets import DashboardModel
    from widgets.export import export_page

    model = DashboardModel(docs["index"], load_questions(DOCS_QUESTIONS), judge="lexical", question="docs-02")
    [path] = export_page(model, tmp_path / "exports")
    again = export_page(model, tmp_path / "exports")[0]
    assert path.suffix == ".html" and again != path  # an export never replaces a file
    data = read_data(path.read_text(encoding="utf-8"))
    assert data["question"]["id"] == "docs-02" and data["with_text"]
    selected = [t.term for t in model.trace.rounds[1].terms if t.selected]
    assert sorted(t["term"] for t in data["rounds"][1]["terms"] if t["selected"]) == sorted(selected)
