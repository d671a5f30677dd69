"""Updating an index in place: only added, changed and removed documents are tokenized.

An update gives the same answers as a full rebuild of the same documents: the same BM25
scores (FTS5 keeps its statistics, the stored postings and row lengths are edited, not
approximated), the same rankings and trajectories. Unit ids keep the corpus order, which
is what breaks ties: a changed document with the same number of units keeps its ids, a
document added after all others gets new ids at the end, a removed one leaves a gap, and
a document that must go between two others takes ids from a gap or, when there is none,
renumbers the documents after it (a rebuild would count them anew, so their relative
order is what matters; the trace shows the ids, so after a removal they differ from a
rebuild's by a constant shift per stretch).

>>> import shutil
>>> from workbench.index import Index
>>> docs = Path(shutil.copytree("sample_corpora/internal_docs", "docs"))
>>> Index.build(docs, "docs.sqlite")
Index('docs.sqlite', units=24, documents=19)
>>> _ = (docs / "auth" / "sso.md").write_text("# Single sign-on\\n\\nSSO is switched off.\\n")
>>> _ = (docs / "ops" / "oncall.md").write_text("# On call\\n\\nOne engineer carries the pager each week.\\n")
>>> (docs / "CHANGELOG.md").unlink()
>>> changes = update_folder(Path("docs.sqlite"), docs)
>>> changes.added, changes.changed, changes.removed
(['ops/oncall.md'], ['auth/sso.md'], ['CHANGELOG.md'])
>>> changes.summary()
'1 added, 1 changed, 1 removed document(s), 4 renumbered; 12 units tokenized;
 18 files stat-checked, ... hashed; ... s'
>>> Index("docs.sqlite")
Index('docs.sqlite', units=24, documents=19)
"""

from __future__ import annotations

import glob
import hashlib
import io
import sqlite3
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.index.build import Fingerprint, insert_units, tokenize_rows, unit_digest, write_aliases
from workbench.index.corpora import document_units, folder_files, iter_corpus
from workbench.index.files import (
    WHOLE_SECOND_WINDOW_NS,
    Stat,
    index_order,
    listing_digest,
    racy_window_ns,
    settled,
    stat_of,
    unchanged_by_stat,
    walk_folder,
    walk_listing,
)
from workbench.index.postings import block_chunks, decode_keys, encode_groups
from workbench.index.schema import IndexProblem, write_failure
from workbench.index.sqlite import busy_error
from workbench.index.units import CorpusError, Unit
from workbench.safeio import file_sha256

_UNIT_COLUMNS = "title, heading, body, document, source, location"


class EmptyIndex(IndexProblem):
    """An update that would leave the index without a passage (refused unless allowed)."""


@dataclass
class Changes:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renumbered: list[str] = field(default_factory=list)
    units_tokenized: int = 0
    seconds: float = 0.0
    checked: int = 0  # files of the manifest whose stat was compared with the recorded one (folder updates)
    hashed: int = 0  # of those, files whose content hash was computed to decide (stat moved, or racy)
    skipped: list[str] = field(default_factory=list)  # files of a kind that is not indexed (.pdf, ...)
    stale: list[str] = field(default_factory=list)  # files built from the index beside it, now out of date

    def summary(self) -> str:
        moved = f", {len(self.renumbered)} renumbered" if self.renumbered else ""
        files = f"{self.checked} files stat-checked, {self.hashed} hashed; " if self.checked else ""
        skipped = f"{len(self.skipped)} skipped (not .md/.txt); " if self.skipped else ""
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed document(s)"
            f"{moved}; {self.units_tokenized} units tokenized; {files}{skipped}{self.seconds:.1f} s"
        ) + (f"; now stale, rebuilt on next use: {', '.join(self.stale)}" if self.stale else "")


