"""Replay (`--cache-only`) from a JEV cache directory that is never written: a read-only
connection to diskcache's SQLite file that also works on a read-only file system, and the
judgment store over it.

>>> from workbench.judges.jev.cache import open_store
>>> writer = open_store("study-cache")
>>> writer.set("k", {"p": 0.9, "model": "m"}); writer.close()
>>> store = ReadOnlyStore("study-cache")                   # nothing in study-cache is written from here on
>>> store.get("k"), store.get("other", "missing")
({'p': 0.9, 'model': 'm'}, 'missing')
>>> store.close()
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path

from workbench.judges.jev.errors import JEVCacheError

CACHE_FILE = "cache.db"  # diskcache's SQLite file inside the cache directory


def _cache_problem(cache_dir: Path, what: str) -> JEVCacheError:
    return JEVCacheError(
        f"JEV cache {what}. The cache only holds judgments that can be asked again, so deleting the cache "
        f"directory {cache_dir} is safe (or pass another --cache-dir)"
    )


def _sqlite_detail(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else (exc.strerror or str(exc))


@contextlib.contextmanager
def cache_errors(cache_dir: str | Path):
    """Turn a SQLite or OS error while reading or writing the cache into a JEVCacheError."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise _in_use_problem(cache_dir, exc) from None


def _in_use_problem(cache_dir, exc: BaseException) -> JEVCacheError:
    return _cache_problem(cache_dir, f"file {Path(cache_dir) / CACHE_FILE} failed while in use ({_sqlite_detail(exc)})")


def read_only_connection(db: Path) -> sqlite3.Connection:
    """`db` (a cache.db) opened for reading only, also where nothing can be written.

    diskcache keeps cache.db in WAL mode, and SQLite opens a WAL database read-only only
    where it can create the -shm file beside it; in a read-only directory (a read-only
    mount, a copy shared with `chmod a-w`) with no -wal file left (diskcache's last close
    merges and removes it), the file is opened as immutable, which needs no lock file."""
    uri = db.resolve().as_uri()
    con = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return con
    except sqlite3.OperationalError:
        con.close()  # (an open file would keep a read-only mount busy)
        if os.access(db.parent, os.W_OK):
            raise
    wal = db.with_name(db.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise JEVCacheError(
            f"JEV cache {db.parent}: the directory is read-only and {wal.name} holds judgments not yet merged into "
            f"{db.name}; open the cache once where it can be written (any sag2wb run without --cache-only, or "
            f"`sag2wb cache stats --cache-dir {db.parent}` on a writable copy), then replay from the read-only copy"
        )
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)


class ReadOnlyStore:
    """A cache directory read for replay (`--cache-only`), never written: diskcache's own
    table read through a read-only connection (`read_only_connection`), so a cache on a
    read-only file system replays. Values are decoded by diskcache's Disk, as Cache.get does."""

    def __init__(self, cache_dir: str | Path):
        import diskcache

        self.cache_dir = Path(cache_dir)
        self.disk = diskcache.Disk(str(self.cache_dir))
        self._lock = threading.Lock()
        self._pid = -1
        self._con: sqlite3.Connection | None = None
        self._connection()  # a problem is named now, not at the first judgment

    def _connection(self) -> sqlite3.Connection:
        if self._con is None or self._pid != os.getpid():  # a forked worker opens its own
            self._con = read_only_connection(self.cache_dir / CACHE_FILE)
            self._pid = os.getpid()
        return self._con

    def _rows(self, sql: str, args=()) -> list:
        with self._lock, cache_errors(self.cache_dir):
            return self._connection().execute(sql, args).fetchall()

    def get(self, key, default=None):
        db_key, raw = self.disk.put(key)
        rows = self._rows(
            "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = ? "
            "AND (expire_time IS NULL OR expire_time > ?)",
            (db_key, raw, time.time()),
        )
        if not rows:
            return default
        mode, filename, value = rows[0]
        with cache_errors(self.cache_dir):
            return self.disk.fetch(mode, filename, value, False)

    def iterkeys(self):
        for key, raw in self._rows("SELECT key, raw FROM Cache ORDER BY key, raw"):
            yield self.disk.get(key, raw)

    def set(self, key, value) -> None:
        raise JEVCacheError(f"JEV cache {self.cache_dir} is open for replay (--cache-only): nothing is written to it")

    @contextlib.contextmanager
    def transact(self):
        yield

    def close(self) -> None:
        with self._lock:
            if self._con is not None and self._pid == os.getpid():
                self._con.close()
            self._con = None
