"""Reliability of the engine API (issue 10 §1): `evaluate` and `Experiment.run` stop at a
failed question or, with keep_going, leave it out of every figure; resume keys; the
executor hook; the engine never imports the CLI."""

import json
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from workbench.index.store import Index
from workbench.index.units import Question
from workbench.judgment import JudgeError
from workbench.params import Params
from workbench.runs.evaluation import evaluate
from workbench.runs.experiment import Experiment
from workbench.runs.options import Hooks, RunOptions
from workbench.runs.policies import Config
from workbench.runs.records import JudgeFailed, QuestionFailed
from workbench.runs.resume import load_resume, record_fingerprint, trace_file_name
from workbench.safeio import InputError

from .reliability_world import as_questions, env, set_mode


@pytest.fixture
def world(world):
    """The shared world (tests/conftest.py) with its index opened and its questions read."""
    w = world
    w["index"] = Index(w["db"])
    w["questions"] = as_questions()
    return w


def test_evaluate_stops_at_the_first_failed_question(world):
    set_mode(world, "raise")
    resume = world["root"] / "r.jsonl"
    with pytest.raises(QuestionFailed) as err:
        evaluate(
            world["index"], world["questions"], world["judge"], options=RunOptions(progress=False, resume_path=resume)
        )
    exc = err.value
    assert isinstance(exc, JudgeFailed) and isinstance(exc, JudgeError)  # older `except JudgeError` still catch it
    assert (exc.question, exc.round) == ("q2", 0) and "ConnectionError" in exc.error
    again = pickle.loads(pickle.dumps(exc))  # crosses process boundaries intact
    assert type(again) is JudgeFailed and again.to_dict() == exc.to_dict() and str(again) == str(exc)
    assert [r["_id"] for r in load_resume(resume).values()] == ["q1"]


def test_keep_going_metrics_cover_completed_questions_only(world):
    ix, qs = world["index"], world["questions"]
    set_mode(world, "raise")
    res = evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, keep_going=True))
    assert [f["question"] for f in res.failures] == ["q2"] and res.failures[0]["round"] == 0
    m = res.metrics
    assert (
        m["questions"] == 3
        and m["failed"] == 1
        and m["scope"] == "completed questions with gold only: 3 of 4 (1 failed)"
    )
    set_mode(world, "ok")
    ref = evaluate(ix, [q for q in qs if q.id != "q2"], world["judge"], options=RunOptions(progress=False)).metrics
    assert {k: m[k] for k in ("R@5", "R@10", "AE@10")} == {k: ref[k] for k in ("R@5", "R@10", "AE@10")}
    data = res.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["failures"][0]["question"] == "q2" and data["sag2wb"]["kind"] == "eval"


def test_record_fingerprint_follows_every_input():
    q = Question("q1", "Who directed Glass Harbour?", ("Glass Harbour",))
    base = record_fingerprint(q, Params(), "lexical-v1", "ix-1")
    changed = [
        # the question's identity too (issue 22 item 5): a renamed or retyped question is recomputed
        record_fingerprint(Question("q2", q.question, q.gold), Params(), "lexical-v1", "ix-1"),
        record_fingerprint(Question("q1", q.question, q.gold, "bridge"), Params(), "lexical-v1", "ix-1"),
        record_fingerprint(Question("q1", q.question, q.gold, None, 2), Params(), "lexical-v1", "ix-1"),
        record_fingerprint(Question("q1", "Who directed Glass Harbor?", q.gold), Params(), "lexical-v1", "ix-1"),
        record_fingerprint(Question("q1", q.question, ("Mara Quell",)), Params(), "lexical-v1", "ix-1"),
        record_fingerprint(q, Params(L=5), "lexical-v1", "ix-1"),
        record_fingerprint(q, Params(), "oracle", "ix-1"),
        record_fingerprint(q, Params(), "lexical-v1", "ix-2"),
        record_fingerprint(q, Params(), "lexical-v1", "ix-1", extra="final-only"),
    ]
    assert len({base, *changed}) == 10


def test_resume_skips_old_format_and_cut_lines_and_an_edited_judge_file(world):
    ix, qs = world["index"], world["questions"]
    resume = world["root"] / "r.jsonl"
    full = evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, resume_path=resume))
    lines = resume.read_text().splitlines()
    old = json.dumps({"config_key": "{}", "_id": "q3", "record": {"_id": "q3", "R@10": 0.0}})
    resume.write_text("\n".join([lines[0], old, lines[1][:30]]))
    again = evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, resume_path=resume))
    assert again.stats["resumed_questions"] == 1 and again.metrics == full.metrics
    # editing the judge's file changes its key: nothing is reused
    path = world["root"] / "j.py"
    path.write_text(path.read_text() + "\n# edited\n")
    assert (
        evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, resume_path=resume)).stats[
            "resumed_questions"
        ]
        == 0
    )


