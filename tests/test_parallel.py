"""Many questions at once (workbench.parallel): threads against a real judge server on
127.0.0.1, a spawned process pool, and a 2-worker Dask LocalCluster (one worker killed
mid-run). Every parallel run is compared byte for byte with a sequential one: records,
resume files, trace files (`stats` excluded), failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from tests.comparison_judges import hash_judge
from tests.reliability_world import default_sigint
from workbench.executors import (
    Dask,
    ParallelError,
    Processes,
    RemoteTaskError,
    Sequential,
    Threads,
    default_concurrency,
    make_executor,
)
from workbench.index.corpora import load_questions
from workbench.judges.jev.server import JudgeServer
from workbench.judges.registry import JudgeSpec
from workbench.runs.evaluation import evaluate
from workbench.runs.experiment import Experiment, paper_ablation, run_order
from workbench.runs.options import Hooks, RunOptions
from workbench.runs.records import QuestionFailed
from workbench.runs.tasks import QuestionTask, components

from .conftest import REPO

DOCS = REPO / "sample_corpora" / "internal_docs"
DOCS_QUESTIONS = REPO / "sample_corpora" / "internal_docs.questions.jsonl"


class CountingHashJudge:
    """The deterministic hash judge, counting how many calls the server runs at once."""

    name = key = "hash-counting"

    def __init__(self, seconds: float = 0.02):
        self.fn, self.seconds = hash_judge, seconds
        self.lock = threading.Lock()
        self.now = self.max = self.calls = 0

    def reset(self):
        with self.lock:
            self.now = self.max = self.calls = 0

    def judge(self, question, candidates, context):
        with self.lock:
            self.now += 1
            self.calls += 1
            self.max = max(self.max, self.now)
        try:
            time.sleep(self.seconds)  # a service that takes a while: requests overlap if the client lets them
            return self.fn(question, candidates, context)
        finally:
            with self.lock:
                self.now -= 1


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from workbench.index.store import open_or_build

    ix, _ = open_or_build(DOCS, tmp_path_factory.mktemp("ix") / "docs.sqlite")
    return ix


@pytest.fixture(scope="module")
def questions():
    return load_questions(DOCS_QUESTIONS)


@pytest.fixture(scope="module")
def server():
    judge = CountingHashJudge()
    srv = JudgeServer(judge).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def pool():
    ex = Processes(2)
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _no_stats(text: str) -> dict:
    data = json.loads(text)
    data.pop("stats", None)
    return data


def run_eval(tmp: Path, name: str, index, questions, judge="lexical", **options):
    """evaluate() with a resume file and trace files (`options`: more RunOptions fields); returns
    what must be identical."""
    resume, traces = tmp / f"{name}.partial.jsonl", tmp / f"{name}-traces"
    result = evaluate(
        index, questions, judge, options=RunOptions(progress=False, resume_path=resume, trace_dir=traces, **options)
    )
    files = {p.name: _no_stats(p.read_text(encoding="utf-8")) for p in sorted(traces.glob("*.json"))}
    return _no_stats(json.dumps(result.to_dict())), resume.read_bytes(), files


def jev_options(server, cache_dir, **extra):
    return {"endpoint": server.url, "cache_dir": str(cache_dir), "timeout": 20, **extra}


def jev(server, cache_dir, **extra) -> JudgeSpec:
    """The JEV judge of `server` as a value, its options in the spec."""
    return JudgeSpec.parse("jev", **jev_options(server, cache_dir, **extra))


# ---- choosing an executor ----------------------------------------------------------------------
def test_make_executor_defaults_and_conflicts(monkeypatch):
    from workbench.executors import pools

    assert default_concurrency("jev") == 8 and default_concurrency("lexical") == 1
    assert isinstance(make_executor(judge="jev"), Threads) and make_executor(judge="jev").workers == 8
    assert isinstance(make_executor(judge="lexical"), Sequential)
    assert isinstance(make_executor(1, judge="jev"), Sequential)
    assert isinstance(make_executor(processes=1), Sequential)
    assert isinstance(make_executor(processes=3), Processes)
    # both: that many questions at once over the processes, on threads in each
    assert repr(make_executor(16, 2)) == "Processes(2, threads=8)" and make_executor(16, 2).name == "processes(2x8)"
    assert isinstance(make_executor(4, 1), Threads) and repr(make_executor(2, 4)) == "Processes(2)"
    # --concurrency alone, for a judge that waits: from 16 on, one process per 8 questions, one per core at most
    assert isinstance(make_executor(8, judge="jev"), Threads) and isinstance(make_executor(16), Threads)
    for cores, expected in ((1, "Threads(16)"), (2, "Processes(2, threads=8)"), (4, "Processes(2, threads=8)")):
        monkeypatch.setattr(pools, "cores", lambda n=cores: n)
        assert repr(make_executor(16, judge="jev")) == expected
    assert repr(make_executor(20, judge="jev")) == "Processes(2, threads=10)"
    assert repr(make_executor(32, judge="jev")) == "Processes(4, threads=8)"
    assert isinstance(make_executor(16, 1, judge="jev"), Threads)  # --processes 1: all on threads here
    with pytest.raises(ParallelError, match="choose --dask or --processes"):
        make_executor(None, 2, "tcp://127.0.0.1:1")
    with pytest.raises(ParallelError, match="concurrency 0"):
        make_executor(0)
    with pytest.raises(ParallelError, match="threads 0"):
        Processes(2, threads=0)


def test_components_keep_a_row_with_its_source():
    configs = paper_ablation(judge="oracle")

    groups = [[c.name for c in g] for g in components(configs, run_order(configs))]
    assert groups == [["bm25"], ["H=2", "H=0", "H=1", "matched-budget"], ["no-context"], ["final-only"]]


# ---- threads: a judge that waits ----------------------------------------------------------------
@pytest.mark.slow
def test_threads_against_a_judge_server_equal_sequential_and_keep_the_request_limit(tmp_path, index, questions, server):
    seq = run_eval(tmp_path, "seq", index, questions, jev(server, tmp_path / "c1", concurrency=3))
    server.judge.reset()
    par = run_eval(
        tmp_path,
        "par",
        index,
        questions,
        jev(server, tmp_path / "c2", concurrency=3),
        executor=Threads(8),
    )
    assert par == seq
    # one client serves the 8 threads: its limit of 3 requests in flight holds, and is used
    assert 2 <= server.judge.max <= 3


@pytest.mark.slow
def test_threads_count_jev_usage_once(tmp_path, index, questions, server):
    server.judge.reset()
    result = evaluate(
        index, questions, jev(server, tmp_path / "c"), options=RunOptions(progress=False, executor=Threads(4))
    )
    assert result.stats["requests"] == server.judge.calls > 0


# ---- processes: a judge that computes ----------------------------------------------------------------
@pytest.mark.slow
def test_process_pool_equals_sequential_and_fills_the_callers_memo(tmp_path, index, questions, pool):
    from workbench.judgment import JudgmentMemo

    memos = JudgmentMemo(), JudgmentMemo()
    seq = run_eval(tmp_path, "seq", index, questions, memo=memos[0])
    assert run_eval(tmp_path, "pool", index, questions, executor=pool, memo=memos[1]) == seq
    assert memos[1].scores == memos[0].scores and len(memos[0].scores) > 100  # every judgment came back


def test_records_only_pool_run_equals_sequential_and_sends_no_traces(tmp_path, index, questions, pool):
    """`sag2wb eval --processes N` without --traces: workers send each question's record
    (made by the same function), not its trace, and no judgments for a memo nobody reads."""
    import pickle

    from workbench.executors import load_outcome, recipe_for, run_remote
    from workbench.params import Params

    def run(name, **options):
        resume = tmp_path / f"{name}.jsonl"
        result = evaluate(
            index, questions, "lexical", options=RunOptions(progress=False, resume_path=resume, **options)
        )
        assert result.traces == {}
        return _no_stats(json.dumps(result.to_dict())), resume.read_bytes()

    assert run("pool", executor=pool) == run("seq")
    q = questions[0]
    slim = pool.submit(
        run_remote,
        recipe_for(index, 2, judgments=False),
        None,
        QuestionTask.evaluating(q, "lexical", Params(), keep_traces=False),
        q.id,
    ).result()
    full = pool.submit(
        run_remote, recipe_for(index, 2), None, QuestionTask.evaluating(q, "lexical", Params()), q.id
    ).result()
    sent = load_outcome(slim).value[0]  # the question's Outcome, without its trace
    record, failure, stats = sent.record, sent.failure, sent.stats
    assert sent.trace is None and sent.question.id == q.id
    assert failure is None and stats["judgments"] == record["judgments"] > 0
    assert load_outcome(slim).judgments == {} and len(load_outcome(full).judgments) == record["judgments"]
    assert len(slim) * 5 < len(full)  # the trace was most of the bytes
    assert pickle.loads(full).value[0].trace.final_ranking  # the full outcome also carries the trace
    assert pickle.loads(full).value[0].record == record  # made in the worker, the same either way


def test_outcomes_unpickle_with_the_collector_paused_and_restored(index, questions, pool):
    import gc

    from workbench.executors import load_outcome, recipe_for, run_remote
    from workbench.params import Params

    q = questions[0]
    data = pool.submit(
        run_remote, recipe_for(index, 2), None, QuestionTask.evaluating(q, "lexical", Params()), q.id
    ).result()
    assert gc.isenabled()
    assert load_outcome(data).value[0].trace.question_id == q.id and gc.isenabled()
    gc.disable()
    try:
        load_outcome(data)
        assert not gc.isenabled()  # a caller's own choice is left as it was
    finally:
        gc.enable()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork start method")
def test_pool_forks_its_workers_with_the_callers_objects_frozen_then_unfreezes(index):
    import gc

    ex = Processes(2)
    try:
        pool = ex.pool()
        assert len(pool._processes) == 2  # every worker forked at once, inside the freeze
        assert gc.get_freeze_count() == 0  # the caller collects its own objects again
        assert ex.submit(gc.get_freeze_count).result() > 1000  # the workers keep theirs out of the collector
    finally:
        ex.close()
    gc.freeze()  # a caller that froze objects itself: left frozen
    frozen, ex = gc.get_freeze_count(), Processes(1)
    try:
        ex.pool()
        assert gc.get_freeze_count() > frozen // 2  # not unfrozen (a few frozen objects may be freed meanwhile)
    finally:
        gc.unfreeze()
        ex.close()


@pytest.mark.slow
def test_semantic_judge_in_forked_workers_equals_sequential(tmp_path, index, questions, monkeypatch):
    """The caller embeds on threads of its own before the fork (a forked worker has none of
    them: it loads its own model); every vector depends on its text alone, so workers that
    embed different passages together still give the sequential run's bytes."""
    from workbench.judges.embeddings import load_model

    load_model().encode(["warm the caller's model and its threads before the fork"])
    monkeypatch.setenv("SAG2WB_EMBED_CACHE", str(tmp_path / "seq-vectors"))
    seq = run_eval(tmp_path, "seq", index, questions, "semantic")
    monkeypatch.setenv("SAG2WB_EMBED_CACHE", str(tmp_path / "pool-vectors"))  # the workers embed afresh
    pool = Processes(2)
    try:
        assert run_eval(tmp_path, "pool", index, questions, "semantic", executor=pool) == seq
    finally:
        pool.close()
    assert any((tmp_path / "pool-vectors").iterdir())


