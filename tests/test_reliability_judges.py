"""Issue 10, judge side: judges and the judge server under abuse, with real processes, real
files and a real server on 127.0.0.1 (docs/reliability-judges.md lists every case).

  - a function judge that never answers ends with a JudgeError naming it and its limit;
  - JEV: a refused key in a many-request round, and a server that echoes the key;
  - corrupt or misplaced JEV caches, `cache export` / `cache import` edge files;
  - `sag2wb judge-server`: 200 concurrent connections, bounded memory, bad Content-Length,
    half-sent requests, ports in use or out of range.

$SAG2WB_RELIABILITY_CONNECTIONS sets the concurrent-connection count (default 200).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from workbench.engine import Run
from workbench.judges import FunctionJudge, JudgeTimeout, JudgeTimeoutSetting, jev, judge_timeout_from_env
from workbench.judges.jev.server import JudgeServer, JudgeServerError
from workbench.judges.registry import load_function_judge
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.params import Params
from workbench.safeio import InputError
from workbench.trace import STOP_JUDGE_ERROR

from .conftest import FILM_WORLD, REPO, build_index, sag2wb
from .echo_server import start_echo_server

CANDIDATE = {"unit_id": 1, "title": "Glass Harbour", "text": "A film.", "document": "Glass Harbour"}


# ---- 1. function judges get a time limit per call -------------------------------------------
def test_a_judge_past_its_limit_fails_naming_itself_and_the_limit():
    release = threading.Event()

    def stuck(question, candidates, context):
        release.wait(30)  # "forever", but the test lets it go at the end
        return [0.5] * len(candidates)

    judge = FunctionJudge(stuck, name="stuck", timeout=0.2)
    try:
        with pytest.raises(JudgeTimeout, match=r"judge 'stuck' did not answer within its time limit of 0.2 s"):
            JudgmentMemo().judge(judge, "q?", [CANDIDATE], [])
    finally:
        release.set()


def test_after_a_timeout_the_judge_answers_again_on_a_fresh_thread():
    release, calls = threading.Event(), []

    def first_call_sticks(question, candidates, context):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            release.wait(30)
        return [0.75] * len(candidates)

    judge = FunctionJudge(first_call_sticks, name="sticky", timeout=0.2)
    try:
        with pytest.raises(JudgeTimeout):
            judge.judge("q?", [CANDIDATE], [])
        assert judge.judge("q?", [CANDIDATE], []) == [0.75]
        stuck = [t for t in threading.enumerate() if t.name == "judge sticky"]
        assert len(stuck) == 2  # the abandoned call's thread is still waiting; a new one answered
    finally:
        release.set()


def test_calls_reuse_one_thread():
    judge = FunctionJudge(lambda q, c, x: [threading.current_thread().ident] * len(c), name="reuse", timeout=5)
    idents = {judge.judge("q?", [CANDIDATE], [])[0] for _ in range(20)}
    assert len(idents) == 1 and idents != {threading.current_thread().ident}


def test_within_the_limit_answers_and_errors_pass_through_unchanged():
    judge = FunctionJudge(lambda q, c, x: [0.25] * len(c), name="quarter", timeout=5)
    assert judge.judge("q?", [CANDIDATE, CANDIDATE], []) == [0.25, 0.25]

    def broken(question, candidates, context):
        raise KeyError("title")

    with pytest.raises(JudgeError, match=r"judge 'broken' raised KeyError: 'title'"):
        JudgmentMemo().judge(FunctionJudge(broken, timeout=5), "q?", [CANDIDATE], [])


def test_the_limit_is_not_part_of_the_judge_key():
    fn = lambda q, c, x: [0.5] * len(c)  # noqa: E731
    assert FunctionJudge(fn, "f", timeout=1).key == FunctionJudge(fn, "f", timeout=None).key == "function:f"


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv("SAG2WB_JUDGE_TIMEOUT", raising=False)
    assert judge_timeout_from_env() == 60.0 and FunctionJudge(len).timeout == 60.0
    monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", "2.5")
    assert FunctionJudge(len).timeout == 2.5
    for off in ("0", "none"):
        monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", off)
        assert FunctionJudge(len).timeout is None
    for bad in ("soon", "-1", "inf"):
        monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", bad)
        with pytest.raises(JudgeTimeoutSetting, match=r"\$SAG2WB_JUDGE_TIMEOUT=.*expected a number of seconds"):
            FunctionJudge(len)
    assert issubclass(JudgeTimeoutSetting, InputError)  # bad input: the CLI's exit 2


def test_no_limit_calls_in_the_callers_thread():
    seen = []
    FunctionJudge(lambda q, c, x: seen.append(threading.current_thread()) or [0.1], timeout=0).judge(
        "q", [CANDIDATE], []
    )
    assert seen == [threading.current_thread()]


def test_a_run_with_a_stuck_judge_stops_with_a_judge_error(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    release = threading.Event()
    judge = FunctionJudge(lambda q, c, x: release.wait(30) and [0.5] * len(c), name="slowpoke", timeout=0.2)
    try:
        trace = Run(index, "Where was the director of Glass Harbour born?", Params(), judge).run()
    finally:
        release.set()
    assert (
        trace.stop == STOP_JUDGE_ERROR
        and "'slowpoke' did not answer within its time limit of 0.2 s" in trace.rounds[0].error
    )


SLEEPING_JUDGE = "import time\n\ndef judge(question, candidates, context):\n    time.sleep(10 ** 6)\n"


@pytest.mark.slow
def test_cli_search_with_a_sleeping_function_judge_ends(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    r = sag2wb(
        "search",
        "--db",
        index.path,
        "Where was the director of Glass Harbour born?",
        "--judge",
        f"{tmp_path / 'sleepy.py'}:judge",
        env={"SAG2WB_JUDGE_TIMEOUT": "0.5"},
    )
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)  # safeio.EXIT_FAILED: the question's judge failed
    assert "sleepy.py:judge' did not answer within its time limit of 0.5 s" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.slow
def test_cli_judge_timeout_option_sets_the_limit(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    r = sag2wb(
        "search",
        "--db",
        index.path,
        "Where was the director of Glass Harbour born?",
        "--judge",
        f"{tmp_path / 'sleepy.py'}:judge",
        "--judge-timeout",
        "0.7",
    )
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)  # safeio.EXIT_FAILED, as with the variable
    assert "did not answer within its time limit of 0.7 s" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_load_function_judge_takes_a_limit(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    assert load_function_judge(f"{tmp_path / 'sleepy.py'}:judge", timeout=3).timeout == 3


# ---- 2. JEV: a refused key among several requests; a server that echoes the key ------------
SECRET = "sk-test-SECRET-123"
FILM_QUESTION = "Where was the director of Glass Harbour born?"
SIX = [
    {"unit_id": i, "title": f"Town {i}", "text": f"Town {i} lies on a river.", "document": f"Town {i}"}
    for i in range(6)
]


ECHO_MODES = ["nonjson", "answer", "type", "model", "escaped", "400", "401", "403", "500"]


@pytest.fixture
def echo_server():
    srv = start_echo_server()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def with_key(monkeypatch):
    for name in (*jev.KEY_VARIABLES, "JEV_ENDPOINT", "JEV_MODEL", "SAG2WB_JEV_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JEV_API_KEY", SECRET)


def files_containing(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("status", ["401", "403"])
def test_a_refused_key_in_a_round_of_several_requests_gives_the_key_message(with_key, tmp_path, status):
    server = JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half"), delay=0.3).start()
    server.add_fault(status)  # the first request is refused while five others are still in flight
    judge = jev.make_jev_judge(endpoint=server.url, cache_dir=tmp_path / "cache", max_questions=1, backoff_base=0.01)
    try:
        with pytest.raises(jev.JEVAuthError) as info:
            JudgmentMemo().judge(judge, FILM_QUESTION, SIX, [])
    finally:
        judge.close()
        server.stop()
    message = str(info.value)
    assert f"HTTP {status}: the key from $JEV_API_KEY was refused" in message and "Cancelled" not in message
    assert "(1 of 6 requests failed" in message  # the cancelled siblings are not counted as failures


@pytest.mark.parametrize("mode", ECHO_MODES)
def test_an_echoed_key_reaches_no_message_log_or_cache(with_key, echo_server, tmp_path, caplog, mode):
    caplog.set_level(logging.DEBUG)  # every logger, httpx's included
    judge = jev.make_jev_judge(
        endpoint=f"{echo_server}/{mode}", cache_dir=tmp_path / "cache", backoff_base=0.01, attempts=2
    )
    try:
        try:
            outcome = repr(JudgmentMemo().judge(judge, FILM_QUESTION, SIX[:2], []))
        except JudgeError as exc:
            outcome = f"{exc!r} {exc} {exc.__context__!r} {exc.__cause__!r}"
    finally:
        judge.close()
    if mode == "model":
        assert outcome == "[0.5, 0.5]"
        assert {e["model"] for e in map(json.loads, _export(tmp_path))} == {"echo Bearer ***"}
    else:
        assert "JEVError" in outcome or "JEVAuthError" in outcome
    assert SECRET not in outcome and SECRET not in caplog.text
    assert files_containing(tmp_path, SECRET) == []


def _export(tmp_path) -> list[str]:
    jev.export_cache(tmp_path / "cache", tmp_path / "export.jsonl")
    return (tmp_path / "export.jsonl").read_text().splitlines()


@pytest.mark.slow
def test_an_echoed_key_reaches_no_screen_or_file_through_the_cli(echo_server, tmp_path):
    """Real `sag2wb search` and `sag2wb eval` processes against the echoing server: search every
    output and every file written (out.json, traces, cache, export) for the key."""
    index = build_index(tmp_path, FILM_WORLD)
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"_id": "f1", "question": FILM_QUESTION, "supporting_titles": ["Glass Harbour", "Mara Quell"]})
        + "\n"
    )
    env = {"JEV_API_KEY": SECRET, "SAG2WB_JEV_CACHE": str(tmp_path / "default-cache")}
    outputs = []
    for mode in ("nonjson", "401", "answer", "model"):  # every mode runs in-process above
        common = [
            "--judge",
            "jev",
            "--jev-endpoint",
            f"{echo_server}/{mode}",
            "--cache-dir",
            tmp_path / f"cache-{mode}",
        ]
        if mode in ("nonjson", "401"):
            r = sag2wb("search", "--db", index.path, FILM_QUESTION, "--explain", *common, env=env)
            outputs.append((f"search {mode}", r))
        else:
            r = sag2wb(
                "eval",
                "--db",
                index.path,
                "--questions",
                questions,
                "--out",
                tmp_path / f"out-{mode}.json",
                "--trace-dir",
                tmp_path / f"traces-{mode}",
                "--quiet",
                *common,
                env=env,
            )
            outputs.append((f"eval {mode}", r))
    r = sag2wb("cache", "export", "--cache-dir", tmp_path / "cache-model", "--file", tmp_path / "model.jsonl", env=env)
    outputs.append(("cache export", r))
    for what, r in outputs:
        assert SECRET not in r.stdout + r.stderr, what
        assert "Traceback" not in r.stderr, (what, r.stderr[-2000:])
    assert dict(outputs)["eval model"].returncode == 0 and "questions 1" in dict(outputs)["eval model"].stdout
    assert list((tmp_path / "traces-model").iterdir())  # traces were written, and are searched below
    assert any("***" in r.stdout + r.stderr for _, r in outputs)  # the echo was seen, and scrubbed
    assert (
        "HTTP 401: the key from $JEV_API_KEY was refused"
        in dict(outputs)["search 401"].stderr + dict(outputs)["search 401"].stdout
    )
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "cache.db" for p in written) and (tmp_path / "model.jsonl").stat().st_size > 0
    assert files_containing(tmp_path, SECRET) == []


# ---- 3. corrupt or misplaced caches; cache export / import edge files ----------------------
def judgment_lines(n: int, p=lambda i: (i % 100) / 100) -> list[str]:
    return [
        json.dumps({"key": jev.CACHE_KEY_PREFIX + hashlib.sha256(str(i).encode()).hexdigest(), "p": p(i), "model": "m"})
        for i in range(n)
    ]


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def good_cache(tmp_path, name="cache", n=600) -> Path:
    report = jev.import_cache(tmp_path / name, write_lines(tmp_path / f"{name}-seed.jsonl", judgment_lines(n)))
    assert report.added == n
    return tmp_path / name


def corrupt(tmp_path, kind: str) -> Path:
    """A cache directory damaged in one of the ways a disk, a sync tool or a person damages it."""
    if kind == "file-as-dir":
        path = tmp_path / "not-a-dir"
        path.write_text("notes\n")
        return path
    cache = good_cache(tmp_path, kind)
    db = cache / jev.CACHE_FILE
    if kind == "garbled-header":
        with open(db, "r+b") as f:
            f.write(b"garbage!" * 8)
    elif kind == "truncated":
        for extra in ("cache.db-wal", "cache.db-shm"):
            (cache / extra).unlink(missing_ok=True)
        os.truncate(db, db.stat().st_size // 3)
    elif kind == "db-is-a-dir":
        db.unlink()
        db.mkdir()
    return cache


CORRUPTIONS = {
    "garbled-header": "is not a readable SQLite database",
    "truncated": "cache.db",  # SQLite says "malformed" or fails the integrity check, depending on where the cut falls
    "db-is-a-dir": "cache.db is a directory, not the cache's SQLite file",
    "file-as-dir": "is a file, not a directory",
}


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_corrupt_cache_is_a_named_error_saying_deleting_it_is_safe(tmp_path, kind):
    cache = corrupt(tmp_path, kind)
    for action in (
        jev.open_cache,
        jev.cache_stats,
        lambda d: jev.export_cache(d, tmp_path / "x.jsonl"),
        lambda d: jev.import_cache(d, write_lines(tmp_path / "one.jsonl", judgment_lines(1))),
        lambda d: jev.make_jev_judge("http://127.0.0.1:9/v1", cache_dir=d),
    ):
        with pytest.raises(jev.JEVCacheError) as info:
            action(cache)
        message = str(info.value)
        assert str(cache) in message and CORRUPTIONS[kind] in message
        if kind != "file-as-dir":
            assert f"deleting the cache directory {cache} is safe" in message
    assert issubclass(jev.JEVCacheError, InputError) and not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_cli_with_a_corrupt_cache_says_which_file_in_one_line(tmp_path, kind):
    index = build_index(tmp_path, FILM_WORLD)
    cache = corrupt(tmp_path, kind)
    r = sag2wb(
        "search",
        "--db",
        index.path,
        FILM_QUESTION,
        "--judge",
        "jev",
        "--jev-endpoint",
        "http://127.0.0.1:9/v1",
        "--cache-dir",
        cache,
    )
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("sag2wb search: error: ") and CORRUPTIONS[kind] in r.stderr


def test_a_damaged_cache_found_during_a_run_is_a_cache_error_not_a_traceback(tmp_path):
    server = JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half")).start()
    judge = jev.make_jev_judge(endpoint=server.url, cache_dir=tmp_path / "cache", backoff_base=0.01)
    try:
        assert judge.judge(FILM_QUESTION, SIX[:2], []) == [0.5, 0.5]
        for name in ("cache.db", "cache.db-wal", "cache.db-shm"):  # overwritten under a running judge
            path = tmp_path / "cache" / name
            if path.exists():
                path.write_bytes(b"garbage!" * 4096)
        with pytest.raises(jev.JEVCacheError, match=r"cache.db failed while in use .*is safe"):
            judge.judge(FILM_QUESTION, SIX[2:4], [])
    finally:
        judge.close()
        server.stop()


@pytest.mark.slow
def test_export_replaces_an_earlier_export_atomically_or_not_at_all(tmp_path):
    cache = good_cache(tmp_path, n=3000)
    earlier = tmp_path / "study.jsonl"
    assert jev.export_cache(good_cache(tmp_path, "small", n=3), earlier) == 3  # an export of ours (recorded)
    before = earlier.read_bytes()
    # A child process that may not write files over 200 kB (a full disk): room for the cache's
    # write-ahead log, not for the export (~350 kB), which fails mid-write.
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000)); "
        "from workbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "cache", "export", "--cache-dir", str(cache), "--file", str(earlier)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"--file {earlier}: cannot write it (File too large); an earlier file there is unchanged" in r.stderr
    assert (
        earlier.read_bytes() == before
        and [p.name for p in tmp_path.iterdir() if p.name.startswith(".sag2wb-tmp")] == []
    )
    assert jev.export_cache(cache, earlier) == 3000 and len(earlier.read_text().splitlines()) == 3000


def test_export_target_problems_are_named(tmp_path):
    cache = good_cache(tmp_path, n=5)
    with pytest.raises(jev.JEVInputError, match=r"the folder .*missing does not exist; create it first"):
        jev.export_cache(cache, tmp_path / "missing" / "x.jsonl")
    with pytest.raises(jev.JEVInputError, match=r"is a directory; give a file path"):
        jev.export_cache(cache, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(jev.JEVInputError, match=r"notes.txt exists and is not a result written by sag2wb.*--force"):
        jev.export_cache(cache, notes)
    assert notes.read_text() == "my notes\n"
    assert jev.export_cache(cache, notes, force=True) == 5
    with pytest.raises(jev.JEVCacheError, match="no JEV cache at"):
        jev.export_cache(tmp_path / "nowhere", tmp_path / "y.jsonl")
    assert not (tmp_path / "nowhere").exists()


KEY0 = jev.CACHE_KEY_PREFIX + "0" * 64
BAD_IMPORT_LINES = {
    "huge-integer": (
        '{"key": "' + KEY0 + '", "p": 1' + "0" * 5000 + "}",
        "line 3: unusable JSON number (Exceeds the limit",
    ),
    "big-integer": (
        '{"key": "' + KEY0 + '", "p": 1' + "0" * 400 + "}",
        "line 3: an integer of 401 digits is not a probability",
    ),
    "deep-nesting": ('{"key": ' + "[" * 100_000 + "]" * 100_000 + "}", "line 3: JSON nested too deeply"),
    "not-json": ('{"key": ', "line 3: not JSON"),
    "nan": ('{"key": "' + KEY0 + '", "p": NaN}', "line 3: p=nan is not a probability"),
    "model-object": ('{"key": "' + KEY0 + '", "p": 0.5, "model": {"a": 1}}', "line 3: model must be a string"),
}


@pytest.mark.parametrize("case", BAD_IMPORT_LINES)
def test_import_names_the_bad_line_and_writes_nothing(tmp_path, case):
    line, message = BAD_IMPORT_LINES[case]
    file = write_lines(tmp_path / f"{case}.jsonl", [*judgment_lines(2), line, *judgment_lines(1)])
    with pytest.raises(jev.JEVInputError) as info:
        jev.import_cache(tmp_path / "cache", file)
    assert f"{file}, {message}" in str(info.value) and len(str(info.value)) < 300
    assert not (tmp_path / "cache").exists()


def test_import_of_a_non_utf8_file_names_line_and_column(tmp_path):
    file = tmp_path / "latin1.jsonl"
    file.write_bytes(
        ("\n".join(judgment_lines(1)) + "\n").encode()
        + b'{"key": "%s", "p": 0.5, "model": "caf\xe9"}\n' % KEY0.encode()
    )
    # 9 characters of {"key": ", 80 of the key, 26 of ", "p": 0.5, "model": "caf: the 0xe9 is the 116th byte
    with pytest.raises(jev.JEVInputError, match=r"latin1.jsonl, line 2: not UTF-8 \(byte 0xe9 at column 116\)"):
        jev.import_cache(tmp_path / "cache", file)


def test_import_counts_duplicates_honestly_and_never_silently_replaces(tmp_path):
    lines = judgment_lines(4)
    file = write_lines(tmp_path / "dups.jsonl", [lines[0], lines[1], lines[0], lines[2], lines[0]])
    report = jev.import_cache(tmp_path / "cache", file)
    assert (report.lines, report.added, report.repeated_in_file, report.same_as_cache) == (5, 3, 2, 0)
    conflicting = json.dumps({**json.loads(lines[1]), "p": 0.99})
    clash = write_lines(tmp_path / "clash.jsonl", [lines[1], conflicting])
    with pytest.raises(
        jev.JEVInputError, match=r"clash.jsonl, line 2: key jev-judgment-v2:.* has p=0.99, but line 1 gave it p=0.01"
    ):
        jev.import_cache(tmp_path / "cache", clash)
    other = write_lines(tmp_path / "other.jsonl", [lines[0], conflicting, lines[3]])
    report = jev.import_cache(tmp_path / "cache", other)
    assert (report.added, report.same_as_cache, report.conflicts_kept, report.replaced) == (1, 1, 1, 0)
    assert "line 2: p=0.99, cached p=0.01" in report.summary()
    key1 = json.loads(lines[1])["key"]
    cache = jev.open_cache(tmp_path / "cache")
    assert cache.get(key1)["p"] == 0.01
    cache.close()
    report = jev.import_cache(tmp_path / "cache", other, overwrite=True)
    assert (report.added, report.same_as_cache, report.conflicts_kept, report.replaced) == (0, 2, 0, 1)
    cache = jev.open_cache(tmp_path / "cache")
    assert cache.get(key1)["p"] == 0.99
    cache.close()


@pytest.mark.slow
def test_cli_import_reports_conflicts_kept_and_overwrite(tmp_path):
    lines = judgment_lines(2)
    jev.import_cache(tmp_path / "cache", write_lines(tmp_path / "a.jsonl", lines))
    changed = write_lines(tmp_path / "b.jsonl", [lines[0], json.dumps({**json.loads(lines[1]), "p": 0.5})])
    r = sag2wb("cache", "import", "--cache-dir", tmp_path / "cache", "--file", changed)
    assert r.returncode == 0 and "imported 0 judgments" in r.stdout and "1 already cached (identical)" in r.stdout
    assert "1 judgments in" in r.stderr and "were not imported; pass --overwrite" in r.stderr
    r = sag2wb("cache", "import", "--cache-dir", tmp_path / "cache", "--file", changed, "--overwrite")
    assert r.returncode == 0 and "imported 1 judgments" in r.stdout and "1 replaced" in r.stdout and r.stderr == ""


# ---- 4. `sag2wb judge-server` under abuse (a real server process on 127.0.0.1) -------------
CONNECTIONS = int(os.environ.get("SAG2WB_RELIABILITY_CONNECTIONS", "200"))


class ServerProcess:
    """`sag2wb judge-server --judge hash --port 0 ...` in a child process; `.port` from its banner."""

    def __init__(self, *extra, judge="hash"):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.cli", "judge-server", "--judge", judge, "--port", "0", *map(str, extra)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        banner = self.proc.stdout.readline()
        assert f"serving judge '{judge}' at http://127.0.0.1:" in banner, banner + self.proc.stderr.read()
        self.port = int(banner.split("http://127.0.0.1:")[1].split("/")[0])

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def stop(self) -> str:
        self.proc.terminate()
        return self.proc.communicate(timeout=30)[1]


@pytest.fixture
def server_process(request):
    procs = []

    def start(*extra, **options):
        procs.append(ServerProcess(*extra, **options))
        return procs[-1]

    yield start
    for p in procs:
        stderr = p.stop()
        assert "Traceback" not in stderr, stderr  # no handler traceback, whatever the test sent


def exchange(port: int, data: bytes, *, finish: bool = True, guard: float = 30.0) -> bytes:
    """Send raw bytes on a new connection and read the whole answer (`guard` only stops a hang)."""
    with socket.create_connection(("127.0.0.1", port), timeout=guard) as s:
        s.sendall(data)
        if finish:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def post(body: bytes, length: str | None = None, extra: bytes = b"") -> bytes:
    head = b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra
    if length is not None:
        head += b"Content-Length: " + length.encode() + b"\r\n"
    return head + b"\r\n" + body


def small_request() -> bytes:
    body = json.dumps(jev.build_request("m", FILM_QUESTION, SIX[:2], [], "stateful")).encode()
    return post(body, str(len(body)), b"Connection: close\r\n")


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.slow
def test_many_simultaneous_new_connections_all_get_answers(server_process):
    server = server_process()
    request = small_request()
    start = threading.Barrier(CONNECTIONS)
    statuses, failures = [], []

    def one():
        start.wait()  # every connection is opened at the same moment
        try:
            statuses.append(status_of(exchange(server.port, request)))
        except OSError as exc:
            failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and statuses == [200] * CONNECTIONS


@pytest.mark.slow
def test_memory_stays_bounded_over_big_requests(server_process):
    """Six 10 MB requests: before, RSS grew ~20 MB per request and never fell (bodies were kept)."""
    server = server_process()
    text = "x" * 10_000_000
    body = json.dumps(jev.build_request("m", FILM_QUESTION, [{**SIX[0], "text": text}], [], "stateful")).encode()
    request = post(body, str(len(body)), b"Connection: close\r\n")
    rss = [server.rss_kib()]
    for _ in range(6):
        assert status_of(exchange(server.port, request)) == 200
        rss.append(server.rss_kib())
    # after two requests of warm-up, 40 MB more of bodies: before, +76 MB (52 -> 176 MB over six)
    growth_mib = (max(rss[-3:]) - max(rss[1:3])) / 1024
    assert growth_mib < 50, [r // 1024 for r in rss]


@pytest.mark.parametrize(
    "length, status, says",
    [
        ("abc", 400, "is not one number of bytes"),
        ("-1", 400, "is not one number of bytes"),
        ("1e3", 400, "is not one number of bytes"),
        (str(10**12), 413, "over this server's limit of 16777216 bytes"),
        (None, 411, "needs a Content-Length"),
    ],
)
@pytest.mark.slow
def test_bad_content_length_is_answered_not_a_traceback(server_process, length, status, says):
    server = server_process()
    answer = exchange(server.port, post(b'{"model": "m"}', length))
    assert status_of(answer) == status and says.encode() in answer and b"Connection: close" in answer
    assert status_of(exchange(server.port, small_request())) == 200  # and the server goes on serving


@pytest.mark.slow
def test_over_the_body_limit_and_chunked_bodies(server_process):
    server = server_process("--max-body-mb", "0.001")  # 1048 bytes
    assert status_of(exchange(server.port, post(b"{}" * 600, "1200"))) == 413
    answer = exchange(server.port, post(b"2\r\n{}\r\n0\r\n\r\n", None, b"Transfer-Encoding: chunked\r\n"))
    assert status_of(answer) == 411 and b"chunked bodies are not accepted" in answer
    two = exchange(server.port, post(b"{}", "2", b"Content-Length: 3\r\n"))
    assert status_of(two) == 400


@pytest.mark.slow
def test_half_sent_requests_time_out(server_process):
    server = server_process("--read-timeout", "0.5")
    answer = exchange(server.port, post(b'{"model": "m", "st', "1000"), finish=False)  # and then silence
    assert status_of(answer) == 408 and b"did not arrive within 0.5 s" in answer
    headers = exchange(server.port, b"POST /v1 HTTP/1.1\r\nHost: x\r\n", finish=False)  # headers never end
    assert status_of(headers) == 408 and b"headers did not arrive within 0.5 s" in headers  # answered, then closed
    assert status_of(exchange(server.port, small_request())) == 200


@pytest.mark.slow
def test_a_body_cut_short_is_a_400(server_process):
    server = server_process()
    answer = exchange(server.port, post(b'{"model": "m"}', "100"))  # the client closes after 14 of 100 bytes
    assert status_of(answer) == 400 and b"the body ended after 14 of 100 bytes" in answer


@pytest.mark.slow
def test_port_in_use_or_out_of_range_is_one_named_line(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        with pytest.raises(JudgeServerError, match=f"--port {busy}: already in use on 127.0.0.1"):
            JudgeServer(FunctionJudge(len), port=busy)
        cases = {str(busy): "already in use", "70000": "expected 0-65535", "-1": "expected 0-65535"}
        for port, says in cases.items():
            r = sag2wb("judge-server", "--judge", "hash", "--port", port, timeout=30)
            assert r.returncode == 2 and r.stdout == "", (port, r.stdout, r.stderr)
            assert r.stderr.count("\n") == 1 and r.stderr.startswith(
                f"sag2wb judge-server: error: --port {port}: {says}"
            )
    r = sag2wb("judge-server", "--judge", "hash", "--port", "0", "--host", "host.invalid", timeout=30)
    assert r.returncode == 2 and "--host host.invalid: cannot listen there" in r.stderr and "Traceback" not in r.stderr
    assert issubclass(JudgeServerError, InputError)


def test_server_keeps_no_bodies_unless_asked():
    with (
        JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c))) as plain,
        JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c)), keep_bodies=1) as recording,
    ):
        for srv in (plain, recording):
            for _ in range(3):
                assert status_of(exchange(srv.port, small_request())) == 200
        assert len(plain.bodies) == 0 and len(recording.bodies) == 1 and plain.questions == 6


@pytest.mark.slow
def test_a_served_function_judge_has_a_time_limit(server_process, tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPING_JUDGE)
    server = server_process("--judge-timeout", "0.5", judge=f"{tmp_path / 'sleepy.py'}:judge")
    answer = exchange(server.port, small_request())
    assert status_of(answer) == 500 and b"did not answer within its time limit of 0.5 s" in answer
    r = sag2wb("judge-server", "--judge", "hash", "--port", "0", "--judge-timeout", "soon", timeout=30)
    assert r.returncode == 2 and "judge timeout='soon': expected a number of seconds" in r.stderr
