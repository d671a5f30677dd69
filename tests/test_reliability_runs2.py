"""Reliability round 2 (issue 22 items 5 and 7, "Tracebacks"; issue 24's traces with resume):
resume keyed by identity, traces kept or rebuilt with a resume file, judges that exit the
process or return what is no probability, judge options that would fail every call.

Real `sag2wb eval` runs over a real FTS5 index of the bundled encyclopedia, interrupted (a
judge that raises KeyboardInterrupt after N questions, or kill -9 of a real process), the
questions file then edited and the run resumed; the resumed out.json is compared with a clean
run's field by field."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.executors import Processes, Threads
from workbench.index.corpora import load_questions
from workbench.index.store import Index
from workbench.index.units import Question
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError, JudgmentMemo, validate_scores
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions
from workbench.safeio import InputError, atomic_write_text

from .conftest import ENC
from .reliability_world import env, sag2wb, write_questions

# word overlap (deterministic); files beside it switch on faults:
#   stop_after N   raise KeyboardInterrupt when question N+1 (by first call) starts
#   slow           sleep 0.2 s per call (so a real process can be killed mid-run)
#   exit           sys.exit(0) on the question mentioning "Harbour"
#   base           raise a BaseException subclass on that question
#   value V        return V (a Python expression) for every candidate of that question
JUDGE = """
import sys, time
from pathlib import Path
import numpy as np

HERE = Path(__file__).parent
SEEN = []

class Boom(BaseException):
    pass

def judge(question, candidates, context):
    if question not in SEEN:
        SEEN.append(question)
    stop = HERE / "stop_after"
    if stop.exists() and len(SEEN) > int(stop.read_text()):
        raise KeyboardInterrupt
    if (HERE / "slow").exists():
        time.sleep(0.2)
    words = set(question.lower().replace("?", "").split())
    scores = [min(1.0, 0.05 + 0.1 * len(words & set((c["title"] + " " + c["text"]).lower().split())))
              for c in candidates]
    if "Harbour" in question:
        if (HERE / "exit").exists():
            sys.exit(0)
        if (HERE / "base").exists():
            raise Boom("out of band")
        value = HERE / "value"
        if value.exists():
            v = eval(value.read_text())
            return [v for _ in candidates]
    kind = HERE / "numpy"
    if kind.exists():
        return [getattr(np, kind.read_text())(s) if kind.read_text() != "array" else np.array(s) for s in scores]
    return scores