def _adopted_index_facts(recipe):
    from workbench.executors import worker_env

    index = worker_env(recipe).index
    known = dict(index.title_phrases._known)  # before the queries below add to it
    on_own = index.title_phrases.db is index.db and index.aliases.db is index.db
    return (
        os.getpid(),
        id(index),
        id(index.db),
        len(index._units),
        "postings" in index.__dict__,
        index.unit(1).title,
        len(index.search('"api"', 3)),
        known,
        on_own,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork start method")
def test_forked_workers_adopt_the_callers_warm_index_on_their_own_connection(index):
    from workbench.executors import recipe_for

    ex = Processes(1)
    try:
        ex.ship_index(index)  # what a Stream does before its first task: warm, then fork
        assert ("api", "reference") not in index.title_phrases and index.title_phrases._known  # looked up here
        recipe = recipe_for(index, 1)
        pid, index_id, db_id, units, postings, title, hits, known, on_own = ex.submit(
            _adopted_index_facts, recipe
        ).result()
    finally:
        ex.close()
    assert pid != os.getpid()
    assert index_id == id(index)  # the caller's object, inherited by the fork with its caches
    assert units == index.N and postings  # read in the caller, not again in the worker
    assert db_id != id(index.db)  # but queries go through a connection of the worker's own
    assert known == index.title_phrases._known and on_own  # title-phrase look-ups kept, on that connection
    assert title == index.unit(1).title and hits == len(index.search('"api"', 3)) > 0
    assert index.unit(2).title  # the caller's connection still works after the worker used its own


@pytest.mark.slow
def test_experiment_on_threads_and_processes_writes_the_sequential_resume_file(tmp_path, index, questions, pool):
    def run(name, **kw):
        resume = tmp_path / f"{name}.jsonl"
        results = Experiment(
            index, questions, paper_ablation(judge="lexical"), RunOptions(resume_path=resume, progress=False)
        ).run(**kw)
        return results.records, resume.read_bytes()

    seq = run("seq")
    assert run("threads", concurrency=3) == seq
    assert run("pool", executor=pool) == seq


@pytest.mark.slow
def test_process_workers_send_jev_judgments_to_the_callers_cache(tmp_path, index, questions, server, pool):
    cache = tmp_path / "cache"
    first = run_eval(tmp_path, "pool", index, questions, jev(server, cache), executor=pool)
    server.judge.reset()
    # replay: every judgment must now be in the caller's cache under the sequential run's keys
    replay = run_eval(tmp_path, "replay", index, questions, jev(server, cache, cache_only=True))
    assert server.judge.calls == 0
    assert replay == first


@pytest.mark.slow
def test_experiment_on_processes_sends_jev_judgments_to_the_callers_cache(tmp_path, index, questions, server, pool):
    from workbench.params import Params
    from workbench.runs.policies import Config

    cache = tmp_path / "cache"

    def configs(spec):
        return [Config("H=2", Params(), spec), Config("H=0", Params(H=0), spec, "truncated", source="H=2")]

    first = Experiment(index, questions, configs(jev(server, cache)), RunOptions(progress=False)).run(executor=pool)
    server.judge.reset()
    replay = Experiment(
        index, questions, configs(jev(server, cache, cache_only=True)), RunOptions(progress=False)
    ).run()
    assert server.judge.calls == 0
    assert replay.records == first.records


# ---- processes with threads: a judge that waits, on more than one core --------------------------------
@pytest.fixture(scope="module")
def hybrid():
    ex = Processes(2, threads=3)
    yield ex
    ex.close()


def test_processes_with_threads_equal_sequential_and_fill_the_callers_memo(tmp_path, index, questions, hybrid):
    from workbench.judgment import JudgmentMemo

    memos = JudgmentMemo(), JudgmentMemo()
    seq = run_eval(tmp_path, "seq", index, questions, memo=memos[0])
    assert run_eval(tmp_path, "hybrid", index, questions, executor=hybrid, memo=memos[1]) == seq
    assert memos[1].scores == memos[0].scores and len(memos[0].scores) > 100


def test_processes_with_threads_against_a_judge_server_equal_sequential_and_fill_the_cache(
    tmp_path, index, questions, server, hybrid
):
    seq = run_eval(tmp_path, "seq", index, questions, jev(server, tmp_path / "c1"))
    server.judge.reset()
    assert run_eval(tmp_path, "hybrid", index, questions, jev(server, tmp_path / "c2"), executor=hybrid) == seq
    # each process's one client keeps its share of the request limit (JEV_REQUEST_LIMIT // 2)
    assert 0 < server.judge.max <= 20
    # the workers' judgments reached the caller's cache under the sequential run's keys
    server.judge.reset()
    replay = run_eval(tmp_path, "replay", index, questions, jev(server, tmp_path / "c2", cache_only=True))
    assert server.judge.calls == 0 and replay == seq
    # and a second run reads that cache in its workers: each process's client asks only its first
    # call again, to learn which model answers now (as one client would once)
    assert run_eval(tmp_path, "again", index, questions, jev(server, tmp_path / "c2"), executor=hybrid) == seq
    assert server.judge.calls <= 2


KILLING_JUDGE = """
import os, signal
def judge(question, candidates, context):
    if "ledger" in question:
        os.kill(os.getpid(), signal.SIGKILL)
    return [(len(c["title"]) % 7) / 7 for c in candidates]
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL, fork start method")
def test_a_worker_process_killed_mid_run_stops_the_run_with_a_clear_error(tmp_path, index, questions):
    path = tmp_path / "killing.py"
    path.write_text(KILLING_JUDGE, encoding="utf-8")
    ex = Processes(2, threads=2)
    try:
        with pytest.raises(ParallelError, match=r"processes\(2x2\) failed .*exit code -9.* rerun the same command"):
            evaluate(index, questions, f"{path}:judge", options=RunOptions(progress=False, executor=ex))
        with pytest.raises(BrokenProcessPool):  # and the broken pool says so to its next task
            ex.submit(os.getpid).result()
    finally:
        ex.close()


class FailingHashJudge(CountingHashJudge):
    """The hash judge behind a server that answers HTTP 500 for one question's later rounds."""

    def judge(self, question, candidates, context):
        if "ledger" in question and context:
            raise ValueError("server-side boom")
        return super().judge(question, candidates, context)


@pytest.mark.slow
def test_a_judge_server_error_stops_processes_with_threads_where_sequential_stops(tmp_path, index, questions, hybrid):
    server = JudgeServer(FailingHashJudge(seconds=0.0)).start()
    try:
        failures = []
        for name, executor in (("seq", None), ("hybrid", hybrid)):
            options = RunOptions(progress=False, executor=executor)
            with pytest.raises(QuestionFailed) as info:
                evaluate(index, questions, jev(server, tmp_path / name), options=options)
            failures.append(info.value.to_dict())
    finally:
        server.stop()
    assert failures[0] == failures[1] and failures[0]["question"] == "docs-05"
    assert "HTTP 500" in failures[0]["error"]


def test_a_task_whose_value_does_not_pickle_fails_its_future_only(hybrid):
    assert hybrid.submit(os.getpid).result() != os.getpid()
    with pytest.raises(RemoteTaskError, match="pickle"):
        hybrid.submit(threading.Lock).result()
    with pytest.raises(ZeroDivisionError):
        hybrid.submit(divmod, 1, 0).result()
    assert hybrid.submit(divmod, 7, 2).result() == (3, 1)


FAILING_JUDGE = """
def judge(question, candidates, context):
    if "ledger" in question and context:
        raise ValueError("boom on the ledger question")
    return [(len(c["title"]) % 7) / 7 for c in candidates]
"""


@pytest.mark.parametrize("parallel", ["threads", "processes", "processes with threads"])
def test_failures_stop_and_keep_going_exactly_as_sequential(tmp_path, index, questions, pool, hybrid, parallel):
    path = tmp_path / "failing.py"
    path.write_text(FAILING_JUDGE, encoding="utf-8")
    spec = f"{path}:judge"
    executor = {"threads": Threads(4), "processes": pool, "processes with threads": hybrid}[parallel]

    def stop(name, ex):
        resume = tmp_path / f"{name}.jsonl"
        with pytest.raises(QuestionFailed) as info:
            evaluate(index, questions, spec, options=RunOptions(progress=False, resume_path=resume, executor=ex))
        return info.value.to_dict(), resume.read_bytes()

    seq = stop("seq", None)
    assert seq[0]["question"] == "docs-05" and seq[0]["round"] == 1 and "boom" in seq[0]["error"]
    assert seq[1].count(b"\n") == 4  # the four questions before it, nothing after
    assert stop("par", executor) == seq
    kept = [
        evaluate(index, questions, spec, options=RunOptions(progress=False, keep_going=True, executor=ex))
        for ex in (None, executor)
    ]
    assert kept[0].failures == kept[1].failures and [f["question"] for f in kept[0].failures] == ["docs-05"]
    assert kept[0].records == kept[1].records and len(kept[0].records) == 8


# ---- Dask ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_dask_local_cluster_equals_sequential(tmp_path, index, questions, dask_client):
    seq = run_eval(tmp_path, "seq", index, questions)
    assert run_eval(tmp_path, "dask", index, questions, executor=Dask(dask_client)) == seq
    # the index shipped once per worker instead of read at its path
    assert run_eval(tmp_path, "shipped", index, questions, executor=Dask(dask_client, ship_index=True)) == seq
    configs = paper_ablation(judge="lexical")
    assert (
        Experiment(index, questions, configs, RunOptions(progress=False)).run(client=dask_client).records
        == Experiment(index, questions, configs, RunOptions(progress=False)).run().records
    )


@pytest.mark.slow
def test_dask_worker_killed_mid_run_loses_nothing(tmp_path, index, questions, server, dask_client):
    seq = run_eval(tmp_path, "seq", index, questions, jev(server, tmp_path / "c1"))
    killed = []

    def kill_a_busy_worker(outcome):
        if killed:
            return
        busy = [w for w, keys in dask_client.processing().items() if keys]
        if busy:
            pid = dask_client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    executor = Dask(dask_client)
    resume, traces = tmp_path / "dask.partial.jsonl", tmp_path / "dask-traces"

    result = evaluate(
        index,
        questions,
        jev(server, tmp_path / "c2"),
        options=RunOptions(
            progress=False,
            resume_path=resume,
            trace_dir=traces,
            executor=executor,
            hooks=Hooks(on_arrival=kill_a_busy_worker),
        ),
    )
    assert killed, "no worker was busy when the first result arrived"
    files = {p.name: _no_stats(p.read_text(encoding="utf-8")) for p in sorted(traces.glob("*.json"))}
    assert (_no_stats(json.dumps(result.to_dict())), resume.read_bytes(), files) == seq


# ---- the CLI: options, and Ctrl-C keeps everything finished --------------------------------------------
class GatedHashJudge(CountingHashJudge):
    """Answers the questions in `free` at once and holds every other one until `gate` is set:
    an interrupted run is sure to have finished some questions and not all."""

    def __init__(self, free):
        super().__init__(seconds=0.0)
        self.free, self.gate = set(free), threading.Event()
        self.gate.set()

    def judge(self, question, candidates, context):
        if question not in self.free:
            self.gate.wait(120)
        return super().judge(question, candidates, context)


@pytest.mark.slow
@pytest.mark.parametrize(
    "way",
    [["--concurrency", "4"], ["--processes", "2"], ["--processes", "2", "--concurrency", "4"]],
    ids=["threads", "processes", "processes-with-threads"],
)
def test_cli_ctrl_c_keeps_finished_questions_and_the_rerun_matches_sequential(tmp_path, index, questions, way):
    # processes without --trace-dir: workers send records, not traces (the path `sag2wb eval` takes)
    judge = GatedHashJudge({questions[0].question.strip()})
    server = JudgeServer(judge).start()
    try:
        seq = evaluate(index, questions, jev(server, tmp_path / "c1"), options=RunOptions(progress=False)).to_dict()
        out = tmp_path / "par.json"
        partial = out.with_name(out.name + ".partial.jsonl")
        args = [
            sys.executable,
            "-m",
            "workbench.cli",
            "eval",
            "--db",
            str(index.path),
            "--questions",
            str(DOCS_QUESTIONS),
            "--out",
            str(out),
            "--judge",
            "jev",
            "--jev-endpoint",
            server.url,
            "--quiet",
            "--cache-dir",
            str(tmp_path / "c2"),
            *way,
        ]
        judge.gate.clear()  # only the first question can finish until the interrupt
        proc = subprocess.Popen(
            args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
        )
        try:
            deadline = time.monotonic() + 120
            while not (partial.exists() and partial.read_bytes().count(b"\n") >= 1) and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
        finally:
            judge.gate.set()  # the questions in flight may end; the process exits
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        kept = [json.loads(line)["_id"] for line in partial.read_text(encoding="utf-8").splitlines()]
        assert kept == [questions[0].id]
        rerun = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert _no_stats(json.dumps(seq)) == _no_stats(out.read_text())
        assert json.loads(out.read_text())["stats"]["resumed_questions"] == 1
    finally:
        server.stop()


def test_cli_refuses_two_ways_at_once(tmp_path, index):
    from workbench.cli.main import main

    rc = main(
        [
            "eval",
            "--db",
            str(index.path),
            "--questions",
            str(DOCS_QUESTIONS),
            "--out",
            str(tmp_path / "o.json"),
            "--processes",
            "2",
            "--dask",
            "tcp://127.0.0.1:1",
        ]
    )
    assert rc == 2


@pytest.mark.slow
def test_cli_ablate_with_processes_writes_the_sequential_files(tmp_path, index):
    from workbench.cli.main import main

    def ablate(name, *extra):
        out = tmp_path / f"{name}.json"
        assert (
            main(
                [
                    "ablate",
                    "--db",
                    str(index.path),
                    "--questions",
                    str(DOCS_QUESTIONS),
                    "--out",
                    str(out),
                    "--judge",
                    "lexical",
                    "--quiet",
                    *extra,
                ]
            )
            == 0
        )
        data = json.loads(out.read_text())
        for volatile in ("stats", "seconds"):
            data.pop(volatile)
        return data, out.with_suffix(".md").read_bytes(), out.with_suffix(".html").read_bytes()

    assert ablate("pool", "--processes", "2") == ablate("seq")


@pytest.mark.slow
def test_runs_keep_the_collector_off_what_the_caller_held_and_give_it_back(index, questions, monkeypatch):
    """evaluate and Experiment.run freeze the caller's objects for the run (a collection scans
    what the run made, not a notebook's earlier results), unfreeze them after, also after a
    failure, and leave a caller's own freeze alone."""
    import gc

    from workbench.judges import FunctionJudge
    from workbench.judges.lexical import LexicalJudge
    from workbench.runs.policies import Config

    seen = []
    real = LexicalJudge.judge

    def probe(self, *args):
        seen.append(gc.get_freeze_count())
        return real(self, *args)

    monkeypatch.setattr(LexicalJudge, "judge", probe)
    held = [[i] for i in range(20_000)]  # containers the caller holds through the runs
    assert gc.get_freeze_count() == 0
    evaluate(index, questions[:2], "lexical", options=RunOptions(progress=False))
    Experiment(index, questions[:2], [Config("sag2", judge="lexical")], RunOptions(progress=False)).run()
    assert len(seen) >= 4 and min(seen) >= len(held)  # frozen while the questions ran
    assert gc.get_freeze_count() == 0  # and the collector's again afterwards

    def boom(question, candidates, context):
        raise ValueError("boom")

    failing = lambda q: FunctionJudge(boom, "boom")  # noqa: E731
    failing.key = "boom"
    with pytest.raises(QuestionFailed):
        evaluate(index, questions[:1], "boom", options=RunOptions(progress=False, hooks=Hooks(judge_for=failing)))
    assert gc.get_freeze_count() == 0

    gc.freeze()
    try:
        evaluate(index, questions[:1], "lexical", options=RunOptions(progress=False))
        assert gc.get_freeze_count() >= len(held)  # the caller's own freeze stands (not unfrozen by the run)
    finally:
        gc.unfreeze()


def test_a_callers_judge_for_stays_in_this_process(index, questions):
    """hooks.judge_for gives judge objects made here: a JEV configuration at 16 at once (which
    alone would spread over processes) keeps them on threads and calls them; processes asked for
    explicitly are refused with the reason, not run with judges built from the spec instead."""
    from workbench.judges import FunctionJudge
    from workbench.runs.experiment import ExperimentError
    from workbench.runs.policies import Config

    called = []

    def half(question, candidates, context):
        called.append(threading.current_thread().name)
        return [0.5] * len(candidates)

    factory = lambda q: FunctionJudge(half, "half")  # noqa: E731
    factory.key = "half"
    options = RunOptions(progress=False, hooks=Hooks(judge_for=factory))
    Experiment(index, questions[:3], [Config("sag2", judge="jev")], options).run(concurrency=16)
    assert called  # the caller's judge answered, in this process
    with pytest.raises(ExperimentError, match=r"judge_for with processes\(2x8\).*threads"):
        Experiment(index, questions[:3], [Config("sag2", judge="jev")], options).run(concurrency=16, processes=2)
