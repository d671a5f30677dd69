"""Widget model and views without a browser: the sample corpora, offline judges."""

from __future__ import annotations

import html
import math
from typing import ClassVar

import pytest

from widgets import Dashboard, DashboardModel, dashboard_for, data
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import open_or_build
from workbench.index.units import Question
from workbench.judges.lexical import LexicalJudge
from workbench.params import Params

from .conftest import ENC, REPO

DOCS = REPO / "sample_corpora" / "internal_docs"
DOCS_QUESTIONS = REPO / "sample_corpora" / "internal_docs.questions.jsonl"


@pytest.fixture(autouse=True)
def views_raise(monkeypatch):
    """A view that fails to redraw fails the test (the dashboard shows it in the status line)."""
    monkeypatch.setenv("SAG2WB_RAISE_VIEW_ERRORS", "1")


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory):
    index, _ = open_or_build(load_corpus(DOCS), tmp_path_factory.mktemp("idx") / "docs.sqlite")
    return index


@pytest.fixture(scope="module")
def questions():
    return load_questions(DOCS_QUESTIONS)


@pytest.fixture
def dash(docs_index, questions):
    return Dashboard(docs_index, questions, judge="lexical")


@pytest.mark.slow
def test_param_change_redraws_every_view_and_reuses_judgments(dash):
    m = dash.model
    m.set_round(1)
    before = {
        "terms": tuple(dash.terms.widget.data[-1]["y"]),
        "pool": dash.pool.widget.value,
        "slope": tuple(dash.slope.widget.data[0]["y"]),
        "sankey": tuple(dash.trajectory.widget.data[0]["node"]["label"]),
    }
    dash.params.ints["L"].value = 3  # the control, as a user would
    assert m.params.L == 3
    assert m.last_recompute["from_round"] == 1
    assert m.last_recompute["memo_hits"] > 0  # round 0 judgments came from the shared memo
    assert m.frames["terms"].query("round == 1 and selected").shape[0] == 3
    terms = m.frames["terms"].query("round == 1").sort_values("priority", ascending=False)
    assert list(dash.terms.widget.data[-1]["y"])[:3] == [
        t if not isinstance(r, str) or r == t else f"{t} → {r}"
        for t, r in zip(terms["term"][:3], terms["resolved"][:3])
    ]
    assert dash.pool.widget.value != before["pool"]
    assert tuple(dash.trajectory.widget.data[0]["node"]["label"]) != before["sankey"]
    assert "applied; recomputed from round 1" in dash.params.message.value
    assert "reference" in dash.diff.body.value  # the previous run is the diff reference


@pytest.mark.slow
def test_round_slider_moves_the_round_views(dash):
    dash.stepper.slider.value = 0
    pool0, seeds0 = dash.pool.widget.value, tuple(d["y"] for d in dash.seeds.widget.data)
    dash.stepper.slider.value = 1
    assert dash.model.round == 1
    assert dash.pool.widget.value != pool0
    assert tuple(dash.seeds.widget.data[0]["y"]) != seeds0 and len(dash.seeds.widget.data[0]["y"]) == 10
    assert "Round <b>1</b>" in dash.stepper.summary.value
    dash.stepper.next.click()
    assert dash.model.round == 2 and dash.stepper.slider.value == 2
    dash.stepper.next.click()  # past the last round: stays
    assert dash.model.round == 2


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("H", 3, "H (expansion rounds) must be 0, 1 or 2, got 3"),
        ("B", 0, "B (candidates per round) must be >= 1, got 0"),
        ("field_weights", "2, x, 1", "field_weights: '2, x, 1' is not three numbers"),
        ("field_weights", "0, 0, 0", "field_weights: at least one weight must be positive"),
    ],
)
def test_invalid_entry_is_rejected_in_the_control_with_the_params_message(dash, field, value, message):
    trace = dash.model.trace
    box = dash.params.field_weights if field == "field_weights" else dash.params.ints[field]
    box.value = value
    assert html.escape(message) in dash.params.message.value
    assert "sag2wb-invalid" in dash.params.message.value
    assert dash.model.params == Params() and dash.model.trace is trace  # nothing applied


