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


@pytest.mark.slow
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
        "a JSON list": ([1, 2], "not a trace"),
        "some other JSON object": ({"rows": []}, "not a trace"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "a candidate field of another version",
        "a parameter of another version",
        "a trace without units",
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
@pytest.mark.slow
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


# ---- the experiment page (results as INPUT) ---------------------------------------------------
@pytest.fixture(scope="module")
def runs(docs, tmp_path_factory):
    """Two eval results on the docs questions with their trace folders (A: defaults, B: L=5), made
    by `sag2wb eval` in this process, and their experiment page made with the index."""
    folder = tmp_path_factory.mktemp("experiment")
    questions = folder / "q.jsonl"  # docs-01 to docs-04: B (L=5) loses docs-02, whose round 1 finds nothing new
    questions.write_text("\n".join(DOCS_QUESTIONS.read_text("utf-8").splitlines()[:4]) + "\n", encoding="utf-8")
    for name, extra in (("a", ()), ("b", ("--param", "L=5"))):
        r = sag2wb_here(
            "eval", "--db", docs["index"].path, "--questions", questions, "--judge", "lexical",
            "--out", folder / f"{name}.json", "--trace-dir", folder / f"traces-{name}", "--quiet", *extra,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    page = folder / "page.html"
    r = sag2wb_here(
        "report", folder / "a.json", "--compare", folder / "b.json", "--out", page, "--db", docs["index"].path
    )
    assert r.returncode == 0, r.stderr
    text = page.read_text(encoding="utf-8")
    return {"folder": folder, "a": folder / "a.json", "b": folder / "b.json", "text": text, "data": read_data(text)}


def _trace_of(folder, qid):
    from workbench.runs.resume import trace_file_name
    from workbench.trace import Trace

    return Trace.from_json((folder / trace_file_name(qid)).read_text(encoding="utf-8"))


@pytest.mark.slow  # two evals and their page (the `runs` fixture, ~5-10 s)
def test_experiment_page_shows_what_compare_and_results_compute(runs):
    from workbench.runs.changes import compare
    from workbench.runs.results import Results

    data = runs["data"]
    a, b = (json.loads(runs[k].read_text(encoding="utf-8")) for k in "ab")
    assert data["kind"] == "experiment" and data["configs"] == ["a.json", "b.json"]
    rows = {r["config"]: r for r in data["metrics"]["rows"]}
    for name, out in (("a.json", a), ("b.json", b)):
        for m in ("R@5", "R@10", "AE@10"):
            assert rows[name][m] == out["metrics"][m]  # as out.json says it
        assert rows[name]["judgments"] == out["metrics"]["judgments"]
    records = [
        {"config": n, "question": r["_id"], "type": r["type"], "hops": r["hops"], **{m: r[m] for m in METRICS_},
         "judgments": r["judgments"]}
        for n, out in (("a.json", a), ("b.json", b)) for r in out["questions"]
    ]  # fmt: skip
    table = Results(records).table("a.json", "R@10")
    assert rows["b.json"]["difference"] == table.loc["b.json", "diff_R@10_vs_a.json"]
    assert tuple(rows["b.json"]["difference interval"]) == table.loc["b.json", "ci_R@10_vs_a.json"]
    for p in ("p_randomization", "p_holm", "p_bonferroni"):
        assert rows["b.json"][p] == table.loc["b.json", f"{p}_R@10_vs_a.json"]
    changes = compare(runs["a"], runs["b"])
    assert data["counts"] == changes.counts()
    shown = {q["question"]: q for q in data["questions"]}
    for c in changes.questions:
        q = shown[c.question]
        assert q["outcome"]["b.json"] == c.outcome and q["delta"]["b.json"] == c.delta
        for k in ("first_round", "terms_gained", "terms_lost", "gold_gained", "gold_lost", "moves"):
            assert q["change"][k] == getattr(c, k), k
    assert {t["type"]: t["a.json"] for t in data["by_type"]["rows"]} == {t: v["R@10"] for t, v in a["by_type"].items()}


METRICS_ = ("R@5", "R@10", "AE@10")


@pytest.mark.slow  # two evals and their page (the `runs` fixture, ~5-10 s)
def test_each_question_opens_its_trajectory_from_a_compact_block_and_texts_are_once_per_page(runs, docs):
    from workbench.report.page import read_blocks, unpack

    data, blocks = runs["data"], read_blocks(runs["text"])
    assert data["trajectories"] == len(blocks) == 8  # 4 questions x 2 results
    q = next(q for q in data["questions"] if q["question"] == "docs-02")
    for config, folder in (("a.json", "traces-a"), ("b.json", "traces-b")):
        trace = _trace_of(runs["folder"] / folder, "docs-02")
        shown = unpack(blocks[q["open"][config]])
        for r, state in zip(shown["rounds"], trace.rounds):
            assert [t["term"] for t in r["terms"] if t["selected"]] == [
                t.term for t in sorted((t for t in state.terms if t.selected), key=lambda t: t.order)
            ]
            ranking = list(state.ranking) if state.scored else [c.unit_id for c in state.candidates]
            assert [p["unit_id"] for p in r["pool"]][: len(ranking)] == ranking
        assert all(p["text"] is None for p in shown["passages"])  # the texts are the page's, once
        assert all(docs["index"].unit(p["unit_id"]).body in data["texts"][str(p["unit_id"])] for p in shown["passages"])
    units = {p["unit_id"] for b in blocks.values() for p in unpack(b)["passages"]}
    assert set(data["texts"]) == {str(u) for u in units}
    sizes = [len(json.dumps(b, ensure_ascii=False, separators=(",", ":")).encode()) for b in blocks.values()]
    assert max(sizes) <= 300_000


@pytest.mark.slow  # two evals and their page (the `runs` fixture, ~5-10 s)
def test_a_page_without_trajectories_when_none_are_asked_for_or_kept(runs, tmp_path):
    out = tmp_path / "p.html"
    r = sag2wb_here("report", runs["a"], "--trajectories", "none", "--out", out)
    assert r.returncode == 0, r.stderr
    data = read_data(out.read_text(encoding="utf-8"))
    assert data["trajectories"] == 0 and "kept no traces" in data["without_trajectories"]
    assert all(q["open"] == {} for q in data["questions"]) and data["metrics"]["rows"][0]["R@10"]


def _bad_result(runs, tmp_path, case) -> tuple[list, str]:
    """The arguments of one bad `sag2wb report` and what its one line must say."""
    import shutil

    folder = tmp_path / "in"
    shutil.copytree(runs["folder"], folder, ignore=shutil.ignore_patterns("*.html"))
    a = folder / "a.json"
    data = json.loads(a.read_text(encoding="utf-8"))
    if case == "a trace of another format version":
        trace = sorted((folder / "traces-a").glob("docs-03*.json"))[0]
        old = json.loads(trace.read_text(encoding="utf-8"))
        old["rounds"][0]["candidates"][0]["relevance_v3"] = 0.5
        trace.write_text(json.dumps(old), encoding="utf-8")
        return [a], "another format version"
    if case == "a missing trace folder":
        shutil.rmtree(folder / "traces-a")
        return [a], "trace folder traces-a"
    if case == "a result without traces when all are asked for":
        data["config"].pop("trace_dir")
        a.write_text(json.dumps(data), encoding="utf-8")
        return [a, "--trajectories", "all"], "kept no traces"
    if case == "an empty result":
        data["questions"] = []
        a.write_text(json.dumps(data), encoding="utf-8")
        return [a], "an empty result"
    if case == "a trace compared":
        return [sorted((folder / "traces-a").glob("*.json"))[0], "--compare", folder / "b.json"], "compares two results"
    if case == "a result of another kind":
        a.write_text(json.dumps({"sag2wb": {"kind": "fit-judge"}, "questions": []}), encoding="utf-8")
        return [a], "not an `sag2wb eval` or `sag2wb ablate` result"
    raise AssertionError(case)


@pytest.mark.slow  # two evals and their page (the `runs` fixture, ~5-10 s)
@pytest.mark.parametrize(
    "case",
    [
        "a trace of another format version",
        "a missing trace folder",
        "a result without traces when all are asked for",
        "an empty result",
        "a trace compared",
        "a result of another kind",
    ],
)
def test_bad_results_are_one_named_line(runs, tmp_path, case):
    args, expected = _bad_result(runs, tmp_path, case)
    r = sag2wb_here("report", *args, "--out", tmp_path / "p.html")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("sag2wb report: error:") and expected in lines[0], lines[0]
    assert not (tmp_path / "p.html").exists()


@pytest.mark.slow  # two evals and their page (the `runs` fixture, ~5-10 s)
def test_the_experiment_page_never_writes_over_a_result_or_one_of_its_traces(runs, tmp_path):
    import shutil

    folder = tmp_path / "in"
    shutil.copytree(runs["folder"], folder, ignore=shutil.ignore_patterns("*.html"))
    trace = sorted((folder / "traces-a").glob("*.json"))[0]
    for target in (folder / "a.json", folder / "b.json", trace):
        before = target.read_bytes()
        r = sag2wb_here("report", folder / "a.json", "--compare", folder / "b.json", "--out", target, "--force")
        assert r.returncode == 2 and "is an input of this command" in r.stderr, r.stderr
        assert target.read_bytes() == before


@pytest.fixture(scope="module")
def ablation(docs, tmp_path_factory):
    """`sag2wb ablate` on three docs questions (its out.json names the db and questions by absolute path)."""
    folder = tmp_path_factory.mktemp("ablate")
    questions = folder / "q.jsonl"
    questions.write_text("\n".join(DOCS_QUESTIONS.read_text("utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    out = folder / "ab.json"
    r = sag2wb_here("ablate", "--db", docs["index"].path, "--questions", questions, "--out", out, "--judge", "lexical",
                    "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow  # an ablation and a real process (~3 s)
def test_an_ablation_page_shows_its_rows_as_written_and_the_papers_figures_from_the_package_table(ablation, tmp_path):
    from workbench.report.experiment import PAPER_DATASETS, paper_figures

    written = json.loads(ablation.read_text(encoding="utf-8"))
    key = "sk-ablate-SECRET-99173"
    out = tmp_path / "p.html"
    r = sag2wb("report", ablation, "--paper", "musique", "--out", out, env={"OPENROUTER_API_KEY": key})
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    data = read_data(text)
    rows = {row["config"]: row for row in data["metrics"]["rows"]}
    assert list(rows) == list(written["rows"]) and data["reference"] == "H=2"
    for name, row in written["rows"].items():
        assert rows[name]["R@10"] == row["R@10"] and rows[name]["judgments"] == row["judgments"]
        assert rows[name]["p_holm"] == row["p_holm"] and rows[name]["p_bonferroni"] == row["p_bonferroni"]
    table = paper_figures()
    assert {r["dataset"] for r in table["rows"]} <= set(PAPER_DATASETS) and all(r["table"] for r in table["rows"])
    b1 = {r["row"]: r for r in table["rows"] if r["dataset"] == "musique"}
    assert data["paper"]["rows"]["H=2"] == b1["H=2"] and data["paper"]["rows"]["H=2"]["table"] == "B.1"
    assert data["paper"]["rows"]["final-only"]["table"] == "B.2"
    assert str(b1["H=2"]["R@10"]) not in (REPO / "workbench" / "report" / "experiment.js").read_text("utf-8")
    assert data["without_trajectories"] and data["trajectories"] == 0
    for leak in (key, str(tmp_path), str(ablation.parent), written["db"], written["questions_file"], str(REPO)):
        assert leak not in text, leak


def test_the_paper_data_set_is_found_from_the_question_ids():
    from workbench.report.experiment import detect_dataset

    assert detect_dataset(["83bf3b5a0bd911eba7f7acde48001122"]) == "2wiki"
    assert detect_dataset(["5abe953b5542993f32c2a170"]) == "hotpotqa"
    assert detect_dataset(["2hop__131818_161450"]) == "musique"
    assert detect_dataset(["docs-01"]) is None and detect_dataset(["docs-01"], "2wiki") == "2wiki"


# ---- from Python ---------------------------------------------------------------------------------
@pytest.mark.slow  # an experiment of two configurations (~3 s)
def test_trace_and_results_write_their_pages_and_the_old_table_fragment_still_works(docs, tmp_path):
    import warnings

    from workbench.params import Params
    from workbench.runs import Config, Experiment, RunOptions

    path = docs["trace"].to_html(tmp_path / "t.html", docs["index"])
    assert read_data(path.read_text("utf-8"))["question"]["id"] == "docs-02"
    questions = load_questions(DOCS_QUESTIONS)[:3]
    configs = [Config("sag2", judge="lexical"), Config("L=5", Params(L=5), judge="lexical")]
    experiment = Experiment(docs["index"], questions, configs, RunOptions(progress=False, keep_traces=True))
    results = experiment.run()
    page = results.to_html(tmp_path / "r.html", traces=experiment.traces, index=docs["index"])
    data = read_data(page.read_text("utf-8"))
    assert data["configs"] == ["sag2", "L=5"] and data["trajectories"] == 6
    assert data["counts"] == results.changes("sag2", "L=5").counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fragment = results.to_html("sag2")
    assert fragment == results.to_html_table("sag2") and fragment.lstrip().startswith("<")
    assert any(issubclass(w.category, DeprecationWarning) and "to_html_table" in str(w.message) for w in caught)
