"""Replay issue 10's causes against a source tree and print what happens, one line each.

    python benchmarks/reliability_causes.py                   # this checkout
    python benchmarks/reliability_causes.py --src /tmp/before # e.g. `git archive ebdc57b | tar -x -C /tmp/before`

Every case runs the real `sag2wb` of `--src` in its own process (PYTHONPATH=SRC) over a small
real index; the judge is a function file whose faults a `mode` file switches (see
tests/reliability_world.py). Prints: case, exit code, what the user saw and what the files hold.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import BRIDGE_WORLD  # noqa: E402
from tests.reliability_world import JUDGE, QUESTIONS  # noqa: E402
from tests.test_reliability_files import FILL_AT_RESULT, PAUSE_AT  # noqa: E402


class World:
    def __init__(self, src: Path, root: Path):
        self.src, self.root = src, root
        (root / "corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in BRIDGE_WORLD]))
        self.q = root / "q.jsonl"
        self.write_questions(QUESTIONS)
        (root / "j.py").write_text(JUDGE)
        self.judge = f"{root / 'j.py'}:judge"
        self.db = root / "ix.sqlite"
        assert self.run("index", root / "corpus.json", "--db", self.db).returncode == 0

    def write_questions(self, items):
        self.q.write_text("".join(json.dumps(q) + "\n" for q in items))

    def mode(self, m):
        (self.root / "mode").write_text(m)

    def env(self, **extra):
        return {**os.environ, "PYTHONPATH": str(self.src), **extra}

    def cmd(self, args, prelude=None):
        if prelude is None:
            return [sys.executable, "-m", "workbench.cli", *map(str, args)]
        code = prelude + "\nimport sys\nfrom workbench.cli import main\nsys.exit(main(sys.argv[1:]))\n"
        return [sys.executable, "-c", code, *map(str, args)]

    def run(self, *args, prelude=None, **extra):
        return subprocess.run(
            self.cmd(args, prelude), capture_output=True, text=True, cwd=self.root, env=self.env(**extra), timeout=300
        )

    def eval(self, out, *extra, judge=None, prelude=None):
        return self.run(
            "eval",
            "--db",
            self.db,
            "--questions",
            self.q,
            "--judge",
            judge or self.judge,
            "--out",
            out,
            "--quiet",
            *extra,
            prelude=prelude,
        )


def seen(p) -> str:
    tb = "Traceback" in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    last = lines[-1][:110] if lines else ""
    return f"exit {p.returncode}, " + ("TRACEBACK " if tb else "") + (f"'{last}'" if last else "no message")


def case_judge(w: World, mode: str) -> str:
    w.mode(mode)
    out = w.root / f"out-{mode}.json"
    p = w.eval(out)
    w.mode("ok")
    r10 = "R@10 printed" if "R@10" in p.stdout else "no R@10"
    return f"{seen(p)}; {r10}; out.json {'written' if out.exists() else 'not written'}"


def case_keep_going(w: World) -> str:
    w.mode("raise")
    p = w.eval(w.root / "kg.json", "--keep-going")
    w.mode("ok")
    return seen(p)


def interrupt_at_q4(w: World, out: Path, partial: Path) -> int:
    """Start an eval and send Ctrl-C once three records are saved (the judge sleeps on q4),
    unless it ended before; return its exit code."""
    proc = subprocess.Popen(
        w.cmd(["eval", "--db", w.db, "--questions", w.q, "--judge", w.judge, "--out", out, "--quiet"]),
        cwd=w.root,
        env=w.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while proc.poll() is None and not (partial.exists() and len(partial.read_text().splitlines()) >= 3):
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    return proc.returncode


def case_edited_question(w: World) -> str:
    out, partial = w.root / "ed.json", w.root / "ed.json.partial.jsonl"
    w.mode("sleep")
    first = interrupt_at_q4(w, out, partial)
    edited = [dict(q) for q in QUESTIONS]
    edited[0]["question"] = "Which river town is Mara Quell from?"
    w.write_questions(edited)
    w.mode("ok")
    w.eval(out)
    resumed = json.loads(out.read_text())["stats"].get("resumed_questions")
    w.write_questions(QUESTIONS)
    return f"Ctrl-C exit {first}; rerun after editing q1: {resumed} of 3 saved records reused"


def case_resume_after_error(w: World) -> str:
    """q2's judge fails, the run is interrupted at q4, the judge is fixed, the run resumed."""
    out, partial = w.root / "re.json", w.root / "re.json.partial.jsonl"
    w.mode("raise sleep")
    first = interrupt_at_q4(w, out, partial)
    w.mode("ok")
    w.eval(out)
    clean = w.root / "re-clean.json"
    w.eval(clean)
    a, b = (json.loads(p.read_text())["metrics"]["R@10"] for p in (out, clean))
    return f"first run exit {first}; resumed after the fix: R@10 {a:.2f}, clean run: R@10 {b:.2f}"


