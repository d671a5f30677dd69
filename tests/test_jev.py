"""JEV over HTTP against a real local server on 127.0.0.1 (workbench.judge_server): payloads,
batching, retries, faults, the disk cache, replay, export/import, event loops, the key."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import pytest

from workbench.cli.main import main as cli_main
from workbench.engine import Run
from workbench.index.store import Index
from workbench.index.units import Unit
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.server import JudgeServer
from workbench.params import Params

SECRET = "sk-test-SECRET-123"
QUESTION = "Where was the director of the harbour film born?"
PARAMS = Params(B=4, s=2, L=3, p=1, incoming_limit=2, context_size=2)  # three rounds on the corpus below
NAMES = [
    "Alder",
    "Birchwood",
    "Cedarholm",
    "Dunmore",
    "Elmstead",
    "Fernvale",
    "Glenrock",
    "Hazelton",
    "Ivybridge",
    "Juniper",
    "Kestrel",
    "Larchmont",
    "Maplewood",
    "Northfen",
    "Oakhurst",
    "Pinecrest",
    "Quarry",
    "Rowan",
]


def corpus() -> list[Unit]:
    """A ring of towns: each names two others, so expansion terms reach unseen passages."""
    units = []
    for i, n in enumerate(NAMES):
        a, b = NAMES[(i + 1) % len(NAMES)], NAMES[(i + 5) % len(NAMES)]
        extra = " The harbour film director was born here." if i < 4 else ""
        units.append(Unit(n, "", f"{n} is a town near {a}. A river joins {n} and {b}.{extra}", n, "inline", str(i)))
    return units


def scores_of(question, candidates, context):
    """A deterministic judge that depends on the question, the candidate and the context."""
    ctx = "|".join(f"{c['title']}={c.get('previous_score')}" for c in context)
    return [(sum(map(ord, question + c["title"] + c["text"] + ctx)) % 997) / 996 for c in candidates]


CANDIDATES = [{"unit_id": i, "title": n, "text": f"{n} is a town.", "document": n} for i, n in enumerate(NAMES[:6])]


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    for name in (*jev.KEY_VARIABLES, "JEV_ENDPOINT", "JEV_MODEL", "SAG2WB_JEV_CACHE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return Index.build(corpus(), tmp_path_factory.mktemp("idx") / "towns.sqlite")


@pytest.fixture
def server():
    srv = JudgeServer(FunctionJudge(scores_of, name="scores_of"), keep_bodies=100).start()
    yield srv
    srv.stop()


@pytest.fixture
def make(server, tmp_path):
    judges = []

    def factory(**opts):
        opts.setdefault("endpoint", server.url)
        opts.setdefault("cache_dir", tmp_path / "cache")
        opts.setdefault("backoff_base", 0.01)
        opts.setdefault("timeout", 5)
        if opts.get("cache_only"):
            opts = {k: v for k, v in opts.items() if k not in ("backoff_base", "timeout")}
        j = jev.make_jev_judge(**opts)
        judges.append(j)
        return j

    yield factory
    for j in judges:
        j.close()


def cached_count(cache_dir) -> int:
    return jev.cache_stats(cache_dir)["judgments"]


# ---- payloads ------------------------------------------------------------------------------
def _state(body) -> dict:
    assert isinstance(body["state"], str)  # the reference's layout: the state is a JSON string
    return json.loads(body["state"])


@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_payload_reads_back_to_question_candidates_and_context(style):
    context = [{"unit_id": 9, "title": "Ctx", "text": "Ctx text.", "previous_score": 0.123456789}]
    body = jev.build_request("m", "Q?", CANDIDATES[:3], context, style)
    assert list(body) == ["model", "state", "questions"]
    assert list(body["questions"]) == ["candidate_0", "candidate_1", "candidate_2"]  # candidate_<unit id>
    assert all(q["type"] == "noul" and isinstance(q["instructions"], dict) for q in body["questions"].values())
    question, cands, ctx, keys = jev.read_payload(json.loads(json.dumps(body)))
    assert question == "Q?" and keys == ["candidate_0", "candidate_1", "candidate_2"]
    assert [(c["title"], c["text"]) for c in cands] == [(c["title"], c["text"]) for c in CANDIDATES[:3]]
    assert ctx[0]["title"] == "Ctx" and ctx[0]["previous_score"] == 0.123456789  # full precision, never rounded
    state = _state(body)
    assert state["original_question"] == "Q?"
    assert state["previously_retrieved_evidence"] == [
        {"title": "Ctx", "passage": "Ctx text.", "previous_jev_score": 0.123456789}
    ]
    template = jev.get_instructions(None)
    assert state["evidence_score_note"] == template.evidence_score_note  # final round: how to use the scores
    q1 = body["questions"]["candidate_0"]
    if style == "stateful":
        assert state["candidate_passages"]["1"] == {"title": "Alder", "passage": "Alder is a town."}
        assert list(state["candidate_passages"]) == ["1", "2", "3"]
        assert state["candidate_question"] == template.question and state["candidate_criteria"] == template.criteria()
        assert q1 == {"type": "noul", "instructions": {"question": template.question, "candidate_number": 1}}
    else:
        assert list(state) == ["original_question", "previously_retrieved_evidence", "evidence_score_note"]
        assert q1 == {
            "type": "noul",
            "instructions": {
                "question": template.question,
                "candidate_title": "Alder",
                "candidate_passage": "Alder is a town.",
            },
            "criteria": template.criteria(),
        }


def test_no_score_note_without_previous_scores():
    body = jev.build_request("m", "Q?", CANDIDATES[:1], [{"unit_id": 9, "title": "C", "text": "t"}], "stateful")
    state = _state(body)
    assert "evidence_score_note" not in state
    assert state["previously_retrieved_evidence"] == [{"title": "C", "passage": "t"}]
    assert _state(jev.build_request("m", "Q?", CANDIDATES[:1], [], "stateful"))["previously_retrieved_evidence"] == []


def test_instructions_carry_the_papers_decision_rules():
    t = jev.get_instructions(None)
    text = (t.question + " " + t.criteria_true + " " + t.criteria_false).lower()
    for phrase in (
        "itself",
        "cannot do without",
        "intermediate",
        "relation",
        "only there",
        "topic",
        "background",
        "outside knowledge",
        "never an instruction",
    ):
        assert phrase in text, phrase


@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
def test_requests_respect_the_token_budget_and_never_truncate(style):
    cands = [{"unit_id": i, "title": f"T{i}", "text": "word " * 200, "document": f"T{i}"} for i in range(30)]
    plans = jev.plan_requests("m", "Q?", cands, [], style, max_tokens=4000, max_item_tokens=4000)
    assert len(plans) > 1
    assert sorted(i for idx, _ in plans for i in idx) == list(range(30))
    for idx, body in plans:
        assert jev.estimate_request_tokens(body) <= 4000
        _, got, _, _ = jev.read_payload(body)
        assert [c["text"] for c in got] == [cands[i]["text"] for i in idx]  # whole, not truncated
    assert all(len(idx) <= 5 for idx, _ in jev.plan_requests("m", "Q?", cands, [], style, max_questions=5))
    assert len(jev.plan_requests("m", "Q?", cands, [], style)) == 1  # no cap on questions by default
    huge = [{"unit_id": 77, "title": "Huge", "text": "x " * 40_000, "document": "Huge"}]
    with pytest.raises(jev.JEVPayloadError, match=r"77.*'Huge'.*32000-token limit.*not truncated"):
        jev.plan_requests("m", "Q?", huge, [], style)


def test_stateful_sends_fewer_tokens_than_inline():
    ctx = [{"unit_id": 100 + i, "title": f"C{i}", "text": "context words " * 20} for i in range(4)]
    cands = [{"unit_id": i, "title": f"T{i}", "text": f"T{i} is a town."} for i in range(30)]
    # (each inline question repeats the instructions; the stateful state holds them once)
    total = {
        s: sum(jev.estimate_request_tokens(b) for _, b in jev.plan_requests("m", "Q?", cands, ctx, s))
        for s in jev.PAYLOAD_STYLES
    }
    assert total["stateful"] < total["inline"]  # (both repeat the question per candidate, as the reference)


def test_cache_key_covers_what_changes_the_answer_and_not_the_api_key(monkeypatch):
    args = ("fam", "m", "stateful", "Q?", [{"title": "C", "text": "t", "previous_score": 0.5}], CANDIDATES[0])
    base = jev.judgment_key(*args)
    monkeypatch.setenv("JEV_API_KEY", SECRET)
    assert jev.judgment_key(*args) == base and SECRET not in base
    variants = [
        ("fam2", *args[1:]),
        (args[0], "m2", *args[2:]),
        (*args[:2], "inline", *args[3:]),
        (*args[:3], "Q2?", *args[4:]),
        (*args[:4], [{"title": "C", "text": "t", "previous_score": 0.6}], args[5]),
        (*args[:4], [{"title": "C", "text": "t", "previous_score": 0.50000001}], args[5]),  # full precision
        (*args[:4], [{"title": "C", "text": "t"}], args[5]),
        (*args[:5], {**CANDIDATES[0], "text": "changed"}),
    ]
    keys = {jev.judgment_key(*v) for v in variants}
    assert base not in keys and len(keys) == len(variants)
    # the unit id is not read by the decision model, so it does not split the cache
    assert jev.judgment_key(*args[:5], {**CANDIDATES[0], "unit_id": 999}) == base


def test_cache_keys_follow_the_batch_in_stateful_style_and_not_in_inline():
    q, ctx = "Q?", []
    alone = jev.request_keys("f", "m", None, "stateful", q, ctx, CANDIDATES[:1])
    first = jev.request_keys("f", "m", None, "stateful", q, ctx, CANDIDATES[:3])
    last = jev.request_keys("f", "m", None, "stateful", q, ctx, [CANDIDATES[1], CANDIDATES[2], CANDIDATES[0]])
    assert len({alone[0], first[0], last[2]}) == 3  # its batch mates and position are in the key
    inline = [jev.request_keys("f", "m", None, "inline", q, ctx, b) for b in (CANDIDATES[:1], CANDIDATES[:3])]
    assert inline[0][0] == inline[1][0]  # inline: the candidate alone
    mine = jev.Template("mine-v1", "Needed?", "yes", "no", "scores")
    other = jev.request_keys("f", "m", mine, "inline", q, ctx, CANDIDATES[:1])
    edited = jev.request_keys(
        "f", "m", jev.Template("mine-v1", "Needed!", "yes", "no", "scores"), "inline", q, ctx, CANDIDATES[:1]
    )
    assert len({inline[0][0], other[0], edited[0]}) == 3  # the template's name and text are in the key


def test_encoded_request_is_the_body_and_its_token_cost():
    ctx = [{"unit_id": 1, "title": "北京", "text": "context é", "previous_score": 0.5}]
    for style in jev.PAYLOAD_STYLES:
        for idx, body in jev.plan_requests('m"1', "Q 问?", CANDIDATES, ctx, style, max_questions=2):
            assert body == jev.build_request('m"1', "Q 问?", [CANDIDATES[i] for i in idx], ctx, style)
            content, cost = jev.encode_request(body)
            assert content == jev.payload._dumps(body).encode("utf-8")
            tokens = jev.payload.count_tokens
            assert cost == tokens(body["state"]) + 1024 + sum(
                tokens(jev.payload._dumps(q)) + 64 for q in body["questions"].values()
            )


# ---- endpoint and key ----------------------------------------------------------------------
def test_presets_and_urls():
    assert jev.resolve_endpoint("typesafe", None)[:3] == (
        "https://api.typesafe.ai/v1/systemone",
        "jev-latest",
        "typesafe",
    )
    assert jev.resolve_endpoint("openrouter", None)[:3] == (
        "https://openrouter.ai/api/alpha/decisions",
        "typesafe/jev-1.13",
        "openrouter",
    )
    # SPEC 3b: "/systemone" is appended unless the URL already ends in /systemone or /decisions
    assert jev.resolve_endpoint("http://127.0.0.1:4001/v1", None)[0] == "http://127.0.0.1:4001/v1/systemone"
    assert jev.resolve_endpoint("http://127.0.0.1:4001/v1/", None)[0] == "http://127.0.0.1:4001/v1/systemone"
    assert jev.resolve_endpoint("http://127.0.0.1:4001/x/decisions", None)[0] == "http://127.0.0.1:4001/x/decisions"
    a = jev.resolve_endpoint("http://127.0.0.1:4001/v1/systemone", None)
    b = jev.resolve_endpoint("http://127.0.0.1:4002/v1/systemone", None)
    assert a[2] == b[2] == "url:127.0.0.1/v1/systemone"  # a local server's port does not split the cache
    with pytest.raises(jev.JEVError, match="expected typesafe or openrouter or an http"):
        jev.resolve_endpoint("ftp://x", None)
    with pytest.raises(jev.JEVError, match="no credentials"):
        jev.resolve_endpoint("https://example.org/v1?key=abc", None)


def test_missing_key_names_the_variables(tmp_path):
    with pytest.raises(jev.JEVAuthError, match="JEV_API_KEY, OPENROUTER_API_KEY, TYPESAFE_API_KEY"):
        jev.make_jev_judge("openrouter", cache_dir=tmp_path)


def test_key_variable_order(monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "b")
    monkeypatch.setenv("TYPESAFE_API_KEY", "c")
    assert jev.JEVClient("openrouter")._key.source == "OPENROUTER_API_KEY"
    assert jev.JEVClient("typesafe")._key.source == "TYPESAFE_API_KEY"
    monkeypatch.setenv("JEV_API_KEY", "a")
    client = jev.JEVClient("typesafe")
    assert client._key.source == "JEV_API_KEY" and "a" not in repr(client._key).replace("API", "")


# ---- over HTTP -----------------------------------------------------------------------------
def test_answers_match_the_served_judge(make, server):
    judge = make()
    ctx = [{"unit_id": 50, "title": "Ctx", "text": "Ctx text."}]
    assert judge.judge(QUESTION, CANDIDATES, ctx) == pytest.approx(scores_of(QUESTION, CANDIDATES, ctx))
    u = judge.usage()
    assert u["requests"] == u["http_requests"] == server.requests == 1
    assert u["judgments_sent"] == u["cache_misses"] == 6 and u["input_tokens"] > 0 and u["output_tokens"] == 6


def test_batches_are_sent_concurrently_within_one_call(make, server):
    judge = make(max_questions=2)
    assert len(judge.judge(QUESTION, CANDIDATES, [])) == 6
    assert server.requests == 3 and judge.usage()["requests"] == 3


def test_429_then_success_honours_retry_after(make, server, caplog):
    server.add_fault("429", retry_after=0.05)
    judge = make()
    with caplog.at_level(logging.INFO, logger="workbench.jev"):
        assert judge.judge(QUESTION, CANDIDATES[:2], []) == pytest.approx(scores_of(QUESTION, CANDIDATES[:2], []))
    assert server.requests == 2
    assert judge.usage()["retries"] == 1 and judge.usage()["http_requests"] == 2 and judge.usage()["requests"] == 1
    assert "HTTP 429" in caplog.text and "Retry-After" in caplog.text


@pytest.mark.parametrize("kind", ["408", "499", "500", "503", "disconnect"])
def test_transient_failures_are_retried(make, server, kind):
    server.add_fault(kind, 2)
    judge = make()
    assert len(judge.judge(QUESTION, CANDIDATES[:2], [])) == 2
    assert server.requests == 3 and judge.usage()["retries"] == 2


def test_500s_beyond_the_retry_budget_fail_and_store_nothing(make, server, tmp_path):
    server.add_fault("500", 4)
    judge = make()
    with pytest.raises(jev.JEVError, match="failed after 4 attempts; last error: HTTP 500"):
        judge.judge(QUESTION, CANDIDATES[:2], [])
    assert server.requests == 4 and cached_count(tmp_path / "cache") == 0


@pytest.mark.slow
def test_slow_responses_past_the_timeout(make, server, tmp_path):
    server.add_fault("slow", 1, delay=1.0)  # once: the retry succeeds
    judge = make(timeout=0.25)
    assert len(judge.judge(QUESTION, CANDIDATES[:2], [])) == 2
    assert judge.usage()["retries"] == 1
    server.add_fault("slow", 4, delay=1.0)
    with pytest.raises(jev.JEVError, match=r"failed after 4 attempts; last error: no answer within 0.25 s"):
        judge.judge(QUESTION, CANDIDATES[2:4], [])
    assert cached_count(tmp_path / "cache") == 2


@pytest.mark.parametrize(
    "kind, message",
    [
        ("malformed", "the answer is not JSON"),
        ("missing", r"1 of 2 questions unanswered \(candidate_1\)"),
        ("out-of-range", "answer 'candidate_0' is 1.5, not a probability in"),
        ("wrong-type", "answer 'candidate_0' has type 'choice', expected 'noul'"),
    ],
)
def test_bad_answers_fail_the_batch_clearly_and_are_not_cached(make, server, tmp_path, kind, message):
    server.add_fault(kind)
    judge = make()
    with pytest.raises(jev.JEVError, match=message):
        judge.judge(QUESTION, CANDIDATES[:2], [])
    assert server.requests == 1 and cached_count(tmp_path / "cache") == 0
    assert len(judge.judge(QUESTION, CANDIDATES[:2], [])) == 2  # nothing poisoned: asked again


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_no_retry_on_client_errors(make, server, status):
    server.add_fault(str(status))
    judge = make()
    error = jev.JEVAuthError if status in (401, 403) else jev.JEVError
    with pytest.raises(error) as info:
        judge.judge(QUESTION, CANDIDATES[:2], [])
    assert server.requests == 1 and judge.usage()["retries"] == 0
    if status in (401, 403):
        assert "key" in str(info.value) and "JEV_API_KEY" in str(info.value) and "Not retried" in str(info.value)


def test_a_failed_batch_stores_nothing_while_good_batches_are_kept(make, server, tmp_path):
    judge = make(max_questions=2, concurrency=1)  # one at a time: the fault hits the first batch
    server.add_fault("out-of-range")
    with pytest.raises(jev.JEVError, match=r"1 of 3 requests failed"):
        judge.judge(QUESTION, CANDIDATES, [])
    assert cached_count(tmp_path / "cache") == 4
    before = server.requests
    assert judge.judge(QUESTION, CANDIDATES, []) == pytest.approx(scores_of(QUESTION, CANDIDATES, []))
    assert server.requests == before + 1  # only the failed batch again


def test_a_refused_key_stops_the_run_with_a_judge_error(make, server, index):
    server.add_fault("401", 10)
    trace = Run(index, QUESTION, PARAMS, make()).run()
    assert trace.rounds[-1].stop == "judge error" and "HTTP 401" in trace.rounds[-1].error
    assert server.requests == 1


# ---- the cache with the engine -------------------------------------------------------------
def test_second_identical_run_makes_no_request(make, server, index, tmp_path):
    first = Run(index, QUESTION, PARAMS, make()).run()
    assert [r.round for r in first.rounds] == [0, 1, 2] and first.stats["requests"] >= 3
    sent = server.requests
    assert first.stats["cache_misses"] == first.stats["judgments_sent"] == server.questions
    second = Run(index, QUESTION, PARAMS, make()).run()  # a new judge and memo: only the disk cache
    # one request is sent again: its answer names the model the service answers with now, and
    # only judgments answered by that model are reused (a new JEV release is never replayed)
    assert server.requests == sent + 1
    assert second.stats["requests"] == second.stats["http_requests"] == 1
    assert second.stats["cache_hits"] == second.judgments and second.final_ranking == first.final_ranking


def test_rerun_from_round_two_requests_only_new_judgments(make, server, index, tmp_path):
    run = Run(index, QUESTION, PARAMS, make())
    first = run.run()
    cached = cached_count(tmp_path / "cache")
    questions = server.questions
    again = run.rerun(params=PARAMS.replace(incoming_limit=3))
    assert len(again.rounds) == 2  # rounds 0 and 1 kept, round 2 re-stepped
    trace = again.run()
    new = cached_count(tmp_path / "cache") - cached
    # stateful: round 2's request is sent whole (its answers depend on the whole batch)
    assert new > 0 and server.questions - questions == new == trace.stats["judgments_sent"]
    # a fresh judge and memo with the new parameters: every judgment is on disk now
    before = server.requests
    replay = Run(index, QUESTION, PARAMS.replace(incoming_limit=3), make()).run()
    # (one request re-sent by the new judge: it learns the model the service answers with now)
    assert server.requests == before + 1 and replay.final_ranking == trace.final_ranking
    assert first.rounds[:2] == trace.rounds[:2]


def test_cache_only_replays_and_fails_clearly_on_a_miss(make, server, index, tmp_path):
    recorded = Run(index, QUESTION, PARAMS, make()).run()
    server.stop()  # replay needs no server and no key
    replay = Run(index, QUESTION, PARAMS, make(cache_only=True)).run()
    assert replay.final_ranking == recorded.final_ranking and replay.stats["http_requests"] == 0
    with pytest.raises(jev.JEVCacheMiss, match=r"cache-only \(replay\) mode: 1 judgment\(s\) not in"):
        make(cache_only=True).judge("another question?", CANDIDATES[:1], [])
    missed = Run(index, "Which town is near Rowan?", PARAMS, make(cache_only=True)).run()
    assert missed.rounds[-1].stop == "judge error" and "cache-only" in missed.rounds[-1].error
    with pytest.raises(jev.JEVError, match="no cache at"):
        make(cache_only=True, cache_dir=tmp_path / "nowhere")


def test_export_import_round_trip(make, server, index, tmp_path, capsys):
    recorded = Run(index, QUESTION, PARAMS, make()).run()
    file = tmp_path / "study.jsonl"
    assert cli_main(["cache", "export", "--cache-dir", str(tmp_path / "cache"), "--file", str(file)]) == 0
    lines = file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == cached_count(tmp_path / "cache") == recorded.stats["judgments_sent"]
    assert all(set(json.loads(line)) == {"key", "p", "model"} for line in lines)
    assert cli_main(["cache", "import", "--cache-dir", str(tmp_path / "copy"), "--file", str(file)]) == 0
    assert cli_main(["cache", "stats", "--cache-dir", str(tmp_path / "copy")]) == 0
    assert f"{len(lines)} judgments" in capsys.readouterr().out
    replay = Run(index, QUESTION, PARAMS, make(cache_only=True, cache_dir=tmp_path / "copy")).run()
    assert replay.final_ranking == recorded.final_ranking
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + json.dumps({"key": jev.CACHE_KEY_PREFIX + "x", "p": 2}) + "\n", encoding="utf-8")
    with pytest.raises(jev.JEVError, match=r"bad.jsonl, line 2: p=2 is not a probability"):
        jev.import_cache(tmp_path / "copy2", bad)
    assert not (tmp_path / "copy2").exists()  # checked completely before writing: no cache was even created


def test_cli_search_with_jev(server, index, tmp_path, capsys):
    code = cli_main(
        [
            "search",
            "--db",
            str(index.path),
            QUESTION,
            "--judge",
            "jev",
            "--jev-endpoint",
            server.url,
            "--cache-dir",
            str(tmp_path / "cli-cache"),
            "--payload-style",
            "inline",
            "--rounds",
            "1",
        ]
    )
    assert code == 0 and "judge: jev (jev-latest via url:127.0.0.1/v1/systemone)" in capsys.readouterr().out
    body = server.bodies[0]
    assert server.requests >= 1 and json.loads(body["state"])["original_question"] == QUESTION
    assert all(
        k.startswith("candidate_") and "candidate_passage" in q["instructions"] for k, q in body["questions"].items()
    )


# ---- event loops and cancellation ----------------------------------------------------------
def test_sync_api_inside_a_running_event_loop_and_async_api(make, server):
    judge = make()

    async def notebook_cell():
        sync = judge.judge(QUESTION, CANDIDATES[:3], [])  # what a notebook user calls; no asyncio.run crash
        awaited = await judge.ajudge(QUESTION, CANDIDATES[3:], [])
        return sync + awaited

    assert asyncio.run(notebook_cell()) == pytest.approx(scores_of(QUESTION, CANDIDATES, []))


def test_cancelling_cancels_in_flight_requests(make, server, tmp_path):
    judge = make(timeout=30)
    server.add_fault("slow", delay=3.0)

    async def cancel_midway():
        task = asyncio.ensure_future(judge.ajudge(QUESTION, CANDIDATES[:2], []))
        await asyncio.to_thread(server.request_received.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    deadline = time.monotonic() + 5
    while judge.client.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert judge.client.in_flight == 0 and cached_count(tmp_path / "cache") == 0


class GatedJudge:
    """Wraps the server's judge: a call waits until the test opens the gate, so the first
    request stays in flight exactly as long as the test needs (no timing)."""

    def __init__(self, judge):
        self.inner, self.name = judge, judge.name
        self.entered, self.gate = threading.Event(), threading.Event()

    def judge(self, question, candidates, context):
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return self.inner.judge(question, candidates, context)


def wait_until(condition, what, timeout=10.0):
    """Wait for a condition another thread makes true (the bound only stops a hang)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_a_request_cancelled_before_it_is_sent_never_reaches_the_server(make, server, tmp_path):
    """HTTP runs on `concurrency` daemon threads: a request cancelled while still queued
    behind a busy thread is dropped, never sent; one already sent finishes on its thread,
    its answer thrown away (nothing cached)."""
    judge = make(timeout=30, concurrency=1)
    gated = server.judge = GatedJudge(server.judge)  # the server answers through `server.judge`
    before = server.requests
    counters = judge.client.counters

    async def scenario():
        first = asyncio.ensure_future(judge.ajudge(QUESTION, CANDIDATES[:1], []))
        assert await asyncio.to_thread(gated.entered.wait, 10)  # sent: the server holds it at the gate
        first.cancel()  # in flight: its HTTP thread stays busy until the gate opens
        second = asyncio.ensure_future(judge.ajudge(QUESTION, CANDIDATES[1:2], []))
        # the second request has taken the client's one slot (the first's was given back when it
        # was cancelled) and is queued for the busy thread: counted, in flight, not yet sent
        await asyncio.to_thread(
            wait_until,
            lambda: counters["http_requests"] == 2 and judge.client.in_flight == 1,
            "the second request to be queued",
        )
        assert server.requests - before == 1
        second.cancel()
        # its cancellation has reached the queued request once the slot is free again
        await asyncio.to_thread(wait_until, lambda: judge.client.in_flight == 0, "the second request to be cancelled")
        for task in (first, second):
            with pytest.raises(asyncio.CancelledError):
                await task

    try:
        asyncio.run(scenario())
    finally:
        gated.gate.set()  # the first request is answered now, after both were cancelled
    # One HTTP thread takes requests in order: the first (answered, thrown away), the second
    # (cancelled: skipped), then this one. So once this answer is back, the second's fate is
    # settled, without waiting for anything: it never reached the server.
    assert judge.judge(QUESTION, CANDIDATES[2:3], []) == pytest.approx(scores_of(QUESTION, CANDIDATES[2:3], []))
    assert server.requests - before == 2 and counters["http_requests"] == 3
    assert server.questions == 2  # the server did answer the first request
    assert cached_count(tmp_path / "cache") == 1  # only the last request's judgment: the first's answer was dropped
    threads = [t for t in threading.enumerate() if t.name.startswith("jev-http-")]
    assert threads and all(t.daemon for t in threads)  # never hold up the interpreter's exit


