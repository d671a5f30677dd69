"""The store's read side of SQLite: a connection whose errors name the index file, and the
stored sets and aliases an index reads lazily instead of loading them whole."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Set
from pathlib import Path

from workbench.index.schema import IndexProblem, damaged_index


class Memo(dict):
    """A dict that computes a missing value once, with `compute(key)`."""

    def __init__(self, compute):
        super().__init__()
        self.compute = compute

    def __missing__(self, key):
        value = self[key] = self.compute(key)
        return value


class Rows(list):
    def fetchone(self):
        return self[0] if self else None

    def fetchall(self):
        return self


class ReadConnection:
    """The index's SQLite connection; a damaged file becomes an IndexProblem that names the
    path and the fix, whichever query meets the damaged page first."""

    def __init__(self, path: Path, db: sqlite3.Connection):
        self.path, self.raw = path, db

    def execute(self, sql: str, args=()) -> Rows:
        try:
            return Rows(self.raw.execute(sql, args).fetchall())
        except sqlite3.OperationalError as exc:
            if "malformed" in str(exc) or "corrupt" in str(exc):
                raise damaged_index(self.path, exc) from None
            raise  # e.g. an FTS5 expression error: callers name it
        except sqlite3.DatabaseError as exc:
            raise damaged_index(self.path, exc) from None

    def close(self) -> None:
        self.raw.close()


class StoredSet(Set):
    """A set stored in one table column: membership is one indexed look-up."""

    def __init__(self, db, table: str, column: str, decode=lambda v: v, encode=lambda v: v):
        self.db, self.table, self.column, self.decode, self.encode = db, table, column, decode, encode
        self._known: dict = {}

    def __contains__(self, item) -> bool:
        found = self._known.get(item)
        if found is None:
            found = self._known[item] = bool(
                self.db.execute(f"SELECT 1 FROM {self.table} WHERE {self.column} = ?", (self.encode(item),)).fetchone()
            )
            if len(self._known) > 100_000:
                self._known.clear()
        return found

    def __iter__(self):
        return iter([self.decode(v) for (v,) in self.db.execute(f"SELECT {self.column} FROM {self.table}")])

    def __len__(self) -> int:
        return self.db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    @classmethod
    def _from_iterable(cls, items):  # set operations give plain sets
        return frozenset(items)

    def __repr__(self) -> str:
        return f"<{len(self)} stored in {self.table}>"


class Aliases(Mapping):
    """Accent-folded key -> title, stored in the index (one look-up per key)."""

    def __init__(self, db):
        self.db = db

    def __getitem__(self, key: str) -> str:
        row = self.db.execute("SELECT title FROM aliases WHERE fold = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return row[0]

    def __iter__(self):
        return iter([k for (k,) in self.db.execute("SELECT fold FROM aliases")])

    def __len__(self) -> int:
        return self.db.execute("SELECT count(*) FROM aliases").fetchone()[0]


def busy_error(path: Path, exc: Exception) -> Exception:
    """The error for an update that found the index locked by another connection."""
    return IndexProblem(
        f"{path}: cannot update the index ({exc}); another process is writing it or reading it "
        "in a transaction: let it finish, or close it, and run the update again"
    )
