"""FTS5's bm25() computed from term positions stored in the index (SPEC §2 ranking).

SQLite evaluates bm25() row by row, reading each row's size from the docsize table; on
2Wiki that is ~3 ms per query, and at 600k passages most of a question's time. The build
(`workbench/build.py`) stores every FTS5 term position and row size; this module reads a
token's positions when a phrase first needs them (nothing corpus-sized at open but the
row sizes) and scores an OR of phrases for all matching rows with numpy, using the
formula of SQLite's fts5_aux.c with the same floating-point operations in the same order:

    idf(p)    = ln((N - hits(p) + 0.5) / (hits(p) + 0.5)), or 1e-6 if that is <= 0
    f(p, row) = column weights of the phrase's instances in the row, added in position order
    bm25(row) = -(sum over phrases p, in query order, of
                  idf(p) * (f * (k1 + 1)) / (f + k1 * (1 - b + b * |row| / avgdl)))

with k1 = 1.2, b = 0.75, |row| the row's token count over all columns. Scores equal
FTS5's bit for bit (tests compare them with FTS5 on every kind of phrase), so rankings and
ties are unchanged. Phrases are split into tokens by FTS5 itself (a scratch table with
the same unicode61 tokenizer), so accents, punctuation and CJK text split exactly as in
the index. The same positions give a phrase's matching rows and its body df.

>>> rows, scores = Postings.open(enc_index.db).bm25(["glass harbour"], (2.0, 2.0, 1.0))
>>> rows, scores.round(2)
(array([ 16,  67, 117, 147]), array([-5.79, -5.54, -5.73, -4.54]))
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from typing import Any, Protocol, cast

import numpy as np

from workbench.index import postings_kernel
from workbench.index.postings_kernel import bm25_order, sorted_unique  # noqa: F401  (this module's face)
from workbench.recent import Recent

K1, B = 1.2, 0.75
COLUMNS = ("title", "heading", "body")


def column_weights(weights) -> tuple[float, ...]:
    """One float weight per column: the given ones, then 1.0 for the columns they leave out."""
    return tuple(float(x) for x in weights) + (1.0,) * (len(COLUMNS) - len(weights))


# postings are int64 keys: row << 32 | column << 24 | token offset (sorted = FTS5's order)
_ROW_SHIFT, _COL_SHIFT, _OFFSET_MASK = 32, 24, (1 << 24) - 1
_BODY_COLUMN = COLUMNS.index("body")
_PLAIN = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*")  # unicode61 keeps these tokens as they are
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def phrases_of(expression: str) -> list[str] | None:
    """The phrases of an expression written as `"a" OR "b c" OR ...` (the only form the
    engine sends), or None for anything else."""
    found = _PHRASE.findall(expression)
    if not found or " OR ".join('"' + p + '"' for p in found) != expression:
        return None
    return [p.replace('""', '"') for p in found]


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (big-endian 7-bit groups; a ninth byte carries 8 bits)."""
    out, i, n = [], 0, len(blob)
    while i < n:
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(value)
    return out


def read_instances(db: sqlite3.Connection, table: str = "fts") -> tuple[list[str], list[int], np.ndarray]:
    """Every term position of the FTS5 table `table` (fts5vocab): the terms in FTS5's
    order, each term's number of positions, and all positions as int64 keys grouped by
    term (row << 32 | column << 24 | offset, each group sorted). The build reads one chunk
    of units at a time this way, from a scratch table with the index's tokenizer."""
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.sag2wb_rows USING fts5vocab(main, {table}, 'row')")
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.sag2wb_instances USING fts5vocab(main, {table}, 'instance')")
    rows = db.execute("SELECT term, cnt FROM temp.sag2wb_rows").fetchall()
    cols = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(COLUMNS))
    (text,) = db.execute(
        f"SELECT group_concat((doc << {_ROW_SHIFT}) + ((CASE col {cols} END) << {_COL_SHIFT}) + offset) "
        "FROM temp.sag2wb_instances"
    ).fetchone()
    # numpy's text parser: no Python object per position
    keys = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)
    terms = [t for t, _ in rows]
    counts = [c for _, c in rows]
    if len(keys) != sum(counts):  # both vocabularies walk the same index; anything else is a bug
        raise RuntimeError(f"fts5vocab disagrees with itself: {len(keys)} instances vs {sum(counts)}")
    return terms, counts, keys


