"""The question a JEV request carries, for questions with surrounding whitespace (issue 34, item 4),
and replay when the service is down (item 5).

SPEC §3: "The judge always receives the original question as the user wrote it". `Run` reads the
question less surrounding whitespace for BM25, term selection and the trace's `question`; every
judge call (scoring, explaining, the in-process memo, the final-only and feedback policies, a
rerun, a fit-judge teacher) receives it as given, so the JEV state's `original_question` is the
question exactly as the data set writes it. The reference (zleap-sag2 0.2.0.post1), found as a
black box: its JEV client sends the question it is handed untrimmed, and its search request model
strips the query; the comparison harness (benchmarks/reference_adapter.py) hands it the question
as given (`request_as_given`), so neither side trims. The question never appears in the
per-candidate question text on either side (only the instruction wording does).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.engine import Run
from workbench.index.units import Question
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.client import JEVUnreachable
from workbench.judges.jev.server import JudgeServer
from workbench.params import Params
from workbench.trace import STOP_JUDGE_ERROR

from .conftest import FILM_WORLD, REPO, build_index, reference_adapter, sag2wb

REFERENCE_PYTHON = os.environ.get("SAG2WB_REFERENCE_PYTHON") or str(REPO / ".venv-reference" / "bin" / "python")
MODEL = "typesafe/jev-1.13"
STYLES = ["inline", "stateful"]
# leading and trailing spaces, tabs, a final newline, a mix (each padding on its own question)
PADDED = [
    "Who directed Glass Harbour? ",
    "  Where was the director of Glass Harbour born?",
    "\tWhich band is called Glass Harbor?\t",
    "Who scored the film Glass Harbour?\n",
    " \t Which town is known for bridges? \n",
]


def hash_like(question, candidates, context):
    """A deterministic judge whose scores depend on the question text (as the test-only hash judge)."""
    return [(sum(map(ord, question + c["title"])) % 97) / 96 for c in candidates]


def states(bodies) -> list[dict]:
    return [json.loads(b["state"]) for b in bodies]


@pytest.fixture
def server():
    srv = JudgeServer(FunctionJudge(hash_like, name="hash-like"), keep_bodies=10_000).start()
    try:
        yield srv
    finally:
        srv.stop()


# ---- ours -----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("question", PADDED, ids=repr)
def test_a_run_sends_the_question_as_given_while_bm25_and_the_trace_read_it_stripped(tmp_path, server, style, question):
    index = build_index(tmp_path, FILM_WORLD)
    judge = jev.make_jev_judge(server.url, MODEL, payload_style=style, cache_dir=tmp_path / "cache")
    try:
        trace = Run(index, Question("q1", question, ()), judge=judge).run()
    finally:
        judge.close()
    sent = {s["original_question"] for s in states(server.bodies)}
    assert sent == {question}, f"JEV state carried {sent!r}"
    assert trace.question == question.strip()
    assert trace.rounds[0].expression == Run(index, question.strip()).run().rounds[0].expression
    for body in server.bodies:  # the question is only in the state, never in a candidate's question text
        assert question.strip() not in json.dumps(body["questions"], ensure_ascii=False)


class Recording:
    """An in-process judge that explains itself and keeps every question it is asked."""

    name = key = "recording"
    explains = True

    def __init__(self):
        self.questions: list[str] = []

    def judge(self, question, candidates, context):
        self.questions.append(question)
        return hash_like(question, candidates, context)

    def explain(self, question, candidates, context):
        self.questions.append(question)
        return [("because", {})] * len(candidates)


def _on_policy(index, question, judge):
    from workbench.judges.features import FEATURES, MODEL_FEATURES
    from workbench.runs.training import collect_examples, fit_examples, on_policy_examples

    names = [n for n in FEATURES if n not in MODEL_FEATURES]
    qs = [question, Question("q2", " Who wrote Glass Harbor? ", ("Glass Harbor",))]
    model = fit_examples(collect_examples(index, qs, lambda q: Recording(), names=names))
    on_policy_examples(index, qs[:1], lambda q: judge, model)


def _feedback(policy):
    def run(index, question, judge):
        from workbench.feedback import gar_trace, rm3_trace

        (rm3_trace if policy == "rm3" else gar_trace)(index, question, None, judge)

    return run


JUDGE_CALLS = {
    "run (score and explain)": lambda index, q, judge: Run(index, q, judge=judge).run(),
    "rerun": lambda index, q, judge: Run(index, q, judge=FunctionJudge(hash_like, name="h")).rerun(judge=judge).run(),
    "final-only": lambda index, q, judge: __import__("workbench.runs", fromlist=["x"]).final_only_trace(
        index, q, Params(), judge
    ),
    "rm3": _feedback("rm3"),
    "gar": _feedback("gar"),
    "fit-judge teacher (collect)": lambda index, q, judge: __import__(
        "workbench.runs.training", fromlist=["x"]
    ).collect_examples(index, [q], lambda _: judge),
    "fit-judge teacher (on policy)": _on_policy,
}


@pytest.mark.parametrize("call", list(JUDGE_CALLS))
@pytest.mark.parametrize("question", [PADDED[1], PADDED[4]], ids=repr)
def test_every_judge_call_receives_the_question_as_given(tmp_path, call, question):
    index = build_index(tmp_path, FILM_WORLD)
    judge = Recording()
    JUDGE_CALLS[call](index, Question("q1", question, ("Glass Harbour",)), judge)
    assert judge.questions and set(judge.questions) == {question}


@pytest.mark.slow
def test_eval_sends_the_question_as_the_questions_file_writes_it(tmp_path, server):
    """The CLI in a real process: `sag2wb eval --judge jev` on a file of padded questions."""
    questions = tmp_path / "padded.jsonl"
    lines = [json.dumps({"_id": f"q{i}", "question": q, "supporting_titles": []}) for i, q in enumerate(PADDED)]
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "film.sqlite"
    build_index(tmp_path, FILM_WORLD, name=db.name).close()
    options = ["--jev-endpoint", server.url, "--cache-dir", tmp_path / "cache", "--out", tmp_path / "out.json"]
    done = sag2wb("eval", "--db", db, "--questions", questions, "--judge", "jev", *options, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {s["original_question"] for s in states(server.bodies)} == set(PADDED)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("question", PADDED, ids=repr)
def test_the_jev_judge_sends_the_question_it_is_given_exactly(tmp_path, server, style, question):
    judge = jev.make_jev_judge(server.url, MODEL, payload_style=style, cache_dir=tmp_path / "cache")
    try:
        judge.judge(question, [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."}], [])
    finally:
        judge.close()
    assert [s["original_question"] for s in states(server.bodies)] == [question]


# ---- the reference, as a black box ----------------------------------------------------------------
def _needs_reference():
    if not Path(REFERENCE_PYTHON).exists():
        pytest.skip("no reference interpreter (SAG2WB_REFERENCE_PYTHON, or .venv-reference)")


def _write_inputs(tmp_path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "text": x} for t, x in FILM_WORLD]), encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    lines = [json.dumps({"_id": f"q{i}", "question": q, "supporting_titles": []}) for i, q in enumerate(PADDED)]
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, questions


@pytest.mark.reference
@pytest.mark.parametrize("style", STYLES)
def test_the_reference_search_and_ours_send_the_same_original_question_as_given(tmp_path, server, style):
    _needs_reference()
    corpus, questions = _write_inputs(tmp_path)
    ref = reference_adapter(
        REFERENCE_PYTHON,
        corpus,
        questions,
        tmp_path / "ref.json",
        "jev",
        tmp_path / "refwork",
        *("--jev-url", server.url, "--payload-style", style, "--jev-model", MODEL),
        timeout=600,
    )
    assert ref.returncode == 0, ref.stdout[-1000:] + ref.stderr[-2000:]
    theirs = states(server.bodies)
    server.bodies.clear()
    index = build_index(tmp_path, FILM_WORLD)
    judge = jev.make_jev_judge(server.url, MODEL, payload_style=style, cache_dir=tmp_path / "cache")
    try:
        for i, q in enumerate(PADDED):
            Run(index, Question(f"q{i}", q, ()), judge=judge).run()
    finally:
        judge.close()
    ours = states(server.bodies)
    for q in PADDED:  # each padded question is its own question: requests are told apart by it
        sent = [
            {s["original_question"] for s in side if s["original_question"].strip() == q.strip()}
            for side in (theirs, ours)
        ]
        assert sent[0] == sent[1], f"{q!r}: the reference sent {sent[0]!r}, ours {sent[1]!r}"
        assert sent[0] == {q}  # as the data set writes it: the harness keeps the request model from stripping it


PROBE = textwrap.dedent(
    """
    import asyncio, json, os, sys
    url, style, db, corpus, question = sys.argv[1:6]
    os.environ.update(DECISION_API_KEY="local-no-key", DECISION_ENDPOINT=url, DECISION_PAYLOAD_STYLE=style,
                      DECISION_MODEL="typesafe/jev-1.13")
    from zleap.sag2 import DataEngine, EngineConfig, RelationalConfig, SearchOptions, SearchRequest, SearchScope
    from zleap.sag2.benchmark import corpus_chunks

    async def main():
        config = EngineConfig.from_env().model_copy(update={"relational": RelationalConfig(provider="sqlite", path=db)})
        async with DataEngine(config, data_source_id="probe") as engine:
            await engine.index(corpus_chunks(json.load(open(corpus)), "probe", chunk_chars=100000))
            scope = SearchScope(data_source_ids=("probe",))
            # model_construct skips the request model's validation (which strips the query), so the
            # question reaches the search stage, and so the reference's own JEV client, as given
            request = SearchRequest.model_construct(query=question, scope=scope, options=SearchOptions(max_hops=1))
            await engine.search(request)

    asyncio.run(main())
    """
)


@pytest.mark.reference
def test_the_reference_jev_client_and_ours_send_an_unstripped_question_as_given(tmp_path, server):
    _needs_reference()
    corpus, _ = _write_inputs(tmp_path)
    question = " \t Who directed Glass Harbour? \n"
    probe = subprocess.run(
        [REFERENCE_PYTHON, "-c", PROBE, server.url, "stateful", str(tmp_path / "probe.sqlite"), str(corpus), question],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert {s["original_question"] for s in states(server.bodies)} == {question}
    server.bodies.clear()
    judge = jev.make_jev_judge(server.url, MODEL, cache_dir=tmp_path / "cache")
    try:
        judge.judge(question, [{"unit_id": 1, "title": "Glass Harbour", "text": FILM_WORLD[0][1]}], [])
    finally:
        judge.close()
    assert {s["original_question"] for s in states(server.bodies)} == {question}


def test_the_comparison_harness_reports_a_question_the_other_side_read_otherwise(tmp_path):
    """compare_reference.py: the reference's recorded question must be ours byte for byte (a
    harness that trimmed it on one side, or on both, would hide what each engine does)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import compare_reference
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    trace = Run(build_index(tmp_path, FILM_WORLD), "Who directed Glass Harbour? ").run()
    record = {"question": "Who directed Glass Harbour? ", "rounds": [], "ranking": trace.documents()}
    assert not [
        d for d in compare_reference.compare(trace, record, "Who directed Glass Harbour? ") if "question" in d["field"]
    ]
    trimmed = {**record, "question": "Who directed Glass Harbour?"}
    diffs = compare_reference.compare(trace, trimmed, "Who directed Glass Harbour? ")
    assert {
        "field": "question as given",
        "ours": "Who directed Glass Harbour? ",
        "theirs": "Who directed Glass Harbour?",
    } in diffs