"""


@pytest.fixture
def world(tmp_path, enc_db) -> dict:
    items = [json.loads(line) for line in (ENC / "questions.jsonl").read_text(encoding="utf-8").splitlines()][:6]
    q = tmp_path / "q.jsonl"
    write_questions(q, items)
    (tmp_path / "j.py").write_text(JUDGE)
    return {"root": tmp_path, "db": enc_db, "q": q, "items": items, "judge": f"{tmp_path / 'j.py'}:judge"}


def _eval(world, out, *extra, questions=None, process=False):
    return sag2wb(
        "eval",
        "--db",
        world["db"],
        "--questions",
        questions or world["q"],
        "--judge",
        world["judge"],
        "--out",
        out,
        "--quiet",
        *extra,
        cwd=world["root"],
        process=process,
    )


def _flag(world, name: str, text: str = "") -> None:
    (world["root"] / name).write_text(text)


def _unflag(world, *names: str) -> None:
    for name in names:
        (world["root"] / name).unlink(missing_ok=True)


def _edited(world) -> list[dict]:
    """The questions file edited between the interrupted run and the resume: the second
    question renamed, the third's type changed, a question with the first's text and gold."""
    items = [dict(x) for x in world["items"]]
    items[1]["_id"] = items[1]["_id"] + "-renamed"
    items[2]["type"] = "retyped"
    items.append({**items[0], "_id": "same-text-and-gold"})
    return items


def _same_as_clean(resumed: dict, clean: dict, resumed_count: int) -> None:
    assert resumed.keys() == clean.keys()
    for key in resumed:
        if key == "stats":
            continue
        if key == "config":  # each run records its own --trace-dir (for `sag2wb compare`); the rest is equal
            a, b = dict(resumed[key]), dict(clean[key])
            a.pop("trace_dir", None), b.pop("trace_dir", None)
            assert a == b, key
            continue
        assert resumed[key] == clean[key], key
    assert resumed["questions"] == clean["questions"]  # every field of every record, ids and types too
    assert resumed["stats"]["resumed_questions"] == resumed_count and clean["stats"]["resumed_questions"] == 0


# ---- resume keyed by identity ---------------------------------------------------------------------
@pytest.mark.slow
def test_resume_after_ctrl_c_and_edits_equals_a_clean_run_with_new_ids_and_types(world):
    out, clean = world["root"] / "out.json", world["root"] / "clean.json"
    partial = world["root"] / "out.json.partial.jsonl"
    _flag(world, "stop_after", "3")
    proc = _eval(world, out)
    assert proc.returncode == 130, proc.stderr
    assert [json.loads(x)["_id"] for x in partial.read_text().splitlines()] == [x["_id"] for x in world["items"][:3]]
    _unflag(world, "stop_after")
    items = _edited(world)
    write_questions(world["q"], items)
    run_a, run_b = world["root"] / "a.run", world["root"] / "b.run"
    resumed = _eval(world, out, "--run", run_a)
    assert resumed.returncode == 0, resumed.stderr
    assert _eval(world, clean, "--run", run_b).returncode == 0
    a, b = json.loads(out.read_text()), json.loads(clean.read_text())
    # only the first question is the same question as before: the renamed and retyped are recomputed
    _same_as_clean(a, b, resumed_count=1)
    ids = [x["_id"] for x in items]
    assert [r["_id"] for r in a["questions"]] == ids
    assert a["by_type"] == b["by_type"] and "retyped" in a["by_type"]
    assert run_a.read_text() == run_b.read_text()
    assert {line.split()[0] for line in run_a.read_text().splitlines()} == set(ids)


@pytest.mark.slow
def test_resume_after_kill_9_with_a_renamed_question_gets_the_new_id(world):
    out, clean = world["root"] / "out.json", world["root"] / "clean.json"
    partial = world["root"] / "out.json.partial.jsonl"
    _flag(world, "slow")
    args = ["eval", "--db", world["db"], "--questions", world["q"], "--judge", world["judge"], "--out", out, "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", *map(str, args)], cwd=world["root"], env=env(), stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not (partial.exists() and len(partial.read_text().splitlines()) >= 2):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no records written"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    done = [json.loads(x)["_id"] for x in partial.read_text().splitlines() if x.endswith("}")]
    assert len(done) >= 2 and not out.exists()
    _unflag(world, "slow")
    items = [dict(x) for x in world["items"]]
    items[0]["_id"] = "renamed-first"
    write_questions(world["q"], items)
    assert _eval(world, out).returncode == 0
    assert _eval(world, clean).returncode == 0
    a, b = json.loads(out.read_text()), json.loads(clean.read_text())
    _same_as_clean(a, b, resumed_count=len(done) - 1)
    assert a["questions"][0]["_id"] == "renamed-first"


def test_two_questions_with_the_same_text_and_gold_keep_their_own_ids(world, tmp_path):
    ix = Index(world["db"])
    q = load_questions(world["q"])[:2]
    twins = [q[0], Question("twin", q[0].question, q[0].gold, q[0].type, q[0].hops), q[1]]
    resume = tmp_path / "r.jsonl"
    first = evaluate(ix, twins, "lexical", options=RunOptions(progress=False, resume_path=resume))
    again = evaluate(ix, twins, "lexical", options=RunOptions(progress=False, resume_path=resume))
    assert [r["_id"] for r in first.records] == [r["_id"] for r in again.records] == [q[0].id, "twin", q[1].id]
    assert again.stats["resumed_questions"] == 3
    assert {json.loads(x)["_id"] for x in resume.read_text().splitlines()} == {q[0].id, "twin", q[1].id}


def test_duplicate_question_ids_are_refused_up_front_naming_ids_and_lines(world):
    items = [dict(x) for x in world["items"][:4]]
    items[3]["_id"] = items[1]["_id"]
    write_questions(world["q"], items)
    out = world["root"] / "out.json"
    proc = _eval(world, out)
    assert proc.returncode == 2
    assert f"line 4: duplicate _id {items[1]['_id']!r} (first at line 2)" in proc.stderr
    assert not out.exists() and not (world["root"] / "out.json.partial.jsonl").exists()
    # the API (questions from any loader or made in code): every repeated id and its lines
    qs = [Question("a", "x?", line=1), Question("b", "y?", line=2), Question("a", "z?", line=5), Question("b", "w?")]
    with pytest.raises(InputError, match=r"'a' \(lines 1, 5\), 'b' \(2 times\)"):
        evaluate(Index(world["db"]), qs, "lexical", options=RunOptions(progress=False))


# ---- traces with a resume file --------------------------------------------------------------------
def _interrupted(world, ix, qs, resume, after: int) -> None:
    _flag(world, "stop_after", str(after))
    with pytest.raises(KeyboardInterrupt):
        evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, resume_path=resume))
    _unflag(world, "stop_after")
    assert len(resume.read_text().splitlines()) == after


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["sequential", "threads", "processes"])
def test_keep_traces_with_a_resume_file_rebuilds_the_resumed_questions_traces(world, tmp_path, executor):
    ix = Index(world["db"])
    qs = load_questions(world["q"])
    resume = tmp_path / "r.jsonl"
    _interrupted(world, ix, qs, resume, after=3)
    clean = evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, keep_traces=True))
    pool = {"sequential": None, "threads": Threads(2), "processes": Processes(2)}[executor]
    try:
        resumed = evaluate(
            ix,
            qs,
            world["judge"],
            options=RunOptions(progress=False, keep_traces=True, resume_path=resume, executor=pool),
        )
    finally:
        if pool is not None:
            pool.close()
    assert set(resumed.traces) == {q.id for q in qs}  # never silently missing
    for q in qs:
        assert resumed.traces[q.id].to_json(stats=False) == clean.traces[q.id].to_json(stats=False), q.id
    assert json.loads(json.dumps(resumed.records)) == json.loads(json.dumps(clean.records))
    assert resumed.stats["resumed_questions"] == 3 and resumed.stats["traces_rebuilt"] == 3
    # without traces asked for, resume reuses the records and re-runs nothing
    plain = evaluate(ix, qs, world["judge"], options=RunOptions(progress=False, resume_path=resume))
    assert plain.traces == {} and "traces_rebuilt" not in plain.stats and plain.stats["resumed_questions"] == 6


@pytest.mark.slow
def test_an_experiment_with_keep_traces_and_a_resume_file_has_every_trace(world, tmp_path):
    from workbench.runs.experiment import Experiment, paper_ablation

    ix = Index(world["db"])
    qs = load_questions(world["q"])[:3]
    configs = paper_ablation(judge=world["judge"])
    resume = tmp_path / "exp.jsonl"
    _flag(world, "stop_after", "2")
    with pytest.raises(KeyboardInterrupt):
        Experiment(ix, qs, configs, RunOptions(resume_path=resume, progress=False)).run()
    _unflag(world, "stop_after")
    assert resume.read_text().strip()
    clean = Experiment(ix, qs, configs, RunOptions(progress=False, keep_traces=True))
    clean_results = clean.run()
    again = Experiment(ix, qs, configs, RunOptions(resume_path=resume, progress=False, keep_traces=True))
    results = again.run()
    assert results.stats["records_reused"] > 0 and results.stats["traces_rebuilt"] == results.stats["records_reused"]
    assert {k: set(v) for k, v in again.traces.items()} == {k: set(v) for k, v in clean.traces.items()}
    for name, traces in clean.traces.items():
        for qid, trace in traces.items():
            assert again.traces[name][qid].to_json(stats=False) == trace.to_json(stats=False), (name, qid)
    assert results.frame().equals(clean_results.frame())


@pytest.mark.slow
def test_a_resumed_eval_writes_every_trace_file_into_a_new_trace_dir(world):
    out, clean = world["root"] / "out.json", world["root"] / "clean.json"
    _flag(world, "stop_after", "2")
    assert _eval(world, out, "--trace-dir", world["root"] / "t1").returncode == 130
    _unflag(world, "stop_after")
    assert _eval(world, out, "--trace-dir", world["root"] / "t2").returncode == 0
    assert _eval(world, clean, "--trace-dir", world["root"] / "t3").returncode == 0
    t2, t3 = sorted((world["root"] / "t2").glob("*.json")), sorted((world["root"] / "t3").glob("*.json"))
    assert [p.name for p in t2] == [p.name for p in t3] and len(t2) == 6
    strip = [json.loads(p.read_text()) for p in t2], [json.loads(p.read_text()) for p in t3]
    for a, b in zip(*strip):
        a.pop("stats"), b.pop("stats")
        assert a == b
    _same_as_clean(json.loads(out.read_text()), json.loads(clean.read_text()), resumed_count=2)


# ---- judges that exit the process or answer no probability -----------------------------------------
@pytest.fixture
def old_out(world) -> tuple[Path, bytes]:
    """An older out.json of this command (another judge's figures) that a failed run must leave alone."""
    out = world["root"] / "out.json"
    assert _eval(world, out).returncode == 0
    data = json.loads(out.read_text())
    data["metrics"]["R@10"] = 12.34
    atomic_write_text(out, json.dumps(data), record="eval --out")  # as an older run wrote it (recorded)
    return out, out.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["exit", "base"])
