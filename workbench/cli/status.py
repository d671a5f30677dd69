"""How a run over many questions ends: its result, or the exit code (safeio: 1 a question failed,
3 --keep-going with failures, 130 interrupted) with the lines that say why and what is kept."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench import safeio
from workbench.executors.pools import make_executor
from workbench.runs.records import QuestionFailed
from workbench.runs.resume import load_resume


def run_work(args, resume, work):
    """`work(executor)` on the executor the options ask for: (its result, None), or (None, the
    exit code) when a question failed or Ctrl-C stopped it (finished questions stay in `resume`)."""
    executor = make_executor(args.concurrency, args.processes, args.dask, judge=args.judge)
    try:
        return work(executor), None
    except QuestionFailed as exc:
        return None, failed(args, exc, resume)
    except KeyboardInterrupt:
        return None, interrupted(args, resume)
    finally:
        executor.close()


def kept_records(resume: Path) -> str:
    """What a stopped run leaves to resume from, said truly: no resume file is named when none was written."""
    kept = len(load_resume(resume))
    return f"{kept} finished record(s) kept in {resume}" if kept else "no question had finished, so nothing was kept"


def failed(args, exc: QuestionFailed, resume: Path) -> int:
    """Exit 1 at the first failed question: say which, where, why, and what is kept."""
    print(f"sag2wb {args.command}: error: {exc}", file=sys.stderr)
    print(
        f"sag2wb {args.command}: no results written; {kept_records(resume)}: fix the cause "
        f"and rerun the same command to resume (or pass --keep-going to skip failing questions)",
        file=sys.stderr,
    )
    return safeio.EXIT_FAILED


def interrupted(args, resume: Path) -> int:
    print(
        f"sag2wb {args.command}: interrupted; {kept_records(resume)}: rerun the same command to resume",
        file=sys.stderr,
    )
    return safeio.EXIT_INTERRUPTED


def report_failures(failures: list[dict], total: int, scope: str) -> int:
    """--keep-going's closing lines: how many failed, the first errors; exit 3."""
    print(f"{len(failures)} of {total} questions failed; {scope}", file=sys.stderr)
    for f in failures[:3]:
        where = f"configuration {f['config']!r}, " if f.get("config") else ""
        at = f" round {f['round']}" if f.get("round") is not None else ""
        print(f"  {where}question {f['question']!r}{at}: {f['error']}", file=sys.stderr)
    if len(failures) > 3:
        print(f'  ... and {len(failures) - 3} more (listed under "failures" in the JSON)', file=sys.stderr)
    return safeio.EXIT_PARTIAL