@pytest.mark.slow
def test_failing_judge_shows_its_error_and_keeps_the_last_good_trajectory(docs_index, questions):
    def broken(question, candidates, context):
        raise RuntimeError("the model endpoint is down")

    dash = Dashboard(docs_index, questions, judge="lexical", judges={"broken": broken})
    good = dash.model.trace
    pool = dash.pool.widget.value
    dash.judge.picker.value = "broken"
    assert dash.model.trace is good
    assert dash.pool.widget.value == pool
    assert "the model endpoint is down" in dash.model.status.error
    assert "the model endpoint is down" in dash.status.text.value
    assert "kept the last good trajectory" in dash.status.text.value
    dash.judge.picker.value = "lexical"  # back to a working judge: the error goes away
    assert dash.model.status.error is None


def test_judge_failing_in_a_later_round_keeps_the_previous_trace(docs_index, questions):
    lexical = LexicalJudge(docs_index)

    def fails_with_context(question, candidates, context):
        if context:
            raise RuntimeError("context too long")
        return lexical.judge(question, candidates, context)

    dash = Dashboard(docs_index, questions, judge="lexical", judges={"flaky": fails_with_context})
    good = dash.model.trace
    dash.model.set_judge("flaky")
    assert dash.model.trace is good
    assert "round 1" in dash.model.status.error and "context too long" in dash.model.status.error


def test_corpus_without_gold_hides_gold_markers_and_the_oracle(docs_index):
    dash = Dashboard(docs_index, ["After login, how does the system decide which APIs a user can access?"])
    m = dash.model
    assert "oracle" not in m.judge_options() and not m.show_gold
    assert "oracle" not in dash.judge.picker.options
    assert ">gold<" not in dash.pool.widget.value and "★" not in dash.pool.widget.value
    assert ">gold<" not in dash.ranking.widget.value
    assert [d["name"] for d in dash.slope.widget.data] == ["other", "entered by expansion"]  # no gold line
    assert all("★" not in label for label in dash.trajectory.widget.data[0]["node"]["label"])
    dash.judge.function.value = "oracle"
    dash.judge.load.click()
    assert "needs gold labels" in dash.judge.message.value or "unknown judge" in dash.judge.message.value


@pytest.mark.slow
def test_gold_markers_and_oracle_with_gold(dash):
    assert "oracle" in dash.model.judge_options()
    assert ">gold<" in dash.pool.widget.value and "★" in dash.pool.widget.value
    dash.judge.picker.value = "oracle"
    top = dash.model.frames["ranking"].head(4)
    assert top["gold"].all()


def test_seeds_view_matches_the_engine_seeds(dash):
    trace = dash.model.trace
    derived = data.seeds_by_round(dash.model.frames)
    for r in trace.rounds[1:]:
        assert derived[r.round] == [s.unit_id for s in r.seeds]
    bars = data.seed_bars(dash.model.frames, 1)
    assert list(bars["seed_score"]) == [s.score for s in trace.rounds[1].seeds]
    assert list(bars["seed_weight"]) == [s.weight for s in trace.rounds[1].seeds]
    # the previous round ranked them first among units not yet expanded
    assert list(bars["previous_rank"]) == sorted(bars["previous_rank"])


def test_term_components_multiply_to_the_priority(dash):
    t = data.term_components(dash.model.frames, 1, top=40)
    assert len(t) > 0
    for product, priority in zip(t["product"], t["priority"]):
        assert math.isclose(product, priority, rel_tol=1e-9)


@pytest.mark.slow
def test_pin_reruns_from_the_pinned_round(dash):
    m = dash.model
    m.set_round(1)
    unit = dash.pins.unit.options[-1][1]
    dash.pins.unit.value = unit
    dash.pins.score.value = 1.0
    dash.pins.pin.click()
    assert m.pins == {(1, unit): 1.0}
    assert m.last_recompute["from_round"] == 1
    p = m.frames["passages"].query("round == 1")
    row = p[p["unit_id"] == unit].iloc[0]
    assert row["pinned"] and row["score"] == 1.0 and row["rank"] == 1
    assert "(pinned) " in dash.pool.widget.value  # in words: no emoji font needed
    dash.pins.clear.click()
    assert m.pins == {}