def case_kill9(w: World, tries: int = 5) -> str:
    out = w.root / "k.json"
    w.eval(out, "--param", "L=3", judge="lexical")
    before = out.read_bytes()
    bad = 0
    for _ in range(tries):
        proc = subprocess.Popen(
            w.cmd(["eval", "--db", w.db, "--questions", w.q, "--judge", "lexical", "--out", out, "--quiet"], PAUSE_AT),
            cwd=w.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=w.env(SAG2WB_TEST_TARGET=out.name, SAG2WB_TEST_POINT="write"),
        )
        proc.stderr.readline()
        proc.kill()
        proc.wait()
        proc.stderr.close()
        data = out.read_bytes() if out.exists() else b""
        try:
            json.loads(data)
            ok = True
        except ValueError:
            ok = False
        bad += not ok
        if not ok:
            out.write_bytes(before)
    return f"{bad} of {tries} kills left out.json truncated ({len(before)} bytes before)"


def case_full_disk(w: World) -> str:
    out = w.root / "fd.json"
    w.eval(out, "--param", "L=3", judge="lexical")
    before = out.read_bytes()
    p = w.eval(out, judge="lexical", prelude=FILL_AT_RESULT)
    after = out.read_bytes() if out.exists() else b""
    state = "old file intact" if after == before else f"out.json now {len(after)} bytes"
    try:
        json.loads(after)
    except ValueError:
        state += ", invalid JSON"
    return f"{seen(p)}; {state}"


def case_out_is_input(w: World) -> str:
    before = w.q.read_bytes()
    p = w.eval(w.q, judge="lexical")
    state = "questions file intact" if w.q.read_bytes() == before else "questions file OVERWRITTEN"
    w.q.write_bytes(before)
    return f"{seen(p)}; {state}"


def case_out_not_ours(w: World) -> str:
    notes = w.root / "notes.txt"
    notes.write_text("my notes\n")
    p = w.eval(notes, judge="lexical")
    state = "notes intact" if notes.read_text() == "my notes\n" else "notes OVERWRITTEN"
    return f"{seen(p)}; {state}"


def case_trace_names(w: World) -> str:
    ids = ["q/1", "q_1", "x" * 120 + "a", "x" * 120 + "b"]
    w.write_questions([{**q, "_id": i} for q, i in zip(QUESTIONS, ids)])
    traces = w.root / "traces"
    p = w.eval(w.root / "tr.json", "--trace-dir", traces, judge="lexical")
    w.write_questions(QUESTIONS)
    n = len(list(traces.glob("*.json"))) if traces.exists() else 0
    return f"{seen(p)}; {n} trace files for 4 questions"


