"""The commands' own usage error (`CLIError`) and one-line messages for OS and SQLite errors: the
path or database, what went wrong, what to do."""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from pathlib import Path


class CLIError(Exception):
    """A command's options cannot work together or with its inputs (main: one line, exit 2)."""


OS_HINTS: dict[int | None, str] = {  # keyed by OSError.errno, which may be None
    errno.EACCES: "check its permissions or choose another location",
    errno.EPERM: "check its permissions or choose another location",
    errno.EROFS: "the file system is read-only: choose a writable location",
    errno.ENOENT: "check the path (its folder must exist)",
    errno.EISDIR: "it is a folder: give a file path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.ENOSPC: "the disk is full: free some space and rerun (finished questions are kept for resume)",
    errno.EDQUOT: "the disk quota is exhausted: free some space and rerun",
    errno.EFBIG: "the file grew past this system's file-size limit: raise the limit or choose another location",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter path",
    errno.EEXIST: "a file of that name is in the way of a folder: choose another path",
    errno.EADDRINUSE: "another program listens on that port: choose another --port",
    errno.EADDRNOTAVAIL: "that address is not on this machine: check --host",
}


def os_error_message(exc: OSError) -> str:
    """One line: the path, what went wrong, what to do."""
    what = exc.strerror or str(exc) or type(exc).__name__
    hint = OS_HINTS.get(exc.errno, "check the path and rerun")
    if exc.filename is None:
        return f"{what}; {hint}"
    # the user's file, never the temporary one it was being written as
    name = Path(os.fsdecode(exc.filename))
    user = re.fullmatch(r"\.sag2wb-tmp-(.+)\.[^.]+|\.(.+)\.building-\d+", name.name)
    shown = name.with_name(user.group(1) or user.group(2)) if user else exc.filename
    return f"{shown}: {what}; {hint}"


def sqlite_error_message(args, exc: sqlite3.Error) -> str:
    db = getattr(args, "db", None)
    where = f"the database {db}" if db else "a database"
    if "locked" in str(exc):
        return f"{where} is locked by another process ({exc}); wait for it to finish and rerun"
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    # only a damaged file is called damaged: a full disk or a read-only place is not
    if primary == 13 or "disk is full" in str(exc):
        return f"{where} could not be written: the disk is full ({exc}); free some space and rerun"
    if primary == 10:
        return f"{where}: a disk I/O error ({exc}): the disk may be full or failing; free some space and rerun"
    if primary == 8 or "readonly" in str(exc):
        return f"{where} cannot be written: it or its folder is read-only ({exc}); choose a writable location"
    if primary == 14:
        return f"{where} cannot be opened ({exc}); check the path and its permissions"
    if primary not in (11, 26, None):
        return f"{where}: SQLite failed ({exc}); rerun, and if it persists rebuild with `sag2wb index CORPUS --db ...`"
    return (
        f"{where} cannot be read ({exc}): it is damaged or not a workbench index; "
        f"rebuild it with `sag2wb index CORPUS --db NEW.sqlite`"
    )