def test_interrupt_keeps_the_previous_trajectory(docs_index, questions):
    holder = {}
    lexical = LexicalJudge(docs_index)

    def interrupting(question, candidates, context):
        if context:
            holder["model"].interrupt()  # as the Stop button would, mid-run
        return lexical.judge(question, candidates, context)

    dash = Dashboard(docs_index, questions, judge="lexical", judges={"interrupting": interrupting})
    holder["model"] = dash.model
    good = dash.model.trace
    dash.model.set_judge("interrupting")
    assert dash.model.trace is good
    assert "interrupted after round 1" in dash.model.status.error


def test_function_judge_from_a_file(dash, tmp_path):
    path = tmp_path / "myjudge.py"
    path.write_text("def half(question, candidates, context):\n    return [0.5] * len(candidates)\n")
    dash.judge.function.value = f"{path}:half"
    dash.judge.load.click()
    assert dash.model.judge_spec == f"{path}:half"
    assert set(dash.model.frames["ranking"]["score"]) == {0.5}
    dash.judge.function.value = f"{path}:missing"
    dash.judge.load.click()
    assert "has no &#x27;missing&#x27;" in dash.judge.message.value


@pytest.mark.slow
def test_question_change_and_diff(dash):
    m = dash.model
    dash.stepper.question.value = "docs-09"
    assert m.question.id == "docs-09" and m.round == 0
    assert m.trace.question_id == "docs-09"
    m.set_params(H=0)
    d = data.diff_runs(m.reference.frames(), m.frames)
    assert m.rounds_count == 1 and not d["same"]
    assert "entered" in dash.diff.body.value or "left" in dash.diff.body.value


def test_bm25_baseline_and_jev_hidden_without_configuration(dash, monkeypatch):
    for var in ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert "jev" not in dash.model.judge_options()
    monkeypatch.setenv("JEV_API_KEY", "x")
    assert "jev" in dash.model.judge_options()
    dash.judge.picker.value = "bm25"
    assert dash.model.trace.judge == "bm25" and dash.model.rounds_count == 1


@pytest.mark.slow
def test_mimebundle_and_dashboard_for(tmp_path):
    d = dashboard_for(DOCS, db=tmp_path / "docs.sqlite")
    assert "application/vnd.jupyter.widget-view+json" in d._repr_mimebundle_()
    assert d.model.question.id == "docs-01"
    e = dashboard_for(ENC, db=tmp_path / "enc.sqlite", questions=[Question("x", "Who directed Glass Harbour?")])
    assert e.model.questions[0].id == "x" and not e.model.show_gold
    model = DashboardModel(e.model.index, ["Who directed Glass Harbour?"], judge="bm25")
    assert model.trace.judge == "bm25"


# ---- charts: whole figures, honest empty states (issue 15) ------------------------------------
def _annotation(chart) -> str:
    return " ".join(a.get("text", "") for a in chart.fig_layout.get("annotations", []))


@pytest.mark.slow
def test_charts_are_whole_figures_stamped_with_the_run_and_round(dash):
    import plotly.graph_objects as go

    from widgets.chart import Chart

    m = dash.model
    charts = [dash.seeds.widget, dash.terms.widget, dash.slope.widget, dash.trajectory.widget]
    assert all(isinstance(c, Chart) and not isinstance(c, go.FigureWidget) for c in charts)
    m.set_round(2)
    for c in charts[:3]:
        assert c.fig_layout["meta"]["round"] == 2 and c.fig_layout["meta"]["run"] == m.generation
    assert dash.slope.widget.fig_layout["shapes"][0]["x0"] == 2  # the round marker
    # round 2's term chart holds round 2's terms only (no categories left from round 1)
    chosen = m.frames["terms"].query("round == 2 and selected")
    selected = [data.term_label(t, d) for t, d in zip(chosen["term"], chosen["display"])]  # surface forms
    labels = [y.split(" → ")[0] for y in dash.terms.widget.data[-1]["y"]]
    assert set(selected) <= set(labels) and len(labels) == len(set(labels))
    assert dash.terms.widget.title.startswith(f"round 2: {len(selected)} selected")
    assert dash.terms.widget.fig_layout["yaxis"]["categoryarray"] == dash.terms.widget.data[-1]["y"]
    before = m.generation
    m.set_params(L=3)
    assert m.generation == before + 1
    assert dash.trajectory.widget.fig_layout["meta"]["run"] == m.generation
    assert dash.trajectory.widget.title == "judge lexical · L=3 · H=2 · 2 expansion round(s) run"