@pytest.mark.parametrize("parallel", [(), ("--processes", "2"), ("--concurrency", "2")])
def test_a_judge_that_exits_or_raises_a_base_exception_ends_eval_with_exit_1(world, old_out, fault, parallel):
    out, before = old_out
    _flag(world, fault)
    proc = _eval(world, out, *parallel, process=True)  # a real process: sys.exit would end it with 0
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    what = "SystemExit (it called sys.exit(0))" if fault == "exit" else "raised Boom: out of band"
    assert "failed at round 0" in proc.stderr and what in proc.stderr, proc.stderr
    assert "no results written" in proc.stderr
    assert out.read_bytes() == before


@pytest.mark.slow
def test_a_judge_file_that_exits_while_loading_is_a_named_error(world, old_out):
    out, before = old_out
    (world["root"] / "j.py").write_text("import sys\nsys.exit(0)\n")
    proc = _eval(world, out, process=True)
    assert proc.returncode == 2
    assert "its file called sys.exit(0) while loading" in proc.stderr
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    "value, shown",
    [
        ("10**400", "an integer of 401 digits, outside [0, 1]"),
        ("float('inf')", "inf, outside [0, 1]"),
        ("float('nan')", "nan, outside [0, 1]"),
        ("-1e-9", "-1e-09, outside [0, 1]"),
        ("True", "True, not a number"),
        ("'0.5'", "'0.5', not a number"),
        ("np.bool_(True)", "not a number"),
        ("np.array([0.5])", "not a number"),
        ("None", "None, not a number"),
    ],
)
def test_a_judge_answering_no_probability_is_named_at_the_first_call(world, old_out, value, shown):
    out, before = old_out
    _flag(world, "value", value)
    proc = _eval(world, out)
    assert proc.returncode == 1
    first = next(x for x in world["items"] if "Harbour" in x["question"])["_id"]
    assert f"question {first!r} failed at round 0: judge {world['judge']!r}: score 0 is" in proc.stderr
    assert shown in proc.stderr
    assert out.read_bytes() == before


