"""The corpus graph scored all at once (workbench/feedback/graph_scoring.py) equals the graph by
its definition, one `Index.search` per passage (`build_graph_by_queries`): the same neighbours
in the same order and the same scores, bit for bit, on the bundled corpora (multi-word phrases
such as `role_id` -> "role id", Chinese, ties between identical passages), in one process or
two, with other settings, after `sag2wb index --add/--remove`, and (-m slow) on 2Wiki; by the
compiled kernel (workbench/feedback/graph_kernel.py) and by the numpy path without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ENC, SAMPLES, build_index, shared_data
from workbench.feedback import GraphParams, build_graph, corpus_graph, graph_kernel, graph_scoring
from workbench.feedback.graph import build_graph_by_queries
from workbench.index import Index
from workbench.index.postings import Postings


def numpy_asked() -> bool:
    return os.environ.get("SAG2WB_GRAPH_KERNEL", "").strip().lower() == "numpy"


def assert_same(index: Index, params: GraphParams, **options) -> None:
    new = build_graph(index, params, progress=False, **options)
    old = build_graph_by_queries(index, params, progress=False)
    assert new.ids.tolist() == old.ids.tolist()
    differ = np.flatnonzero((new.neighbours != old.neighbours).any(axis=1))
    assert not len(differ), (
        f"passages {old.ids[differ[:5]].tolist()}: {new.neighbours[differ[:2]]} vs {old.neighbours[differ[:2]]}"
    )
    # bit for bit: the floats' bytes, not a tolerance
    assert new.scores.view(np.int64).tolist() == old.scores.view(np.int64).tolist()


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graph-scale")
    return {
        "encyclopedia": Index.build(ENC / "corpus.json", folder / "enc.sqlite"),
        "internal_docs": Index.build(SAMPLES / "internal_docs", folder / "docs.sqlite"),
    }


@pytest.mark.parametrize(
    "params",
    [
        GraphParams(),
        GraphParams(neighbours=3, query_tokens=5, field_weights=(1.0, 0.5, 3.0)),
        GraphParams(neighbours=30),
    ],
    ids=["paper", "short-questions", "more-neighbours-than-matches"],
)
@pytest.mark.parametrize("corpus", ["encyclopedia", "internal_docs"])
def test_the_graph_equals_one_search_per_passage(corpora, corpus, params):
    if not numpy_asked():  # SAG2WB_GRAPH_KERNEL=numpy runs the same tests on the numpy path
        assert graph_kernel.load() is not None, "the compiled kernel did not load (no C compiler?)"
    assert_same(corpora[corpus], params, workers=1)


@pytest.mark.parametrize("corpus", ["encyclopedia", "internal_docs"])
def test_the_numpy_path_gives_the_same_graph(corpora, corpus, monkeypatch):
    """SAG2WB_GRAPH_KERNEL=numpy: the scoring without the compiled kernel (as on a machine
    without a C compiler) gives the same lists and scores."""
    monkeypatch.setenv("SAG2WB_GRAPH_KERNEL", "numpy")
    assert graph_kernel.load() is None
    assert_same(corpora[corpus], GraphParams(), workers=1)


def test_without_a_c_compiler_the_numpy_path_builds_the_graph(corpora, tmp_path, monkeypatch):
    """No compiler (CC names none, PATH has no cc) and an empty kernel cache: `load()` says
    None, nothing is left in the cache, and the graph is the definition's all the same."""
    monkeypatch.setattr(graph_kernel.load, "loaded", [])  # built again, not the kept library
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-cc"))
    monkeypatch.setenv("PATH", "")
    assert graph_kernel.load() is None
    assert not [p for p in (tmp_path / "cache").rglob("*") if not p.is_dir()]  # no library, no temp file
    assert_same(corpora["internal_docs"], GraphParams(), workers=1)