@pytest.mark.slow
def test_empty_states_say_why_and_data_returns(dash):
    m = dash.model
    m.set_round(0)
    assert dash.seeds.widget.data == [] and "round 0 is plain BM25" in _annotation(dash.seeds.widget)
    assert dash.terms.widget.data == [] and "no expansion terms" in _annotation(dash.terms.widget)
    m.set_params(H=0)
    assert (
        dash.trajectory.widget.data == [] and _annotation(dash.trajectory.widget) == "no expansion: H=0 (round 0 only)"
    )
    m.set_params(H=1, L=5)
    # round 1 expanded: the diagram shows what its terms retrieved (the L=5, H=1 case)
    sankey = dash.trajectory.widget.data[0]
    assert sankey["type"] == "sankey" and any("(r1)" in label for label in sankey["node"]["label"])
    assert "L=5 · H=1" in dash.trajectory.widget.title
    m.set_round(1)
    assert len(dash.seeds.widget.data[0]["y"]) == len(m.frames["seeds"].query("round == 1"))


def test_dashboard_notebook_is_stored_without_outputs_or_widget_state():
    import json

    nb = json.loads((REPO / "notebooks" / "dashboard.ipynb").read_text(encoding="utf-8"))
    assert "widgets" not in nb["metadata"]
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_voila_hook_sets_the_xsrf_cookie_and_drops_cdn_links():
    from widgets.voila_hooks import prelaunch_hook

    class Handler:
        touched = False
        written: ClassVar[list] = []

        @property
        def xsrf_token(self):
            Handler.touched = True  # tornado sets the _xsrf cookie here
            return b"token"

        def write(self, chunk):
            self.written.append(chunk)

    h = Handler()
    prelaunch_hook(h, notebook=None, cwd=".")
    assert Handler.touched
    page = (
        '<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/@fortawesome/fontawesome-free@^5/css/'
        'all.min.css" type="text/css" />\n  <style>x</style>'
    )
    h.write(page)
    h.write(b"<p>plain</p>")
    assert h.written == ["<style>x</style>", b"<p>plain</p>"]


def test_passage_view_follows_a_table_click_and_shows_text_source_history_and_term(dash):
    m = dash.model
    m.set_round(1)
    p = m.frames["passages"]
    unit = int(p.query("round == 1 and via_term.notna()")["unit_id"].iloc[0])
    term = p.query("round == 1 and unit_id == @unit")["via_terms"].iloc[0].split(", ")[0]  # as the text writes it
    dash.pool.widget.selected = unit  # what a click on the row sets in the browser
    assert m.selected_unit == unit and dash.passage.picker.value == unit
    body = dash.passage.body.value
    source = p.loc[p["unit_id"] == unit, "source"].iloc[0]
    assert html.escape(source) in body and f"through “{html.escape(term)}”" in body
    assert f'<mark class="t">{html.escape(term)}</mark>'.lower() in body.lower()
    assert body.count("<tr>") - 1 == len(p[p["unit_id"] == unit])  # one history row per round


def test_tables_carry_source_and_unit_ids(dash):
    rows = dash.pool.widget.rows
    assert all(r["source"] and isinstance(r["unit_id"], int) for r in rows)
    assert [c[0] for c in dash.ranking.widget.columns].count("source") == 1
    # two units of the same file are told apart by their lines
    login = [r["source"] for r in dash.ranking.widget.rows if r["title"] == "Login flow"]
    assert len(login) == len(set(login))


