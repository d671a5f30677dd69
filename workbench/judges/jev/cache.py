"""The JEV judgment cache on disk (diskcache, one entry per judgment): its keys, checking and
opening a cache directory, export to and import from JSONL (`sag2wb cache`: workbench/cli/cache.py).

Each entry point has its example: `export_cache` (which also makes a cache from a local
judge server), `import_cache`, `cache_stats`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.judges.cached import valid_entry
from workbench.judges.jev.errors import JEVCacheError, JEVError, JEVInputError
from workbench.judges.jev.instructions import Template, get_instructions
from workbench.judges.jev.payload import context_items, item_json
from workbench.judges.jev.readonly import (
    CACHE_FILE,
    ReadOnlyStore,
    _cache_problem,
    _in_use_problem,
    _sqlite_detail,
    cache_errors,
    read_only_connection,
)
from workbench.safeio import InputError, atomic_writer, check_output

CACHE_KEY_PREFIX = "jev-judgment-v2:"
OLD_KEY_PREFIXES = ("jev-judgment-v1:",)  # written by the client before the reference's layout
FORMAT_KEY = "jev-cache-format"  # a cache directory's format marker (one entry)
CACHE_FORMAT = 2
DEFAULT_CACHE_DIR = ".sag2wb/jev-cache"


# ---- judgment keys -------------------------------------------------------------------------
def _canon(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def request_keys(
    family: str,
    model: str,
    instructions: str | Template | None,
    style: str,
    question: str,
    context: list[dict],
    candidates: list[dict],
) -> list[str]:
    """The cache key of each candidate's judgment: sha256 of the canonical JSON of everything the
    decision model reads (never the API key): the requested model, the endpoint family, the
    instructions (template name and a hash of its text), the payload style, the question, the
    evidence (titles, passages, full-precision earlier scores) and, in stateful style, the
    request's candidate list in order and the candidate's position in it (its state holds its
    batch mates); in inline style the candidate alone. Unit ids (question keys) are not read.

    >>> pair = [{"title": "A", "text": "a"}, {"title": "B", "text": "b"}]
    >>> a = request_keys("f", "m", None, "stateful", "Q?", [], pair)
    >>> b = request_keys("f", "m", None, "stateful", "Q?", [], pair[:1])
    >>> a[0] == b[0], a[0].startswith(CACHE_KEY_PREFIX)
    (False, True)
    """
    t = get_instructions(instructions)
    shared = {
        "endpoint_family": family,
        "model": model,
        "instructions": t.key,
        "payload_style": style,
        "question": question,
        "evidence": context_items(context),
    }
    # each candidate's canonical [title, text], made once per passage (payload.item_json)
    items = [item_json(c["title"], c["text"]) for c in candidates]
    if style == "stateful":
        # sha256(head + "\n" + n) for each position: the head (every batch mate's text) hashed once;
        # the canonical head is {"batch": [...], ...shared}: "batch" sorts before every shared key
        canon = '{"batch":[' + ",".join(items) + "]," + _canon(shared)[1:]
        head = hashlib.sha256(canon.encode())
        keys = []
        for n in range(1, len(items) + 1):
            h = head.copy()
            h.update(b"\n%d" % n)
            keys.append(CACHE_KEY_PREFIX + h.hexdigest())
        return keys
    tail = hashlib.sha256(_canon(shared).encode() + b"\n")  # sha256(tail + "\n" + item): the tail hashed once
    keys = []
    for item in items:
        h = tail.copy()
        h.update(item.encode())
        keys.append(CACHE_KEY_PREFIX + h.hexdigest())
    return keys


def judgment_key(family: str, model: str, style: str, question: str, context: list[dict], candidate: dict) -> str:
    """The key of one candidate judged alone (a request of one) with the default instructions."""
    return request_keys(family, model, None, style, question, context, [candidate])[0]


def judgment_keys(
    family: str, model: str, style: str, question: str, context: list[dict], candidates: list[dict]
) -> list[str]:
    """`request_keys` with the default instructions (`candidates`: one request's, in order)."""
    return request_keys(family, model, None, style, question, context, candidates)


# ---- the cache directory -------------------------------------------------------------------
def check_cache_dir(cache_dir: str | Path, *, must_exist: bool = False) -> Path:
    """Check a cache directory before diskcache touches it: a directory (or absent: it is created),
    whose cache.db is a readable, intact SQLite file. Raises JEVCacheError naming the file.

    `PRAGMA quick_check` reads every page of cache.db once (70 ms for 100,000 judgments, 30 MiB): a garbled header or
    a truncated file is named here, before any question is judged, never later as a traceback."""
    path = Path(cache_dir)
    if path.exists() and not path.is_dir():
        raise JEVCacheError(
            f"--cache-dir {path} is a file, not a directory; give a directory (it is created if missing)"
        )
    if not path.exists():
        if must_exist:
            raise JEVCacheError(f"no JEV cache at {path} (the directory does not exist)")
        return path
    db = path / CACHE_FILE
    if db.exists() and not db.is_file():
        raise _cache_problem(path, f"file {db} is a directory, not the cache's SQLite file")
    if not db.exists():
        if must_exist:
            raise JEVCacheError(f"no JEV cache at {path} (it has no {CACHE_FILE})")
        return path
    if not os.access(db, os.R_OK):
        raise JEVCacheError(
            f"JEV cache file {db}: permission denied (cannot read it); make it readable, or pass another --cache-dir"
        )
    try:
        con = read_only_connection(db)
        try:
            problems = [row[0] for row in con.execute("PRAGMA quick_check").fetchall()]
        finally:
            con.close()
    except JEVCacheError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise _cache_problem(path, f"file {db} is not a readable SQLite database ({_sqlite_detail(exc)})") from None
    if problems != ["ok"]:
        raise _cache_problem(path, f"file {db} is damaged (SQLite integrity check: {problems[0][:120]})")
    return path


def open_cache(cache_dir: str | Path, *, must_exist: bool = False):
    """The diskcache.Cache of `cache_dir`, checked first (`check_cache_dir`); created if missing
    unless `must_exist`. Any problem is a JEVCacheError that names the file.

    >>> cache = open_cache(".sag2wb/jev-cache")      # created: it was missing
    >>> len(cache), cache.directory
    (0, '.sag2wb/jev-cache')
    >>> cache.close()
    """
    import diskcache

    path = check_cache_dir(cache_dir, must_exist=must_exist)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JEVCacheError(
            f"--cache-dir {path}: cannot create it ({exc.strerror}); choose another directory"
        ) from None
    try:
        # Paid judgments are never evicted (diskcache's default drops the oldest past 1 GB), and
        # with no eviction a write skips the size and expiry queries it made per judgment
        return diskcache.Cache(str(path), eviction_policy="none", cull_limit=0)
    except (sqlite3.Error, OSError) as exc:
        raise _cache_problem(path, f"in {path} cannot be opened ({_sqlite_detail(exc)})") from None


_CHUNK = 500  # keys per statement (SQLite allows 999 variables in old builds)
_ABSENT = object()


def _disk_class():
    import diskcache

    return diskcache.Disk


def _diskcache_5() -> bool:
    """Whether diskcache is a 5.x, whose Cache table the bulk reads and writes are written for
    (its private `_sql`/`_con` included): another major version is read and written key by key."""
    import diskcache

    return diskcache.__version__.split(".")[0] == "5"


class JudgmentStore:
    """A cache directory's diskcache.Cache as the store of a `CachedJudge`: a SQLite or OS
    failure while in use is a JEVCacheError that names the file (`cache_errors`)."""

    def __init__(self, cache, cache_dir: str | Path):
        self.cache, self.cache_dir = cache, Path(cache_dir)

    def get(self, key, default=None):
        try:  # not `cache_errors`: a round reads hundreds of keys, a generator per read adds up
            return self.cache.get(key, default)
        except (sqlite3.Error, OSError) as exc:
            raise _in_use_problem(self.cache_dir, exc) from None

    def set(self, key, value) -> None:
        with cache_errors(self.cache_dir):
            self.cache.set(key, value)

    def _bulk(self) -> bool:
        """Whether reads and writes may go in bulk: the table as diskcache 5 lays it out, and
        nothing that `Cache.get` or `Cache.set` would do per key besides (statistics, eviction
        bookkeeping, culling): else the per-key methods are used."""
        cache = self.cache
        return (
            not cache.statistics
            and cache.eviction_policy == "none"
            and cache.cull_limit == 0
            and type(cache.disk) is _disk_class()  # a str key is stored as itself with raw = 1
            and _diskcache_5()
        )

    def get_many(self, keys: list[str]) -> dict:
        """{key: value} of the keys present, as `get` reads each (not expired, decoded by the
        cache's Disk): one SELECT per 500 keys instead of one per key (~15 us each)."""
        if not self._bulk() or not all(type(k) is str for k in keys):
            return {k: v for k in keys if (v := self.get(k, _ABSENT)) is not _ABSENT}
        cache, out = self.cache, {}
        fetch = cache.disk.fetch
        try:
            for at in range(0, len(keys), _CHUNK):
                part = keys[at : at + _CHUNK]
                rows = cache._sql(
                    "SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN "
                    f"({','.join('?' * len(part))}) AND (expire_time IS NULL OR expire_time > ?)",
                    (*part, time.time()),
                ).fetchall()
                for key, mode, filename, value in rows:
                    with contextlib.suppress(OSError):  # as Cache.get: its file went meanwhile: missing
                        out[key] = fetch(mode, filename, value, False)
        except sqlite3.Error as exc:
            raise _in_use_problem(self.cache_dir, exc) from None
        return out

    def set_many(self, pairs: list[tuple[str, dict]]) -> None:
        """Store every (key, value) in one transaction, all or none, as `set` would store each:
        one SELECT for the keys already present and one INSERT for the rest instead of two
        statements (and a transaction context) per judgment. A present key is set by `set`."""
        latest = dict(pairs)  # a key given twice: its last value, as setting them in turn leaves it
        if not self._bulk() or not all(type(k) is str for k in latest):
            with self.transact():
                for k, v in latest.items():
                    self.set(k, v)
            return
        cache = self.cache
        store = cache.disk.store
        with cache_errors(self.cache_dir), cache.transact():
            keys = list(latest)
            present: set[str] = set()
            for at in range(0, len(keys), _CHUNK):
                part = keys[at : at + _CHUNK]
                present.update(
                    k
                    for (k,) in cache._sql(
                        f"SELECT key FROM Cache WHERE raw = 1 AND key IN ({','.join('?' * len(part))})", part
                    ).fetchall()
                )
            rows, now = [], time.time()
            for key, value in latest.items():
                if key in present:  # an update (and maybe an old file to remove): diskcache's own path
                    cache.set(key, value)
                    continue
                size, mode, filename, db_value = store(value, False, key=key)
                rows.append((key, now, now, size, mode, filename, db_value))
            cache._con.executemany(
                "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size,"
                " mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, ?, ?, ?, ?)",
                rows,
            )

    @contextlib.contextmanager
    def transact(self):
        """All of one request's judgments, or none."""
        with cache_errors(self.cache_dir), self.cache.transact():
            yield

    def count(self) -> int:
        """How many judgments the cache holds (diskcache keeps the count: no scan)."""
        with cache_errors(self.cache_dir):
            return len(self.cache) - (self.cache.get(FORMAT_KEY) is not None)

    def close(self) -> None:
        self.cache.close()


def open_store(cache_dir: str | Path, *, cache_only: bool = False) -> JudgmentStore:
    """The judgment store of `cache_dir` (`open_cache`); replay (`cache_only`) needs one that exists."""
    if cache_only and cache_dir is None:
        raise JEVError("cache-only (replay) mode needs a cache directory (--cache-dir)")
    if cache_only and not (Path(cache_dir) / CACHE_FILE).exists() and not Path(cache_dir).is_file():
        raise JEVCacheError(f"cache-only (replay) mode: no cache at {cache_dir}")
    if cache_only:  # replay reads, never writes: it works from a read-only copy
        check_cache_dir(cache_dir, must_exist=True)
        store = ReadOnlyStore(cache_dir)
        try:
            check_format(store, cache_dir, write=False)
        except BaseException:
            store.close()
            raise
        return store  # type: ignore[return-value]
    cache = open_cache(cache_dir)
    try:
        check_format(cache, cache_dir, write=not cache_only)
    except BaseException:
        cache.close()
        raise
    return JudgmentStore(cache, cache_dir)


def _old_format_problem(cache_dir) -> JEVCacheError:
    return JEVCacheError(
        f"JEV cache {cache_dir} was written by an older client (keys {OLD_KEY_PREFIXES[0]}...: another request "
        f"layout, earlier scores rounded, stateful keys without the batch and position), so its judgments cannot be "
        f"reused exactly and are never mixed in. Rebuild it: move or delete {cache_dir} (or pass another "
        f"--cache-dir) and run again; the judgments are asked anew"
    )


def check_format(cache, cache_dir, *, write: bool = True) -> None:
    """Refuse a cache written with another key format; mark a new (or format-2) one.

    A cache with the marker is read as it is; one without is scanned once: old keys are an
    error (`_old_format_problem`), else the marker is written (when `write`)."""
    with cache_errors(cache_dir):
        marker = cache.get(FORMAT_KEY)
        if marker == CACHE_FORMAT:
            return
        if marker is not None:
            raise JEVCacheError(
                f"JEV cache {cache_dir} has format {marker!r}; this client reads format {CACHE_FORMAT}. "
                f"Use the client that wrote it, or move it aside and rebuild it"
            )
        if any(isinstance(k, str) and k.startswith(OLD_KEY_PREFIXES) for k in cache.iterkeys()):
            raise _old_format_problem(cache_dir)
        if write:
            cache.set(FORMAT_KEY, CACHE_FORMAT)


# ---- export, import, stats -----------------------------------------------------------------
def is_export(path: Path) -> bool:
    """Whether `path` holds judgments as `export_cache` writes them (empty, or a first line with our
    key). What makes it replaceable is provenance (safeio: its folder's record holds its size and
    sha256); this only tells an export from another file sag2wb wrote there."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    if not first.strip():
        return True
    try:
        rec = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(rec, dict) and str(rec.get("key", "")).startswith(CACHE_KEY_PREFIX)


def export_cache(cache_dir: str | Path, file: str | Path, *, force: bool = False) -> int:
    """Write every judgment as one JSONL line {"key", "p", "model"}; returns the count.

    The file is written atomically (safeio): a failure leaves an earlier export whole. An
    existing file that sag2wb did not record writing there is refused unless `force`.

    >>> from workbench.judges.jev import make_jev_judge
    >>> judge = make_jev_judge(endpoint=judge_server.url, cache_dir=".sag2wb/jev-cache")   # a local judge server
    >>> judge.judge("Who directed Glass Harbour?", [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
    ...                                             {"unit_id": 2, "title": "Porto Calven", "text": "A town."}], [])
    [0.69163..., 0.0]
    >>> judge.close()
    >>> export_cache(".sag2wb/jev-cache", "study.jsonl")
    2
    >>> sorted(json.loads(Path("study.jsonl").read_text().splitlines()[0]))
    ['key', 'model', 'p']
    """
    file = Path(file)
    cache_dir = Path(cache_dir)
    if not file.parent.is_dir():
        raise JEVInputError(f"--file {file}: the folder {file.parent} does not exist; create it first")
    try:
        check_output(file, inputs=[cache_dir / CACHE_FILE], ours=is_export, force=force, what="--file")
    except InputError as exc:
        raise JEVInputError(str(exc)) from None
    cache = open_cache(cache_dir, must_exist=True)
    n = 0
    try:
        with atomic_writer(file, record="cache --file") as f:
            with cache_errors(cache_dir):
                keys = sorted(k for k in cache.iterkeys() if isinstance(k, str) and k.startswith(CACHE_KEY_PREFIX))
            for key in keys:
                with cache_errors(cache_dir):
                    value = cache.get(key)
                if valid_entry(value):
                    f.write(
                        json.dumps({"key": key, "p": value["p"], "model": value.get("model")}, ensure_ascii=False)
                        + "\n"
                    )
                    n += 1
    except OSError as exc:  # writing the export (a cache failure is a JEVCacheError, not an OSError)
        raise JEVInputError(
            f"--file {file}: cannot write it ({exc.strerror or exc}); an earlier file there is unchanged"
        ) from None
    finally:
        cache.close()
    return n


@dataclass
class ImportReport:
    """What `import_cache` did, line by line of the file (every line counted once)."""

    lines: int = 0  # judgment lines read
    added: int = 0  # new keys written
    same_as_cache: int = 0  # key already cached with the same p: nothing to do
    repeated_in_file: int = 0  # a later line repeating an earlier one with the same p
    conflicts_kept: int = 0  # key cached with another p: the cache's value kept (no --overwrite)
    replaced: int = 0  # key cached with another p: replaced (--overwrite)
    first_conflict: str | None = None

    def summary(self) -> str:
        parts = [f"{self.added} new"]
        if self.same_as_cache:
            parts.append(f"{self.same_as_cache} already cached (identical)")
        if self.repeated_in_file:
            parts.append(f"{self.repeated_in_file} repeated lines in the file (identical)")
        if self.replaced:
            parts.append(f"{self.replaced} replaced a different cached value (--overwrite)")
        if self.conflicts_kept:
            parts.append(
                f"{self.conflicts_kept} differ from the cached value and were NOT imported "
                f"(kept the cache's; e.g. {self.first_conflict}; --overwrite replaces them)"
            )
        return f"{self.lines} judgment lines: " + ", ".join(parts)


MAX_IMPORT_LINE = 1 << 20  # bytes; an exported line is ~120


def _open_to_read(file: Path):
    """The file opened for reading; failing to open it is its own named error, apart from its lines'."""
    try:
        return open(file, "rb")
    except OSError as exc:
        raise JEVInputError(f"--file {file}: cannot read it ({exc.strerror})") from None


def _read_import_file(file: Path) -> tuple[list[tuple[str, dict, int]], int]:
    """[(key, value, line number)] of a JSONL export, every line checked; repeated identical
    lines are dropped (counted), a key given two different p is an error naming both lines."""
    if not file.is_file():
        raise JEVInputError(f"--file {file}: {'is a directory' if file.is_dir() else 'no such file'}")
    entries: dict[str, tuple[dict, int]] = {}
    repeated = 0
    with _open_to_read(file) as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            where = f"{file}, line {n}"
            if len(raw) > MAX_IMPORT_LINE:
                raise JEVInputError(
                    f"{where}: {len(raw)} bytes, too long for a judgment line (at most {MAX_IMPORT_LINE})"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise JEVInputError(
                    f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                    f"exports are UTF-8 JSON lines"
                ) from None
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise JEVInputError(f"{where}: not JSON ({exc.msg})") from None
            except RecursionError:
                raise JEVInputError(f"{where}: JSON nested too deeply for a judgment line") from None
            except ValueError as exc:  # e.g. an integer with thousands of digits
                raise JEVInputError(f"{where}: unusable JSON number ({str(exc).split(';')[0]})") from None
            if isinstance(rec, dict) and str(rec.get("key", "")).startswith(OLD_KEY_PREFIXES):
                raise JEVInputError(
                    f"{where}: an export of an older client's cache (keys {OLD_KEY_PREFIXES[0]}...); its judgments "
                    f"were keyed for another request layout and cannot be imported. Rebuild: run the study again "
                    f"into an empty --cache-dir and export that"
                )
            if (
                not isinstance(rec, dict)
                or not isinstance(rec.get("key"), str)
                or not rec["key"].startswith(CACHE_KEY_PREFIX)
            ):
                raise JEVInputError(f'{where}: expected {{"key": "{CACHE_KEY_PREFIX}...", "p": ...}}')
            if not valid_entry(rec):
                p = rec.get("p")
                shown = f"an integer of {len(str(p))} digits" if isinstance(p, int) and abs(p) > 10**15 else f"p={p!r}"
                raise JEVInputError(f"{where}: {shown[:80]} is not a probability in [0, 1]")
            model = rec.get("model")
            if model is not None and (not isinstance(model, str) or len(model) > 200):
                raise JEVInputError(f"{where}: model must be a string of at most 200 characters or null")
            value = {"p": float(rec["p"]), "model": model}
            earlier = entries.get(rec["key"])
            if earlier is not None:
                if earlier[0]["p"] != value["p"]:
                    raise JEVInputError(
                        f"{where}: key {rec['key'][:28]}... has p={value['p']!r}, but line {earlier[1]} "
                        f"gave it p={earlier[0]['p']!r}; keep one of the two lines"
                    )
                repeated += 1
                continue
            entries[rec["key"]] = (value, n)
    return [(k, v, n) for k, (v, n) in entries.items()], repeated


def import_cache(cache_dir: str | Path, file: str | Path, *, overwrite: bool = False) -> ImportReport:
    """Add the judgments of an exported JSONL file to a cache. The file is checked completely
    before anything is written; a key already cached with another p is kept (counted in the
    report) unless `overwrite`.

    >>> from workbench.judges.jev import make_jev_judge
    >>> judge = make_jev_judge(endpoint=judge_server.url, cache_dir=".sag2wb/jev-cache")   # a local judge server
    >>> judge.judge("Who directed Glass Harbour?", [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
    ...                                             {"unit_id": 2, "title": "Porto Calven", "text": "A town."}], [])
    [0.69163..., 0.0]
    >>> judge.close()
    >>> export_cache(".sag2wb/jev-cache", "study.jsonl")
    2
    >>> import_cache("copy-cache", "study.jsonl").summary()
    '2 judgment lines: 2 new'
    >>> import_cache("copy-cache", "study.jsonl").summary()
    '2 judgment lines: 0 new, 2 already cached (identical)'
    """
    cache_dir = Path(cache_dir)
    entries, repeated = _read_import_file(Path(file))
    report = ImportReport(lines=len(entries) + repeated, repeated_in_file=repeated)
    cache = open_cache(cache_dir)
    try:
        check_format(cache, cache_dir)
        with cache_errors(cache_dir), cache.transact():
            for key, value, n in entries:
                old = cache.get(key)
                if not valid_entry(old):
                    cache.set(key, value)
                    report.added += 1
                elif float(old["p"]) == value["p"]:
                    report.same_as_cache += 1
                elif overwrite:
                    cache.set(key, value)
                    report.replaced += 1
                else:
                    report.conflicts_kept += 1
                    if report.first_conflict is None:
                        report.first_conflict = f"line {n}: p={value['p']!r}, cached p={float(old['p'])!r}"
    finally:
        cache.close()
    return report


def cache_stats(cache_dir: str | Path) -> dict:
    """Judgments, bytes, the format, and how many judgments each answering model gave."""
    cache = open_cache(cache_dir, must_exist=True)
    models: dict[str, int] = {}
    n = 0
    try:
        with cache_errors(cache_dir):
            fmt = cache.get(FORMAT_KEY)
            old = 0
            for k in cache.iterkeys():
                if not isinstance(k, str):
                    continue
                if k.startswith(OLD_KEY_PREFIXES):
                    old += 1
                elif k.startswith(CACHE_KEY_PREFIX):
                    n += 1
                    value = cache.get(k)
                    model = value.get("model") if isinstance(value, dict) else None
                    name = model if isinstance(model, str) else "(unknown)"
                    models[name] = models.get(name, 0) + 1
            return {
                "judgments": n,
                "bytes": cache.volume(),
                "format": fmt,
                "old_format_judgments": old,
                "models": dict(sorted(models.items())),
            }
    finally:
        cache.close()
