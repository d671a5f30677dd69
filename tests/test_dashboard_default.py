"""The default example the dashboard and notebook 03 open on is the one the teaching criterion
picks over the bundled trajectories, and it satisfies the criterion when re-checked from the
raw trace (BM25's top 10 misses a gold passage, SAG2's top 10 has it, and the term that
brought it is a name or an identifier). Plus how `dashboard_for` and `sag2wb dashboard`
choose and refuse (the page itself: tests/browser/test_dashboard_cli_browser.py)."""

from __future__ import annotations

import argparse

import pytest

from workbench.cli import dashboard as dashboard_cli
from workbench.cli.errors import CLIError
from workbench.cli.main import main
from workbench.engine import Run
from workbench.index import CorpusError, load_corpus, load_questions, open_or_build
from workbench.judges import JudgeError, make_judge
from workbench.params import Params
from workbench.runs.examples import (
    Example,
    bridge_kind,
    bundled_paths,
    default_example,
    examine,
    teaching_examples,
)

from .conftest import REPO

# each bundled corpus under its own default judge (workbench.judges.default_judge)
BUNDLED = {"encyclopedia": "semantic", "internal_docs": "lexical"}


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundled")
    out = {}
    for name in BUNDLED:
        corpus, questions = bundled_paths(name)
        source = corpus / "corpus.json" if (corpus / "corpus.json").is_file() else corpus
        index, _ = open_or_build(load_corpus(source), folder / f"{name}.sqlite", source=str(source))
        out[name] = (index, load_questions(questions))
    return out


@pytest.mark.slow
def test_the_shipped_default_is_what_the_criterion_picks(bundled):
    best = []
    for name, judge in BUNDLED.items():
        index, questions = bundled[name]
        found = teaching_examples(index, questions, judge)
        assert found, f"no teaching example in {name}"
        best += [(e.key(), name, e) for e in found]
    _, corpus, top = min(best, key=lambda x: x[0])
    ex = default_example()
    assert (corpus, top.question_id, top.judge) == (ex.corpus, ex.question_id, ex.judge)


def test_the_default_satisfies_the_criterion_from_the_raw_trace(bundled):
    ex = default_example()
    index, questions = bundled[ex.corpus]
    question = next(q for q in questions if q.id == ex.question_id)
    bm25 = Run(index, question, Params(), None).run().documents()[:10]
    trace = Run(index, question, Params(), make_judge(ex.judge, index)).run()
    sag2 = trace.documents()[:10]
    gained = [g for g in question.gold if g in sag2 and g not in bm25]
    assert gained, "SAG2's top 10 gained no gold passage over BM25's"
    assert not [g for g in question.gold if g in bm25 and g not in sag2], "SAG2 lost gold BM25 had"
    bridges = []
    for r in trace.rounds[1:]:
        selected = {t.term: t for t in r.terms if t.selected}
        for c in r.candidates:
            if c.via_term and trace.units[c.unit_id].document in gained:
                t = selected[c.via_term]  # the term that brought it was selected from a seed
                bridges.append((trace.units[c.unit_id].document, t.kind, t.surface))
    kinds = {bridge_kind(kind, surface) for _, kind, surface in bridges}
    assert {d for d, _, _ in bridges} == set(gained)  # every gained passage came through a term
    assert kinds & {"name", "identifier"}
    # and what notebook 03 and the dashboard's first screen say about it
    assert sorted(surface for _, _, surface in bridges) == ["Piet Oduya", "Élodie Marchetti"]
    assert (len(set(question.gold) & set(bm25)), len(set(question.gold) & set(sag2))) == (2, 4)


def test_internal_docs_have_one_identifier_bridge(bundled):
    index, questions = bundled["internal_docs"]
    (e,) = teaching_examples(index, questions, "lexical")
    assert e.question_id == "docs-09"
    assert [(b.kind, b.surface, b.document) for b in e.teaching_bridges] == [
        ("identifier", "st.standard", "auth/sessions.md")
    ]
    # the flagship question gains nothing: notebook 03 says so
    flagship = examine(index, next(q for q in questions if q.id == "docs-01"), make_judge("lexical", index))
    assert not flagship.teaches and flagship.bm25_found == flagship.sag2_found == 2