@pytest.mark.parametrize("kind", ["float32", "float64", "int64", "array"])
def test_numpy_scalars_are_numbers(world, kind):
    plain, numpy = world["root"] / "plain.json", world["root"] / "numpy.json"
    assert _eval(world, plain).returncode == 0
    _flag(world, "numpy", kind)
    proc = _eval(world, numpy)
    assert proc.returncode == 0, proc.stderr
    a, b = json.loads(plain.read_text()), json.loads(numpy.read_text())
    if kind in ("float64", "array"):  # the same scores (float32 rounds them, int64 truncates them)
        assert a["questions"] == b["questions"]
    assert b["metrics"]["questions"] == 6


def test_validate_scores_takes_numpy_and_names_the_rest():
    np = pytest.importorskip("numpy")
    got = validate_scores("j", [np.float32(0.25), np.float64(0.5), np.int64(1), np.array(0.0), np.uint8(0)], 5)
    assert got == [0.25, 0.5, 1.0, 0.0, 0.0] and all(type(s) is float for s in got)
    assert validate_scores("j", np.array([0.5, 1.0], dtype=np.float32), 2) == [0.5, 1.0]
    for bad, why in [(10**5000, "an integer of 5001 digits, outside"), (-(10**400), "401 digits, outside")]:
        with pytest.raises(JudgeError, match=why):
            validate_scores("j", [bad], 1)
    with pytest.raises(JudgeError, match="returned str, expected a list of 1 probabilities"):
        validate_scores("j", "1", 1)

    class Exits:
        name, key = "exits", "exits"

        def judge(self, question, candidates, context):
            raise SystemExit(3)

    item = {"unit_id": 1, "title": "t", "text": "x", "document": "t"}
    with pytest.raises(JudgeError, match=r"judge 'exits' raised SystemExit \(it called sys.exit\(3\)\)"):
        JudgmentMemo().judge(Exits(), "q?", [item], [])


