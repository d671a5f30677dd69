"""Writing an index from a stream of units, in chunks tokenized by a process pool.

Everything a question needs that depends only on the corpus is computed here, once, and
stored in the index file beside FTS5's own tables (SPEC §2):

| table | what | read by |
|---|---|---|
| `postings` | every FTS5 term position, delta + varint, per token and block of chunks | BM25, phrases, phrase df |
| `row_lengths` | each unit's token count, one int32 blob per chunk | BM25's length normalisation |
| `terms` | body document count of every token | df of a token |
| `title_phrases` | titles of two or more tokens | name resolution (title phrase) |
| `aliases` | accent-folded title -> the title | name repair |
| `diversity_df` | original documents containing a diversity token | diversity vectors |

A chunk is a run of whole documents (about CHUNK_UNITS units). Each chunk's positions come
from a scratch FTS5 table with the index's tokenizer in the worker, so they are FTS5's own
positions; chunks are tokenized in parallel but written in order, so one process and
several give byte-identical tables.

>>> from workbench.index.corpora import iter_corpus
>>> meta = write_index(iter_corpus("sample_corpora/encyclopedia/corpus.json"), Path("enc.sqlite"), "encyclopedia")
>>> meta["units"], meta["documents"], meta["chunks"], meta["complete"]
('169', '169', '1', '1')
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import signal
import sqlite3
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from workbench.index import encode_kernel, names_kernel
from workbench.index.postings import BLOCK_CHUNKS, encode_groups
from workbench.index.schema import SCHEMA_VERSION, tokenizer_signature
from workbench.index.tokenized import stable_order, tokenize_rows
from workbench.index.units import Unit
from workbench.machine import cores

CHUNK_UNITS = 2048
# 16 KiB pages: a unit's row (~600 bytes) wastes less of a page than at 4 KiB, and a blob
# up to ~4 KiB stays on its leaf page (30k units: 1.47 KiB per unit, against 1.55 at 4 KiB)
PAGE_SIZE = 16384
ENCODE_POSITIONS = 1 << 18
# distinct diversity tokens held in memory before they are added to a temp table (~100 MiB)
DIVERSITY_SPILL = 1 << 20
# accent-folded titles kept to look up their aliases at the end; past this, every unit is grouped
ALIAS_CANDIDATES = 1 << 20
GC_YOUNG = 20_000  # `_fewer_collections`
# FTS5's pending-terms hash (its `hashsize` option, kept in fts_config, 1 MiB by default): at 1 MiB
# a build flushes a small segment every few hundred units, which FTS5 merges again and again; at
# 32 MiB the 300k build's wall fell ~10% (more buys little and costs memory: docs/performance.md)
FTS_HASH_BYTES = 32 << 20
SCHEMA = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE units (id INTEGER PRIMARY KEY, title TEXT NOT NULL, heading TEXT NOT NULL,
        body TEXT NOT NULL, document TEXT NOT NULL, source TEXT NOT NULL, location TEXT NOT NULL,
        title_norm TEXT NOT NULL, title_fold TEXT NOT NULL, digest BLOB NOT NULL);
    -- contentless: the original text lives in `units`; FTS5 keeps only the token index.
    CREATE VIRTUAL TABLE fts USING fts5(title, heading, body, content='');
    CREATE TABLE diversity_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
    -- (block, term) first: a build appends blocks in order, so pages fill up
    CREATE TABLE postings (block INTEGER NOT NULL, term TEXT NOT NULL, keys BLOB NOT NULL,
        PRIMARY KEY (block, term)) WITHOUT ROWID;
    CREATE TABLE row_lengths (first_id INTEGER PRIMARY KEY, chunk INTEGER NOT NULL, lengths BLOB NOT NULL);
    CREATE TABLE terms (term TEXT PRIMARY KEY, body_docs INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE title_phrases (phrase TEXT PRIMARY KEY, units INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE aliases (fold TEXT PRIMARY KEY, title TEXT NOT NULL, lookup TEXT NOT NULL) WITHOUT ROWID;
    CREATE INDEX aliases_lookup ON aliases (lookup);
"""


