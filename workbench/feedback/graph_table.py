"""The corpus graph's phrase table (`graph_scoring.PhraseTable`) from one sequential read of the
index's postings, instead of one look-up, one decode and a dozen numpy calls per phrase.

A graph's vocabulary is nearly every token of the corpus, so `graph_scoring.phrase_table`
asks SQLite for ~130k terms at 60k passages, one B-tree look-up per term and block, and
decodes each term's blobs alone (numpy's per-call overhead, not the bytes, sets that time).
Here the postings table is read once in its stored order (block, term), the blobs of the
vocabulary's one-token phrases kept; then batches of terms are decoded in one `decode_keys`
call each, and every term's rows, weighted frequencies and contributions computed by whole-
batch numpy passes. Each float is the one `Postings.bm25` computes: a row's f is a bincount
of its instances' column weights in position order (bincount adds each bin's weights in input
order, so other terms in the batch change nothing), idf comes from `math.log` per term, and the
contribution is idf * ((f * (k1 + 1)) / (f + norm)) elementwise. Phrases of several tokens
or ones FTS5 splits otherwise (`Postings.known_tokens`) go through `phrase_contributions`.
tests/test_graph_table.py compares the two tables bit for bit.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence

import numpy as np

from workbench.index.postings import COLUMNS, K1, Postings, decode_grouped
from workbench.index.sqlite import ReadConnection, damaged_index

BATCH_BYTES = 1 << 20  # blob bytes decoded per numpy pass: ~1 M keys of int64 temporaries at most
# (4 MB: ~250 MB of temporaries, now that the table is made in the parent)
_ROW_SHIFT, _COL_SHIFT = 32, 24


def read_term_blobs(postings: Postings, terms: set[str]) -> dict[str, list[bytes]]:
    """{term: its blobs in block order} for these terms, by one pass over the postings table.
    The index file is read on a connection of its own without a memory map, row by row: the
    index's connection maps the file (its pages would count in this process's memory, then
    in every forked worker's) and fetches a whole result at once (every term's blobs)."""
    blocks = ",".join(map(str, postings.blocks))
    out: dict[str, list[bytes]] = {}
    sql = f"SELECT term, keys FROM postings WHERE block IN ({blocks}) ORDER BY block, term"

    def collect(rows) -> dict[str, list[bytes]]:
        for term, blob in rows:
            if term in terms:
                out.setdefault(term, []).append(blob)
        return out

    if not isinstance(postings.db, ReadConnection):  # not an index file's connection: its own execute
        return collect(postings.db.execute(sql))
    path = postings.db.path
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.execute("PRAGMA mmap_size = 0")
        return collect(db.execute(sql))
    except sqlite3.DatabaseError as exc:
        raise damaged_index(path, exc) from None
    finally:
        db.close()


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


def bulk_parts(postings: Postings, vocabulary: Sequence[str], weights, blobs: dict[str, list[bytes]]):
    """(lengths, missing, rows parts, impacts parts) of the vocabulary's phrases, in its order:
    one-token phrases from `blobs` by batches, the others by `phrase_contributions`."""
    from workbench.feedback.graph_scoring import phrase_contributions

    column_weight = np.array([float(w) for w in weights] + [1.0] * (len(COLUMNS) - len(weights)))
    n = len(vocabulary)
    lengths = np.zeros(n, dtype=np.int64)
    missing = np.zeros(n, dtype=bool)
    rows_of: list[np.ndarray] = []
    impacts_of: list[np.ndarray] = []
    batch: list[int] = []
    batch_bytes = 0

    def flush() -> None:
        nonlocal batch_bytes
        if batch:
            counts, rows, impacts = batch_contributions(
                [blobs.get(vocabulary[p], []) for p in batch], postings.row_norm, postings.n_rows, column_weight
            )
            lengths[batch] = counts
            rows_of.append(rows)
            impacts_of.append(impacts)
            batch.clear()
        batch_bytes = 0

    for p, phrase in enumerate(vocabulary):
        if single_token(postings, phrase):
            batch.append(p)
            batch_bytes += sum(len(b) for b in blobs.get(phrase, ()))
            if batch_bytes >= BATCH_BYTES:
                flush()
            continue
        flush()  # the parts stay in vocabulary order
        found = phrase_contributions(postings, phrase, column_weight)
        if found is None:
            missing[p] = True
        elif len(found[0]):
            lengths[p] = len(found[0])
            rows_of.append(found[0].astype(np.int32))
            impacts_of.append(found[1])
    flush()
    return lengths, missing, rows_of, impacts_of