@pytest.mark.parametrize("fractions", [(0.02,), (0.08,), (0.05, 0.15, 0.3)])
def test_prefix_levels_of_any_budget_give_the_same_graph(corpora, fractions, monkeypatch):
    """The levels only change the cost: small budgets send most questions through the prefix
    lists and the bounds (the pruning path), and the lists stay the definition's."""
    monkeypatch.setattr(graph_scoring, "KERNEL_FRACTIONS", fractions)
    monkeypatch.setattr(graph_scoring, "BUDGET_FRACTIONS", fractions)
    for corpus in ("encyclopedia", "internal_docs"):
        assert_same(corpora[corpus], GraphParams(), workers=1)


def test_two_worker_processes_give_the_same_graph(corpora):
    assert_same(corpora["encyclopedia"], GraphParams(), workers=2)


def test_ties_and_passages_without_neighbours_as_the_search_gives_them(tmp_path):
    same = "Harbour lights over the quay of Vellor, where the glass boats land."
    passages = [(f"Copy {i}", same) for i in range(12)]  # twelve equal scores: ties by lower id
    passages += [("Lonely", "Zyxwv qqqq."), ("Empty", ""), ("Role", "The role_id and 3.5% of c# users.")]
    passages += [("Near", same + " Vellor again."), ("Other", "Role keys and ids of users.")]
    assert_same(build_index(tmp_path, passages), GraphParams(), workers=1)


def test_a_phrase_the_postings_cannot_split_is_scored_by_fts5_as_the_search_does(tmp_path, monkeypatch):
    """A question with a phrase the table cannot score goes through `Index.search` (FTS5 then
    computes bm25() for the whole expression, in both graphs)."""
    index = Index.build(SAMPLES / "internal_docs", tmp_path / "docs.sqlite")
    phrase = Postings.phrase
    monkeypatch.setattr(Postings, "phrase", lambda self, p: None if p == "session" else phrase(self, p))
    assert_same(index, GraphParams(), workers=1)


@pytest.mark.slow  # three `sag2wb index` processes (~20 s); tests/test_feedback.py checks the rule in-process
def test_after_sag2wb_index_add_and_remove_the_graph_equals_a_rebuilds(tmp_path):
    corpus = json.loads((ENC / "corpus.json").read_text(encoding="utf-8"))
    keep, later = corpus[:-10], corpus[-10:]
    (tmp_path / "first.json").write_text(json.dumps(keep), encoding="utf-8")
    (tmp_path / "more.json").write_text(json.dumps(later), encoding="utf-8")
    gone = [keep[3]["title"], keep[40]["title"]]
    db = tmp_path / "enc.sqlite"
    sag2wb = [sys.executable, "-m", "workbench.cli", "index"]
    subprocess.run([*sag2wb, str(tmp_path / "first.json"), "--db", str(db)], check=True, capture_output=True)
    corpus_graph(Index(db), progress=False)  # stored, then made stale by the updates
    for update in (["--add", str(tmp_path / "more.json")], ["--remove", *gone]):
        done = subprocess.run([*sag2wb, str(tmp_path / "first.json"), "--db", str(db), *update], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
    updated = Index(db)
    after = corpus_graph(updated, progress=False)
    assert_same(updated, GraphParams(), workers=2)  # ids with a gap where passages were removed
    final = [u for u in keep if u["title"] not in gone] + later
    (tmp_path / "final.json").write_text(json.dumps(final), encoding="utf-8")
    rebuilt = Index.build(tmp_path / "final.json", tmp_path / "rebuilt.sqlite")
    assert after.as_documents(updated) == build_graph(rebuilt, progress=False).as_documents(rebuilt)


@pytest.mark.slow
def test_the_graph_equals_one_search_per_passage_on_2wiki(tmp_path):
    corpus = shared_data("2wiki", "corpus.json")
    shutil.copy(corpus, tmp_path / "corpus.json")
    index = Index.build(tmp_path / "corpus.json", tmp_path / "2wiki.sqlite")
    assert_same(index, GraphParams(), workers=2)