def document_chunks(units: Iterable[Unit], size: int = CHUNK_UNITS) -> Iterator[list[Unit]]:
    """Runs of whole documents of about `size` units (a chunk never splits a document, so
    per-document statistics are complete within one chunk)."""
    chunk: list[Unit] = []
    for u in units:
        if len(chunk) >= size and u.document != chunk[-1].document:
            yield chunk
            chunk = []
        chunk.append(u)
    if chunk:
        yield chunk


def tokenize_chunk(first_id: int, rows: list[tuple[str, str, str, str, str, str]]) -> dict:
    """Everything the index stores about units `first_id`, `first_id + 1`, ... given their
    (title, heading, body, document, source, location): runs in a worker process. Their
    digests are made here too, off the writing process's path. Its terms and diversity tokens
    travel to the writing process (and on to a block's encoding) as one string each: a list of
    ~20k strings took ~5 ms to pickle and as long again to load."""
    done = tokenize_rows(list(range(first_id, first_id + len(rows))), [r[:4] for r in rows], sort_terms=False)
    done["digests"] = [fields_digest(*r) for r in rows]
    done["terms"], done["counts"] = pack(done["terms"]), np.asarray(done["counts"], dtype=np.int64)
    tokens, df = done["diversity"]
    done["diversity"] = (pack(tokens), np.asarray(df, dtype=np.int64))
    return done


def pack(names) -> str:
    """Terms or diversity tokens as one string (neither ever holds white space: FTS5's unicode61
    and DIVERSITY_TOKEN split at it)."""
    return "\n".join(names)


def unpack(packed: str) -> list[str]:
    return packed.split("\n") if packed else []


def _start_worker() -> None:
    # Ctrl-C reaches the whole process group; the parent alone stops the build and cleans up
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # what a worker inherits (modules, jieba's dictionary) is never garbage: its collections
    # skip it (with `_fewer_collections`' threshold, inherited too: ~15% of a worker's CPU)
    gc.freeze()


