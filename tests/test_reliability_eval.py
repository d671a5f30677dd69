"""Reliability (issue 10 §1, §3): a judge failure is never a number. Real `sag2wb eval` /
`ablate` processes over a real index, with a function judge that fails on demand."""

import json
import signal
import subprocess
import sys
import time

import pytest

from .reliability_world import (
    QUESTIONS,
    default_sigint,
    env,
    one_line_error,
    sag2wb,
    set_mode,
    write_questions,
)


def _eval(world, out, *extra, process=False):
    return sag2wb(
        "eval",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--judge",
        world["judge"],
        "--out",
        out,
        "--quiet",
        *extra,
        cwd=world["root"],
        process=process,
    )


@pytest.mark.parametrize(
    "mode, message",
    [
        ("raise", "raised ConnectionError: judge server at 127.0.0.1:9 refused the connection"),
        ("nan", "score 0 is nan, outside [0, 1]"),
        ("count", "scores for"),
    ],
)
@pytest.mark.slow
def test_a_failing_judge_stops_with_exit_1_and_no_figures(world, mode, message):
    out = world["root"] / "out.json"
    set_mode(world, mode)
    proc = _eval(world, out, process=mode == "raise")  # once as a real process, end to end
    assert proc.returncode == 1
    assert "question 'q2' failed at round 0" in proc.stderr and message in proc.stderr
    assert "R@10" not in proc.stdout and "R@10" not in proc.stderr
    assert not out.exists()
    # q1 finished before q2 failed: kept for resume, and nothing about q2 was saved
    kept = [json.loads(line) for line in (world["root"] / "out.json.partial.jsonl").read_text().splitlines()]
    assert [k["_id"] for k in kept] == ["q1"]
    assert "1 finished record(s) kept" in proc.stderr


def test_a_run_whose_first_question_fails_names_no_resume_file(world):
    """Nothing finished, nothing kept: the message must not point at a resume file that was never written."""
    out = world["root"] / "out.json"
    write_questions(world["q"], [q for q in QUESTIONS if q["_id"] == "q2"])  # the failing question alone
    set_mode(world, "raise")
    proc = _eval(world, out)
    assert proc.returncode == 1 and "question 'q2' failed at round 0" in proc.stderr
    assert not (world["root"] / "out.json.partial.jsonl").exists()
    assert "no question had finished, so nothing was kept" in proc.stderr
    assert "finished record(s) kept" not in proc.stderr


def test_resume_after_the_judge_is_fixed_equals_a_clean_run(world):
    out, clean = world["root"] / "out.json", world["root"] / "clean.json"
    set_mode(world, "raise")
    assert _eval(world, out).returncode == 1
    set_mode(world, "ok")
    resumed = _eval(world, out)
    assert resumed.returncode == 0, resumed.stderr
    assert _eval(world, clean).returncode == 0
    a, b = json.loads(out.read_text()), json.loads(clean.read_text())
    assert a["metrics"] == b["metrics"] and a["metrics"]["questions"] == 4
    assert a["stats"]["resumed_questions"] == 1 and b["stats"]["resumed_questions"] == 0
    assert [q["ranking"] for q in a["questions"]] == [q["ranking"] for q in b["questions"]]
    assert not (world["root"] / "out.json.partial.jsonl").exists()


def test_keep_going_exits_3_with_metrics_over_completed_questions_only(world):
    out = world["root"] / "out.json"
    set_mode(world, "raise")
    proc = _eval(world, out, "--keep-going")
    assert proc.returncode == 3
    assert "1 of 4 questions failed" in proc.stderr and "question 'q2' round 0" in proc.stderr
    data = json.loads(out.read_text())
    assert data["failures"] == [
        {"question": "q2", "round": 0, "kind": "judge error", "error": data["failures"][0]["error"]}
    ]
    assert "ConnectionError" in data["failures"][0]["error"]
    assert data["metrics"]["questions"] == 3 and data["metrics"]["failed"] == 1
    assert "3 of 4" in data["metrics"]["scope"] and "3 of 4" in proc.stdout
    assert [q["_id"] for q in data["questions"]] == ["q1", "q3", "q4"]
    # the same figures as a clean run over the three completed questions (no zero averaged in)
    set_mode(world, "ok")
    three = world["root"] / "three.jsonl"
    write_questions(three, [q for q in QUESTIONS if q["_id"] != "q2"])
    ref = world["root"] / "three.json"
    assert (
        sag2wb(
            "eval",
            "--db",
            world["db"],
            "--questions",
            three,
            "--judge",
            world["judge"],
            "--out",
            ref,
            "--quiet",
            cwd=world["root"],
        ).returncode
        == 0
    )
    m = json.loads(ref.read_text())["metrics"]
    assert {k: data["metrics"][k] for k in ("R@5", "R@10", "AE@10")} == {k: m[k] for k in ("R@5", "R@10", "AE@10")}
    # the resume file kept the completed questions; the fixed judge's rerun retries q2 only
    rerun = _eval(world, out)
    assert rerun.returncode == 0 and json.loads(out.read_text())["stats"]["resumed_questions"] == 3