# ---- the stored form of positions (schema 3) ------------------------------------------
# One blob per (block of BLOCK_CHUNKS build chunks, term). A blob is one byte `ob` (the bits
# its offsets need), then LEB128 varints of the gaps between successive values
# v = row << (ob + 2) | column << ob | offset (the first gap is from 0): v grows with the key,
# so a term in every tenth row of a block costs ~2 bytes a position, against 8 for the key.
BLOCK_CHUNKS = 16


def block_chunks(db: Queryable) -> int:
    """Chunks per postings block of this index (its meta records the build's BLOCK_CHUNKS)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'block_chunks'").fetchone()
    return int(row[0]) if row else BLOCK_CHUNKS


def encode_groups(keys: np.ndarray, counts) -> list[bytes]:
    """The blobs of consecutive groups of sorted int64 keys (`counts[g]` keys each, every
    count > 0), in one pass of numpy over all of them."""
    counts = np.asarray(counts, dtype=np.int64)
    if not len(counts):
        return []
    keys = np.asarray(keys, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    offset = (keys & _OFFSET_MASK).astype(np.uint64)
    column = ((keys >> _COL_SHIFT) & 0xFF).astype(np.uint64)
    row = (keys >> _ROW_SHIFT).astype(np.uint64)
    ob_group = np.frexp(np.maximum.reduceat(offset, starts).astype(np.float64))[1].astype(np.uint64)
    ob = np.repeat(ob_group, counts)
    v = (row << (ob + np.uint64(2))) | (column << ob) | offset
    gaps = v.copy()
    gaps[1:] -= v[:-1]
    gaps[starts] = v[starts]
    nbytes = np.ones(len(gaps), dtype=np.int64)
    for groups_of_7 in range(1, 10):
        nbytes += gaps >= np.uint64(1 << (7 * groups_of_7))
    group_of = np.repeat(np.arange(len(counts)), counts)
    first_byte = np.cumsum(nbytes) - nbytes + group_of + 1  # one header byte before each group
    out = np.empty(int(nbytes.sum()) + len(counts), dtype=np.uint8)
    heads = first_byte[starts] - 1
    out[heads] = ob_group.astype(np.uint8)
    if int(nbytes.max()) == 1:
        out[first_byte] = gaps.astype(np.uint8)
    else:
        value_of = np.repeat(np.arange(len(gaps)), nbytes)
        k = np.arange(len(value_of)) - np.repeat(np.cumsum(nbytes) - nbytes, nbytes)  # byte k of its value
        shift = (7 * k).astype(np.uint64)
        byte = (gaps[value_of] >> shift) & np.uint64(0x7F)
        byte |= (k < nbytes[value_of] - 1).astype(np.uint64) << np.uint64(7)
        out[np.repeat(first_byte, nbytes) + k] = byte.astype(np.uint8)
    ends = np.append(heads[1:], len(out)).tolist()
    data = out.tobytes()
    return [data[a:b] for a, b in zip(heads.tolist(), ends)]


_SMALL_BLOBS = 192  # bytes: below this, a Python loop beats numpy's per-call overhead
_FEW_LONG = 48  # values of several bytes: up to this many, a Python loop beats numpy's rounds


def _decode_small(blobs: list[bytes]) -> list[int]:
    out = []
    for blob in blobs:
        ob = blob[0]
        mask, shift = (1 << ob) - 1, ob + 2
        v = part = bit = 0
        for byte in blob[1:]:
            part |= (byte & 0x7F) << bit
            if byte < 0x80:
                v += part
                out.append((v >> shift) << _ROW_SHIFT | ((v >> ob) & 3) << _COL_SHIFT | (v & mask))
                part = bit = 0
            else:
                bit += 7
    return out


def decode_keys(blobs: list[bytes]) -> np.ndarray:
    """The int64 keys (row << 32 | column << 24 | offset) of stored blobs, concatenated (one
    term's blocks in block order give its keys sorted), in one pass of numpy over them all.
    A typical term's blobs hold ~1 KB, so the number of numpy calls, not the bytes, sets the
    time: every step is one call over all blobs, whatever their number. The compiled loop
    (`postings_kernel`) gives the same keys in one pass over the bytes where it is available."""
    kernel = postings_kernel.load()
    if kernel is not None:
        return postings_kernel.decode_blobs(kernel, blobs)[0]
    return decode_keys_numpy(blobs)


def decode_keys_numpy(blobs: list[bytes]) -> np.ndarray:
    """`decode_keys` in numpy alone (without a C compiler, and to compare the kernel with)."""
    data = b"".join(blobs)
    if len(data) <= _SMALL_BLOBS:
        return np.array(_decode_small(blobs), dtype=np.int64)
    b = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(b < 0x80)  # the last byte of every value (a header byte is a value too)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    values = (b[starts] & 0x7F).astype(np.uint64)
    longer = np.flatnonzero(ends != starts)
    if len(longer) <= _FEW_LONG:  # e.g. only each blob's first gap, from 0: finish them in Python
        for i, first, last in zip(longer.tolist(), starts[longer].tolist(), ends[longer].tolist()):
            value = 0
            for k in range(last, first - 1, -1):
                value = (value << 7) | (data[k] & 0x7F)
            values[i] = value
    else:
        extra = ends - starts  # bytes after each value's first
        j = 1
        while len(longer):  # the j-th byte of the values that have one (most gaps take 1-2 bytes)
            values[longer] |= (b[starts[longer] + j] & 0x7F).astype(np.uint64) << np.uint64(7 * j)
            j += 1
            longer = longer[extra[longer] >= j]
    # each blob's header value (its `ob`), then its gaps, which count from 0: a running sum over
    # all blobs, less the sum before each blob (uint64 wraps alike on both sides: exact)
    heads = np.searchsorted(starts, np.cumsum([0] + [len(x) for x in blobs[:-1]])).tolist()
    sizes = np.diff([*heads, len(values)])
    values[heads] = 0
    v = np.cumsum(values)
    if len(heads) > 1:
        v -= np.repeat(v[heads], sizes)
    gap = np.ones(len(values), dtype=bool)
    gap[heads] = False
    v = v[gap]
    obs = [blob[0] for blob in blobs]
    ob: Any = np.uint64(obs[0]) if min(obs) == max(obs) else np.repeat(np.array(obs, dtype=np.uint64), sizes - 1)
    out = (v >> (ob + np.uint64(2))).astype(np.int64) << _ROW_SHIFT
    out |= ((v >> ob) & np.uint64(3)).astype(np.int64) << _COL_SHIFT
    out |= (v & ((np.uint64(1) << ob) - np.uint64(1))).astype(np.int64)
    return out


def decode_grouped(groups: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """(`decode_keys` of all the groups' blobs, how many of those keys each group holds), in one
    pass of numpy: a blob decodes alone, so the concatenation splits into each group's keys."""
    blobs = [blob for group in groups for blob in group]
    if not blobs:
        return np.zeros(0, dtype=np.int64), np.zeros(len(groups), dtype=np.int64)
    kernel = postings_kernel.load()
    if kernel is not None:  # it counts each blob's keys: sum them per group
        keys, per_blob = postings_kernel.decode_blobs(kernel, blobs)
        ended = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum(per_blob, out=ended[1:])
        bounds = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum([len(group) for group in groups], out=bounds[1:])
        return keys, np.diff(ended[bounds])
    keys = decode_keys_numpy(blobs)
    # a group's keys: the values it holds (one byte < 0x80 ends each) less its blobs' header bytes
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    ended = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(data < 0x80, out=ended[1:])
    ends = np.cumsum([sum(len(blob) for blob in group) for group in groups])
    counts = np.diff(ended[ends], prepend=0) - np.array([len(group) for group in groups], dtype=np.int64)
    return keys, counts


def decode_groups(groups: list[list[bytes]]) -> list[np.ndarray]:
    """`decode_keys` of each group of blobs (one term's blobs per group), in one pass of numpy over
    all of them (`decode_grouped`)."""
    keys, counts = decode_grouped(groups)
    return np.split(keys, np.cumsum(counts)[:-1])


def stored_counts(db: Queryable, table: str, column: str, terms: list[str]) -> dict[str, int]:
    """{term: its `column` in `table`, 0 if absent} for many terms, one read per 500."""
    out: dict[str, int] = {}
    for i in range(0, len(terms), 500):
        chunk = terms[i : i + 500]
        out.update(dict.fromkeys(chunk, 0))
        out.update(
            db.execute(f"SELECT term, {column} FROM {table} WHERE term IN ({','.join('?' * len(chunk))})", chunk)
        )
    return out


class Queryable(Protocol):
    # what Postings reads through: a sqlite3.Connection, or the index's read connection around one
    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...


def averages(db: Queryable) -> tuple[int, float]:
    """(rows, average row length in tokens) from FTS5's averages record, as fts5_aux.c reads them."""
    (block,) = db.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
    n_rows, *column_totals = _varints(block)
    return n_rows, float(sum(column_totals)) / float(n_rows)


# phrase look-ups keep at most this many positions of recently used tokens in memory
TOKEN_CACHE_POSITIONS = 16_000_000
# and at most this many rows of phrases' BM25 terms (8 bytes each, with their row ids)
TERMS_CACHE_ROWS = 4_000_000
# and the tokens of at most this many phrases, and the starts of phrases counted, not yet searched
TOKENS_CACHE_PHRASES, STARTS_CACHE_POSITIONS = 100_000, 1_000_000
NO_TOKENS: tuple[str, ...] = ()  # what the tokens cache holds for a phrase without tokens


def find_sorted(values: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, found): where each of `queries` sits in the sorted, duplicate-free `values`
    (a binary search each), and whether it is there."""
    if not len(values):
        return np.zeros(len(queries), dtype=np.int64), np.zeros(len(queries), dtype=bool)
    at = np.searchsorted(values, queries)
    at[at == len(values)] = 0
    return at, values[at] == queries


class Postings:
    """The index's term positions as the build stored them (table `postings`, one blob per
    block of units and term, decoded to int64 keys on first use), row sizes and the table averages. A token's
    positions are read from disk when a phrase first needs them (SQLite memory-maps the
    file), so opening costs the row sizes only, whatever the corpus size."""

    def __init__(self, db: Queryable, row_norm: np.ndarray, n_rows: int, blocks: tuple[int, ...] = (0,)):
        self.db = db
        self.blocks = blocks  # the postings blocks that hold this index's rows
        # a term's blobs: one look-up per block in one statement (the key is (block, term))
        self._read_term = (
            f"SELECT keys FROM postings WHERE block IN ({','.join(map(str, blocks))}) AND term = ? ORDER BY block"
        )
        self.row_norm = row_norm  # rowid -> k1 * (1 - b + b * |row| / avgdl)
        self.n_rows = n_rows
        # phrase -> its FTS5 tokens, NO_TOKENS for a phrase without any (a stored None would read as
        # absent), least recently used let go first like the other caches
        self._tokens = Recent(TOKENS_CACHE_PHRASES)
        # bounded, least recently used let go first (recent.py): phrase -> (rows, instance -> row, column)
        self._phrases = Recent(4096)
        # phrase -> the starts `body_rows` counted, which `phrase` takes when the expansion searches it
        self._counted_starts = Recent(STARTS_CACHE_POSITIONS, len)
        self._token_keys = Recent(TOKEN_CACHE_POSITIONS, len)  # token -> its keys, within a number of keys
        # (phrase, column weights) -> (rows, each row's BM25 term for the phrase), as `bm25` adds them
        self._terms = Recent(TERMS_CACHE_ROWS, lambda found: len(found[0]))
        self._lock = threading.Lock()
        self._scratch = False  # the scratch table that splits phrases like FTS5 exists
        self._sums: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # `_row_arrays`
        self._sums_lock = threading.Lock()

    @classmethod
    def open(cls, db: Queryable) -> Postings:
        """The stored postings of an index (row sizes and averages are read now)."""
        n_rows, avgdl = averages(db)
        blobs = db.execute("SELECT first_id, chunk, lengths FROM row_lengths ORDER BY first_id").fetchall()
        top = max((first + len(blob) // 4 for first, _, blob in blobs), default=1)
        length = np.zeros(top, dtype=np.float64)
        for first, _, blob in blobs:
            length[first : first + len(blob) // 4] = np.frombuffer(blob, dtype="<i4")
        row_norm = K1 * ((1 - B) + (B * length) / avgdl)
        per_block = block_chunks(db)
        return cls(db, row_norm, n_rows, tuple(sorted({chunk // per_block for _, chunk, _ in blobs})) or (0,))

    # ---- phrases -------------------------------------------------------------------------
    def tokens(self, phrase: str) -> tuple[str, ...] | None:
        """The phrase as FTS5's unicode61 splits it (None if it has no token)."""
        known = self._tokens.get(phrase)
        if known is not None:
            return known or None
        toks = self.known_tokens(phrase)  # a plain phrase splits at its spaces
        if toks is None:
            toks = self._fts5_split([phrase])[0]
        return self._remember_tokens(phrase, toks)

    def split(self, phrases: list[str]) -> list[tuple[str, ...] | None]:
        """`tokens` of each phrase; those that need FTS5's tokenizer are split together, in one round
        trip to the scratch table per 400 (a round's phrases with accents or punctuation took three
        statements each)."""
        todo = [p for p in dict.fromkeys(phrases) if p not in self._tokens and self.known_tokens(p) is None]
        for i in range(0, len(todo), 400):
            chunk = todo[i : i + 400]
            for phrase, toks in zip(chunk, self._fts5_split(chunk)):
                self._remember_tokens(phrase, toks)
        return [self.tokens(p) for p in phrases]

    def _fts5_split(self, phrases: list[str]) -> list[tuple[str, ...]]:
        # each phrase is a row of its own: FTS5 tokenizes rows apart, so together they split as one by one
        with self._lock:
            if not self._scratch:
                self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.sag2wb_scratch USING fts5(x)")
                self.db.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.sag2wb_scratch_terms "
                    "USING fts5vocab(temp, sag2wb_scratch, 'instance')"
                )
                self._scratch = True
            rows = ", ".join(["(?, ?)"] * len(phrases))
            values = [x for row in enumerate(phrases, 1) for x in row]
            self.db.execute(f"INSERT INTO temp.sag2wb_scratch (rowid, x) VALUES {rows}", values)
            try:
                found = self.db.execute("SELECT doc, term FROM temp.sag2wb_scratch_terms ORDER BY doc, offset")
            finally:
                self.db.execute("DELETE FROM temp.sag2wb_scratch")
        split: list[list[str]] = [[] for _ in phrases]
        for doc, term in found:
            split[doc - 1].append(term)
        return [tuple(toks) for toks in split]

    def _remember_tokens(self, phrase: str, toks: tuple[str, ...] | None) -> tuple[str, ...] | None:
        self._tokens.put(phrase, toks or NO_TOKENS)
        return toks or None

    def known_tokens(self, phrase: str) -> tuple[str, ...] | None:
        """The phrase's FTS5 tokens if they come without a scratch-table round trip."""
        return tuple(phrase.split(" ")) if _PLAIN.fullmatch(phrase) else self._tokens.get(phrase) or None

    def _term_keys(self, token: str) -> np.ndarray:
        keys = self._token_keys.get(token)
        if keys is None:
            with self._lock:
                blobs = self.db.execute(self._read_term, (token,)).fetchall()
            # blocks hold increasing row ranges, so the concatenation stays sorted
            keys = decode_keys([b for (b,) in blobs]) if blobs else np.zeros(0, dtype=np.int64)
            self._keep_keys(token, keys)
        return keys

    def load_tokens(self, tokens) -> None:
        """Read the positions of the tokens not yet in memory, in one statement per 500 and one
        decoding pass (what `_term_keys` reads one by one; counting a round's phrases needs
        dozens, and each read or decoding call costs more than its bytes)."""
        todo = [t for t in dict.fromkeys(tokens) if t not in self._token_keys]
        for i in range(0, len(todo), 500):
            chunk = todo[i : i + 500]
            blobs: dict[str, list[bytes]] = {t: [] for t in chunk}
            sql = self._read_term.replace("term = ?", f"term IN ({','.join('?' * len(chunk))})")
            with self._lock:
                rows = self.db.execute(sql.replace("SELECT keys", "SELECT term, keys"), chunk).fetchall()
            for term, blob in rows:  # ORDER BY block: each term's blobs in block order
                blobs[term].append(blob)
            for term, keys in zip(chunk, decode_groups(list(blobs.values()))):
                self._keep_keys(term, keys)

    def forget_cached(self) -> None:
        """Let go of the positions and BM25 terms kept for later questions (up to ~130 MB): a
        corpus graph reads each phrase once, and its scoring workers would inherit them."""
        self._token_keys.clear()
        self._terms.clear()
        self._phrases.clear()
        self._counted_starts.clear()

    def _keep_keys(self, token: str, keys: np.ndarray) -> None:
        self._token_keys.put(token, keys)

    def _starts(self, toks: tuple[str, ...]) -> np.ndarray:
        """Sorted keys where the phrase begins: token k sits k places after token 0, same column.
        The rarest token's keys (less its place) are the candidates; each other token keeps those
        whose key plus its place it holds, a binary search of the candidates in its keys: no
        array as long as a common token's keys is made."""
        keys = [self._term_keys(tok) for tok in toks]
        rare = min(range(len(toks)), key=lambda k: len(keys[k]))
        starts = keys[rare] - rare if rare else keys[rare]
        kernel = postings_kernel.load()
        for k, other in enumerate(keys):
            if k != rare and len(starts):
                if kernel is not None:  # one merge of the two sorted arrays
                    starts = postings_kernel.keep_followed(kernel, starts, other, k)
                else:
                    starts = starts[find_sorted(other, starts + k if k else starts)[1]]
        return starts

    def phrase(self, phrase: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(rows, instance -> row index, instance column) for the phrase's instances; None
        for a phrase without tokens (callers leave those to FTS5)."""
        found = self._phrases.get(phrase)
        if found is None:
            starts = self._counted_starts.pop(phrase, None)
            if starts is None:
                toks = self.tokens(phrase)
                if toks is None:
                    return None
                starts = self._starts(toks)
            rows_of = starts >> _ROW_SHIFT  # sorted: keys are in (row, column, offset) order
            first = np.empty(len(rows_of), dtype=bool)
            first[:1] = True
            np.not_equal(rows_of[1:], rows_of[:-1], out=first[1:])
            found = (rows_of[first], np.cumsum(first) - 1, (starts >> _COL_SHIFT) & 0xFF)
            self._phrases.put(phrase, found)
        return found

    def body_rows(self, phrase: str) -> int | None:
        """How many rows have the phrase in their body (FTS5's `body : "phrase"` count;
        None: ask FTS5)."""
        found = self._phrases.get(phrase)
        if found is not None:
            _, where, cols = found
            body = where[cols == _BODY_COLUMN]  # row indexes, non-decreasing
        else:  # most counted phrases are never searched: count from the starts alone
            toks = self.tokens(phrase)
            if toks is None:
                return None
            starts = self._starts(toks)
            self._counted_starts.put(phrase, starts)
            body = starts[((starts >> _COL_SHIFT) & 0xFF) == _BODY_COLUMN] >> _ROW_SHIFT
        return int(len(body) and 1 + np.count_nonzero(body[1:] != body[:-1]))

    # ---- scoring -------------------------------------------------------------------------
    def phrase_terms(self, phrase: str, weights) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows with the phrase, ascending; the phrase's term of the BM25 sum in each row,
        idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * |row| / avgdl))), or None for a phrase
        without tokens. Remembered per phrase and weights: a question's rounds and re-runs
        score the same phrases again."""
        w = column_weights(weights)
        found = self._terms.get((phrase, w))
        if found is None:
            instances = self.phrase(phrase)
            if instances is None:
                return None
            rows, where, cols = instances
            if len(rows):
                # instances are in position order, so bincount adds each row's weights in FTS5's order
                f = np.bincount(where, weights=np.array(w)[cols], minlength=len(rows))
                n_hit = len(rows)
                idf = math.log((self.n_rows - n_hit + 0.5) / (n_hit + 0.5))
                if idf <= 0.0:
                    idf = 1e-6
                found = rows, idf * ((f * (K1 + 1.0)) / (f + self.row_norm[rows]))
            else:
                found = rows, np.zeros(0, dtype=np.float64)
            self._terms.put((phrase, w), found)
        return found

    def _all_phrase_terms(self, phrases: list[str], weights) -> list:
        """`phrase_terms` of each phrase, the positions of the tokens of those not yet known read
        together first (a question's tokens: one read and one decoding pass instead of one each)."""
        w = column_weights(weights)
        todo = [p for p in phrases if (p, w) not in self._terms and p not in self._phrases]
        self.load_tokens(tok for toks in self.split(todo) for tok in toks or ())
        return [self.phrase_terms(p, weights) for p in phrases]

    def bm25(self, phrases: list[str], weights) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows matching any phrase, ascending; their bm25 as FTS5 returns it), or None
        when a phrase has no token."""
        found = self._all_phrase_terms(phrases, weights)
        if any(f is None for f in found):
            return None
        total = np.zeros(len(self.row_norm), dtype=np.float64)
        hit = np.zeros(len(self.row_norm), dtype=bool)
        for rows, term in cast("list[tuple[np.ndarray, np.ndarray]]", found):  # no None left
            if len(rows):  # a phrase no row has adds 0.0 to every row in FTS5 too
                total[rows] += term  # phrases in query order: FTS5's order of the sum
                hit[rows] = True
        matched = np.flatnonzero(hit)
        return matched, -1.0 * total[matched]

    def top(self, phrases: list[str], weights, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The first `limit` of `bm25`'s rows in `bm25_order` (rows, scores), or None when a phrase
        has no token: with the compiled kernel, without arrays of every matching row."""
        kernel = postings_kernel.load()
        if kernel is None:
            scored = self.bm25(phrases, weights)
            if scored is None:
                return None
            rows, scores = scored
            order = bm25_order(rows, scores, limit)
            return rows[order], scores[order]
        found = self._all_phrase_terms(phrases, weights)
        if any(f is None for f in found):
            return None
        lists = [(rows, term) for rows, term in cast("list[tuple[np.ndarray, np.ndarray]]", found) if len(rows)]
        with self._sums_lock:  # arrays of every row, kept zeroed (or -1) between calls
            sums, marks, slots = self._row_arrays()
            pruned = postings_kernel.top_of_short_lists(kernel, lists, limit, slots)
            if pruned is not None:
                return pruned
            return postings_kernel.top_bm25(kernel, lists, len(self.row_norm), limit, (sums, marks))

    def _row_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(float64 zeros, uint8 zeros, int32 -1s) as long as the rows, made once (their pages'
        first touch costs ~3 ms a call at 600k rows); the kernels leave them as they found them."""
        if self._sums is None:
            size = len(self.row_norm)
            self._sums = (np.zeros(size), np.zeros(size, dtype=np.uint8), np.full(size, -1, dtype=np.int32))
        return self._sums

    def bm25_among(self, phrases: list[str], weights, among: np.ndarray) -> np.ndarray | None:
        """bm25 (as `bm25` gives it) of the rows `among` (ascending, unique, each matching
        some phrase), without scoring the others; None when a phrase has no token. Each row
        adds the same terms in the same order as in `bm25`, so the scores are equal."""
        found = self._all_phrase_terms(phrases, weights)
        if any(f is None for f in found):
            return None
        total = np.zeros(len(among), dtype=np.float64)
        # each row's place in `among` (-1: not there), so a phrase's rows find theirs in one pass
        # over them (a binary search costs ~50 ns a look-up: only for a list far longer than `among`)
        lists = [(rows, term) for rows, term in cast("list[tuple[np.ndarray, np.ndarray]]", found) if len(rows)]
        if not len(among) or not lists:
            return -1.0 * total
        kernel = postings_kernel.load()
        if kernel is not None and int(among[-1]) < len(self.row_norm):  # the same additions in the same order
            with self._sums_lock:
                return -1.0 * postings_kernel.add_among(kernel, among, lists, self._row_arrays()[2])
        slot = np.full(max([int(among[-1]), *(int(rows[-1]) for rows, _ in lists)]) + 1, -1, dtype=np.int32)
        slot[among] = np.arange(len(among), dtype=np.int32)
        for rows, term in lists:  # phrases in query order, as in `bm25`
            if len(rows) > 16 * len(among):  # far longer: binary search of `among` in it instead
                at, present = find_sorted(rows, among)
                total[present] += term[at[present]]
            else:
                at = slot[rows]
                present = at >= 0
                total[at[present]] += term[present]
        return -1.0 * total
