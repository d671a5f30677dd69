"""Experiments and `sag2wb ablate` (issue 6) on the encyclopedia sample corpus with offline judges:
the paper's rows from one set of trajectories, shared judgments, resume, refusals, errors."""

import json
import math

import pytest

from workbench.cli.main import main as cli_main
from workbench.engine import Run
from workbench.index.corpora import load_questions
from workbench.judges.lexical import OracleJudge
from workbench.judgment import JudgmentMemo
from workbench.params import Params
from workbench.runs import results as ex
from workbench.runs.experiment import Experiment, paper_ablation
from workbench.runs.options import RunOptions
from workbench.runs.policies import Config, final_only_trace
from workbench.runs.records import ExperimentError
from workbench.runs.results import ABLATION_ROWS, paired_interval
from workbench.terms import TERM_WEIGHTINGS, TermWeight, TermWeightingError, register_term_weighting

from .conftest import ENC


@pytest.fixture(scope="module")
def questions():
    return load_questions(ENC / "questions.jsonl")


@pytest.fixture(scope="module")
def ablation(enc_index, questions):
    memo = JudgmentMemo()
    exp = Experiment(
        enc_index, questions, paper_ablation(judge="oracle"), RunOptions(memo=memo, progress=False, keep_traces=True)
    )
    return exp, exp.run()


@pytest.mark.slow
def test_rows_are_the_papers_in_order(ablation):
    _exp, res = ablation
    assert res.names == list(ABLATION_ROWS)
    df = res.frame()
    assert list(df.columns) == ["config", "question", "type", "hops", "R@5", "R@10", "AE@10", "judgments"]
    assert len(df) == 7 * 40
    summary = res.summary()
    assert list(summary.index) == list(ABLATION_ROWS)
    assert summary.loc["bm25", "judgments"] == 0


def test_h2_row_equals_a_plain_run(ablation, enc_index, questions):
    _, res = ablation
    h2 = res.rankings("H=2")
    judgments = res.values("H=2", "judgments")
    for q in questions:
        trace = Run(enc_index, q, Params(), OracleJudge(q.gold)).run()
        assert h2[q.id] == trace.documents()[:100], q.id
        assert judgments[q.id] == trace.judgments


def test_h0_h1_come_from_the_same_trajectories(ablation, enc_index, questions):
    exp, res = ablation
    h1, h0 = res.values("H=1", "judgments"), res.values("H=0", "judgments")
    for q in questions:
        full = exp.traces["H=2"][q.id]
        rounds = full.rounds
        assert h0[q.id] == rounds[0].judgments
        assert h1[q.id] == sum(r.judgments for r in rounds[:2])
        # H=0 read off the trajectory equals an independent H=0 run
        assert res.rankings("H=0")[q.id] == Run(enc_index, q, Params(H=0), OracleJudge(q.gold)).run().documents()[:100]
        # and the H=1 row's rounds are the H=2 run's rounds 0-1, judgment for judgment
        t1 = exp.traces["H=1"][q.id]
        assert [r.scores for r in t1.rounds] == [r.scores for r in rounds[: len(t1.rounds)]]
    assert res.summary().loc["H=1", "judgments"] <= res.summary().loc["H=2", "judgments"]


def test_matched_budget_final_only_and_no_context(ablation, questions):
    exp, res = ablation
    full = res.frame(extras=True).set_index(["config", "question"])
    for q in questions:
        h2 = full.loc[("H=2", q.id), "judgments"]
        mb = full.loc[("matched-budget", q.id)]
        assert mb["budget"] == h2 and mb["judgments"] + mb["shortfall"] == h2
        assert full.loc[("final-only", q.id), "judgments"] <= 100
        nc = exp.traces["no-context"][q.id]
        assert all(not r.context for r in nc.rounds)
        fo = exp.traces["final-only"][q.id]
        assert sum(r.scored for r in fo.rounds) == 1 and all(not r.context for r in fo.rounds)
        assert all(s.score == 1.0 and s.weight == 1.0 for r in fo.rounds for s in r.seeds)  # uniform seed weights
    # this small corpus has fewer BM25 matches than the budgets: the report says so
    report = ex.ablation_report(res, "oracle")
    note = report["matched_budget"]
    assert note["questions_with_too_few_matches"] == len(note["ids"]) > 0
    assert note["missing_judgments"] == int(full.xs("matched-budget")["shortfall"].sum())
    assert "ceiling" in report["note"]


def test_rows_share_judgments(ablation):
    exp, _ = ablation
    assert exp.memo.hits > 0  # round 0 of no-context / matched-budget reuse H=2's judgments


def test_final_only_definition_on_one_question(enc_index, questions):
    q = questions[0]
    trace = final_only_trace(enc_index, q, Params(), OracleJudge(q.gold))
    r0 = trace.rounds[0]
    assert not r0.scored and r0.ranking == tuple(c.unit_id for c in r0.candidates)
    seeds1 = [s.unit_id for s in trace.rounds[1].seeds]
    assert seeds1 == [c.unit_id for c in r0.candidates[:10]]  # BM25 order chooses the seeds
    last = [r for r in trace.rounds if r.scored][-1]
    assert 0 < last.judgments == len(last.pool) <= 100
    with pytest.raises(ExperimentError, match="needs a judge"):
        final_only_trace(enc_index, q, Params(), None)