@contextlib.contextmanager
def _fewer_collections():
    """The cyclic collector's youngest generation raised to GC_YOUNG objects while the block
    runs, then put back: a chunk makes ~10^5 short-lived tuples and lists (rows, FTS5 rows,
    pairs) and none is garbage in a cycle, but at the default 700 most were walked, often
    twice, before they were freed (~1 s of the writer's CPU at 300k)."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_YOUNG), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def default_workers() -> int:
    return max(1, min(2, cores()))


class _Chunks:
    """Chunks tokenized in order: the first in this process, the rest by a process pool
    (started only when a second chunk exists) with a bounded number in flight, so memory
    holds a few chunks whatever the corpus size."""

    def __init__(self, units: Iterable[Unit], workers: int, first_id: int = 1):
        self.source = document_chunks(units, CHUNK_UNITS)
        self.workers = workers
        self.first_id = first_id
        self.pool: ProcessPoolExecutor | None = None

    def __iter__(self) -> Iterator[tuple[int, list[Unit], dict]]:
        pending: deque = deque()
        next_id = self.first_id
        try:
            for chunk in self.source:
                rows = [(u.title, u.heading, u.body, u.document, u.source, u.location) for u in chunk]
                if self.workers <= 1 or next_id == self.first_id:
                    pending.append((next_id, chunk, None, tokenize_chunk(next_id, rows)))
                else:
                    if self.pool is None:
                        # the platform's default start (fork on Linux: workers inherit the loaded tokenizer)
                        self.pool = ProcessPoolExecutor(self.workers, initializer=_start_worker)
                    pending.append((next_id, chunk, self.pool.submit(tokenize_chunk, next_id, rows), None))
                next_id += len(chunk)
                # the first chunk (done here) waits until the next one is on its way to the pool,
                # so the workers start before this process writes it
                while pending and ((pending[0][2] is None and len(pending) > 1) or len(pending) > 2 * self.workers):
                    first, units, future, done = pending.popleft()
                    yield first, units, done if future is None else future.result()
            while pending:
                first, units, future, done = pending.popleft()
                yield first, units, done if future is None else future.result()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """The pool stopped (kept until then for the last postings blocks' encoding)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None  # what is still to encode is encoded here


def unit_digest(u: Unit) -> bytes:
    """sha256 of a unit's fields (stored per unit: an update recomputes the fingerprint
    from these without reading the text)."""
    return fields_digest(u.title, u.heading, u.body, u.document, u.source, u.location)


def fields_digest(title, heading, body, document, source, location) -> bytes:
    return hashlib.sha256(f"{title}\x1f{heading}\x1f{body}\x1f{document}\x1f{source}\x1f{location}".encode()).digest()


class Fingerprint:
    """sha256 over the units' digests in order (an index records it; `open_or_build`
    compares it)."""

    def __init__(self):
        self.hash = hashlib.sha256()

    def add(self, u: Unit) -> bytes:
        digest = unit_digest(u)
        self.hash.update(digest)
        return digest

    def add_digest(self, digest: bytes) -> None:
        self.hash.update(digest)

    def hexdigest(self) -> str:
        return self.hash.hexdigest()


def _progress_bar(progress, total):
    from tqdm.auto import tqdm

    # disable=None: a bar on a terminal or in a notebook, nothing in a log file
    return tqdm(
        total=total,
        unit=" passages",
        desc="indexing",
        disable=None if progress is None else not progress,
        smoothing=0.1,
        mininterval=0.5,
    )


def insert_units(db: sqlite3.Connection, ids, units: list[Unit], title_keys, fingerprint=None, digests=None) -> None:
    """`digests`: the units' `unit_digest`s when a worker made them (else made here)."""
    if digests is None:
        digests = map(fingerprint.add if fingerprint is not None else unit_digest, units)
    elif fingerprint is not None:
        for digest in digests:
            fingerprint.add_digest(digest)
    db.executemany(
        "INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (i, u.title, u.heading, u.body, u.document, u.source, u.location, *keys, digest)
            for i, u, keys, digest in zip(ids, units, title_keys, digests)
        ],
    )


def write_chunk(db: sqlite3.Connection, chunk_no: int, first: int, units: list[Unit], done: dict, fingerprint) -> None:
    """One tokenized chunk into the index's tables (statistics that add over chunks are
    summed at the end: `DiversityCounts`, `write_statistics`)."""
    insert_units(db, range(first, first + len(units)), units, done["title_keys"], fingerprint, done["digests"])
    db.executemany("INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)", done["fts_rows"])
    db.execute("INSERT INTO row_lengths VALUES (?, ?, ?)", (first, chunk_no, done["lengths"]))
    db.executemany(
        "INSERT INTO title_phrases VALUES (?, ?) ON CONFLICT (phrase) DO UPDATE SET units = units + excluded.units",
        done["phrases"],
    )


