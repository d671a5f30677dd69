"""The corpus graph's phrase table (`graph_scoring.PhraseTable`) from one sequential read of the
index's postings, instead of one look-up, one decode and a dozen numpy calls per phrase.

A graph's vocabulary is nearly every token of the corpus, so `graph_scoring.phrase_table`
asks SQLite for ~130k terms at 60k passages, one B-tree look-up per term and block, and
decodes each term's blobs alone (numpy's per-call overhead, not the bytes, sets that time).
Here the postings table is read once in term order (one cursor per block, merged), the blobs
of the vocabulary's one-token phrases kept; then batches of terms are decoded in one `decode_keys`
call each, and every term's rows, weighted frequencies and contributions computed by whole-
batch numpy passes. Each float is the one `Postings.bm25` computes: a row's f is a bincount
of its instances' column weights in position order (bincount adds each bin's weights in input
order, so other terms in the batch change nothing), idf comes from `math.log` per term, and the
contribution is idf * ((f * (k1 + 1)) / (f + norm)) elementwise. Phrases of several tokens
or ones FTS5 splits otherwise (`Postings.known_tokens`) go through `phrase_contributions`.
tests/test_graph_stream.py compares the two tables bit for bit; tests/test_graph_table.py checks
one by hand.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np

from workbench.index.postings import K1, Postings, column_weights, decode_grouped
from workbench.index.sqlite import ReadConnection, damaged_index

BATCH_BYTES = 1 << 20  # blob bytes decoded per numpy pass: ~1 M keys of int64 temporaries at most
# (4 MB: ~250 MB of temporaries, now that the table is made in the parent)
_ROW_SHIFT, _COL_SHIFT = 32, 24


@contextlib.contextmanager
def _own_connection(postings: Postings) -> Iterator[sqlite3.Connection | None]:
    """A connection of its own on the index file without a memory map (the index's connection
    maps the file, whose pages would count in this process's memory and in every forked
    worker's, and fetches a whole result at once); None when the postings are not an index
    file's (the caller then uses their own `execute`)."""
    if not isinstance(postings.db, ReadConnection):
        yield None
        return
    path = postings.db.path
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.execute("PRAGMA mmap_size = 0")
        yield db
    except sqlite3.DatabaseError as exc:
        raise damaged_index(path, exc) from None
    finally:
        db.close()


@contextlib.contextmanager
def unmapped(index) -> Iterator[None]:
    """The index's connection reads without its memory map meanwhile (the same pages, by read()):
    pages read through the map stay resident and count in this process's RSS, ~225 MiB in a
    600k graph's parent (mostly the positions of the tokens of the phrases FTS5 splits, read
    for the table), which the 1 GiB goal cannot hold. The map's size is set back after."""
    if not isinstance(index.db, ReadConnection):
        yield
        return
    raw = index.db.raw
    (size,) = raw.execute("PRAGMA mmap_size").fetchone()
    raw.execute("PRAGMA mmap_size = 0")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA mmap_size = {int(size)}")


def single_token(postings: Postings, phrase: str) -> bool:
    toks = postings.known_tokens(phrase)
    return toks is not None and len(toks) == 1 and toks[0] == phrase


def batch_contributions(
    blobs: list[list[bytes]], row_norm: np.ndarray, n_rows: int, column_weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows per term, rows, contributions) of several terms, each given as its blobs in block
    order; terms without blobs have no rows."""
    keys, per_term = decode_grouped(blobs)
    if not len(keys):
        return per_term, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
    term_of = np.repeat(np.arange(len(blobs)), per_term)
    rows = keys >> _ROW_SHIFT
    first = np.ones(len(keys), dtype=bool)  # a term's first instance in a row
    np.logical_or(rows[1:] != rows[:-1], term_of[1:] != term_of[:-1], out=first[1:])
    group = np.cumsum(first) - 1
    f = np.bincount(group, weights=column_weight[(keys >> _COL_SHIFT) & 0xFF], minlength=int(group[-1]) + 1)
    hit_rows = rows[first]
    hit_term = term_of[first]
    counts = np.bincount(hit_term, minlength=len(blobs)).astype(np.int64)
    idf = np.empty(len(blobs))
    for t, n_hit in enumerate(counts.tolist()):  # math.log, as Postings.phrase_terms
        value = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
        idf[t] = value if value > 0.0 else 1e-6
    impacts = idf[hit_term] * ((f * (K1 + 1.0)) / (f + row_norm[hit_rows]))
    return counts, hit_rows.astype(np.int32), impacts


def keep_parts(found, p: int, lengths: np.ndarray, missing: np.ndarray, rows_of: list, impacts_of: list) -> None:
    """Phrase p's (rows, impacts) appended to the parts, or p marked missing (`found` None)."""
    if found is None:
        missing[p] = True
    elif len(found[0]):
        lengths[p] = len(found[0])
        rows_of.append(found[0].astype(np.int32))
        impacts_of.append(found[1])


def table_order(postings: Postings, vocabulary: Sequence[str]) -> tuple[np.ndarray, int]:
    """(order, n): the vocabulary's phrase ids with its `n` one-token phrases first, ascending by
    text (the postings table's term order: SQLite compares UTF-8 bytes, Python code points, the
    same order), then the others in their order. A phrase's id changes no neighbour list (a row's
    score adds contributions in question order), so the table can be made in the stored order."""
    single = [p for p, phrase in enumerate(vocabulary) if single_token(postings, phrase)]
    single.sort(key=vocabulary.__getitem__)
    chosen = np.zeros(len(vocabulary), dtype=bool)
    chosen[single] = True
    order = np.concatenate([np.array(single, dtype=np.int64), np.flatnonzero(~chosen)])
    return order, len(single)


def _term_stream(postings: Postings, db: sqlite3.Connection | None, first: str = ""):
    """(term, block, blob) of every stored blob from term `first` on, ascending by (term, block):
    one cursor per block (each a range of the (block, term) key, in term order) merged, so a
    term's blobs arrive together in block order and only the batch being decoded is held (a dict
    of every term's blobs was ~1/3 of the table's memory besides it)."""
    sql = "SELECT term, block, keys FROM postings WHERE block = ? AND term >= ? ORDER BY term"
    if db is None:
        return heapq.merge(*(iter(postings.db.execute(sql, (b, first))) for b in postings.blocks))
    return heapq.merge(*(db.execute(sql, (b, first)) for b in postings.blocks))


def streamed_parts(postings: Postings, terms: Sequence[str], weights):
    """(lengths, rows parts, impacts parts) of the one-token phrases `terms` (ascending, as
    `table_order` puts them), from one merged pass over the postings table
    (`batch_contributions` of each term's blobs in block order)."""
    column_weight = np.array(column_weights(weights))
    lengths = np.zeros(len(terms), dtype=np.int64)
    rows_of: list[np.ndarray] = []
    impacts_of: list[np.ndarray] = []
    batch: list[int] = []
    groups: list[list[bytes]] = []
    batch_bytes = 0

    def flush() -> None:
        nonlocal batch_bytes
        if batch:
            counts, rows, impacts = batch_contributions(groups, postings.row_norm, postings.n_rows, column_weight)
            lengths[batch] = counts
            rows_of.append(rows)
            impacts_of.append(impacts)
            batch.clear()
            groups.clear()
        batch_bytes = 0

    j, n = 0, len(terms)
    with _own_connection(postings) as db:
        for term, _, blob in _term_stream(postings, db, terms[0] if n else ""):
            while j < n and terms[j] < term:
                j += 1
            if j == n:
                break
            if terms[j] != term:
                continue  # a term no question has
            if not batch or batch[-1] != j:
                if batch_bytes >= BATCH_BYTES:
                    flush()
                batch.append(j)
                groups.append([])
            groups[-1].append(blob)
            batch_bytes += len(blob)
        flush()
    return lengths, rows_of, impacts_of


def stored_order_table(postings: Postings, questions, weights, workers: int = 1):
    """The phrase table of `questions`' vocabulary made in the postings table's order: the
    phrases renumbered by `table_order` (the questions' phrase ids and vocabulary rewritten in
    place), the one-token ones from `streamed_parts` (by `workers` processes, each a run of the
    terms, see `_parallel_parts`), the others by `phrase_contributions`. The same contributions
    as `phrase_table`, under the new ids."""
    from workbench.feedback.graph_scoring import PhraseTable, _joined, phrase_contributions, release_memory

    vocabulary = questions.vocabulary
    order, n_single = table_order(postings, vocabulary)
    new_id = np.empty(len(order), dtype=np.int32)
    new_id[order] = np.arange(len(order), dtype=np.int32)
    phrases = questions.phrases
    for a in range(0, len(phrases), 1 << 20):  # in place, a slice at a time: no second copy
        phrases[a : a + (1 << 20)] = new_id[phrases[a : a + (1 << 20)]]
    del new_id
    vocabulary = questions.vocabulary = [vocabulary[p] for p in order.tolist()]
    del order
    lengths = np.zeros(len(vocabulary), dtype=np.int64)
    missing = np.zeros(len(vocabulary), dtype=bool)
    column_weight = np.array(column_weights(weights))
    if workers > 1 and isinstance(postings.db, ReadConnection) and n_single >= workers:
        with tempfile.TemporaryDirectory(prefix="sag2wb-graph-") as folder:
            files, lengths[:n_single] = _parallel_parts(postings, vocabulary[:n_single], weights, workers, folder)
            rows_of: list[np.ndarray] = []
            impacts_of: list[np.ndarray] = []
            for p in range(n_single, len(vocabulary)):
                found = phrase_contributions(postings, vocabulary[p], column_weight)
                keep_parts(found, p, lengths, missing, rows_of, impacts_of)
            postings.forget_cached()
            release_memory()  # the freed caches' pages back before the table's pages fill
            offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            rows, impacts = _read_parts(files, int(offsets[-1]), rows_of, impacts_of)
        return PhraseTable(offsets, rows, impacts, missing)
    lengths[:n_single], rows_of, impacts_of = streamed_parts(postings, vocabulary[:n_single], weights)
    for p in range(n_single, len(vocabulary)):
        found = phrase_contributions(postings, vocabulary[p], column_weight)
        keep_parts(found, p, lengths, missing, rows_of, impacts_of)
    postings.forget_cached()  # what the phrases of several tokens read: not needed again
    offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return PhraseTable(offsets, _joined(rows_of, np.int32), _joined(impacts_of, np.float64), missing)


_SHARED: dict = {}  # what forked workers inherit: set before the fork, read in the child


def _parallel_parts(postings: Postings, terms: list[str], weights, workers: int, folder: str):
    """`streamed_parts` of the one-token phrases `terms` by `workers` forked processes, each a
    run of the terms at a time (its own connection and merged stream from the run's first
    term), written to a file in `folder` (rows, then contributions): the parent does not hold
    the parts and the table at once, and no part goes through a pipe. (files, lengths) in term
    order; every float is the one `streamed_parts` computes (a term's rows and weights are the
    same whatever the batch)."""
    from workbench.feedback.graph_scoring import _run, _shares

    # runs of equal term counts hold unequal postings (the common terms cluster): 16 a process
    # balance them (600k: 3.5-3.9 s against 5.3 s with 4 a process, the same minutes)
    _SHARED.update(postings=postings, terms=terms, weights=weights, folder=folder)
    try:
        parts = _run(_write_part, _shares(len(terms), workers * 16), workers)
    finally:
        _SHARED.clear()
    return [(path, total) for path, total, _ in parts], np.concatenate([x for _, _, x in parts])


def _write_part(share: tuple[int, int]) -> tuple[str, int, np.ndarray]:
    postings, terms, weights, folder = (_SHARED[k] for k in ("postings", "terms", "weights", "folder"))
    a, b = share
    lengths, rows_of, impacts_of = streamed_parts(postings, terms[a:b], weights)
    path = f"{folder}/{a}.bin"
    with open(path, "wb") as f:
        for part in rows_of:
            f.write(np.ascontiguousarray(part, dtype=np.int32).data)
        for part in impacts_of:
            f.write(np.ascontiguousarray(part, dtype=np.float64).data)
    return path, int(lengths.sum()), lengths


def _read_parts(files, total: int, rows_of: list, impacts_of: list) -> tuple[np.ndarray, np.ndarray]:
    """The table's rows and contributions: each file's, in order, then the given parts'."""
    rows, impacts = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.float64)
    at = 0
    for path, n in files:
        with open(path, "rb") as f:
            _read_into(f, rows[at : at + n])
            _read_into(f, impacts[at : at + n])
        os.unlink(path)  # its pages leave the page cache
        at += n
    for r, x in zip(rows_of, impacts_of, strict=True):
        rows[at : at + len(r)], impacts[at : at + len(r)] = r, x
        at += len(r)
    if at != total:
        raise RuntimeError(f"graph table: {at} entries read where {total} were written")
    return rows, impacts


def _read_into(f, out: np.ndarray) -> None:
    view = memoryview(out.view(np.uint8).data)  # the array's bytes, written in place
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])
        if not n:
            raise RuntimeError("graph table: a part file cut short")
        done += n