def test_compare_and_tables(ablation):
    _, res = ablation
    c = res.compare("H=0", "H=2")
    assert c["questions"] == 40 and c["low"] <= c["difference"] <= c["high"]
    mean_diff = (
        res.frame().query("config == 'H=0'")["R@10"].mean() - res.frame().query("config == 'H=2'")["R@10"].mean()
    )
    assert c["difference"] == pytest.approx(mean_diff, abs=1e-3)
    table = res.table("H=2")
    assert table.loc["H=2", "ci_R@10_vs_H=2"] == (0.0, 0.0)
    by_type = res.by("type")
    assert set(by_type.columns) == set(ABLATION_ROWS) | {"questions"} and by_type["questions"].sum() == 40
    assert res.by("hops")["questions"].sum() == 40
    md = res.to_markdown("H=2")
    assert md.startswith("| Method | R@5 | R@10 | AE@10 | Judgments |") and "| matched-budget |" in md
    fig = res.plot("R@10")
    assert len(fig.data[0].x) == 7 and fig.data[0].error_y.array is not None
    fig = res.plot("R@10", reference="H=2")
    assert "H=2" not in list(fig.data[0].x)


def test_refuses_mismatched_question_sets(enc_index, questions):
    cfg = [Config("lex", judge="lexical", params=Params(H=0))]
    a = Experiment(enc_index, questions[:5], cfg, RunOptions(progress=False)).run()
    b = Experiment(
        enc_index, questions[2:8], [Config("lex2", judge="lexical", params=Params(H=0))], RunOptions(progress=False)
    ).run()
    both = a.combine(b)
    with pytest.raises(ExperimentError) as err:
        both.compare("lex", "lex2")
    msg = str(err.value)
    assert "question sets differ" in msg and "2 only in 'lex'" in msg and "enc-01" in msg and "enc-06" in msg
    with pytest.raises(ExperimentError, match="differ"):
        paired_interval({"q1": 1.0}, {"q2": 1.0})
    with pytest.raises(ExperimentError, match="appear in both"):
        a.combine(a)
    with pytest.raises(ExperimentError, match="no configuration 'nope'"):
        a.compare("lex", "nope")