# ---- judge options that would fail (or mean nothing) on every call ---------------------------------
@pytest.mark.parametrize(
    "option, allowed",
    [
        ("scale=1e6", "scale must be in (0, 300]"),
        ("scale=inf", "scale must be in (0, 300]"),
        ("scale=nan", "scale must be in (0, 300]"),
        ("scale=-10", "scale must be in (0, 300]"),
        ("scale=0", "scale must be in (0, 300]"),
        ("shift=inf", "shift must be in [-1, 1]"),
        ("shift=-5", "shift must be in [-1, 1]"),
        ("gamma=nan", "gamma must be in [0, 1]"),
        ("gamma=-0.1", "gamma must be in [0, 1]"),
        ("gamma=1e308", "gamma must be in [0, 1]"),
    ],
)
def test_semantic_options_out_of_range_are_refused_at_parse_time(world, option, allowed):
    out = world["root"] / "out.json"
    proc = sag2wb(
        "eval", "--db", world["db"], "--questions", world["q"], "--judge", f"semantic:{option}", "--out", out, "--quiet"
    )
    assert proc.returncode == 2
    assert f"bad option {option!r} ({allowed}" in proc.stderr
    assert not out.exists() and not (world["root"] / "out.json.partial.jsonl").exists()


def test_semantic_judge_made_in_code_checks_its_ranges_too(world):
    from workbench.judges.semantic import SemanticJudge

    for bad in ({"scale": float("inf")}, {"shift": float("nan")}, {"scale": 1e6}, {"gamma": 2}):
        with pytest.raises(ValueError, match="must be in"):
            SemanticJudge(None, signals=("coverage",), **bad)
    with pytest.raises(JudgeError, match="scale must be in"):
        JudgeSpec("semantic", (("scale", 1e6),)).build(Index(world["db"]))
    edge = SemanticJudge(None, signals=("coverage",), scale=300, shift=-1.0, gamma=0)
    assert (edge.scale, edge.shift, edge.gamma) == (300.0, -1.0, 0.0)
