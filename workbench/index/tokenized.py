"""A chunk of units tokenized for the index (runs in a build's worker processes): the
FTS5 rows, FTS5's term positions, title phrases and keys, diversity document counts.

Each distinct whitespace-free piece of normalised text ("chunk") is looked up once per
process: its SAG2 tokens, its FTS5 terms (from a scratch FTS5 table with the index's
tokenizer, so they are FTS5's own) and its diversity tokens are remembered by its id, and a
row's positions are put together from its chunks' ids with numpy. The result equals what a
scratch FTS5 table of the rows gives (`postings.read_instances`; tested).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator

import numpy as np

from workbench import text as textlib
from workbench.index import words_kernel
from workbench.index.postings import COLUMNS
from workbench.index.schema import DIVERSITY_TOKEN, fold_accents, normalize_title

_BODY = COLUMNS.index("body")
_PLAIN = re.compile(r"[a-z0-9]+")


class Ids(dict):
    """Strings numbered 0, 1, 2, ... in order of first look-up (`names` in that order)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __missing__(self, name: str) -> int:
        number = self[name] = len(self)
        self.names.append(name)
        return number


class _Runs:
    """A run of ids per numbered item (CSR arrays), grown in batches."""

    def __init__(self) -> None:
        self.starts = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int64)
        self.flat = np.zeros(0, dtype=np.int64)

    def extend(self, lengths: list[int], flat: list[int]) -> None:
        lengths_ = np.array(lengths, dtype=np.int64)
        self.starts = np.concatenate([self.starts, len(self.flat) + np.cumsum(lengths_) - lengths_])
        self.lengths = np.concatenate([self.lengths, lengths_])
        self.flat = np.concatenate([self.flat, np.array(flat, dtype=np.int64)])

    def expand(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The runs of `items` one after another, and each item's run length."""
        lens = self.lengths[items]
        ends = np.cumsum(lens)
        n = int(ends[-1]) if len(ends) else 0
        return self.flat[np.arange(n, dtype=np.int64) + np.repeat(self.starts[items] - (ends - lens), lens)], lens


class _Words:
    """Per process: each distinct normalised chunk (a whitespace-free piece of a text) gets an
    id on first look-up; `settle` then finds the FTS5 terms and diversity tokens of all new
    chunks at once. A text's FTS5 terms are its chunks' terms in order: FTS5's unicode61
    tokenizer carries nothing across the spaces that join the chunks' tokens. The chunks and
    their joined tokens live in the compiled table (`words_kernel`) when there is one, else in
    a dict and a list here (the same ids and texts)."""

    def __init__(self) -> None:
        self.settled = 0
        lib = words_kernel.load()
        self.table = words_kernel.WordTable(lib) if lib is not None else None
        self.ids = Ids()  # without the table: chunk -> id
        self.pending: list[str] = []  # with the table: the chunks met since the last settle
        self.joined: list[str] = []  # without the table: a chunk's SAG2 tokens joined by spaces, by id
        self.terms, self.term_runs = Ids(), _Runs()
        self.tokens, self.token_runs = Ids(), _Runs()

    def __len__(self) -> int:
        return len(self.table) if self.table is not None else len(self.ids)

    def lookup(self, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the normalised `columns`' chunks (`str.split()`'s), one column after
        another, and each column's number of chunks."""
        if self.table is not None:
            ids, counts, new = self.table.lookup(columns)
            self.pending += new
            return ids, counts
        flat: list[int] = []
        per_column: list[int] = []
        word_id = self.ids.__getitem__
        for column in columns:
            words = column.split()
            flat.extend(map(word_id, words))
            per_column.append(len(words))
        return np.array(flat, dtype=np.int64), np.array(per_column, dtype=np.int64)

    def texts(self, w: np.ndarray, per_column: np.ndarray) -> list[str]:
        """Each column's text for FTS5: its chunks' non-empty joined tokens, one space between
        (settled chunks)."""
        if self.table is not None:
            return self.table.texts(w, per_column)
        joined = list(map(self.joined.__getitem__, w.tolist()))
        return [" ".join(filter(None, part)) for part in _split(joined, per_column.tolist())]

    def settle(self) -> None:
        """The FTS5 terms of the chunks first seen since the last call, from a scratch FTS5
        table with the index's tokenizer (so they are FTS5's own, whatever the text)."""
        if self.table is not None:
            pending, self.pending = self.pending, []
        else:
            pending = self.ids.names[self.settled :]
        if not pending:
            return
        joined = list(map(textlib.joined_tokens, pending))
        if self.table is not None:
            self.table.settle(self.settled, joined)
        else:
            self.joined += joined
        self.settled += len(pending)
        # a joined chunk that is one lower-case ASCII letter/digit run is one FTS5 term, itself
        # (unicode61 keeps such a run whole and unchanged), and '' is none: only the others are
        # split by FTS5
        ask = [i for i, j in enumerate(joined) if j and not _PLAIN.fullmatch(j)]
        terms_of: dict[int, list[str]] = {}
        if ask:
            scratch = sqlite3.connect(":memory:")
            try:
                scratch.execute("CREATE VIRTUAL TABLE words USING fts5(t, content='')")
                scratch.executemany("INSERT INTO words (rowid, t) VALUES (?, ?)", [(i, joined[i]) for i in ask])
                scratch.execute("CREATE VIRTUAL TABLE temp.words_instances USING fts5vocab(main, words, 'instance')")
                found = scratch.execute("SELECT doc, offset, term FROM temp.words_instances").fetchall()
            finally:
                scratch.close()
            found.sort()
            for doc, _, term in found:
                terms_of.setdefault(doc, []).append(term)
        runs: list = [(j,) if j else () for j in joined]
        for i in ask:
            runs[i] = terms_of.get(i, ())
        self.term_runs.extend(
            list(map(len, runs)), list(map(self.terms.__getitem__, itertools.chain.from_iterable(runs)))
        )
        # diversity tokens of the chunk as it is: equal to the case-folded chunk's for ASCII text
        found_tokens = [[c] if c.isascii() and c.isalnum() else DIVERSITY_TOKEN.findall(c) for c in pending]
        self.token_runs.extend(
            [len(t) for t in found_tokens],
            list(map(self.tokens.__getitem__, itertools.chain.from_iterable(found_tokens))),
        )


_WORDS = _Words()
_WORDS_LIMIT = 1 << 21  # distinct chunks remembered (a few hundred MiB at most), then forgotten at once


def stable_order(groups: np.ndarray) -> np.ndarray:
    """np.argsort(groups, kind="stable") for small non-negative ints, by one plain sort of
    (group, index) keys (numpy's vectorised sort; its stable sort of int64 is ~8x slower)."""
    n = len(groups)
    if n >= 1 << 40 or (n and int(groups.max()) >= 1 << 23):  # the keys would not fit in int64
        return np.argsort(groups, kind="stable")
    return np.sort((groups << 40) | np.arange(n, dtype=np.int64)) & ((1 << 40) - 1)


def positions(
    ids: list[int], w: np.ndarray, per_column: np.ndarray, sort_terms: bool = True
) -> tuple[list[str], list[int], np.ndarray, bytes]:
    """(terms, counts, keys) as `postings.read_instances` reads them from an FTS5 table of
    these rows, and the rows' lengths: `w` holds the chunk ids of row 0's title, heading, body,
    row 1's title, ... (`per_column` of them in each column), settled in `_WORDS`. Terms
    sorted (or, without `sort_terms`, in an order of this process's own), each term's keys in
    key order."""
    vocab = _WORDS
    term, lens = vocab.term_runs.expand(w)
    n = len(term)
    chunk_ends = np.concatenate([[0], np.cumsum(lens)])
    column_ends = chunk_ends[np.cumsum(per_column)]
    per_column_terms = np.diff(np.concatenate([[0], column_ends]))  # a column's token count
    column_start = np.repeat(column_ends - per_column_terms, per_column_terms)
    column = np.repeat(np.arange(len(per_column), dtype=np.int64), per_column_terms)
    row = np.asarray(ids, dtype=np.int64)[column // len(COLUMNS)]
    keys = (row << 32) | ((column % len(COLUMNS)) << 24) | (np.arange(n, dtype=np.int64) - column_start)
    counts_all = np.bincount(term, minlength=len(vocab.terms.names))
    present = np.flatnonzero(counts_all)
    names = list(map(vocab.terms.names.__getitem__, present.tolist()))
    if sort_terms:
        order = sorted(range(len(names)), key=names.__getitem__)  # FTS5's order: UTF-8 bytes, i.e. code points
        present, names = present[order], [names[i] for i in order]
    rank = np.zeros(len(counts_all), dtype=np.int64)
    rank[present] = np.arange(len(present), dtype=np.int64)
    keys = keys[stable_order(rank[term])]  # stable: positions are made in key order
    lengths = per_column_terms.reshape(-1, len(COLUMNS)).sum(axis=1).astype("<i4")  # a row's token count
    return names, counts_all[present].tolist(), keys, lengths.tobytes()


def diversity_counts(w: np.ndarray, per_column: np.ndarray, bodies: list[str], same: list[bool], doc_of: list[int]):
    """(tokens, documents): DIVERSITY_TOKEN's tokens in the case-folded bodies and the number of
    documents holding each, each document counted once: from the settled chunks of a body whose
    case folding equals its NFKC + lower case (`same`; DIVERSITY_TOKEN never matches white
    space, so a text's tokens are its chunks'), from the case-folded body itself otherwise."""
    vocab = _WORDS
    reuse = np.zeros(len(per_column), dtype=bool)
    reuse[_BODY :: len(COLUMNS)] = same
    word_column = np.repeat(np.arange(len(per_column), dtype=np.int64), per_column)
    use = reuse[word_column]
    tokens, lens = vocab.token_runs.expand(w[use])
    docs = np.repeat(np.asarray(doc_of, dtype=np.int64)[word_column[use] // len(COLUMNS)], lens)
    other = [i for i, b in enumerate(same) if not b]
    if other:
        found = [DIVERSITY_TOKEN.findall(bodies[i].casefold()) for i in other]
        more = np.fromiter(map(vocab.tokens.__getitem__, itertools.chain(*found)), dtype=np.int64)
        tokens = np.concatenate([tokens, more])
        more_docs = np.repeat(np.array([doc_of[i] for i in other], dtype=np.int64), [len(f) for f in found])
        docs = np.concatenate([docs, more_docs])
    size = max(1, len(vocab.tokens))
    pairs = np.sort(docs * size + tokens)
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = pairs[1:] != pairs[:-1]  # each (document, token) once
    df = np.bincount(pairs[first] % size, minlength=size)
    present = np.flatnonzero(df)
    return list(map(vocab.tokens.names.__getitem__, present.tolist())), df[present].tolist()


def _split(items: list, lengths: list[int]) -> Iterator[list]:
    """`items` cut into consecutive runs of `lengths`."""
    end = 0
    for n in lengths:
        yield items[end : end + n]
        end += n


def tokenize_rows(ids: list[int], rows: list[tuple[str, str, str, str]], sort_terms: bool = True) -> dict:
    """`tokenize_chunk` for units with the ids `ids` (ascending; a document's units together).
    `sort_terms` False: the terms in an order of this process's own (the build's blocks sort
    their terms anyway, `build.merge_positions`; sorting each chunk's ~20k names cost ~8% of a
    worker)."""

    global _WORDS
    if len(_WORDS) >= _WORDS_LIMIT:
        _WORDS = _Words()
    norm = textlib.normalize
    normed: list[str] = []  # each row's normalised title, heading, body
    title_keys: list[tuple[str, str]] = []
    keys_of_title: dict[str, tuple[str, str]] = {}
    doc_of: list[int] = []
    same: list[bool] = []  # the body's NFKC + lower case equals its case folding
    documents = 0
    for i, (title, heading, body, document) in enumerate(rows):
        normed_body = norm(body)
        normed += (norm(title), norm(heading), normed_body)
        # ASCII text: NFKC leaves it alone and lower case is its case folding (no casefold call)
        same.append(body.isascii() or normed_body == body.casefold())
        if title not in keys_of_title:
            key = normalize_title(title)
            # an ASCII title folds to itself (NFKD and NFKC leave it alone, it has no marks)
            keys_of_title[title] = (key, key if key.isascii() else fold_accents(key))
        title_keys.append(keys_of_title[title])
        doc_of.append(documents)
        if i + 1 < len(rows) and rows[i + 1][3] != document:
            documents += 1
    w, per_column = _WORDS.lookup(normed)
    _WORDS.settle()
    texts = _WORDS.texts(w, per_column)
    fts_rows = list(zip(ids, texts[0::3], texts[1::3], texts[2::3]))
    # two or more tokens (a token never holds a space); counted: an update removes a phrase with its last unit
    phrases = Counter(t for t in texts[0::3] if " " in t)
    diversity = diversity_counts(w, per_column, [r[2] for r in rows], same, doc_of)
    # FTS5's own terms for these rows, with their positions (tested equal to a scratch FTS5 table's)
    terms, counts, keys, lengths = positions(ids, w, per_column, sort_terms)
    return {
        "fts_rows": fts_rows,
        "terms": terms,
        "counts": counts,  # each term's number of positions in `keys`
        "keys": keys,  # int64 keys grouped by term, each group sorted
        "lengths": lengths,
        "phrases": sorted(phrases.items()),
        "title_keys": title_keys,
        "diversity": diversity,
    }