def test_close_stops_the_loop_thread(make):
    judge = make()
    judge.judge(QUESTION, CANDIDATES[:1], [])
    thread = judge.inner._loop.thread
    judge.close()
    thread.join(5)
    assert not thread.is_alive()


# ---- the key never leaves the process except in the Authorization header --------------------
@pytest.mark.slow
def test_api_key_never_written_anywhere(monkeypatch, tmp_path, index, caplog):
    monkeypatch.setenv("JEV_API_KEY", SECRET)
    srv = JudgeServer(FunctionJudge(scores_of, name="scores_of"), require_key=SECRET).start()
    errors = []
    cache_dir = tmp_path / "cache"
    try:
        with caplog.at_level(logging.DEBUG):
            judge = jev.make_jev_judge(srv.url, cache_dir=cache_dir, backoff_base=0.01, timeout=2)
            trace = Run(index, QUESTION, PARAMS, judge).run()  # succeeds: the key was sent
            assert trace.rounds[-1].stop != "judge error"
            (tmp_path / "trace.json").write_text(trace.to_json(), encoding="utf-8")
            for fault in ("401", "403", "500", "malformed", "slow", "400"):
                srv.add_fault(fault, 4, delay=0.5)
                judge.client.timeout = 0.2 if fault == "slow" else 2
                try:
                    judge.judge(f"question for {fault}?", CANDIDATES[:2], [])
                except jev.JEVError as exc:
                    errors.append(exc)
                srv.faults.clear()
            judge.close()
            failed = Run(
                index,
                "A failing question about Rowan?",
                PARAMS,
                jev.make_jev_judge(srv.url, cache_dir=cache_dir, model="other", timeout=0.5, backoff_base=0.01),
            )
            srv.add_fault("403", 10)
            (tmp_path / "failed.json").write_text(failed.run().to_json(), encoding="utf-8")
            failed.judge.close()
            jev.export_cache(cache_dir, tmp_path / "export.jsonl")
    finally:
        srv.stop()
    assert len(errors) == 6
    texts = [caplog.text, *(str(e) for e in errors), *(repr(e) for e in errors), repr(judge), repr(judge.client)]
    assert "HTTP 401" in " ".join(texts)
    for t in texts:
        assert SECRET not in t
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in files) and (tmp_path / "export.jsonl").stat().st_size > 0
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p
