"""The index file on disk: never build over what is not ours; clear the builds a killed process left."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

from workbench.index.schema import IndexProblem


def check_replaceable(path: Path) -> None:
    """Refuse to build over anything but a workbench index (a corpus, notes, a folder).

    >>> _ = Path("notes.txt").write_text("my notes")
    >>> check_replaceable(Path("notes.txt"))
    Traceback (most recent call last):
    ...
    workbench.index.schema.IndexProblem: notes.txt: exists and is not a SAG2 workbench index; refusing to replace it ...
    >>> check_replaceable(Path("new.sqlite"))   # nothing there yet: fine
    """
    if not path.exists():
        return
    if path.is_dir():
        raise IndexProblem(f"{path}: is a folder; pass a file name for the index to --db")
    with open(path, "rb") as f:
        head = f.read(16)
    ours = False
    if head == b"SQLite format 3\x00":
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                ours = bool(row) and str(row[0]).startswith("sag2wb-index")
            finally:
                db.close()
        except sqlite3.DatabaseError:
            ours = False
    if not ours:
        raise IndexProblem(
            f"{path}: exists and is not a SAG2 workbench index; refusing to replace it "
            "(choose another --db, or delete the file yourself)"
        )


def remove_stale_builds(path: Path) -> list[Path]:
    """Delete `.NAME.building-PID` files left by builds whose process is gone (killed).

    >>> _ = Path(".docs.sqlite.building-999999999").write_bytes(b"")   # no such process
    >>> remove_stale_builds(Path("docs.sqlite"))
    [PosixPath('.docs.sqlite.building-999999999')]
    """
    removed = []
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.building-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