def derived_files(path: Path) -> list[str]:
    """Files beside the index built from its contents — GAR-BM25's corpus graphs
    (`INDEX.graph-KEY.npz`, workbench/feedback/graph.py) — which an update leaves describing
    the old contents (each records the index fingerprint it was built from, so its next use
    finds it stale and rebuilds it)."""
    path = Path(path)
    return sorted(p.name for p in path.parent.glob(f"{glob.escape(path.name)}.graph-*.npz"))


CHECKED_AT = "files_checked_at_ns"  # meta: when the walk that last checked every file began (time.time_ns())
LISTING = "files_listing"  # meta: files.listing_digest of that walk, when it found every file settled
_INSERT_FILE = (
    "INSERT OR REPLACE INTO files (path, size, mtime_ns, ctime_ns, inode, device, sha256) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _manifest_table(db: sqlite3.Connection) -> None:
    """The `files` table: each document file as last checked (size, mtime, ctime, inode,
    device, content hash). An index of an older workbench has no ctime, inode or device:
    they are added empty, so each of its files is hashed once and then recorded."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, "
        "sha256 TEXT NOT NULL, ctime_ns INTEGER, inode INTEGER, device INTEGER) WITHOUT ROWID"
    )
    columns = {row[1] for row in db.execute("PRAGMA table_info(files)")}
    for column in ("ctime_ns", "inode", "device"):
        if column not in columns:
            db.execute(f"ALTER TABLE files ADD COLUMN {column} INTEGER")


def write_manifest(db: sqlite3.Connection, root: Path, started_ns: int | None = None) -> None:
    """The folder's files as indexed (stat, content hash): what an update compares against.
    `started_ns`: when the build began reading the folder (`time.time_ns()`). A file changed
    since then may have been read before its change: its units are checked against the bytes
    hashed here, and on a difference it is recorded unhashed, so the next update reads it again."""
    _manifest_table(db)
    db.execute("DELETE FROM files")
    walk = walk_folder(root, ordered=False)  # the stats recorded, and in their walk's order, the listing
    walked = dict(walk.documents)
    rows = []
    for (document,) in db.execute("SELECT DISTINCT document FROM units").fetchall():
        st = walked.get(document) or stat_of((root / document).stat())
        if started_ns is not None and max(st[1], st[2]) >= started_ns - racy_window_ns(st[1], st[2]):
            digest, units = _read_document(root, document)
            indexed = [d for (d,) in db.execute("SELECT digest FROM units WHERE document = ? ORDER BY id", (document,))]
            if indexed != [unit_digest(u) for u in units]:
                digest = ""  # changed while the build read the folder: read again by the next update
        else:
            digest = file_sha256(root / document)
        rows.append((document, *st, digest))
    db.executemany(_INSERT_FILE, rows)
    if started_ns is not None:
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (CHECKED_AT, str(started_ns)))
        same_files = len(rows) == len(walked)  # every file walked is recorded (none added meanwhile)
        _record_listing(db, walk.documents if same_files else None, started_ns)


def _record_listing(db: sqlite3.Connection, walked: list[tuple[str, Stat]] | None, started_ns: int) -> None:
    """Record the listing of a walk that began at `started_ns` and whose stats the manifest now
    holds, when every file was settled; otherwise none, so the next update compares file by file."""
    if walked is not None and settled(walked, started_ns):
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (LISTING, listing_digest(walked, started_ns)))
    else:
        db.execute("DELETE FROM meta WHERE key = ?", (LISTING,))


def _read_document(root: Path, rel: str) -> tuple[str, list[Unit]]:
    """A document's sha256 and units from one read of its bytes (decoded as `file_units`
    reads it), so the hash an update records is the hash of the text it indexed."""
    try:
        data = (root / rel).read_bytes()
    except FileNotFoundError:
        raise _vanished(root, rel) from None
    try:
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{rel}: not UTF-8 ({exc.reason} at byte {exc.start}); convert it or remove it") from None
    return hashlib.sha256(data).hexdigest(), document_units(text, rel)


def _vanished(root: Path, rel: str) -> CorpusError:
    return CorpusError(
        f"{root / rel}: removed while the folder was being read; the index was not changed: run the update again"
    )


def _documents(db: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """document -> (first unit id, number of units), in id order."""
    rows = db.execute("SELECT document, min(id), count(*) FROM units GROUP BY document ORDER BY min(id)")
    return {d: (first, n) for d, first, n in rows}


def plan(order: list[str], old: dict[str, tuple[int, int]], fresh: dict[str, list[Unit]], read=None):
    """Ids for the new document order. `order`: every document of the new corpus, in
    order; `old`: document -> (first id, units) in the index; `fresh`: the documents whose
    content is new or changed, with their units; `read(document)`: the units of an
    unchanged document that must move (it sits where new ids go). Returns (ids to
    remove, [(id, unit)] to add, [document] renumbered)."""
    removed: list[int] = []
    added: list[tuple[int, Unit]] = []
    renumbered: list[str] = []
    next_free = 1
    for document in order:
        before = old.get(document)
        units = fresh.get(document)
        if units is None and before is not None and before[0] >= next_free:
            next_free = before[0] + before[1]  # unchanged, in order: kept as it is
            continue
        if before is not None:
            removed.extend(range(before[0], before[0] + before[1]))
        if units is None:
            units = read(document)
            renumbered.append(document)
        first = next_free
        if before is not None and len(units) == before[1] and before[0] >= next_free:
            first = before[0]  # changed in place
        added.extend((first + i, u) for i, u in enumerate(units))
        next_free = first + len(units)
    for document in set(old) - set(order):
        first, n = old[document]
        removed.extend(range(first, first + n))
    return sorted(set(removed)), added, renumbered


def apply(db: sqlite3.Connection, removed: list[int], added: list[tuple[int, Unit]]) -> int:
    """Remove the units `removed` and add `added` (id, unit) in every table, in the open
    transaction. Returns the number of units tokenized."""
    added = sorted(added, key=lambda a: a[0])  # tokenize_rows wants ascending ids
    old_rows = []
    for i in range(0, len(removed), 500):
        part = removed[i : i + 500]
        old_rows += db.execute(
            f"SELECT id, {_UNIT_COLUMNS} FROM units WHERE id IN ({','.join('?' * len(part))}) ORDER BY id", part
        ).fetchall()
    old = tokenize_rows([r[0] for r in old_rows], [(r[1], r[2], r[3], r[4]) for r in old_rows]) if old_rows else None
    new = (
        tokenize_rows([i for i, _ in added], [(u.title, u.heading, u.body, u.document) for _, u in added])
        if added
        else None
    )
    # FTS5: a contentless table deletes a row given the values it indexed
    if old is not None:
        db.executemany(
            "INSERT INTO fts (fts, rowid, title, heading, body) VALUES ('delete', ?, ?, ?, ?)", old["fts_rows"]
        )
        db.executemany("DELETE FROM units WHERE id = ?", [(r[0],) for r in old_rows])
    if new is not None:
        db.executemany("INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)", new["fts_rows"])
        insert_units(db, [i for i, _ in added], [u for _, u in added], new["title_keys"])
    _edit_postings(db, removed, added, old, new)
    _edit_counts(db, "diversity_df", "term", "df", old and zip(*old["diversity"]), new and zip(*new["diversity"]))
    _edit_counts(db, "title_phrases", "phrase", "units", old and old["phrases"], new and new["phrases"])
    # body document counts of the tokens touched, from FTS5's own vocabulary
    touched = {t for d in (old, new) if d for t in d["terms"]}
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.body_vocabulary USING fts5vocab(main, fts, 'col')")
    for term in touched:
        row = db.execute("SELECT doc FROM temp.body_vocabulary WHERE term = ? AND col = 'body'", (term,)).fetchone()
        if row:
            db.execute("INSERT OR REPLACE INTO terms VALUES (?, ?)", (term, row[0]))
        else:
            db.execute("DELETE FROM terms WHERE term = ?", (term,))
    folds = {k[1] for d in (old, new) if d for k in d["title_keys"]}
    write_aliases(db, folds)
    return len(old_rows) + len(added)


def _edit_counts(db, table: str, key: str, column: str, minus, plus) -> None:
    change: Counter = Counter()
    for k, n in minus or ():
        change[k] -= n
    for k, n in plus or ():
        change[k] += n
    for k, n in change.items():
        if n:
            db.execute(
                f"INSERT INTO {table} VALUES (?, ?) ON CONFLICT ({key}) DO UPDATE SET {column} = {column} + ?",
                (k, n, n),
            )
    db.execute(f"DELETE FROM {table} WHERE {column} <= 0")


def _edit_postings(db, removed, added, old, new) -> None:
    """Rewrite each touched (block, token) blob: positions of removed rows out, positions
    of added rows in, sorted as a build writes them; row lengths likewise."""
    chunks = db.execute("SELECT first_id, chunk, lengths FROM row_lengths ORDER BY first_id").fetchall()
    firsts = np.array([c[0] for c in chunks], dtype=np.int64)
    ends = firsts + np.array([len(c[2]) // 4 for c in chunks], dtype=np.int64)
    last_end = int(ends[-1]) if len(ends) else 1
    # ids past the last chunk start a new one (a build would have put them there too)
    beyond = sorted(i for i, _ in added if i >= last_end)
    if beyond:
        number = 1 + max((c[1] for c in chunks), default=-1)
        db.execute(
            "INSERT INTO row_lengths VALUES (?, ?, ?)",
            (beyond[0], number, np.zeros(beyond[-1] - beyond[0] + 1, dtype="<i4").tobytes()),
        )
        chunks = db.execute("SELECT first_id, chunk, lengths FROM row_lengths ORDER BY first_id").fetchall()
        firsts = np.array([c[0] for c in chunks], dtype=np.int64)
    numbers = [c[1] for c in chunks]

    def chunk_of(rows: np.ndarray) -> np.ndarray:
        return np.searchsorted(firsts, rows, side="right") - 1

    removed_rows = np.array(removed, dtype=np.int64)
    block_of_chunk = np.array(numbers, dtype=np.int64) // block_chunks(db)

    def by_block(d: dict):  # (term, block number, that term's keys in the block) of tokenized rows
        bounds = np.cumsum([0, *d["counts"]])
        for k, term in enumerate(d["terms"]):
            keys = d["keys"][bounds[k] : bounds[k + 1]]
            where = block_of_chunk[chunk_of(keys >> 32)]
            for block in np.unique(where):
                yield term, int(block), keys[where == block]

    # per (token, block): positions to add
    additions: dict[tuple[int, str], list[np.ndarray]] = {}
    if new is not None:
        for term, block, keys in by_block(new):
            additions.setdefault((block, term), []).append(keys)
    targets = set(additions)
    if old is not None:
        targets.update((block, term) for term, block, _ in by_block(old))
    for block, term in sorted(targets):
        row = db.execute("SELECT keys FROM postings WHERE block = ? AND term = ?", (block, term)).fetchone()
        keys = decode_keys([row[0]]) if row else np.zeros(0, dtype=np.int64)
        if len(removed_rows):
            keys = keys[~np.isin(keys >> 32, removed_rows)]
        if (block, term) in additions:
            keys = np.sort(np.concatenate([keys, *additions[(block, term)]]))
        if row and len(keys):
            db.execute(
                "UPDATE postings SET keys = ? WHERE block = ? AND term = ?",
                (encode_groups(keys, [len(keys)])[0], block, term),
            )
        elif row:
            db.execute("DELETE FROM postings WHERE block = ? AND term = ?", (block, term))
        elif len(keys):
            db.execute(
                "INSERT INTO postings (block, term, keys) VALUES (?, ?, ?)",
                (block, term, encode_groups(keys, [len(keys)])[0]),
            )
    # row lengths
    lengths_of = dict(zip((i for i, _ in added), np.frombuffer(new["lengths"], dtype="<i4"))) if new else {}
    touched = (
        {int(c) for c in chunk_of(np.array(sorted(set(removed) | set(lengths_of)), dtype=np.int64))}
        if (removed or lengths_of)
        else set()
    )
    for c in touched:
        first, number, blob = chunks[c]
        lengths = np.frombuffer(blob, dtype="<i4").copy()
        top = max([i for i in lengths_of if chunk_of(np.array([i]))[0] == c] + [first + len(lengths) - 1])
        if top - first + 1 > len(lengths):
            lengths = np.concatenate([lengths, np.zeros(top - first + 1 - len(lengths), dtype="<i4")])
        for i in removed:
            if first <= i < first + len(lengths):
                lengths[i - first] = 0
        for i, n in lengths_of.items():
            if first <= i < first + len(lengths):
                lengths[i - first] = n
        db.execute("UPDATE row_lengths SET lengths = ? WHERE first_id = ?", (lengths.astype("<i4").tobytes(), first))


def _finish(db: sqlite3.Connection, source: str) -> dict:
    """Meta after an update: counts and the fingerprint a rebuild of the same units would record."""
    fingerprint = Fingerprint()
    for (digest,) in db.execute("SELECT digest FROM units ORDER BY id"):
        fingerprint.add_digest(digest)
    (n,) = db.execute("SELECT count(*) FROM units").fetchone()
    (documents,) = db.execute("SELECT count(DISTINCT document) FROM units").fetchone()
    meta = {
        "units": str(n),
        "documents": str(documents),
        "fingerprint": fingerprint.hexdigest(),
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if source:
        meta["source"] = source
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
    return meta


@contextmanager
def _transaction(path: Path):
    """The index open for writing, in one transaction: committed at the end, rolled back
    on any error or Ctrl-C (and by SQLite's journal after a kill)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        try:
            db.execute("PRAGMA journal_mode = DELETE")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise busy_error(path, exc) from None
        try:
            yield db
            try:
                if db.in_transaction:  # an update with nothing to record has rolled back itself
                    db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                raise busy_error(path, exc) from None
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            problem = write_failure(path, exc, f"the update was rolled back: {path} is as it was before it")
            if problem is not None:
                raise problem from None
            raise
    finally:
        db.close()


@dataclass
class Compared:
    """What `compare_files` decided: the files whose content differs from the manifest's (or
    that it lacks), in folder order; the unchanged files whose stat moved (with their new
    stat); how many files it stat-checked, how many it hashed and how many of those only
    because they were racy."""

    different: list[str] = field(default_factory=list)
    touched: list[tuple[str, Stat]] = field(default_factory=list)
    checked: int = 0
    hashed: int = 0
    racy: int = 0


def compare_files(root: Path, found: list[tuple[str, Stat]], known: dict[str, tuple], recorded_sha256, checked_at_ns):
    """Which of the walked files `found` (relative path, stat) changed since the manifest
    `known` (path -> size, mtime, ctime, inode, device as recorded by the walk that began at
    `checked_at_ns`; `recorded_sha256(path)` gives the hash). A different size is a change
    without hashing; a file whose stat is the recorded one and was not racy is unchanged
    without reading it (`files.unchanged_by_stat`); any other file is hashed.

    >>> _ = Path("a.md").write_text("alpha"); st = stat_of(Path("a.md").stat())
    >>> compare_files(Path("."), [("a.md", st)], {"a.md": st}, lambda p: "0" * 64, st[2] + 10**10).hashed
    0
    >>> compare_files(Path("."), [("a.md", st)], {"a.md": st}, lambda p: "0" * 64, None).different
    ['a.md']
    """
    out = Compared()
    get = known.get
    # the common case first, without a call: the recorded stat, older than either window
    settled = checked_at_ns - WHOLE_SECOND_WINDOW_NS if checked_at_ns is not None else -1
    for rel, st in found:
        before = get(rel)
        if before is None:
            out.different.append(rel)
            continue
        out.checked += 1
        if before == st and st[1] < settled and st[2] < settled:
            continue
        if st[0] != before[0]:
            out.different.append(rel)
            continue
        if unchanged_by_stat(before, st, checked_at_ns):
            continue
        try:
            digest = file_sha256(root / rel)
        except FileNotFoundError:
            raise _vanished(root, rel) from None
        out.hashed += 1
        if digest != recorded_sha256(rel):
            out.different.append(rel)
        elif tuple(before) != st:
            out.touched.append((rel, st))
        else:
            out.racy += 1
    return out


def update_folder(path: Path, root: Path) -> Changes:
    """Bring the index at `path` of the folder `root` up to date with the folder's files (`compare_files` decides
    what changed). When the walk's listing is the one recorded by the last walk that found every file settled
    (`files.listing_digest`), nothing changed, without a look at the manifest. An update that finds nothing to
    change leaves the index file as it was, byte for byte (except once, to record the listing, when there was none)."""
    t0 = time.perf_counter()
    changes = Changes()
    with _transaction(path) as db:
        _manifest_table(db)
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (CHECKED_AT, LISTING)))
        started = time.time_ns()  # before the walk: every stat it records is taken after this
        checked_at = int(meta[CHECKED_AT]) if str(meta.get(CHECKED_AT)).isdigit() else None
        if checked_at is not None and started < checked_at:
            checked_at = None  # the clock went back since: no stat can be trusted, every file is hashed
        listed = walk_listing(root)  # as bytes; as objects (walk order), then in folder order, on a change
        if not listed.count:
            folder_files(root)  # says what the folder holds instead
        changes.skipped = listed.skipped
        listing = listed.digest(checked_at) if checked_at is not None else None
        if listing is not None and listing == meta.get(LISTING):
            # every file where and as the last settled walk recorded it: none changed, none is read
            db.execute("ROLLBACK")
            changes.checked = listed.count
            changes.seconds = time.perf_counter() - t0
            return changes
        documents = listed.documents()
        del listed  # its bytes (45 MB at 600k files) are not held through the update
        known = {r[0]: r[1:] for r in db.execute("SELECT path, size, mtime_ns, ctime_ns, inode, device FROM files")}

        def recorded_sha256(rel: str) -> str:
            return db.execute("SELECT sha256 FROM files WHERE path = ?", (rel,)).fetchone()[0]

        decided = compare_files(root, documents, known, recorded_sha256, checked_at)
        changes.checked, changes.hashed = decided.checked, decided.hashed
        # every recorded file seen (walked paths are unique): none is gone
        gone = set() if decided.checked == len(known) else set(known) - {rel for rel, _ in documents}
        if not (decided.different or decided.touched or decided.racy or gone) and checked_at is not None:
            # nothing changed, and every file was settled at the last walk (or it was hashed):
            # only the listing is recorded (an index of an older workbench has none), once
            if listing is not None and meta.get(LISTING) != listing:
                _record_listing(db, documents, checked_at)
            else:
                db.execute("ROLLBACK")  # nothing to record: the file is left untouched
            changes.seconds = time.perf_counter() - t0
            return changes
        # same content, new stat: the manifest follows
        db.executemany(_INSERT_FILE, [(rel, *st, recorded_sha256(rel)) for rel, st in decided.touched])
        old = _documents(db)
        ordered = index_order(documents)  # documents keeps the walk's order: the listing's
        order = [rel for rel, _ in ordered]
        different = set(decided.different)
        decided.different = [rel for rel in order if rel in different]  # in folder order
        stats = dict(ordered)
        fresh = {}
        for rel in decided.different:
            digest, fresh[rel] = _read_document(root, rel)
            db.execute(_INSERT_FILE, (rel, *stats[rel], digest))  # the stat taken before the bytes were read
            (changes.changed if rel in old else changes.added).append(rel)
        changes.removed = sorted(set(old) - set(order))
        removed, added, changes.renumbered = plan(order, old, fresh, lambda rel: _read_document(root, rel)[1])
        changes.units_tokenized = apply(db, removed, added)
        db.executemany("DELETE FROM files WHERE path = ?", [(r,) for r in sorted(gone)])
        if not db.execute("SELECT 1 FROM units LIMIT 1").fetchone():
            raise CorpusError(f"{root}: no .md or .txt files found")
        if decided.different or gone:
            _finish(db, str(root))
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (CHECKED_AT, str(started)))
        _record_listing(db, documents, started)  # the manifest now holds every stat of this walk
    changes.seconds = time.perf_counter() - t0
    if changes.added or changes.changed or changes.removed:
        changes.stale = derived_files(path)
    return changes