@pytest.mark.slow
def test_export_writes_trace_and_frames_without_replacing_files(dash, tmp_path):
    import json

    from widgets.export import export_frames, export_trace, parquet_available

    first = export_trace(dash.model, tmp_path)[0]
    second = export_trace(dash.model, tmp_path)[0]
    assert first != second and second.name.endswith("-2.trace.json")
    assert json.loads(first.read_text())["judge"] == "lexical"
    csvs = export_frames(dash.model, tmp_path, "csv")
    assert {p.name.split(".")[-2] for p in csvs} == set(dash.model.frames)
    if not parquet_available():
        with pytest.raises(RuntimeError, match="pyarrow"):
            export_frames(dash.model, tmp_path, "parquet")
        assert dash.export.parquet_button.disabled
        return
    import pandas as pd

    assert not dash.export.parquet_button.disabled
    for path in export_frames(dash.model, tmp_path, "parquet"):
        name = path.name.split(".")[-2]
        back, frame = pd.read_parquet(path), dash.model.frames[name]
        assert list(back.columns) == list(frame.columns) and len(back) == len(frame), name


def test_status_line_shows_judge_cost(dash):
    dash.model.set_params(L=4)
    assert "judgments" in dash.status.text.value and "from the in-process cache" in dash.status.text.value
    assert dash.status.stop.disabled and dash.status.stop.button_style == ""


def test_a_failing_view_is_reported_and_the_others_still_redraw(dash, monkeypatch):
    monkeypatch.delenv("SAG2WB_RAISE_VIEW_ERRORS")
    m = dash.model

    def broken(model, what):
        raise ValueError("boom")

    m._listeners.insert(0, broken)
    m.set_round(1)
    assert dash.seeds.widget.fig_layout["meta"]["round"] == 1  # later views still redrew
    assert "a view failed to redraw" in m.status.error and "boom" in dash.status.text.value


def test_params_message_does_not_outlive_a_judge_or_question_change(dash):
    dash.params.ints["L"].value = 6
    assert "applied; recomputed from round 1" in dash.params.message.value
    dash.judge.picker.value = "bm25"
    assert "applied" not in dash.params.message.value


@pytest.mark.slow
def test_background_reruns_and_round_moves_end_on_the_newest_state(docs_index, questions):
    """Re-runs on a worker thread while the kernel thread moves the round: after both, every
    chart shows the model's final run and round."""
    dash = Dashboard(docs_index, questions, judge="lexical", background=True)
    m = dash.model
    threads = []
    for L in (5, 7, 9):
        threads.append(m.recompute_in_background())
        m.params = m.params.replace(L=L)
        m.set_round(1)
        m.set_round(2)
    for t in threads:
        t.join(timeout=60)
    final = m.recompute_in_background()
    m.set_round(1)
    final.join(timeout=60)
    for chart in (dash.seeds.widget, dash.terms.widget, dash.slope.widget):
        assert chart.fig_layout["meta"]["run"] == m.generation and chart.fig_layout["meta"]["round"] == m.round
    assert dash.trajectory.widget.fig_layout["meta"]["run"] == m.generation
    assert f"L={m.params.L}" in dash.trajectory.widget.title


def test_judge_explanations_are_shown_when_the_trace_has_them(dash):
    """Issue 14's contract: a nullable `explanation` column in the passages frame (absent or
    all empty for judges that do not explain themselves)."""
    frames = dict(dash.model.frames)
    assert "explanation" not in data.pool_table(frames, 0, True).columns  # lexical: no column
    p = frames["passages"].copy()
    p["explanation"] = None
    unit = int(p.loc[p["round"] == 0, "unit_id"].iloc[0])
    p.loc[(p["round"] == 0) & (p["unit_id"] == unit), "explanation"] = "scored 0.64: named by 'Login flow' (0.91)"
    frames["passages"] = p
    pool = data.pool_table(frames, 0, True)
    assert "scored 0.64: named by 'Login flow' (0.91)" in set(pool["explanation"])
    assert "explanation" in data.passage_detail(frames, unit)["history"].columns
    p["explanation"] = None
    frames["passages"] = p
    assert "explanation" not in data.pool_table(frames, 0, True).columns  # all empty: no column