# ---- replay when the service is down (item 5) -------------------------------------------------------
CANDS = [{"unit_id": i + 1, "title": t, "text": x} for i, (t, x) in enumerate(FILM_WORLD[:4])]
FAST = {"backoff_base": 0.01, "backoff_max": 0.02}  # 4 attempts, short waits: the count is what is checked


def _refused_url() -> str:
    """A loopback URL whose port refuses connections: a real server's, after it stopped."""
    with JudgeServer(FunctionJudge(hash_like, name="hash-like")) as srv:
        url, port = srv.url, srv.port
    with pytest.raises(OSError):  # it really refuses
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    return url


@pytest.mark.parametrize(
    "cached, expected",
    [
        (4, r"All 4 judgments of this round are in the cache \S+ \(it holds 4 judgments\): --cache-only replays"),
        (2, r"2 of this round's 4 judgments are in the cache \S+ \(it holds 2 judgments\): --cache-only replays"),
        (0, r"None of this round's 4 judgments is in the cache \S+ \(it holds 0 judgments\)$"),
    ],
    ids=["all cached", "some cached", "none cached"],
)
def test_the_unreachable_service_error_says_what_the_cache_holds(tmp_path, cached, expected):
    cache = tmp_path / "cache"
    with JudgeServer(FunctionJudge(hash_like, name="hash-like")) as srv:
        url = srv.url
        if cached:
            first = jev.make_jev_judge(url, MODEL, payload_style="inline", cache_dir=cache)
            first.judge("Who directed Glass Harbour?", CANDS[:cached], [])
            first.close()
    judge = jev.make_jev_judge(url, MODEL, payload_style="inline", cache_dir=cache, **FAST)
    try:
        with pytest.raises(JEVUnreachable, match=expected) as err:
            judge.judge("Who directed Glass Harbour?", CANDS, [])
        assert "no attempt connected: the service cannot be reached" in str(err.value)
        assert judge.usage()["http_requests"] == 4  # the client's attempts, none answered
    finally:
        judge.close()


