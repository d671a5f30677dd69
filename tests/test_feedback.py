"""RM3 and GAR-BM25 (paper B.3): each RM3 rule on a tiny real FTS5 index, worked by hand; the
GAR loop on a hand-built graph; the corpus graph after an incremental update equal to the
graph of a rebuild; the rm3 / gar policies through the real run layer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.feedback import (
    GARParams,
    GraphParams,
    RM3Params,
    adaptive_loop,
    build_graph,
    corpus_graph,
    gar_batches,
    gar_trace,
    graph_path,
    graph_status,
    rm3_expansion,
    rm3_trace,
)
from workbench.feedback.rm3 import passage_counts, relevance_model, term_allowed
from workbench.index import Index, load_questions, update_folder
from workbench.index.store import query_expression, quote
from workbench.index.units import Question
from workbench.judges import OracleJudge
from workbench.judges.registry import JudgeSpec
from workbench.params import Params, ParamsError
from workbench.runs import Config, Experiment, ExperimentError
from workbench.runs.options import RunOptions
from workbench.trace import Trace

from .conftest import SAMPLES

# 20 passages: "alpha" is in p01 (strongly) and p02 only; 10% of 20 units is 2.
PASSAGES = [
    ("p01", "alpha alpha gamma gamma gamma delta delta x role_id 北京大学 averyveryverylongtokenabcd 3d common rare"),
    ("p02", "alpha delta delta delta delta omega"),
    ("p03", "kappa lambda mu"),
    ("p04", "kappa nu xi"),
    ("p05", "common omicron"),
    ("p06", "common pi"),
    ("p07", "rare rho"),
] + [(f"p{i:02d}", f"filler{i} sigma{i}") for i in range(8, 21)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rm3")
    corpus = folder / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "text": b} for t, b in PASSAGES]))
    return Index.build(corpus, folder / "tiny.sqlite")


def unit_of(index, title):
    return next(index.unit(u) for u, d in index.documents.items() if d == title)


# ---- RM3, rule by rule ---------------------------------------------------------------------------
def test_token_filter_keeps_2_to_20_ascii_letters_or_digits(tiny):
    rm3 = RM3Params()
    assert [term_allowed(t, rm3) for t in ("ab", "a", "3d", "x" * 20, "x" * 21, "role_id", "müller", "北京")] == [
        True,
        False,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    counts = passage_counts(tiny, unit_of(tiny, "p01"), rm3)
    # x (1 char), role_id (underscore), 北京 大学 北京大学 (not ASCII), the 26-character token: out;
    # role and id (the connected token's parts) are ordinary tokens and stay
    assert counts == {"gamma": 3, "alpha": 2, "delta": 2, "3d": 1, "id": 1, "p01": 1, "rare": 1, "role": 1}
    unicode = passage_counts(tiny, unit_of(tiny, "p01"), RM3Params(ascii_only=False, terms_per_passage=20))
    assert "北京大学" in unicode and "role_id" not in unicode


def test_terms_in_more_than_10_percent_of_units_are_removed(tiny):
    assert tiny.N == 20 and len(tiny.matches("common")) == 3 and len(tiny.matches("rare")) == 2
    counts = passage_counts(tiny, unit_of(tiny, "p01"), RM3Params())
    assert "common" not in counts  # 3 of 20 units: 15% > 10%
    assert counts["rare"] == 1  # 2 of 20: exactly 10%, not more: kept
    assert "common" in passage_counts(tiny, unit_of(tiny, "p01"), RM3Params(max_df=0.15, terms_per_passage=20))


def test_each_passage_keeps_its_top_terms_and_the_model_its_top_terms(tiny):
    # tf: gamma 3, alpha 2, delta 2, then ties at 1 broken by the term's code points
    assert passage_counts(tiny, unit_of(tiny, "p01"), RM3Params(terms_per_passage=4)) == {
        "gamma": 3,
        "alpha": 2,
        "delta": 2,
        "3d": 1,
    }
    model, raw = relevance_model([{"a": 0.5, "b": 0.3, "c": 0.2}, {"c": 1.0}], [1.0, 0.5], 2)
    assert raw == {"a": 0.5, "b": 0.3, "c": 0.7}
    assert model == [("c", 0.7 / 1.2), ("a", 0.5 / 1.2)]  # b pruned; the two kept renormalised


def test_weighting_interpolates_and_sums_weighted_bm25_contributions(tiny):
    rm3 = RM3Params(feedback_passages=2, terms_per_passage=3, terms=3)
    exp = rm3_expansion(tiny, "alpha", Params(), rm3)
    bm25 = dict(tiny.search(query_expression(["alpha"]), 100))
    assert sorted(tiny.unit(u).document for u in bm25) == ["p01", "p02"]  # the only two feedback passages
    s1, s2 = -bm25[unit_of(tiny, "p01").id], -bm25[unit_of(tiny, "p02").id]
    # passage vectors, top 3 by tf: p01 gamma 3, alpha 2, delta 2 (of 7); p02 delta 4, alpha 1, omega 1 (of 6)
    raw = {
        "gamma": s1 * 3 / 7,
        "alpha": s1 * 2 / 7 + s2 * 1 / 6,
        "delta": s1 * 2 / 7 + s2 * 4 / 6,
        "omega": s2 * 1 / 6,
    }
    kept = sorted(raw, key=lambda t: (-raw[t], t))[:3]
    total = sum(raw[t] for t in kept)
    expected = {t: 0.5 * raw[t] / total for t in kept}
    expected["alpha"] = expected.get("alpha", 0.0) + 0.5 * 1.0  # λ · Q(alpha), Q = {alpha: 1}
    assert dict(exp.query) == pytest.approx(expected, rel=1e-12)
    assert sum(dict(exp.query).values()) == pytest.approx(1.0)
    assert [t.term for t in exp.selected] == kept and not any(t.selected for t in exp.model if t.term not in kept)
    # every unit matching a term, scored by sum of w(t) * (-bm25 of t alone), ties to the lower id
    by_hand: dict[int, float] = {}
    for t, w in expected.items():
        for u, b in tiny.search(quote(t), 100):
            by_hand[u] = by_hand.get(u, 0.0) - w * b
    order = sorted(by_hand, key=lambda u: (-by_hand[u], u))
    assert list(exp.ranking) == order
    assert {c.unit_id: -c.bm25 for c in exp.candidates} == pytest.approx(by_hand, rel=1e-12)


def test_original_weight_one_is_the_bm25_ranking(tiny):
    exp = rm3_expansion(tiny, "alpha delta kappa", Params(), RM3Params(original_weight=1.0))
    assert list(exp.ranking) == [u for u, _ in tiny.search(query_expression(["alpha", "delta", "kappa"]), 100)]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"feedback_passages": 0}, "feedback_passages (feedback passages) must be an integer >= 1, got 0"),
        ({"terms": 2.5}, "terms (terms in the relevance model) must be an integer >= 1, got 2.5"),
        ({"terms_per_passage": True}, "terms_per_passage"),
        ({"original_weight": -0.1}, "original_weight (the original query's weight λ) must be a number in [0, 1]"),
        ({"original_weight": float("nan")}, "original_weight"),
        ({"min_chars": 5, "max_chars": 4}, "max_chars (longest feedback term) must be an integer >= min_chars (5)"),
        ({"max_df": 0}, "max_df (largest unit fraction of a term) must be in (0, 1], got 0"),
        ({"ascii_only": "yes"}, "ascii_only (ASCII-only feedback terms) must be true or false, got 'yes'"),
    ],
)
def test_rm3_params_refuse_bad_values_by_name(bad, message):
    with pytest.raises(ParamsError) as exc:
        RM3Params(**bad)
    assert message in str(exc.value)


@pytest.mark.parametrize("name", ["neighbours", "batch_size", "budget", "graph_query_tokens"])
def test_gar_params_refuse_bad_values_by_name(name):
    with pytest.raises(ParamsError, match=f"^{name} "):
        GARParams(**{name: 0})


# ---- GAR: the adaptive loop on a hand-built graph ------------------------------------------------
def test_gar_interleaves_initial_and_frontier_batches():
    graph = {
        1: [11, 10],
        2: [11, 12],
        3: [13],
        4: [],
        5: [],
        6: [],
        10: [14],
        11: [],
        12: [],
        13: [],
        14: [],
    }
    score = {1: 9.0, 2: 8.0, 3: 7.0, 4: 6.0, 5: 5.0, 6: 4.0, 10: 3.0, 11: 2.5, 12: 2.0, 13: 1.0, 14: 0.5}
    batches, scores = adaptive_loop([1, 2, 3, 4, 5, 6], graph.__getitem__, lambda us: {u: score[u] for u in us}, 2, 9)
    # 1: initial (1, 2); the frontier, in joining order: 11 (max(9 via 1, 8 via 2) = 9 via 1), 10 (9 via 1),
    #    12 (8 via 2)
    # 2: frontier, highest priority first, ties in joining order: (11, 10); 14 joins (priority 3 via 10)
    # 3: initial (3, 4); 13 joins (7 via 3)
    # 4: frontier: 12 (8) then 13 (7)
    # 5: initial, one left in the budget of 9: (5,)
    assert [(b.source, b.units, b.priorities, b.via) for b in batches] == [
        ("initial", (1, 2), (9.0, 8.0), (None, None)),
        ("frontier", (11, 10), (9.0, 9.0), (1, 1)),
        ("initial", (3, 4), (7.0, 6.0), (None, None)),
        ("frontier", (12, 13), (8.0, 7.0), (2, 3)),
        ("initial", (5,), (5.0,), (None,)),
    ]
    assert len(scores) == 9 and scores[10] == 3.0


def test_gar_takes_from_the_other_pool_when_one_is_empty():
    graph = {1: [2, 3], 2: [], 3: [4], 4: []}
    batches, _ = adaptive_loop([1], graph.__getitem__, lambda us: dict.fromkeys(us, 1.0), 1, 10)
    assert [(b.source, b.units) for b in batches] == [
        ("initial", (1,)),
        ("frontier", (2,)),
        ("frontier", (3,)),  # the initial ranking is spent: the frontier again
        ("frontier", (4,)),
    ]  # then both pools are empty: the loop ends under its budget


# ---- the corpus graph ----------------------------------------------------------------------------
def test_graph_neighbours_are_the_passage_text_bm25_list(tiny):
    graph = build_graph(tiny, GraphParams(neighbours=3), progress=False)
    u = unit_of(tiny, "p01")
    from workbench.feedback.graph import passage_expression

    hits = [v for v, _ in tiny.search(passage_expression(u, 80), 4) if v != u.id][:3]
    assert graph.neighbours_of(u.id) == hits
    assert [tiny.unit(v).document for v in graph.neighbours_of(unit_of(tiny, "p03").id)][:1] == ["p04"]


@pytest.mark.slow
def test_graph_after_an_incremental_update_equals_the_graph_of_a_rebuild(tmp_path, capsys):
    docs = Path(shutil.copytree(SAMPLES / "internal_docs", tmp_path / "docs"))
    db = tmp_path / "docs.sqlite"
    params = GraphParams(neighbours=4)
    before = corpus_graph(Index.build(docs, db), params, progress=False)
    assert graph_path(Index(db), params).exists() and graph_status(Index(db), params) == "current"
    (docs / "auth" / "sso.md").write_text("# Single sign-on\n\nSSO is switched off; the session keeps role_id.\n")
    (docs / "ops" / "oncall.md").write_text("# On call\n\nOne engineer carries the pager each week.\n")
    (docs / "CHANGELOG.md").unlink()
    changes = update_folder(db, docs)
    updated = Index(db)
    assert graph_status(updated, params) == "stale"  # BM25 statistics moved for every passage
    assert changes.stale == [graph_path(updated, params).name] and "now stale" in changes.summary()  # said so
    after = corpus_graph(updated, params, progress=False)
    assert "stale" in capsys.readouterr().err
    assert graph_status(updated, params) == "current"
    rebuilt = Index.build(docs, tmp_path / "rebuilt.sqlite")
    assert after.as_documents(updated) == build_graph(rebuilt, params, progress=False).as_documents(rebuilt)
    assert after.as_documents(updated) != before.as_documents(Index.build(SAMPLES / "internal_docs", tmp_path / "o"))


def test_a_graph_built_twice_is_the_same(tiny):
    a, b = build_graph(tiny, progress=False), build_graph(tiny, progress=False)
    assert (a.ids == b.ids).all() and (a.neighbours == b.neighbours).all() and (a.scores == b.scores).all()


def test_a_file_in_the_graphs_place_that_is_not_a_graph_is_refused(tmp_path):
    index = Index.build(SAMPLES / "internal_docs", tmp_path / "d.sqlite")
    path = graph_path(index)
    path.write_text("my notes")
    with pytest.raises(Exception, match="not a readable corpus graph"):
        corpus_graph(index, progress=False)
    assert path.read_text() == "my notes"


# ---- traces and policies -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    index = Index.build(SAMPLES / "internal_docs", tmp_path_factory.mktemp("fb") / "docs.sqlite")
    return index, load_questions(SAMPLES / "internal_docs.questions.jsonl")


def test_rm3_trace_shows_feedback_passages_terms_and_weights(docs):
    index, questions = docs
    q = questions[0]
    trace = rm3_trace(index, q, Params(), None)
    exp = rm3_expansion(index, q.question)
    r1 = trace.rounds[1]
    assert [s.unit_id for s in r1.seeds] == [u for u, _ in exp.feedback]
    assert [(t.term, t.priority) for t in r1.terms if t.selected] == [(t.term, t.weight) for t in exp.selected]
    assert [t.order for t in r1.terms if t.selected] == list(range(1, len(exp.selected) + 1))
    assert trace.final_ranking == exp.ranking and trace.judgments == 0 and not r1.scored
    assert Trace.from_json(trace.to_json()) == trace
    frames = trace.frames()
    assert set(frames["terms"]["round"]) == {1} and len(frames["seeds"]) == len(exp.feedback)


def test_judged_rm3_and_gar_judge_at_most_100_once_without_context(docs):
    index, questions = docs
    for q in questions:
        for make in (rm3_trace, gar_trace):
            trace = make(index, q, Params(), OracleJudge(q.gold))
            assert trace.judgments <= 100 and sum(r.scored for r in trace.rounds) == 1
            assert all(not r.context for r in trace.rounds)
            assert set(trace.final_ranking) == {e.unit_id for e in trace.rounds[1].pool}


def test_gar_trace_batches_read_back(docs):
    index, questions = docs
    trace = gar_trace(index, questions[1], Params(), None, gar=GARParams(batch_size=4, budget=12))
    batches = gar_batches(trace)
    assert sum(len(b["units"]) for b in batches) == len(trace.rounds[1].candidates) <= 12
    assert batches[0]["source"] == "initial" and all(u["via"] is None for u in batches[0]["units"])
    frontier = [u for b in batches if b["source"] == "frontier" for u in b["units"]]
    assert frontier and all(u["via"] in trace.units for u in frontier)
    assert Trace.from_json(trace.to_json()) == trace


def test_empty_question_stops_like_sag2(docs):
    index, _ = docs
    assert rm3_trace(index, "the of", Params(), None).stop == "empty question: no tokens after text processing"
    assert gar_trace(index, "zzqx", Params(), None).stop == "no candidates: the question matches no unit"


def test_policies_run_through_the_experiment(docs):
    index, questions = docs
    configs = [
        Config("bm25", judge="bm25"),
        Config("rm3", judge="bm25", policy="rm3"),
        Config("gar", judge="bm25", policy="gar"),
        Config("rm3+oracle", judge="oracle", policy="rm3"),
        Config("gar+oracle", judge="oracle", policy="gar", feedback=GARParams(batch_size=8)),
    ]
    results = Experiment(index, questions, configs, RunOptions(progress=False, keep_traces=True)).run()
    table = results.summary()
    assert list(table["judgments"][:3]) == [0, 0, 0]
    assert all(0 < n <= 100 * len(questions) for n in table["judgments"][3:])
    assert {r["stop"] for r in results.records if r["config"] in ("rm3", "gar")} == {"lexical feedback: no judge"}


def test_config_refuses_feedback_settings_that_do_not_fit():
    with pytest.raises(ExperimentError, match="policy 'rm3' takes RM3Params, got GARParams"):
        Config("x", policy="rm3", feedback=GARParams())
    with pytest.raises(ExperimentError, match="feedback settings are for the rm3 and gar policies"):
        Config("x", feedback=RM3Params())
    assert Config("x", policy="gar", judge="bm25").feedback == GARParams()


@pytest.mark.slow
def test_existing_policies_are_unchanged(docs):
    """The sag2 and final-only rows give the trajectories they gave before feedback existed:
    the same trace as a Run / final_only_trace made directly."""
    from workbench.engine import Run
    from workbench.judges import LexicalJudge
    from workbench.runs.policies import final_only_trace

    index, questions = docs
    configs = [Config("sag2", judge="lexical"), Config("fo", judge="lexical", policy="final-only")]
    exp = Experiment(index, questions, configs, RunOptions(progress=False, keep_traces=True))
    exp.run()
    for q in questions:
        judge = LexicalJudge(index)
        direct = Run(index, q, Params(), judge).run()
        assert exp.traces["sag2"][q.id].to_json(stats=False) == direct.to_json(stats=False)
        fo = final_only_trace(index, q, Params(), LexicalJudge(index))
        assert exp.traces["fo"][q.id].to_json(stats=False) == fo.to_json(stats=False)


def test_question_object_and_text_give_the_same_rm3(docs):
    index, questions = docs
    q = questions[2]
    a = rm3_trace(index, q, Params(), None)
    b = rm3_trace(index, Question(q.id, q.question, q.gold), Params(), None)
    assert a.to_json(stats=False) == b.to_json(stats=False)


# ---- PyTerrier ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_pyterrier_transformers_give_the_traces_rankings(docs):
    pt = pytest.importorskip("pyterrier")
    from workbench.measures import qrels_frame, topics_frame
    from workbench.pyterrier import GARRetriever, RM3Retriever

    index, questions = docs
    topics, qrels = topics_frame(questions), qrels_frame(questions)
    rm3, gar = RM3Retriever(index), GARRetriever(index, "oracle", qrels=qrels)
    for q in questions[:3]:
        got = rm3.transform(topics[topics["qid"] == q.id])
        assert list(got["docno"]) == rm3_trace(index, q, Params(), None).documents()[:100]
        judged = gar.transform(topics[topics["qid"] == q.id])
        assert list(judged["docno"]) == gar_trace(index, q, Params(), OracleJudge(q.gold)).documents()[:100]
        assert judged["judge_score"].notna().all()
    table = pt.Experiment([rm3, gar], topics, qrels, eval_metrics=["recall_10"])
    assert list(table["name"]) == ["RM3Retriever('bm25')", "GARRetriever('oracle')"]


def test_rm3_and_gar_judge_with_jev_through_its_cache(docs, tmp_path, monkeypatch):
    """Final-only judging with JEV: requests to a real HTTP server on 127.0.0.1, answers kept in
    the judgment cache; a replay from the cache alone (no server) gives the same records."""
    from workbench.judges import LexicalJudge
    from workbench.judges.jev.server import JudgeServer

    for name in ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY", "JEV_ENDPOINT", "JEV_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SAG2WB_JEV_CACHE", raising=False)
    index, questions = docs

    def configs(**options):  # JEV's options in its spec
        jev = JudgeSpec.parse("jev", **options)
        return [Config("rm3+jev", judge=jev, policy="rm3"), Config("gar+jev", judge=jev, policy="gar")]

    srv = JudgeServer(LexicalJudge(index)).start()
    try:
        opts = {"endpoint": srv.url, "cache_dir": str(tmp_path / "cache")}
        first = Experiment(index, questions[:3], configs(**opts), RunOptions(progress=False)).run()
    finally:
        srv.stop()
    assert all(0 < r["judgments"] <= 100 for r in first.records)
    replay = Experiment(index, questions[:3], configs(**opts, cache_only=True), RunOptions(progress=False)).run()
    assert replay.records == first.records


# ---- the dashboard -----------------------------------------------------------------------------
@pytest.mark.slow
def test_dashboard_shows_what_rm3_and_gar_did(docs, monkeypatch):
    from widgets import Dashboard
    from widgets.feedback_view import set_method, trace_method

    monkeypatch.setenv("SAG2WB_RAISE_VIEW_ERRORS", "1")  # any view that cannot draw a feedback trace fails here
    index, questions = docs
    dash = Dashboard(index, questions, judge="lexical")
    sag2 = dash.model.trace
    assert "SAG2 trajectory" in dash.feedback.widget.value
    dash.method.picker.value = "rm3"
    assert trace_method(dash.model.trace) == "rm3" and dash.model.trace.judgments <= 100
    assert "relevance model" in dash.feedback.widget.value
    top = next(t.term for t in dash.model.trace.rounds[1].terms if t.selected)
    assert f"<td>{top}</td>" in dash.feedback.widget.value
    dash.model.set_judge("bm25")  # no judge: RM3's lexical ranking
    assert dash.model.trace.judgments == 0 and "no judge" in dash.feedback.widget.value
    set_method(dash.model, "gar")
    assert trace_method(dash.model.trace) == "gar" and "batch 1</b> · initial" in dash.feedback.widget.value
    dash.model.set_params(B=50)  # a re-run keeps the method
    assert trace_method(dash.model.trace) == "gar" and dash.model.trace.params.B == 50
    dash.model.set_params(B=100)
    dash.model.set_judge("lexical")
    set_method(dash.model, "sag2")
    assert dash.model.trace.to_json(stats=False) == sag2.to_json(stats=False)
    with pytest.raises(ValueError, match="unknown method 'bm42'"):
        set_method(dash.model, "bm42")


def test_a_rebuild_that_renumbers_the_passages_makes_the_graph_stale(tmp_path):
    """An updated index with a gap in its ids and a full rebuild of the same documents share
    the fingerprint; the graph of the first is stale for the second (its ids differ)."""
    docs = Path(shutil.copytree(SAMPLES / "internal_docs", tmp_path / "docs"))
    db = tmp_path / "docs.sqlite"
    Index.build(docs, db)
    (docs / "CHANGELOG.md").unlink()
    update_folder(db, docs)
    updated = Index(db)
    corpus_graph(updated, progress=False)
    assert graph_status(updated) == "current"
    Index.build(docs, db)  # the same documents, numbered anew without the gap
    rebuilt = Index(db)
    assert rebuilt.meta["fingerprint"] == updated.meta["fingerprint"]
    assert sorted(rebuilt.documents) != sorted(updated.documents)
    assert graph_status(rebuilt) == "stale"
