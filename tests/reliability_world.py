"""Shared pieces of the reliability suite (tests/test_reliability_*.py): a small real index,
a questions file, a function judge whose behaviour a `mode` file switches (ok, raise, nan,
count, sleep), and `sag2wb(...)`, which runs the real command in its own process and checks
that no traceback ever reaches the user."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from workbench.index.store import Index
from workbench.index.units import Question

from .conftest import BRIDGE_WORLD, REPO, sag2wb_here, units_from
from .conftest import sag2wb as sag2wb_process

QUESTIONS = [
    {
        "_id": "q1",
        "type": "bridge",
        "question": "Where was the director of Glass Harbour born?",
        "supporting_titles": ["Glass Harbour", "Mara Quell", "Tessaly"],
    },
    {
        "_id": "q2",
        "type": "bridge",
        "question": "Which band is from Ostrow?",
        "supporting_titles": ["Glass Harbor (band)", "Ostrow"],
    },
    {"_id": "q3", "type": "comparison", "question": "What did Mara Quell paint?", "supporting_titles": ["Mara Quell"]},
    {
        "_id": "q4",
        "type": "comparison",
        "question": "Which town is known for bridges?",
        "supporting_titles": ["Tessaly"],
    },
]

# Scores by word overlap (deterministic); the `mode` file beside it turns on faults: for the
# question about Ostrow (q2) raise, nan or count (one score short); sleep (60 s) for q4.
JUDGE = """
import math, time
from pathlib import Path

MODE = Path(__file__).with_name("mode")

def judge(question, candidates, context):
    mode = MODE.read_text().strip() if MODE.exists() else "ok"
    words = set(question.lower().replace("?", "").split())
    scores = [min(1.0, 0.1 + 0.2 * len(words & set((c["title"] + " " + c["text"]).lower().replace(".", "").split())))
              for c in candidates]
    if "Ostrow" in question:
        if "raise" in mode:
            raise ConnectionError("judge server at 127.0.0.1:9 refused the connection")
        if "nan" in mode:
            return [math.nan for _ in candidates]
        if "count" in mode:
            return scores[:-1]
    if "sleep" in mode and "bridges" in question:
        time.sleep(60)
    return scores
"""


def make_world(root: Path, questions=QUESTIONS) -> dict:
    """corpus.json, ix.sqlite (built by the real command), q.jsonl and j.py under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "text": x} for t, x in BRIDGE_WORLD]))
    qfile = root / "q.jsonl"
    write_questions(qfile, questions)
    (root / "j.py").write_text(JUDGE)
    db = root / "ix.sqlite"
    Index.build(units_from(BRIDGE_WORLD), db, source=str(corpus))
    return {"root": root, "corpus": corpus, "q": qfile, "db": db, "judge": f"{root / 'j.py'}:judge"}


def write_questions(path: Path, questions) -> None:
    path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")


def as_questions(items=QUESTIONS) -> list[Question]:
    return [Question(q["_id"], q["question"], tuple(q["supporting_titles"]), q.get("type")) for q in items]


def set_mode(world: dict, mode: str) -> None:
    (world["root"] / "mode").write_text(mode)


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def sag2wb(
    *args, cwd=None, timeout=120, python_prelude: str | None = None, process: bool = False
) -> subprocess.CompletedProcess:
    """Run `sag2wb ARGS` and assert no traceback reaches stderr. In this process by default
    (`workbench.cli.main`, the console script's own entry; an exception escaping it fails the
    test), or as a real process with `process=True` or a `python_prelude` (code that installs a
    fault at a controlled point before `main` runs)."""
    argv = [str(a) for a in args]
    if python_prelude is None:
        run = sag2wb_process if process else sag2wb_here
        proc = run(*argv, cwd=cwd, timeout=timeout) if process else run(*argv, cwd=cwd)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc
    code = python_prelude + "\nimport sys\nfrom workbench.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    cmd = [sys.executable, "-c", code, *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env())
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The single error line of a failed command, checked to contain each needle."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def eval_args(world, out, *extra, judge: str = "lexical") -> tuple:
    """`sag2wb eval` over the world's index and questions, quiet, writing `out`."""
    return ("eval", "--db", world["db"], "--questions", world["q"], "--judge", judge, "--out", out, "--quiet", *extra)


def default_sigint() -> None:
    """`preexec_fn` for a child a test sends Ctrl-C to: SIGINT's default action, so Python
    installs its KeyboardInterrupt handler even when pytest itself runs with SIGINT ignored
    (as a background job of a non-interactive shell does, and children inherit)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