def update_passages(path: Path, add: Path | None = None, remove=(), *, allow_empty: bool = False) -> Changes:
    """Add the passages of the corpus.json-style file `add` (a passage whose title is in
    the index replaces it, in place; new ones go after all others) and remove the
    passages titled `remove`. An update that would leave no passage is refused (nothing
    could be searched) unless `allow_empty`; the index is then left as it was.

    >>> from workbench.index import Index
    >>> Index.build("sample_corpora/encyclopedia/corpus.json", "enc.sqlite")
    Index('enc.sqlite', units=169, documents=169)
    >>> _ = Path("new.json").write_text('[{"title": "Harrow Point Ferry", "text": "A ferry crosses to Harrow Point."}]')
    >>> update_passages(Path("enc.sqlite"), Path("new.json"), remove=["Glass Harbor"]).summary()
    '1 added, 0 changed, 1 removed document(s); 2 units tokenized; ... s'
    """
    t0 = time.perf_counter()
    changes = Changes()
    items = list(iter_corpus(add)) if add is not None else []
    with _transaction(path) as db:

        def span(title: str):  # (first id, units) of an indexed document, or None
            first, n = db.execute("SELECT min(id), count(*) FROM units WHERE document = ?", (title,)).fetchone()
            return (first, n) if n else None

        gone = list(dict.fromkeys(remove))
        removed: list[int] = []
        for title in gone:
            where = span(title)
            if where is None:
                raise CorpusError(f"--remove {title!r}: no passage with this title in {path}")
            removed.extend(range(where[0], where[0] + where[1]))
        # new passages go after every unit (no id is ever reused, so nothing moves);
        # a replaced one keeps its ids when it has as many units
        (next_free,) = db.execute("SELECT coalesce(max(id), 0) + 1 FROM units").fetchone()
        added: list[tuple[int, Unit]] = []
        for u in items:
            if u.document in gone:
                raise CorpusError(f"{add}: {u.title!r} is both added and removed")
            where = span(u.document)
            if where is not None and where[1] == 1:
                changes.changed.append(u.document)
                removed.append(where[0])
                added.append((where[0], u))
            else:
                if where is not None:
                    changes.changed.append(u.document)
                    removed.extend(range(where[0], where[0] + where[1]))
                else:
                    changes.added.append(u.document)
                added.append((next_free, u))
                next_free += 1
        changes.removed = gone
        (total,) = db.execute("SELECT count(*) FROM units").fetchone()
        if not added and len(set(removed)) >= total and not allow_empty:
            raise EmptyIndex(
                f"{path}: --remove names every passage of the index ({total}); an index with no passages "
                "cannot be searched, so nothing was changed. Remove fewer, add passages in the same "
                "update (--add), or pass --allow-empty to keep an empty index"
            )
        changes.units_tokenized = apply(db, sorted(removed), added)
        _finish(db, "")
    changes.seconds = time.perf_counter() - t0
    if changes.added or changes.changed or changes.removed:
        changes.stale = derived_files(path)
    return changes
