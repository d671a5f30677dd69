"""Widget model and views without a browser: the sample corpora, offline judges."""
from __future__ import annotations

import html
import math
from pathlib import Path

import pytest

from workbench.corpora import Question, load_corpus, load_questions
from workbench.index import open_or_build
from workbench.judges import LexicalJudge
from workbench.params import Params

from widgets import Dashboard, DashboardModel, dashboard_for
from widgets import data

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "sample_corpora" / "internal_docs"
DOCS_QUESTIONS = ROOT / "sample_corpora" / "internal_docs.questions.jsonl"
ENC = ROOT / "sample_corpora" / "encyclopedia"


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


def test_param_change_redraws_every_view_and_reuses_judgments(dash):
    m = dash.model
    m.set_round(1)
    before = {
        "terms": tuple(dash.terms.widget.data[-1].y), "pool": dash.pool.widget.value,
        "slope": tuple(dash.slope.widget.data[0].y or ()), "sankey": tuple(dash.trajectory.widget.data[0].node.label),
    }
    dash.params.ints["L"].value = 3  # the control, as a user would
    assert m.params.L == 3
    assert m.last_recompute["from_round"] == 1
    assert m.last_recompute["memo_hits"] > 0  # round 0 judgments came from the shared memo
    assert m.frames["terms"].query("round == 1 and selected").shape[0] == 3
    terms = m.frames["terms"].query("round == 1").sort_values("priority", ascending=False)
    assert list(dash.terms.widget.data[-1].y)[:3] == [
        t if not isinstance(r, str) or r == t else f"{t} → {r}" for t, r in zip(terms["term"][:3], terms["resolved"][:3])]
    assert dash.pool.widget.value != before["pool"]
    assert tuple(dash.trajectory.widget.data[0].node.label) != before["sankey"]
    assert "applied; recomputed from round 1" in dash.params.message.value
    assert "reference" in dash.diff.body.value  # the previous run is the diff reference


def test_round_slider_moves_the_round_views(dash):
    dash.stepper.slider.value = 0
    pool0, seeds0 = dash.pool.widget.value, tuple(dash.seeds.widget.data[0].y or ())
    dash.stepper.slider.value = 1
    assert dash.model.round == 1
    assert dash.pool.widget.value != pool0
    assert tuple(dash.seeds.widget.data[0].y) != seeds0 and len(dash.seeds.widget.data[0].y) == 10
    assert "Round <b>1</b>" in dash.stepper.summary.value
    dash.stepper.next.click()
    assert dash.model.round == 2 and dash.stepper.slider.value == 2
    dash.stepper.next.click()  # past the last round: stays
    assert dash.model.round == 2


@pytest.mark.parametrize("field,value,message", [
    ("H", 3, "H (expansion rounds) must be 0, 1 or 2, got 3"),
    ("B", 0, "B (candidates per round) must be >= 1, got 0"),
    ("field_weights", "2, x, 1", "field_weights: '2, x, 1' is not three numbers"),
    ("field_weights", "0, 0, 0", "field_weights: at least one weight must be positive"),
])
def test_invalid_entry_is_rejected_in_the_control_with_the_params_message(dash, field, value, message):
    trace = dash.model.trace
    box = dash.params.field_weights if field == "field_weights" else dash.params.ints[field]
    box.value = value
    assert html.escape(message) in dash.params.message.value
    assert "sag2wb-invalid" in dash.params.message.value
    assert dash.model.params == Params() and dash.model.trace is trace  # nothing applied


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
    assert not dash.slope.widget.data[2].visible  # the gold line
    assert all("★" not in label for label in dash.trajectory.widget.data[0].node.label)
    dash.judge.function.value = "oracle"
    dash.judge.load.click()
    assert "needs gold labels" in dash.judge.message.value or "unknown judge" in dash.judge.message.value


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
    assert "📌" in dash.pool.widget.value
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


def test_mimebundle_and_dashboard_for(tmp_path):
    d = dashboard_for(DOCS, db=tmp_path / "docs.sqlite")
    assert "application/vnd.jupyter.widget-view+json" in d._repr_mimebundle_()
    assert d.model.question.id == "docs-01"
    e = dashboard_for(ENC, db=tmp_path / "enc.sqlite", questions=[Question("x", "Who directed Glass Harbour?")])
    assert e.model.questions[0].id == "x" and not e.model.show_gold
    model = DashboardModel(e.model.index, ["Who directed Glass Harbour?"], judge="bm25")
    assert model.trace.judge == "bm25"