def test_an_edited_question_is_not_reused(world):
    out = world["root"] / "out.json"
    set_mode(world, "raise")
    assert _eval(world, out, "--keep-going").returncode == 3  # q1, q3, q4 in the resume file
    edited = [dict(q) for q in QUESTIONS]
    edited[0]["question"] = "Which river town is Mara Quell from?"
    edited[2]["supporting_titles"] = ["Mara Quell", "Painters"]
    write_questions(world["q"], edited)
    set_mode(world, "ok")
    assert _eval(world, out).returncode == 0
    data = json.loads(out.read_text())
    assert data["stats"]["resumed_questions"] == 1  # q4 only: q1's text and q3's gold changed, q2 had failed
    assert data["questions"][2]["gold"] == ["Mara Quell", "Painters"]


@pytest.mark.slow
def test_ctrl_c_exits_130_and_keeps_finished_questions(world):
    set_mode(world, "sleep")  # q4 sleeps in the judge
    out = world["root"] / "out.json"
    partial = world["root"] / "out.json.partial.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "eval",
            "--db",
            str(world["db"]),
            "--questions",
            str(world["q"]),
            "--judge",
            world["judge"],
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=world["root"],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not (partial.exists() and len(partial.read_text().splitlines()) == 3):
            assert proc.poll() is None and time.monotonic() < deadline, "eval ended before q4"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    assert "interrupted; 3 finished record(s) kept" in err and not out.exists()
    set_mode(world, "ok")
    again = _eval(world, out)
    assert again.returncode == 0 and json.loads(out.read_text())["stats"]["resumed_questions"] == 3


def test_questions_without_gold(world):
    items = [*QUESTIONS[:2], {"_id": "free", "question": "Which city is a port?"}]
    write_questions(world["q"], items)
    out = world["root"] / "out.json"
    proc = sag2wb(
        "eval",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--judge",
        "lexical",
        "--out",
        out,
        "--quiet",
        cwd=world["root"],
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())  # valid JSON: no NaN
    assert data["metrics"]["questions"] == 2 and data["metrics"]["excluded_no_gold"] == 1
    assert data["excluded_no_gold"] == ["free"] and data["questions"][2]["R@10"] is None
    assert "without gold" in proc.stdout
    # the oracle judge refuses them before any work, naming the line
    proc = sag2wb(
        "eval",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--judge",
        "oracle",
        "--out",
        world["root"] / "o.json",
        "--quiet",
        cwd=world["root"],
    )
    assert proc.returncode == 2
    one_line_error(proc, "'free' (line 3)", "oracle judge needs")
    assert not (world["root"] / "o.json.partial.jsonl").exists()


@pytest.mark.parametrize(
    "value, says", [("null", "must be a string, not null"), ('["a", "b"]', "not a list"), ("7", "not a number")]
)
def test_a_question_that_is_not_text_is_named(world, value, says):
    world["q"].write_text(json.dumps(QUESTIONS[0]) + "\n" + f'{{"_id": "q9", "question": {value}}}\n')
    proc = sag2wb(
        "eval",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--out",
        world["root"] / "o.json",
        "--quiet",
        cwd=world["root"],
    )
    assert proc.returncode == 2
    one_line_error(proc, "q.jsonl, line 2", says)


@pytest.mark.slow
def test_ablate_stops_or_keeps_going(world):
    out = world["root"] / "abl.json"
    set_mode(world, "raise")
    args = (
        "ablate",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--judge",
        world["judge"],
        "--out",
        out,
        "--quiet",
    )
    proc = sag2wb(*args, cwd=world["root"])
    assert proc.returncode == 1 and "configuration 'H=2', question 'q2' failed at round 0" in proc.stderr
    assert not out.exists() and "R@10" not in proc.stdout
    proc = sag2wb(*args, "--keep-going", cwd=world["root"])
    assert proc.returncode == 3 and "1 of 4 questions failed" in proc.stderr
    data = json.loads(out.read_text())
    assert data["questions"] == 3 and [f["question"] for f in data["failures"]] == ["q2"]
    assert all(row["questions"] == 3 for row in data["rows"].values())
    assert "3 of 4" in out.with_suffix(".md").read_text() and "3 of 4" in out.with_suffix(".html").read_text()
    set_mode(world, "ok")
    proc = sag2wb(*args, cwd=world["root"])
    assert proc.returncode == 0 and json.loads(out.read_text())["questions"] == 4
    assert "failures" not in json.loads(out.read_text())


def test_keep_going_when_every_question_fails(world):
    write_questions(world["q"], [QUESTIONS[1]])  # only q2, whose judge fails
    set_mode(world, "raise")
    out = world["root"] / "out.json"
    proc = _eval(world, out, "--keep-going")
    assert proc.returncode == 3 and "1 of 1 questions failed" in proc.stderr
    m = json.loads(out.read_text())["metrics"]  # valid JSON: no NaN, no number for the failed question
    assert (m["R@10"], m["questions"], m["failed"]) == (None, 0, 1) and "R@10 –" in proc.stdout
    abl = world["root"] / "abl.json"
    proc = sag2wb(
        "ablate",
        "--db",
        world["db"],
        "--questions",
        world["q"],
        "--judge",
        world["judge"],
        "--out",
        abl,
        "--quiet",
        "--keep-going",
    )
    assert proc.returncode == 1 and "no question completed: nothing written" in proc.stderr and not abl.exists()