# ---- what the views show: surface forms, every retrieving term, chunks, legend (issue 24) ------


@pytest.mark.parametrize(
    "term, text, shown",
    [
        ("é lodie marchetti", "The film starred Élodie Marchetti, who", "Élodie Marchetti"),
        ("jos é arriaga", "(José Arriaga)", "José Arriaga"),
        ("otto geb ü hr", "with Otto Gebühr.", "Otto Gebühr"),
        ("ț", "the Brațov station", "Brațov"),  # a fragment: the word it was cut from
        ("é", "Élodie Marchetti", "Élodie"),
        ("保存", "登录后系统保存role_id到会话。", "保存"),  # jieba's word inside a sentence without spaces
        ("role_id", "系统保存role_id到会话", "role_id"),
        ("会话", "系统保存role_id到会话。", "会话"),
        ("3.5%", "rose 3.5%.", "3.5%"),
        ("glass harbour", "no such words", "glass harbour"),  # not in the text: the token form
    ],
)
def test_surface_form_finds_the_span_the_text_writes(term, text, shown):
    from workbench.text import surface_form, tokenize

    before = tokenize(text)
    assert surface_form(term, text) == shown
    assert tokenize(text) == before  # display only: tokenisation is what it was
    if shown != term:
        assert set(term.split(" ")) <= set(tokenize(shown))


def test_term_label_adds_the_token_form_only_when_the_surface_holds_more():
    assert data.term_label("é lodie marchetti", "Élodie Marchetti") == "Élodie Marchetti"
    assert data.term_label("ț", "Brațov") == "Brațov (ț)"
    assert data.term_label("role_id", None) == "role_id"


def test_surface_forms_in_the_frames_sankey_and_terms_chart_on_the_encyclopedia(enc_index):
    from workbench.text import phrase

    qs = {q.id: q for q in load_questions(ENC / "questions.jsonl")}
    dash = Dashboard(enc_index, [qs["enc-33"]], judge="semantic")
    m = dash.model
    t = m.frames["terms"]
    shown = dict(zip(t["term"], t["display"]))
    assert shown["é lodie marchetti"] == "Élodie Marchetti"
    assert shown["jos é arriaga"] == "José Arriaga"
    # every surface form holds its term's tokens; a name's surface gives exactly its term
    for term, _kind, display in zip(t["term"], t["kind"], t["display"]):
        assert set(term.split(" ")) <= set(phrase(display).split(" ")), (term, display)
    names = t[t["kind"] == "name"]
    exact = [phrase(d) == term for term, d in zip(names["term"], names["display"])]
    assert sum(exact) >= len(exact) - 1, list(zip(names["term"], names["display"]))  # 'é s arriaga' ← 'Inés Arriaga'
    m.set_round(1)
    bars = dash.terms.widget.data[-1]
    assert "Élodie Marchetti" in bars["y"] and "é lodie marchetti" not in bars["y"]
    hover = dict(zip(bars["y"], bars["hovertext"]))
    assert "token form “é lodie marchetti”" in hover["Élodie Marchetti"]
    sankey = dash.trajectory.widget.data[0]
    assert any("Élodie Marchetti" in label for label in sankey["node"]["label"])
    assert not any("é lodie" in label for label in sankey["node"]["label"])
    assert any("token form: é lodie marchetti" in h for h in sankey["node"]["customdata"])
    # the frames carry both forms: the engine's token form stays in "term"
    c = m.frames["credits"]
    assert set(c.loc[c["term"] == "é lodie marchetti", "display"]) <= {"Élodie Marchetti"}