def case_garbled(w: World, command: str) -> str:
    g = w.root / "garbled.sqlite"
    data = bytearray(w.db.read_bytes())
    for start in range(2 * 4096, len(data), 3 * 4096):
        data[start : start + 4096] = b"\xde\xad" * 2048
    g.write_bytes(bytes(data))
    if command == "search":
        p = w.run("search", "--db", g, "Where was the director of Glass Harbour born?", "--judge", "lexical")
    else:
        p = w.run("eval", "--db", g, "--questions", w.q, "--out", w.root / "g.json", "--quiet")
    return seen(p)


def case_top(w: World) -> str:
    p = w.run("search", "--db", w.db, "glass", "--top", "-1")
    return seen(p) + ("; printed results" if p.stdout.count("score=") else "")


def case_question(w: World, value: str) -> str:
    w.q.write_text(
        json.dumps(QUESTIONS[0]) + "\n" + f'{{"_id": "q9", "question": {value}, "supporting_titles": ["Ostrow"]}}\n'
    )
    p = w.run("eval", "--db", w.db, "--questions", w.q, "--out", w.root / "qn.json", "--quiet")
    w.write_questions(QUESTIONS)
    return seen(p)


def case_no_gold(w: World, judge: str) -> str:
    w.write_questions([*QUESTIONS[:2], {"_id": "free", "question": "Which city is a port?"}])
    p = w.eval(w.root / f"ng-{judge}.json", judge=judge)
    w.write_questions(QUESTIONS)
    return seen(p)


def case_paths(w: World, which: str) -> str:
    (w.root / "afile").write_text("x")
    (w.root / "adir").mkdir(exist_ok=True)
    if which == "out-under-file":
        p = w.eval(w.root / "afile" / "o.json", judge="lexical")
    elif which == "out-is-dir":
        p = w.eval(w.root / "adir", judge="lexical")
    else:
        p = w.run("eval", "--db", w.db, "--questions", w.root / "adir", "--out", w.root / "o.json")
    return seen(p)


CASES = [
    ("judge raises", lambda w: case_judge(w, "raise")),
    ("judge returns NaN", lambda w: case_judge(w, "nan")),
    ("judge returns one score short", lambda w: case_judge(w, "count")),
    ("--keep-going with a failing judge", case_keep_going),
    ("resume after a judge error is fixed", case_resume_after_error),
    ("edited question after an interrupted run", case_edited_question),
    ("kill -9 during the final out.json write", case_kill9),
    ("full disk (RLIMIT_FSIZE) at the final write", case_full_disk),
    ("--out names the questions file", case_out_is_input),
    ("--out names an existing file not ours", case_out_not_ours),
    ("trace names: q/1, q_1, 120-char prefix", case_trace_names),
    ("garbled DB pages: search", lambda w: case_garbled(w, "search")),
    ("garbled DB pages: eval", lambda w: case_garbled(w, "eval")),
    ("search --top -1", case_top),
    ('"question": null', lambda w: case_question(w, "null")),
    ('"question": a list', lambda w: case_question(w, '["a", "b"]')),
    ("no gold, lexical judge", lambda w: case_no_gold(w, "lexical")),
    ("no gold, oracle judge", lambda w: case_no_gold(w, "oracle")),
    ("--out under a file", lambda w: case_paths(w, "out-under-file")),
    ("--out is a directory", lambda w: case_paths(w, "out-is-dir")),
    ("--questions is a directory", lambda w: case_paths(w, "questions-dir")),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=str(REPO), help="source tree whose workbench/ runs (default: this checkout)")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args(argv)
    src = Path(args.src).resolve()
    with tempfile.TemporaryDirectory(prefix="sag2wb-causes-") as tmp:
        w = World(src, Path(tmp))
        print(f"source: {src}")
        for name, fn in CASES:
            if args.only and args.only not in name:
                continue
            try:
                result = fn(w)
            except Exception as exc:  # a case that cannot run on this tree (e.g. an option it lacks)
                result = f"case failed: {type(exc).__name__}: {exc}"
            print(f"{name:45s} | {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