def test_an_executor_map_gives_the_same_result_in_question_order(world):
    ix, qs = world["index"], world["questions"]
    serial = evaluate(ix, qs, "lexical", options=RunOptions(progress=False))
    with ThreadPoolExecutor(2) as pool:
        parallel = evaluate(ix, qs, "lexical", options=RunOptions(progress=False, hooks=Hooks(map_outcomes=pool.map)))
    assert [r["_id"] for r in parallel.records] == ["q1", "q2", "q3", "q4"]
    assert parallel.records == serial.records and parallel.metrics == serial.metrics


def test_oracle_refuses_questions_without_gold_up_front(world):
    qs = world["questions"] + [Question("free", "Which city is a port?", (), line=5)]
    with pytest.raises(InputError, match=r"'free' \(line 5\)"):
        evaluate(world["index"], qs, "oracle", options=RunOptions(progress=False))
    with pytest.raises(InputError, match="oracle judge needs"):
        Experiment(world["index"], qs, [Config("o", judge="oracle")], RunOptions(progress=False))
    res = evaluate(world["index"], qs, "lexical", options=RunOptions(progress=False))  # other judges: excluded, said so
    assert res.excluded == ["free"] and res.metrics["excluded_no_gold"] == 1 and res.metrics["questions"] == 4


def test_experiment_stops_or_keeps_going(world):
    ix, qs = world["index"], world["questions"]
    configs = [
        Config("sag2", Params(H=1), world["judge"]),
        Config("H=0", Params(H=0), world["judge"], "truncated", source="sag2"),
        Config("final", Params(H=1), world["judge"], "final-only"),
    ]
    resume = world["root"] / "exp.jsonl"
    set_mode(world, "raise")
    with pytest.raises(QuestionFailed, match="configuration 'sag2', question 'q2' failed at round 0"):
        Experiment(ix, qs, configs, RunOptions(resume_path=resume, progress=False)).run()
    assert [v["question"] for v in load_resume(resume).values()] == ["q1"]
    res = Experiment(ix, qs, configs, RunOptions(resume_path=resume, progress=False, keep_going=True)).run()
    assert res.question_ids == ["q1", "q3", "q4"] and [f["question"] for f in res.failures] == ["q2"]
    assert res.failures[0]["config"] == "sag2" and res.scope.startswith("completed questions only: 3 of 4")
    assert set(res.frame()["question"]) == {"q1", "q3", "q4"}
    assert res.compare("final", "sag2")["questions"] == 3  # still paired
    assert all(v["question"] != "q2" for v in load_resume(resume).values())  # a failure is never saved
    set_mode(world, "ok")
    fixed = Experiment(ix, qs, configs, RunOptions(resume_path=resume, progress=False)).run()
    clean = Experiment(ix, qs, configs, RunOptions(progress=False)).run()
    assert fixed.stats["records_reused"] == 9 and fixed.frame().equals(clean.frame())


def test_final_only_judge_failure_names_its_round(world):
    set_mode(world, "nan")
    with pytest.raises(JudgeFailed) as err:
        Experiment(
            world["index"],
            world["questions"],
            [Config("f", Params(H=1), world["judge"], "final-only")],
            RunOptions(progress=False),
        ).run()
    assert err.value.config == "f" and err.value.question == "q2" and "nan" in err.value.error


@pytest.mark.slow
def test_the_engine_never_imports_the_cli():
    code = (
        "import sys, workbench.runs, workbench.judges.jev, widgets\n"
        "assert 'workbench.cli' not in sys.modules, sorted(m for m in sys.modules if m.startswith('workbench'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env())
    assert proc.returncode == 0, proc.stderr


def test_trace_file_name_is_readable_and_distinct():
    assert trace_file_name("2hop_abc").startswith("2hop_abc-")
    assert trace_file_name("q/1") != trace_file_name("q_1")
    assert trace_file_name("../../etc/passwd").startswith("_.._etc_passwd-")  # no folder, not hidden
    assert trace_file_name("..").startswith("q-") and trace_file_name("").startswith("q-")
