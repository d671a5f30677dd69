"""SAG2 and BM25 as PyTerrier transformers; pt.Experiment figures equal `sag2wb eval`'s."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

pt = pytest.importorskip("pyterrier", reason="PyTerrier is in the [pyterrier] and [dev] extras")
from pyterrier.measures import R, nDCG  # noqa: E402

from tests.conftest import BRIDGE_WORLD, ENC, REPO, build_index, title_judge  # noqa: E402
from workbench.cli.main import main  # noqa: E402
from workbench.engine import Run  # noqa: E402
from workbench.index.corpora import load_questions  # noqa: E402
from workbench.index.store import Index, open_or_build  # noqa: E402
from workbench.measures import qrels_frame, topics_frame  # noqa: E402
from workbench.params import Params  # noqa: E402
from workbench.pyterrier import RESULT_COLUMNS, BM25Retriever, SAG2Retriever  # noqa: E402
from workbench.runs.evaluation import evaluate  # noqa: E402
from workbench.runs.options import RunOptions  # noqa: E402


def test_columns_say_which_round_and_term_brought_each_passage(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    judge = title_judge({"Glass Harbour": 0.9, "Mara Quell": 0.8, "Tessaly": 0.7})
    topics = pd.DataFrame({"qid": ["q1"], "query": ["Where did the director of the film Glass Harbour grow up?"]})
    out = SAG2Retriever(index, judge).transform(topics)
    assert list(out.columns) == ["qid", "query", *RESULT_COLUMNS]
    assert list(out.docno) == [
        "Glass Harbour",
        "Mara Quell",
        "Tessaly",
        "Painters",
        "Glass Harbor (band)",
        "Ostrow",
        "Harbour Lights",
    ]
    assert list(out["rank"]) == list(range(7)) and list(out.score) == [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert list(out.judge_score[:4]) == [0.9, 0.8, 0.7, 0.1]
    # Tessaly came in round 1 through the term "tessaly" of the seed Mara Quell; the film in round 0
    rows = out.set_index("docno")
    assert (rows.loc["Tessaly", "entered_round"], rows.loc["Tessaly", "via_term"]) == (1, "tessaly")
    assert (rows.loc["Painters", "entered_round"], rows.loc["Painters", "via_term"]) == (1, "rivers")
    assert rows.loc["Glass Harbour", "entered_round"] == 0 and pd.isna(rows.loc["Glass Harbour", "via_term"])
    # BM25: the round-0 list in lexical order, no judge score
    bm25 = BM25Retriever(index).transform(topics)
    assert list(bm25.docno) == ["Harbour Lights", "Glass Harbour", "Glass Harbor (band)", "Mara Quell"]
    assert bm25.judge_score.isna().all() and (bm25.entered_round == 0).all()


def test_outputs_are_declared_so_inspection_runs_nothing(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    sag2 = SAG2Retriever(index, title_judge({}))
    declared = pt.inspect.transformer_outputs(sag2, ["qid", "query", "extra"])
    actual = sag2.transform(pd.DataFrame({"qid": ["q"], "query": ["Glass Harbour"], "extra": [1]}))
    assert declared == list(actual.columns) == ["qid", "query", "extra", *RESULT_COLUMNS]
    with pytest.raises(pt.validate.InputValidationError):
        pt.inspect.transformer_outputs(sag2, ["qid"])  # no query column


def test_docnos_are_documents_with_the_r_at_k_dedup(tmp_path):
    """A folder corpus has several units per file: one row per file, first occurrence kept."""
    index, _ = open_or_build(REPO / "sample_corpora" / "internal_docs", tmp_path / "docs.sqlite")
    questions = load_questions(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
    out = SAG2Retriever(index, "lexical").transform(topics_frame(questions[:3]))
    for q in questions[:3]:
        trace = Run(index, q, Params(), SAG2Retriever(index, "lexical")._judge_for(q)).run()
        assert len(trace.final_ranking) > len(trace.documents())  # there was something to dedup
        assert list(out[out.qid == q.id].docno) == trace.documents()[:100]


@pytest.mark.slow
def test_pt_experiment_equals_sag2wb_eval(tmp_path):
    """The three systems of the notebook: the pt.Experiment table is `sag2wb eval`'s figures."""
    db, qpath = tmp_path / "enc.sqlite", ENC / "questions.jsonl"
    assert main(["index", str(ENC / "corpus.json"), "--db", str(db)]) == 0
    cli = {}
    for name, extra in (
        ("bm25", ["--judge", "bm25"]),
        ("sag2", ["--judge", "lexical"]),
        ("sag2_h1", ["--judge", "lexical", "--rounds", "1"]),
    ):
        out = tmp_path / f"{name}.json"
        assert (
            main(
                [
                    "eval",
                    "--db",
                    str(db),
                    "--questions",
                    str(qpath),
                    "--out",
                    str(out),
                    "--quiet",
                    "--measure",
                    "nDCG@10",
                    *extra,
                ]
            )
            == 0
        )
        cli[name] = json.loads(out.read_text())
    index, questions = Index(db), load_questions(qpath)
    systems = [BM25Retriever(index), SAG2Retriever(index, "lexical"), SAG2Retriever(index, "lexical", Params(H=1))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pt's validation would warn about undeclared outputs
        table = pt.Experiment(
            systems,
            topics_frame(questions),
            qrels_frame(questions),
            eval_metrics=[R @ 5, R @ 10, nDCG @ 10],
            baseline=0,
            names=list(cli),
        )
    assert not pt.java.started()
    for _, row in table.iterrows():
        data = cli[row["name"]]
        for m in ("R@5", "R@10"):
            # the same mean, before the result file rounds it to 2 decimals
            mean = sum(r[m] for r in data["questions"]) / len(data["questions"])
            assert row[m] * 100 == pytest.approx(mean, abs=1e-9) and round(mean, 2) == data["metrics"][m]
        assert round(row["nDCG@10"], 4) == data["stats"]["measures"]["nDCG@10"]
    assert table["name"].tolist() == ["bm25", "sag2", "sag2_h1"]
    assert table["R@5 p-value"].notna().tolist() == [False, True, True]  # paired t-test against BM25
    # per question too
    per_query = pt.Experiment(
        systems[1:2], topics_frame(questions), qrels_frame(questions), eval_metrics=[R @ 10], perquery=True
    )
    ours = {r["_id"]: r["R@10"] for r in cli["sag2"]["questions"]}
    assert {row.qid: round(row.value * 100, 6) for row in per_query.itertuples()} == {
        k: round(v, 6) for k, v in ours.items()
    }


@pytest.mark.slow
def test_oracle_takes_its_gold_from_qrels(tmp_path):
    index, _ = open_or_build(ENC / "corpus.json", tmp_path / "enc.sqlite")
    questions = load_questions(ENC / "questions.jsonl")[:8]
    qrels = qrels_frame(questions)
    table = pt.Experiment(
        [SAG2Retriever(index, "oracle", qrels=qrels)], topics_frame(questions), qrels, eval_metrics=[R @ 10]
    )
    records = evaluate(index, questions, "oracle", options=RunOptions(progress=False)).records
    assert table["R@10"][0] * 100 == pytest.approx(sum(r["R@10"] for r in records) / len(records), abs=1e-9)