def test_the_retries_are_paid_once_then_every_request_fails_at_once(tmp_path):
    judge = jev.make_jev_judge(_refused_url(), MODEL, cache_dir=tmp_path / "cache", **FAST)
    try:
        for n in range(3):
            with pytest.raises(JEVUnreachable) as err:
                judge.judge(f"Question {n}?", CANDS, [])
            if n:
                assert "not tried: the service could not be reached" in str(err.value)
        usage = judge.usage()
        assert (usage["http_requests"], usage["retries"], usage["requests"]) == (4, 3, 1)
    finally:
        judge.close()


def test_a_server_that_answers_again_is_used_again_once_the_hold_is_over(tmp_path):
    with JudgeServer(FunctionJudge(hash_like, name="hash-like")) as srv:
        url, port = srv.url, srv.port
    judge = jev.make_jev_judge(url, MODEL, cache_dir=tmp_path / "cache", unreachable_hold=0, **FAST)
    try:
        with pytest.raises(JEVUnreachable):
            judge.judge("Q?", CANDS, [])
        with JudgeServer(FunctionJudge(hash_like, name="hash-like"), port=port):
            assert len(judge.judge("Q?", CANDS, [])) == 4
    finally:
        judge.close()


@pytest.mark.slow
def test_a_fully_cached_rerun_with_the_service_down_names_the_cache_and_retries_once(tmp_path):
    """The CLI: the cache holds every judgment of three questions (asked in process while the server
    was up, with the options `sag2wb eval` uses), the server has stopped, the same eval runs."""
    questions = tmp_path / "three.jsonl"
    lines = [json.dumps({"_id": f"q{i}", "question": q, "supporting_titles": []}) for i, q in enumerate(PADDED[:3])]
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db, cache = tmp_path / "film.sqlite", tmp_path / "cache"
    index = build_index(tmp_path, FILM_WORLD, name=db.name)
    with JudgeServer(FunctionJudge(hash_like, name="hash-like")) as srv:
        url = srv.url
        judge = jev.make_jev_judge(url, cache_dir=cache)
        for i, q in enumerate(PADDED[:3]):
            assert Run(index, Question(f"q{i}", q, ()), judge=judge).run().stop != STOP_JUDGE_ERROR
        judge.close()
    index.close()
    again = sag2wb(
        "eval",
        "--db",
        db,
        "--questions",
        questions,
        "--judge",
        "jev",
        "--jev-endpoint",
        url,
        "--cache-dir",
        cache,
        "--out",
        tmp_path / "again.json",
        "--keep-going",
        cwd=tmp_path,
    )
    assert again.returncode != 0
    out = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    errors = [f["error"] for f in out["failures"]]
    assert len(errors) == 3 and all("the service c" in e and "--cache-only replays" in e for e in errors), errors
    assert all(" judgments of this round are in the cache " in e and e.count("All ") == 1 for e in errors), errors
    assert (out["stats"]["http_requests"], out["stats"]["retries"]) == (4, 3)  # once per run, not per question
