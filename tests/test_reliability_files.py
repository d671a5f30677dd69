"""Reliability (issue 10 §2, §3): every write is atomic, nothing but our own output is
overwritten, and every OS or SQLite error is one line with exit 2. Real processes killed
with SIGKILL at controlled points, a real file-size limit (RLIMIT_FSIZE), a real tmpfs
when this machine lets us mount one, real garbled SQLite pages."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from workbench.runs.resume import trace_file_name
from workbench.safeio import TEMP_PREFIX

from .reliability_world import QUESTIONS, env, eval_args, one_line_error, sag2wb, write_questions

# ---- kill -9 during the final write -------------------------------------------------------------
# Pauses the process when it calls `POINT` (write, fsync or replace) on the target file —
# the same hook finds the old code's `Path.write_text` — so the SIGKILL lands mid-write.
PAUSE_AT = r"""
import os, sys, time
TARGET, POINT = os.environ["SAG2WB_TEST_TARGET"], os.environ["SAG2WB_TEST_POINT"]
def _hook(frame, event, arg):
    if event == "c_call" and getattr(arg, "__name__", "") == POINT:
        who = frame.f_locals.get("path", frame.f_locals.get("self"))
        try:
            name = os.fspath(who) if who is not None else ""
        except TypeError:  # not a path (e.g. a half-built object whose str() would fail)
            return
        if isinstance(name, str) and name.endswith(TARGET):
            sys.setprofile(None)
            os.write(2, b"PAUSED\n")
            time.sleep(600)
sys.setprofile(_hook)
"""


def _kill_during_write(world, out: Path, point: str) -> str:
    code = PAUSE_AT + "\nimport sys\nfrom workbench.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    e = {**env(), "SAG2WB_TEST_TARGET": out.name, "SAG2WB_TEST_POINT": point}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, eval_args(world, out))],
        cwd=world["root"],
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        line = proc.stderr.readline()  # blocks until the pause point (or the process ends)
        assert line == b"PAUSED\n", line + proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return point


@pytest.mark.slow
@pytest.mark.parametrize("old", [True, False], ids=["over-an-old-result", "first-result"])
def test_kill_9_during_the_final_write_never_leaves_a_truncated_file(world, old):
    out = world["root"] / "out.json"
    before = None
    if old:
        assert sag2wb(*eval_args(world, out, "--param", "L=3")).returncode == 0
        before = out.read_bytes()
    truncated = 0
    for point in ("write", "fsync", "replace"):
        _kill_during_write(world, out, point)
        if old:
            truncated += out.read_bytes() != before
            json.loads(out.read_text())
        else:
            truncated += out.exists()
    assert truncated == 0
    leftovers = [p.name for p in world["root"].iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert leftovers  # what a killed writer leaves: a hidden temp file, never the target
    # the next run finishes, cleans them up and writes the whole result
    assert sag2wb(*eval_args(world, out)).returncode == 0
    assert json.loads(out.read_text())["metrics"]["questions"] == 4
    assert not [p for p in world["root"].iterdir() if p.name.startswith(TEMP_PREFIX)]


# ---- a full disk during the final write ---------------------------------------------------------
# At the moment the result is ready, the file-size limit drops to 2 KiB (SIGXFSZ ignored, so
# the write fails with EFBIG as on a full disk).
FILL_AT_RESULT = r"""
import resource, signal
import workbench.runs.evaluation as _ev
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_to_dict = _ev.EvalResult.to_dict
def _full(self):
    d = _to_dict(self)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return d
_ev.EvalResult.to_dict = _full
"""


@pytest.mark.slow
def test_a_full_disk_leaves_the_old_result_whole(world):
    out = world["root"] / "out.json"
    assert sag2wb(*eval_args(world, out, "--param", "L=3")).returncode == 0
    before = out.read_bytes()
    assert len(before) > 2048
    proc = sag2wb(*eval_args(world, out), python_prelude=FILL_AT_RESULT)
    assert proc.returncode == 2
    one_line_error(proc, str(out), "File too large")
    assert out.read_bytes() == before
    assert not [p for p in world["root"].iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert (world["root"] / "out.json.partial.jsonl").exists()  # the finished questions, for the rerun


@contextlib.contextmanager
def _tmpfs(size: str, *options: str):
    """A real tmpfs (needs root and a mount-capable kernel; skipped otherwise)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="sag2wb-tmpfs-"))
    opts = ",".join((f"size={size}", *options))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True).returncode:
        where.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)
        where.rmdir()


@pytest.mark.slow
def test_a_full_tmpfs_leaves_the_old_result_whole(world):
    with _tmpfs("256k") as disk:
        out = disk / "out.json"
        assert sag2wb(*eval_args(world, out, "--param", "L=3")).returncode == 0
        before = out.read_bytes()
        (disk / "out.json.partial.jsonl").write_text("")
        filler = FILL_AT_RESULT.replace(
            "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))", "_fill()"
        )
        filler = (
            f"import os\nDISK = {str(disk)!r}\n"
            + r"""
def _fill():
    st = os.statvfs(DISK)
    with open(os.path.join(DISK, "filler"), "wb") as f:
        try:
            f.write(b"\0" * (st.f_bavail * st.f_frsize))
        except OSError:
            pass
"""
            + filler
        )
        proc = sag2wb(*eval_args(world, out), python_prelude=filler)
        assert proc.returncode == 2
        one_line_error(proc, str(out), "No space left", "free some space")
        assert out.read_bytes() == before