def test_every_term_that_retrieved_a_passage_is_credited(docs_index, questions):
    """docs-02: zh/roles.md came through '保存' first, and 'role_id' retrieves it too."""
    dash = Dashboard(docs_index, questions, judge="lexical")
    m = dash.model
    m.set_question("docs-02")
    f = m.frames
    zh = f["passages"].query("round == 1 and source.str.startswith('zh/roles.md')")
    unit = int(zh["unit_id"].iloc[0])
    assert zh["via_term"].iloc[0] == "保存"
    c = f["credits"].query("round == 1 and unit_id == @unit")
    assert list(c["term"])[:1] == ["保存"] and "role_id" in set(c["term"])
    # each credit is true of the index: the term's searched phrase matches the passage, and the
    # engine's own first term keeps the rank the trace records
    trace = m.trace
    for r in trace.rounds[1:]:
        resolved = {x.term: x.resolved for x in r.terms if x.selected}
        for cand in r.candidates:
            rows = f["credits"].query("round == @r.round and unit_id == @cand.unit_id")
            for term in rows["term"]:
                assert cand.unit_id in docs_index.matches(resolved[term])
            first = rows[rows["first"]]
            assert list(first["term"]) == [cand.via_term] and list(first["term_rank"]) == [cand.term_rank]
    assert zh["unit_id"].iloc[0] == unit
    assert f["passages"].query("round == 1 and unit_id == @unit")["via_terms"].iloc[0].startswith("保存, role_id")
    # the Sankey links the role_id term to the passage, and the passage panel names both
    d = data.trajectory_links(f)
    role = d["labels"].index("“role_id” (r1)")
    target = [d["labels"][b] for a, b in zip(d["source"], d["target"]) if a == role]
    assert any("角色与权限键" in x for x in target), target
    m.select_unit(unit)
    body = dash.passage.body.value
    assert "through “保存”" in body and "also “role_id”" in body


def test_chunks_of_one_file_are_marked_and_the_sankey_has_a_legend(dash):
    m = dash.model  # docs-01: both chunks of auth/login.md take part
    labels = set(m.frames["passages"]["label"])
    assert {"Login flow (lines 1-23)", "Login flow (lines 25-25)"} <= labels
    assert "Login flow" not in labels
    d = data.trajectory_links(m.frames)
    same = [lab for lab, col in zip(d["label"], d["link_colors"]) if col == data.SAME_FILE_LINK]
    assert same and all("another chunk of the seed's own file" in x for x in same)
    legend = _annotation(dash.trajectory.widget)
    for words in ("gold passage", "in the final top 10", "other passage", "term (round)", "another chunk"):
        assert words in legend


def test_legend_leaves_out_gold_without_gold(docs_index):
    dash = Dashboard(docs_index, ["How do users sign in?"], judge="lexical")
    assert "gold passage" not in _annotation(dash.trajectory.widget)
    assert "in the final top 10" in _annotation(dash.trajectory.widget)


def test_controls_name_the_parameters_in_words(dash):
    words = {n: b.description for n, b in dash.params.ints.items()}
    assert words == {"B": "B · candidates", "s": "s · seeds", "L": "L · terms", "H": "H · rounds", "p": "p · protected"}
    dash.model.set_round(1)
    assert "1+c (question link)" in [a["text"] for a in dash.terms.widget.fig_layout["annotations"]]
    assert "c: query connection" in dash.terms.widget.title


def test_a_folder_bm25_already_covers_says_expansion_has_nothing_to_do(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, topic in enumerate(["kettle descaling", "kettle filters", "kettle warranty"]):
        (folder / f"n{i}.md").write_text(f"# Kettle {i}\n\nThe kettle note on {topic}.\n", encoding="utf-8")
    index, _ = open_or_build(load_corpus(folder), tmp_path / "notes.sqlite")
    dash = Dashboard(index, ["How do I look after the kettle?"], judge="lexical")
    assert "expansion has little or nothing left to find here" in dash.stepper.summary.value
    assert "3 of the corpus’s 3 passages" in dash.stepper.summary.value


def test_no_note_when_expansion_has_work(dash):
    assert "sag2wb-expansion-note" not in dash.stepper.summary.value