@pytest.mark.parametrize(
    "kind,surface,expected",
    [
        ("name", "Hallam Rusk", "name"),
        ("token", "role_id", "identifier"),
        ("token", "st.standard", "identifier"),
        ("token", "svc.billing-v2", "identifier"),
        ("token", "permissionKeys", "identifier"),
        ("token", "v2", "identifier"),
        ("token", "city", "word"),
        ("token", "1988", "word"),
        ("token", "2.5", "word"),
        ("token", "well-known", "word"),
        ("token", "保存", "word"),
    ],
)
def test_bridge_kind(kind, surface, expected):
    assert bridge_kind(kind, surface) == expected


def test_ranking_prefers_more_teaching_bridges_then_gain():
    from workbench.runs.examples import Bridge

    def ex(qid, found, kinds):
        bridges = tuple(Bridge("d", "d", 1, "t", "t", k, "s", 1, 1) for k in kinds)
        return Example(qid, "?", "j", 4, 1, found, (), bridges)

    a, b, c = ex("a", 2, ["word"]), ex("b", 3, ["identifier"]), ex("c", 3, ["name", "name"])
    assert not a.teaches and b.teaches and c.teaches
    assert sorted([a, b, c], key=Example.key)[0] is c


# ---- dashboard_for --------------------------------------------------------------------------
def test_dashboard_for_without_a_corpus_opens_the_default(tmp_path):
    from widgets import dashboard_for

    dash = dashboard_for(db=tmp_path / "enc.sqlite")
    ex = default_example()
    assert dash.trace.question_id == ex.question_id and dash.model.judge_spec == ex.judge


def test_dashboard_for_refuses_unknown_questions_and_gold_by_name(tmp_path):
    from widgets import dashboard_for
    from widgets.model import UnknownQuestion

    docs, _ = bundled_paths("internal_docs")
    with pytest.raises(UnknownQuestion, match=r"unknown question 'docs-99'; the questions are docs-01, docs-02"):
        dashboard_for(docs, question="docs-99", db=tmp_path / "a.sqlite")
    assert not (tmp_path / "a.sqlite").exists()  # refused before indexing
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"_id": "x1", "question": "Who?", "supporting_titles": ["no/such.md"]}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"question 'x1'.*unknown gold title\(s\) \['no/such.md'\]"):
        dashboard_for(docs, questions=bad, db=tmp_path / "b.sqlite")


# ---- sag2wb dashboard (checks only; serving: the browser test) ---------------------------------
def _choices(argv):
    parser = argparse.ArgumentParser()
    dashboard_cli.add_parser(parser.add_subparsers())
    return dashboard_cli.dashboard_choices(parser.parse_args(["dashboard", *argv]))


def test_cli_resolves_relative_paths_and_defaults(monkeypatch):
    monkeypatch.chdir(REPO / "sample_corpora")
    got = _choices(["internal_docs", "--question", "docs-09"])
    assert got["SAG2WB_DASHBOARD_CORPUS"] == str(REPO / "sample_corpora" / "internal_docs")
    assert got["SAG2WB_DASHBOARD_QUESTIONS"] == str(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
    assert got["SAG2WB_DASHBOARD_QUESTION"] == "docs-09" and got["SAG2WB_DASHBOARD_JUDGE"] == "auto"
    ex = default_example()
    assert _choices([])["SAG2WB_DASHBOARD_QUESTION"] == ex.question_id
    assert _choices(["--judge", "lexical"])["SAG2WB_DASHBOARD_JUDGE"] == "lexical"
    assert dashboard_cli.dashboard_notebook() == REPO / "notebooks" / "dashboard.ipynb"


def test_cli_refuses_bad_input_before_serving(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CLIError, match="no_such: no such file or folder"):
        _choices(["no_such"])
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    with pytest.raises(CLIError, match="pass --questions FILE"):
        _choices(["docs"])
    with pytest.raises(JudgeError, match="unknown judge 'nope'"):
        _choices(["--judge", "nope"])
    assert main(["dashboard", "--question", "enc-99"]) == 2
    err = capsys.readouterr().err
    assert "sag2wb dashboard: error: --question 'enc-99': no such question" in err and "enc-01" in err