def test_resume_after_interruption(enc_index, questions, tmp_path, monkeypatch):
    qs = questions[:6]
    configs = [Config("sag2", Params(H=1), "lexical"), Config("h0", Params(H=0), "lexical", "truncated", source="sag2")]
    path = tmp_path / "runs.jsonl"
    reference = Experiment(enc_index, qs, configs, RunOptions(progress=False)).run()

    from workbench.runs.tasks import RunContext  # computes each (configuration, question) of the loop

    calls = {"n": 0}
    real = RunContext.outcome

    def interrupted(self, config, question):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(self, config, question)

    monkeypatch.setattr(RunContext, "outcome", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Experiment(enc_index, qs, configs, RunOptions(resume_path=path, progress=False)).run()
    monkeypatch.setattr(RunContext, "outcome", real)
    assert len(path.read_text().splitlines()) == 3
    with path.open("a") as f:
        f.write('{"config_key": "cut by the interrupt')  # a half-written line is ignored
    resumed = Experiment(enc_index, qs, configs, RunOptions(resume_path=path, progress=False)).run()
    assert resumed.stats["records_reused"] == 3 and resumed.stats["records_computed"] == 9
    assert resumed.frame().equals(reference.frame())
    # a changed configuration does not reuse the old lines
    other = [Config("sag2", Params(H=1, L=5), "lexical")]
    assert (
        Experiment(enc_index, qs, other, RunOptions(resume_path=path, progress=False)).run().stats["records_reused"]
        == 0
    )


def test_variant_comparison_and_errors(enc_index, questions):
    def idf_squared(seed, stats):
        return {t: TermWeight(stats.idf(t) ** 2) for t in seed.candidate_terms}

    register_term_weighting("idf_squared_test", idf_squared)
    try:
        res = Experiment(
            enc_index,
            questions[:8],
            [
                Config("sag2", Params(H=1), "lexical"),
                Config("idf²", Params(H=1, term_weighting="idf_squared_test"), "lexical"),
            ],
            RunOptions(progress=False),
        ).run()
        c = res.compare("idf²", "sag2")
        assert c["questions"] == 8 and not math.isnan(c["difference"])

        register_term_weighting("nan_test", lambda seed, stats: {t: float("nan") for t in seed.candidate_terms})
        with pytest.raises(TermWeightingError) as err:
            Experiment(
                enc_index,
                questions[:2],
                [Config("bad", Params(term_weighting="nan_test"), "lexical")],
                RunOptions(progress=False),
            ).run()
        assert "'nan_test'" in str(err.value) and "configuration 'bad'" in str(err.value)
    finally:
        TERM_WEIGHTINGS.pop("idf_squared_test", None)
        TERM_WEIGHTINGS.pop("nan_test", None)
    with pytest.raises(TermWeightingError, match=r"registered: .*bm25_feedback"):
        Config("x", Params(term_weighting="no_such_variant"))


def test_configuration_errors(enc_index, questions):
    with pytest.raises(ExperimentError, match="unknown policy"):
        Config("x", policy="magic")
    with pytest.raises(ExperimentError, match="needs source"):
        Config("x", policy="truncated")
    with pytest.raises(ExperimentError, match="needs a judge"):
        Config("x", judge="bm25", policy="final-only")
    with pytest.raises(ExperimentError, match="unique; repeated"):
        Experiment(enc_index, questions, [Config("a"), Config("a")])
    with pytest.raises(ExperimentError, match="source 'b' is not among"):
        Experiment(enc_index, questions, [Config("a", policy="truncated", source="b")])
    with pytest.raises(ExperimentError, match="source's parameters"):
        Experiment(
            enc_index, questions, [Config("s", Params(L=5)), Config("t", Params(H=1), policy="truncated", source="s")]
        )
    with pytest.raises(ExperimentError, match="judge 'oracle' differs"):
        Experiment(enc_index, questions, [Config("s"), Config("t", Params(H=1), "oracle", "truncated", source="s")])


@pytest.mark.slow
def test_ablate_command(enc_index, questions, tmp_path, capsys):
    out = tmp_path / "abl" / "oracle.json"
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(line + "\n" for line in (ENC / "questions.jsonl").read_text().splitlines()[:10]))
    rc = cli_main(
        [
            "ablate",
            "--db",
            str(enc_index.path),
            "--questions",
            str(qfile),
            "--judge",
            "oracle",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert list(data["rows"]) == list(ABLATION_ROWS) + list(ex.FEEDBACK_ROWS)  # B.1, B.2, B.3
    for name, row in data["rows"].items():
        assert {"R@5", "R@10", "AE@10", "judgments", "ci_R@10_vs_H=2"} <= set(row), name
        lo, hi = row["ci_R@10_vs_H=2"]
        assert lo <= hi
    assert data["rows"]["bm25"]["judgments"] == 0 and data["questions"] == 10
    assert "matched_budget" in data and len(data["per_question"]) == 110
    md = out.with_suffix(".md").read_text()
    assert "| H=2 |" in md and "ceiling" in md
    assert "<table>" in out.with_suffix(".html").read_text()
    assert not (out.parent / "oracle.json.partial.jsonl").exists()

    assert (
        cli_main(
            ["ablate", "--db", str(enc_index.path), "--questions", str(qfile), "--judge", "bm25", "--out", str(out)]
        )
        == 2
    )
    assert (
        cli_main(
            [
                "ablate",
                "--db",
                str(enc_index.path),
                "--questions",
                str(qfile),
                "--judge",
                "lexical",
                "--out",
                str(out),
                "--param",
                "term_weighting=nope",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "needs a judge" in err or "compares judged policies" in err
    assert "unknown term weighting 'nope'" in err and "registered:" in err


def test_questions_without_gold(enc_index, questions, tmp_path):
    from workbench.index.units import Question

    qs = [questions[0], Question("nogold", "Who directed Glass Harbour?")]
    res = Experiment(
        enc_index,
        qs,
        [Config("a", Params(H=0), "lexical"), Config("b", Params(H=0, L=5), "lexical")],
        RunOptions(progress=False),
    ).run()
    with pytest.raises(ExperimentError, match=r"no value .*nogold"):
        res.compare("a", "b")
    qfile = tmp_path / "nogold.jsonl"
    qfile.write_text('{"_id": "nogold", "question": "Who directed Glass Harbour?"}\n')
    assert (
        cli_main(
            [
                "ablate",
                "--db",
                str(enc_index.path),
                "--questions",
                str(qfile),
                "--judge",
                "lexical",
                "--out",
                str(tmp_path / "x.json"),
                "--quiet",
            ]
        )
        == 2
    )


@pytest.mark.slow
def test_ablate_with_a_file_variant(enc_index, tmp_path):
    rules = tmp_path / "my_rules.py"
    rules.write_text("from workbench.terms import tf_only\n\ndef flat(seed, stats):\n    return tf_only(seed, stats)\n")
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(line + "\n" for line in (ENC / "questions.jsonl").read_text().splitlines()[:4]))
    out = tmp_path / "flat.json"
    assert (
        cli_main(
            [
                "ablate",
                "--db",
                str(enc_index.path),
                "--questions",
                str(qfile),
                "--judge",
                "lexical",
                "--out",
                str(out),
                "--quiet",
                "--param",
                f"term_weighting={rules}:flat",
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["params"]["term_weighting"] == f"{rules}:flat" and data["rows"]["H=2"]["judgments"] > 0