def merge_positions(parts: list[tuple[list[str], list[int], np.ndarray]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(terms, counts, keys) of consecutive chunks as one: terms sorted (SQLite's order, so a
    block's rows are appended in key order), each term's keys in row order."""
    terms = sorted(set().union(*(t for t, _, _ in parts))) if len(parts) > 1 else sorted(parts[0][0])
    rank = dict(zip(terms, range(len(terms))))
    group_term = np.concatenate(
        [np.fromiter(map(rank.__getitem__, names), np.int64, len(names)) for names, _, _ in parts]
    )
    return terms, *place_groups(group_term, [c for _, c, _ in parts], [k for _, _, k in parts], len(terms))


def place_groups(group_term: np.ndarray, counts: list, keys: list[np.ndarray], terms: int) -> tuple:
    """(each term's count, the keys grouped by term) of chunks whose keys are already grouped by
    term (`counts[k]`: chunk k's group sizes; `group_term`: each group's term, one chunk after
    another). Each (chunk, term) group is moved to its place whole: groups ordered by term, chunks
    in order within a term (a sort of ~300k groups, not of a block's ~2M keys)."""
    sizes = np.concatenate([np.asarray(c, dtype=np.int64) for c in counts])
    order = stable_order(group_term)  # stable: chunks hold increasing rows
    placed = np.empty_like(sizes)
    placed[order] = np.cumsum(sizes[order]) - sizes[order]
    every = np.concatenate(keys)
    merged = np.empty_like(every)
    merged[np.repeat(placed - (np.cumsum(sizes) - sizes), sizes) + np.arange(len(every), dtype=np.int64)] = every
    return np.bincount(group_term, weights=sizes, minlength=terms).astype(np.int64), merged


def _merged_block(parts: list[tuple]) -> tuple[str, np.ndarray, np.ndarray]:
    """`merge_positions` of packed parts, its terms packed: the compiled merge when it is there."""
    merged = names_kernel.merge([t for t, _, _, _, _ in parts], [len(c) for _, c, _, _, _ in parts])
    if merged is None:
        terms, counts, keys = merge_positions([(unpack(t), c, k) for t, c, k, _, _ in parts])
        return pack(terms), counts, keys
    packed, group_term, found = merged
    return packed, *place_groups(group_term, [c for _, c, _, _, _ in parts], [k for _, _, k, _, _ in parts], found)


def _summed_diversity(parts: list[tuple]) -> tuple[str, np.ndarray]:
    """(tokens packed, documents) of a block's chunks' diversity counts summed."""
    merged = names_kernel.merge([t for _, _, _, t, _ in parts], [len(df) for _, _, _, _, df in parts])
    if merged is None:
        pairs = sum_diversity((unpack(tokens), df) for _, _, _, tokens, df in parts)
        return pack(t for t, _ in pairs), np.array([n for _, n in pairs], dtype=np.int64)
    packed, rank, found = merged
    every = np.concatenate([np.zeros(0, np.int64), *(df for _, _, _, _, df in parts)])
    return packed, np.bincount(rank, weights=every, minlength=found).astype(np.int64)


def encode_block(parts: list[tuple]) -> tuple[str, list[bytes], str, np.ndarray]:
    """The terms (packed) and blobs of one postings block (its chunks merged, then `encode_groups`
    ~ENCODE_POSITIONS at a time, so numpy's temporaries stay small), and its chunks' diversity
    counts summed (tokens packed, documents): runs in a worker. `parts`: each chunk's (packed
    terms, counts, keys, packed diversity tokens, their document counts)."""
    terms, counts, keys = _merged_block(parts)
    diversity = _summed_diversity(parts)
    if encode_kernel.load() is not None:  # the C loop: one pass, no temporaries to bound
        return terms, encode_kernel.encode_groups(keys, counts), *diversity
    ends = np.cumsum(counts)
    blobs: list[bytes] = []
    first = 0
    while first < len(counts):
        last = max(first + 1, int(np.searchsorted(ends, ends[first] + ENCODE_POSITIONS)))
        lo, hi = int(ends[first] - counts[first]), int(ends[last - 1])
        blobs += encode_groups(keys[lo:hi], counts[first:last])
        first = last
    return terms, blobs, *diversity


def sum_diversity(chunks: Iterable[tuple[list[str], np.ndarray]]) -> list[tuple[str, int]]:
    """(token, documents) summed over chunks (a block's ~16 x 20k counts become ~4x fewer for
    the writing process to add)."""
    total: dict[str, int] = {}
    get = total.get
    for tokens, df in chunks:
        for token, n in zip(tokens, df.tolist()):
            total[token] = get(token, 0) + n
    return list(total.items())


class PostingsBlocks:
    """The positions of BLOCK_CHUNKS consecutive chunks, written as one blob per term (fewer,
    longer rows than one per chunk: the (block, term) key costs about what ~6 positions do).
    A finished block is encoded by the pool when there is one (`pool()`), and its rows are
    inserted when the next block is finished or at the end: the same statements in the same
    order whatever the timing, so the file does not depend on it. The block's diversity
    counts, summed with its encoding, go to `diversity`."""

    def __init__(self, db: sqlite3.Connection, diversity: DiversityCounts, pool=lambda: None):
        self.db, self.block, self.pool, self.diversity = db, -1, pool, diversity
        self.parts: list[tuple] = []
        self.encoding: deque = deque()  # (block, parts, future or None)

    def add(self, chunk_no: int, done: dict) -> None:
        if chunk_no // BLOCK_CHUNKS != self.block:
            self._finish_block()
            while len(self.encoding) > 1:
                self._insert(*self.encoding.popleft())
            self.block = chunk_no // BLOCK_CHUNKS
        self.parts.append((done["terms"], done["counts"], done["keys"], *done["diversity"]))

    def _finish_block(self) -> None:
        if self.parts:
            pool = self.pool()
            future = pool.submit(encode_block, self.parts) if pool is not None else None
            self.encoding.append((self.block, self.parts, future))
            self.parts = []

    def _insert(self, block: int, parts, future) -> None:
        # a block still queued when the pool shut down (cancelled) is encoded here instead
        done = encode_block(parts) if future is None or future.cancelled() else future.result()
        terms, blobs, tokens, documents = done
        self.db.executemany(
            "INSERT INTO postings (block, term, keys) VALUES (?, ?, ?)",
            zip(itertools.repeat(block), unpack(terms), blobs),
        )
        self.diversity.add(zip(unpack(tokens), documents.tolist()))

    def flush(self) -> None:
        """Every block's rows written."""
        self._finish_block()
        while self.encoding:
            self._insert(*self.encoding.popleft())


class DiversityCounts:
    """Diversity df summed over blocks (`sum_diversity`): in a dict (a block's counts added in
    a few ms, where rows in a temp table and a GROUP BY at the end cost several times that in
    the parent), spilled to a temp table whenever it holds `DIVERSITY_SPILL` tokens, so memory
    stays bounded for any vocabulary."""

    def __init__(self, db: sqlite3.Connection, spill: int | None = None):
        self.db, self.spill, self.spilled = db, DIVERSITY_SPILL if spill is None else spill, False
        self.counts: dict[str, int] = {}
        # created before FTS5's first insert: a schema change in mid-build makes FTS5 flush its
        # pending rows early, and its stored structure would differ (tested)
        db.execute("CREATE TEMP TABLE diversity_parts (term TEXT NOT NULL, df INTEGER NOT NULL)")

    def add(self, pairs: Iterable[tuple[str, int]]) -> None:
        counts, get = self.counts, self.counts.get
        for term, df in pairs:
            counts[term] = get(term, 0) + df
        if len(counts) >= self.spill:
            self._spill()

    def _spill(self) -> None:
        self.spilled = True
        self.db.executemany("INSERT INTO temp.diversity_parts VALUES (?, ?)", self.counts.items())
        self.counts = {}

    def write(self) -> None:
        """The table `diversity_df`, rows in term order (SQLite's BINARY order is code point order)."""
        if not self.spilled:
            self.db.executemany("INSERT INTO diversity_df VALUES (?, ?)", sorted(self.counts.items()))
        else:
            self._spill()
            self.db.execute(
                "INSERT INTO diversity_df SELECT term, sum(df) FROM temp.diversity_parts GROUP BY term ORDER BY term"
            )
        self.db.execute("DROP TABLE temp.diversity_parts")
        self.counts = {}


def write_statistics(db: sqlite3.Connection) -> None:
    """Body document counts of tokens: fts5vocab's 'col' counts of the whole FTS5 table."""
    db.execute("CREATE VIRTUAL TABLE temp.body_vocabulary USING fts5vocab(main, fts, 'col')")
    db.execute("INSERT INTO terms SELECT term, doc FROM temp.body_vocabulary WHERE col = 'body'")
    db.execute("DROP TABLE temp.body_vocabulary")


def write_aliases(db: sqlite3.Connection, folds=None) -> None:
    """SPEC §2 accent aliases: a folded key that exactly one distinct title folds to, and
    that differs from it (all of them, or only those of the keys `folds`)."""
    if folds is None:
        db.execute("DELETE FROM aliases")
        rows = db.execute(
            "SELECT title_fold, min(title_norm) FROM (SELECT DISTINCT title_norm, title_fold FROM units) "
            "GROUP BY title_fold HAVING count(*) = 1 AND title_fold != min(title_norm)"
        ).fetchall()
    else:
        rows = []
        for fold in folds:
            db.execute("DELETE FROM aliases WHERE fold = ?", (fold,))
            titles = db.execute("SELECT DISTINCT title_norm FROM units WHERE title_fold = ?", (fold,)).fetchall()
            if len(titles) == 1 and titles[0][0] != fold:
                rows.append((fold, titles[0][0]))
    # the look-up key: case-insensitive matching compares case-folded text
    db.executemany("INSERT INTO aliases VALUES (?, ?, ?)", [(f, t, f.casefold()) for f, t in rows])


def write_index(
    units: Iterable[Unit],
    path: Path,
    source: str,
    *,
    workers: int | None = None,
    progress: bool | None = False,
    total: int | None = None,
) -> dict:
    """Write a complete index of `units` (any iterable, read once) into the new file
    `path`. Returns the meta table it wrote."""

    workers = default_workers() if workers is None else workers
    db = sqlite3.connect(path)
    bar = _progress_bar(progress, total)
    chunks = _Chunks(units, workers)
    with _fewer_collections():
        try:
            db.executescript(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA page_size = " + str(PAGE_SIZE) + ";"
                "PRAGMA cache_size = -65536;" + SCHEMA
            )
            db.execute("INSERT INTO fts (fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))
            diversity = DiversityCounts(db)
            folds: set[str] | None = set()  # alias candidates (`write_aliases`), None past ALIAS_CANDIDATES
            fingerprint = Fingerprint()
            blocks = PostingsBlocks(db, diversity, lambda: chunks.pool)
            documents = 0
            n = 0
            for chunk_no, (first, chunk, done) in enumerate(chunks):
                write_chunk(db, chunk_no, first, chunk, done, fingerprint)
                blocks.add(chunk_no, done)
                if folds is not None:
                    # only a title whose accent-folded key differs from it can give an alias
                    folds.update(fold for norm, fold in done["title_keys"] if fold != norm)
                    folds = folds if len(folds) <= ALIAS_CANDIDATES else None
                documents += sum(1 for i, u in enumerate(chunk) if i == 0 or u.document != chunk[i - 1].document)
                n += len(chunk)
                bar.update(len(chunk))
            if n == 0:
                return {}
            blocks.flush()  # the last blocks encoded by the pool, then it stops
            chunks.close()
            bar.set_description("indexing: merging")
            db.execute("INSERT INTO fts (fts) VALUES ('optimize')")
            # an update finds the units of a changed document, and the aliases of changed titles
            db.execute("CREATE INDEX units_document ON units (document)")
            db.execute("CREATE INDEX units_title_fold ON units (title_fold)")
            write_statistics(db)
            diversity.write()
            # the candidates' units read by the title_fold index instead of every unit grouped
            write_aliases(db, None if folds is None else sorted(folds))
            meta = {
                "schema": SCHEMA_VERSION,
                **tokenizer_signature(),
                "units": str(n),
                "documents": str(documents),
                "chunks": str(chunk_no + 1),
                "block_chunks": str(BLOCK_CHUNKS),  # chunks per postings block (readers and updates follow it)
                "source": source,
                "fingerprint": fingerprint.hexdigest(),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "complete": "1",  # written last: an index without it never opens
            }
            db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            db.commit()
            return meta
        finally:
            chunks.close()
            bar.close()
            db.close()
