"""Each trace's JEV stats are its own question's, also with questions at once (issue 33).

The JEV judge is shared by the questions a thread pool runs at once (`--concurrency`). A trace's
stats used to be the judge's counters at its end less those at its start, so they took in the
requests, tokens and cache lookups other questions made meanwhile. A server that holds the first
two requests until both have arrived makes the two questions overlap every time, with no timing.
"""

from __future__ import annotations

import threading

from tests.conftest import FILM_WORLD, build_index
from workbench.engine import Run
from workbench.judges import FunctionJudge, LexicalJudge, jev
from workbench.judges.jev.server import JudgeServer
from workbench.params import Params

QUESTIONS = ("Where was the director of Glass Harbour born?", "Who scored the film Glass Harbour?")
PER_CALL = (
    "requests",
    "http_requests",
    "judgments_sent",
    "cache_hits",
    "cache_misses",
    "input_tokens",
    "output_tokens",
    "estimated_input_tokens",
    "memo_hits",
    "memo_misses",
)


def meeting_judge(index, parties: int):
    """The lexical judge's scores; the first `parties` calls answer only once all have arrived."""
    lexical = LexicalJudge(index)
    barrier = threading.Barrier(parties, timeout=30)  # the timeout only keeps a broken test from hanging
    calls = []
    lock = threading.Lock()

    def judge(question, candidates, context):
        with lock:
            calls.append(question)
            waits = len(calls) <= parties
        if waits:
            barrier.wait()
        return lexical.judge(question, candidates, context)

    return FunctionJudge(judge, name="meeting")


def test_traces_count_only_their_own_requests_under_concurrency(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    params = Params()
    alone = {}
    with JudgeServer(LexicalJudge(index)) as server:  # each question alone, its own fresh cache
        for i, q in enumerate(QUESTIONS):
            judge = jev.make_jev_judge(server.url, cache_dir=tmp_path / f"alone-{i}")
            alone[q] = Run(index, q, params, judge).run().stats
            judge.close()
    with JudgeServer(meeting_judge(index, len(QUESTIONS))) as server:
        judge = jev.make_jev_judge(server.url, cache_dir=tmp_path / "together")
        traces: dict[str, dict] = {}
        errors: list[BaseException] = []

        def one(q):
            try:
                traces[q] = Run(index, q, params, judge).run().stats
            except BaseException as exc:  # reported below, not lost on the thread
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(q,)) for q in QUESTIONS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = judge.usage()
        judge.close()
    assert not errors, errors
    for q in QUESTIONS:
        assert alone[q]["requests"] > 0
        assert {k: traces[q][k] for k in PER_CALL} == {k: alone[q][k] for k in PER_CALL}, q
    for k in PER_CALL[:-2]:  # the traces add up to the judge's totals
        assert sum(traces[q][k] for q in QUESTIONS) == total[k], k