# ---- refusing to overwrite what is not ours -----------------------------------------------------
@pytest.mark.slow
def test_out_refuses_inputs_and_files_that_are_not_ours(world):
    root = world["root"]
    q_before, db_before = world["q"].read_bytes(), world["db"].read_bytes()
    one_line_error(sag2wb(*eval_args(world, world["q"])), "is an input of this command")
    one_line_error(sag2wb(*eval_args(world, world["db"])), "is an input of this command")
    (root / "link.jsonl").symlink_to(world["q"])
    one_line_error(sag2wb(*eval_args(world, root / "link.jsonl")), "is an input of this command")
    assert world["q"].read_bytes() == q_before and world["db"].read_bytes() == db_before
    notes = root / "notes.json"
    notes.write_text('{"my": "notes"}')
    proc = sag2wb(*eval_args(world, notes))
    assert proc.returncode == 2
    one_line_error(proc, "not a result written by sag2wb", "--force")
    assert notes.read_text() == '{"my": "notes"}'
    assert sag2wb(*eval_args(world, notes, "--force")).returncode == 0
    assert json.loads(notes.read_text())["sag2wb"] == {"kind": "eval", "version": 1}
    # our own result is replaced without --force; an ablation result is not an eval result
    assert sag2wb(*eval_args(world, notes)).returncode == 0
    abl = root / "abl.json"
    ablate = ("ablate", "--db", world["db"], "--questions", world["q"], "--judge", "lexical", "--out", abl, "--quiet")
    (root / "abl.md").write_text("# my own notes\n")
    one_line_error(sag2wb(*ablate), "abl.md exists and is not a result written by sag2wb")
    (root / "abl.md").unlink()
    assert sag2wb(*ablate).returncode == 0
    assert sag2wb(*ablate).returncode == 0  # its own .json/.md/.html are recognised
    one_line_error(sag2wb(*eval_args(world, abl)), "not a result written by sag2wb")


def test_trace_names_never_collide(world):
    ids = ["q/1", "q_1", "x" * 120 + "a", "x" * 120 + "b"]
    write_questions(world["q"], [{**QUESTIONS[i], "_id": qid} for i, qid in enumerate(ids)])
    traces = world["root"] / "traces"
    assert sag2wb(*eval_args(world, world["root"] / "out.json", "--trace-dir", traces)).returncode == 0
    names = sorted(p.name for p in traces.iterdir() if p.name != ".sag2wb-outputs.jsonl")  # beside: their record
    assert len(names) == 4 and sorted(trace_file_name(i) for i in ids) == names
    for i, qid in enumerate(ids):
        assert json.loads((traces / trace_file_name(qid)).read_text())["question"] == QUESTIONS[i]["question"]
    assert trace_file_name("q/1").startswith("q_1-") and len(trace_file_name("x" * 500)) < 100


# ---- OS and SQLite errors: one line, exit 2 -------------------------------------------------------
def test_os_errors_are_one_line_with_exit_2(world):
    root = world["root"]
    (root / "afile").write_text("x")
    (root / "adir").mkdir()
    cases = [
        (eval_args(world, root / "afile" / "out.json"), ["afile is a file, not a folder"]),
        (eval_args(world, root / "adir"), ["adir is a directory"]),
        (eval_args(world, root / "o.json", "--trace-dir", root / "afile"), ["afile", "in the way of a folder"]),
        (
            ("eval", "--db", world["db"], "--questions", root / "adir", "--out", root / "o.json"),
            ["adir: Is a directory", "give a file path"],
        ),
        (("search", "--db", world["db"], "glass", "--top", "-1"), ["--top -1"]),
        (("search", "--db", world["db"], "glass", "--top", "0"), ["--top 0"]),
    ]
    for args, needles in cases:
        proc = sag2wb(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        one_line_error(proc, *needles)


def test_a_read_only_folder_is_named_before_any_work(world):
    if os.geteuid() != 0:
        ro = world["root"] / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        ctx = contextlib.nullcontext(ro)
    else:
        ctx = _tmpfs("64k", "ro")
    with ctx as ro:
        proc = sag2wb(*eval_args(world, ro / "sub" / "out.json"))
        assert proc.returncode == 2
        one_line_error(proc, f"cannot write in {ro}", "choose a writable folder")
        proc = sag2wb(*eval_args(world, world["root"] / "o.json", "--trace-dir", ro / "t"))
        assert proc.returncode == 2
        one_line_error(proc, str(ro / "t"))


def test_a_garbled_database_is_named_in_search_and_eval(world):
    garbled = world["root"] / "garbled.sqlite"
    data = bytearray(world["db"].read_bytes())
    page = 4096
    for start in range(2 * page, len(data), 3 * page):  # every third page from the third on
        data[start : start + page] = b"\xde\xad" * (page // 2)
    garbled.write_bytes(bytes(data))
    for args in (
        ("search", "--db", garbled, "Where was the director of Glass Harbour born?", "--judge", "lexical"),
        ("eval", "--db", garbled, "--questions", world["q"], "--out", world["root"] / "g.json", "--quiet"),
    ):
        proc = sag2wb(*args)
        assert proc.returncode == 2, proc.stderr
        one_line_error(proc, str(garbled))
        assert "sqlite3." not in proc.stderr
