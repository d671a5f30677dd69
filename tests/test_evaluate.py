"""SPEC §3 Evaluation: unique-passage recall, complete evidence, bootstrap, resume."""

import json

import pytest

from workbench.index.units import Question
from workbench.metrics import all_evidence_at, mean_metrics, paired_bootstrap, question_metrics, recall_at
from workbench.params import Params
from workbench.runs.evaluation import evaluate
from workbench.runs.options import Hooks, RunOptions

from .conftest import BRIDGE_WORLD, build_index


def test_recall_and_all_evidence_by_hand():
    docs = ["a", "x", "b", "y", "z", "c"]
    assert recall_at(docs, ["a", "b", "c"], 5) == 2 / 3
    assert all_evidence_at(docs, ["a", "b"], 5) == 1.0 and all_evidence_at(docs, ["a", "c"], 5) == 0.0
    assert question_metrics(docs, ["a", "c"]) == {"R@5": 50.0, "R@10": 100.0, "AE@10": 100.0}
    assert mean_metrics([{"R@5": 50.0, "R@10": 100.0, "AE@10": 100.0}, {"R@5": 0.0, "R@10": 50.0, "AE@10": 0.0}]) == {
        "R@5": 25.0,
        "R@10": 75.0,
        "AE@10": 50.0,
    }


def test_units_map_to_unique_documents_first_occurrence(tmp_path):
    from workbench.engine import Run
    from workbench.index.store import Index
    from workbench.index.units import Unit

    units = [
        Unit("A", "", "alpha one", "a.md", "a.md", "l1"),
        Unit("A", "", "alpha two", "a.md", "a.md", "l2"),
        Unit("B", "", "alpha three", "b.md", "b.md", "l1"),
    ]
    ix = Index.build(units, tmp_path / "ix.sqlite")
    trace = Run(ix, "alpha", Params(H=0), None).run()
    assert trace.documents() == ["a.md", "b.md"]  # two units of a.md count once


def test_paired_bootstrap_is_seeded_and_paired():
    a = [1.0, 0.0, 1.0, 1.0]
    b = [0.0, 0.0, 1.0, 0.0]
    mean, lo, hi = paired_bootstrap(a, b)
    assert mean == 0.5 and 0.0 <= lo <= 0.5 <= hi <= 1.0
    assert paired_bootstrap(a, b) == (mean, lo, hi)  # seed 20261015: reproducible
    assert paired_bootstrap(a, a) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="same questions"):
        paired_bootstrap(a, b[:3])


class CountingOracle:
    """The oracle judge, logging every call it answers (question text per call)."""

    def __init__(self, gold, log):
        from workbench.judges import OracleJudge

        self._oracle, self.log = OracleJudge(gold), log
        self.name, self.key = self._oracle.name, self._oracle.key

    def judge(self, question, candidates, context):
        self.log.append(question)
        return self._oracle.judge(question, candidates, context)


def counting_oracle(log):
    return lambda q: CountingOracle(q.gold, log)


def test_evaluate_resumes_from_partial_records(tmp_path):
    ix = build_index(tmp_path, BRIDGE_WORLD)
    qs = [
        Question("q1", "Where was the director of Glass Harbour born?", ("Glass Harbour", "Tessaly"), "bridge", 2),
        Question("q2", "Which band is from Ostrow?", ("Glass Harbor (band)", "Ostrow"), "bridge", 2),
    ]
    q1_text, q2_text = qs[0].question, qs[1].question
    resume = tmp_path / "partial.jsonl"
    fresh_log = []
    full = evaluate(
        ix,
        qs,
        "oracle",
        Params(),
        RunOptions(progress=False, resume_path=resume, hooks=Hooks(judge_for=counting_oracle(fresh_log))),
    )
    assert len(resume.read_text().splitlines()) == 2
    assert set(fresh_log) == {q1_text, q2_text} and full.stats["resumed_questions"] == 0
    # an interrupted run: only q1 recorded, plus a line cut in half
    lines = resume.read_text().splitlines()
    resume.write_text(lines[0] + "\n" + lines[1][:20])
    log = []
    again = evaluate(
        ix,
        qs,
        "oracle",
        Params(),
        RunOptions(progress=False, resume_path=resume, hooks=Hooks(judge_for=counting_oracle(log))),
    )
    # q1 came from its record: its judge was never asked; only q2 was run, with as many calls as fresh
    assert q1_text not in log and log == [x for x in fresh_log if x == q2_text]
    assert again.stats["resumed_questions"] == 1
    assert again.records == full.records and again.metrics == full.metrics  # equal to the fresh run, record by record
    # q2's record was appended: now both are resumed, and no judge is asked at all
    log.clear()
    third = evaluate(
        ix,
        qs,
        "oracle",
        Params(),
        RunOptions(progress=False, resume_path=resume, hooks=Hooks(judge_for=counting_oracle(log))),
    )
    assert log == [] and third.stats["resumed_questions"] == 2 and third.records == full.records
    # another configuration does not reuse those records: every question is run again, and its
    # records are those of a fresh run of that configuration (H=0 ranks q1 differently)
    log.clear()
    other = evaluate(
        ix,
        qs,
        "oracle",
        Params(H=0),
        RunOptions(progress=False, resume_path=resume, hooks=Hooks(judge_for=counting_oracle(log))),
    )
    fresh_other = evaluate(ix, qs, "oracle", Params(H=0), RunOptions(progress=False))
    assert set(log) == {q1_text, q2_text} and other.stats["resumed_questions"] == 0
    assert other.records == fresh_other.records and other.records != full.records


def test_by_type_and_hops_tables(tmp_path):
    ix = build_index(tmp_path, BRIDGE_WORLD)
    qs = [
        Question("q1", "Where was the director of Glass Harbour born?", ("Glass Harbour", "Tessaly"), "bridge", 2),
        Question("q2", "Which band is from Ostrow?", ("Glass Harbor (band)",), "single", 1),
    ]
    res = evaluate(ix, qs, "lexical", Params(), RunOptions(progress=False))
    assert set(res.by("type").index) == {"bridge", "single"}
    assert set(res.by("hops").index) == {1, 2}
    data = res.to_dict()
    assert set(data["metrics"]) == {"R@5", "R@10", "AE@10", "questions", "judgments"}
    json.dumps(data, allow_nan=False)
