"""Every passage's graph question (`graph_scoring.passage_tokens`: its first distinct tokens,
title first) for a whole corpus, with one tokenization per distinct chunk and no Python object
per chunk or token.

`passage_tokens` tokenizes title, heading and body joined by new lines, a chunk (a whitespace-
free piece of the normalised text) at a time: `textlib.tokenize(text)` is the concatenation of
each chunk's tokens (`textlib.chunk_tokens`). Each process numbers the tokens it meets
(`_Tokens`); a chunk's tokens are remembered as their numbers, in C (`graph_chunks`: the passages'
normalised UTF-8 split and looked up there, `dict.fromkeys` and the cut done there too) or, without
a compiler, in a dict of tuples (`_Chunks`, `dict.fromkeys` over the chunks' numbers). Only a chunk
not seen before is tokenized in Python. The numbers are then put in the order of first use in the
questions, which is the vocabulary's order `passage_tokens` gives. 600k passages on two processes:
~18 s of CPU in all, against ~40-64 s for `passage_tokens` per passage (~90 us a passage).
tests/test_graph_questions.py compares both paths with `passage_tokens` (Chinese text, titles and
headings, repeats, joiners, white space other than the space, questions above and below the cut).
"""

from __future__ import annotations

import array
import itertools
import sqlite3

import numpy as np

from workbench import text as textlib
from workbench.feedback import graph_chunks

CHUNKS_LIMIT = 1 << 20  # distinct chunks remembered per process, then forgotten at once (as textlib's cache)
BATCH = 2000  # passages read from the units table per query

_SHARED: dict = {}  # what forked workers inherit: set before the fork, read in the child


class _Tokens(dict):
    """Token text -> number, numbered 0, 1, 2, ... in order of first look-up (`names`)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __missing__(self, token: str) -> int:
        number = self[token] = len(self.names)
        self.names.append(token)
        return number


class _Chunks(dict):
    """Normalised chunk -> its tokens' numbers (a tuple), computed on first look-up."""

    def __init__(self, tokens: _Tokens) -> None:
        super().__init__()
        self.tokens = tokens

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        if len(self) >= CHUNKS_LIMIT:  # bounded; a chunk forgotten is tokenized again, the same
            self.clear()
        numbers = self[chunk] = tuple(map(self.tokens.__getitem__, textlib.chunk_tokens(chunk)))
        return numbers


def _texts(db, ids: list[int]):
    """(title, heading, body) of each unit in `ids` (ascending), in that order, by one range
    query on the units table (what `Index.units` reads, without a record object per unit)."""
    rows = db.execute(
        "SELECT id, title, heading, body FROM units WHERE id >= ? AND id <= ? ORDER BY id", (ids[0], ids[-1])
    ).fetchall()
    if len(rows) != len(ids):  # not a run of consecutive units: keep the ones asked for
        wanted = set(ids)
        rows = [r for r in rows if r[0] in wanted]
    if len(rows) != len(ids):
        found = {r[0] for r in rows}
        raise KeyError(f"unit {next(u for u in ids if u not in found)} is not in the index")
    return [r[1:] for r in rows]


def tokenize_range(db, ids: np.ndarray, query_tokens: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(vocabulary, phrase ids, question lengths) of the passages `ids` (ascending): passage i's
    question is `vocabulary[p]` for the ids p of its run, the vocabulary in order of first use
    (the order passage_tokens' questions name the tokens; tokens met only past a question's cut
    are left out)."""
    tokens = _Tokens()
    lib = graph_chunks.load()
    batches = (_texts(db, ids[a : a + BATCH].tolist()) for a in range(0, len(ids), BATCH))
    if lib is not None:
        return _questions_compiled(lib, batches, tokens, query_tokens)
    numbers, lengths = _questions_python(batches, tokens, query_tokens)
    used, first = np.unique(numbers, return_index=True)
    used = used[np.argsort(first)]
    renumber = np.zeros(len(tokens.names), dtype=np.int32)
    renumber[used] = np.arange(len(used), dtype=np.int32)
    names = tokens.names
    return [names[t] for t in used.tolist()], renumber[numbers], lengths


def passage_text(title: str, heading: str, body: str) -> str:
    """A passage's text as its graph question reads it (`graph_scoring.passage_tokens`)."""
    return "\n".join(x for x in (title, heading, body) if x)


def _passage_text(title: str, heading: str, body: str) -> str:
    """passage_tokens' text normalised: its tokens are its chunks' tokens one after another."""
    return textlib.normalize(passage_text(title, heading, body))


def _questions_python(batches, tokens: _Tokens, query_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    chunks = _Chunks(tokens)
    get, chain = chunks.__getitem__, itertools.chain.from_iterable
    phrases = array.array("i")  # 4 bytes a position
    lengths = array.array("q")
    for texts in batches:
        for title, heading, body in texts:
            question = list(dict.fromkeys(chain(map(get, _passage_text(title, heading, body).split()))))
            question = question[:query_tokens]
            phrases.extend(question)
            lengths.append(len(question))
    return _array(phrases, np.int32), _array(lengths, np.int64)


def _questions_compiled(lib, batches, tokens: _Tokens, query_tokens: int):
    table = graph_chunks.ChunkTable(lib)
    stamp = np.full(1 << 16, -1, dtype=np.int64)  # per token number: the passage that last had it
    renumber = np.full(1 << 16, -1, dtype=np.int32)  # per token number: its number by first use
    used = np.zeros(1 << 16, dtype=np.int32)  # the token numbers in order of first use
    n_used = serial = 0
    numbers: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for texts in batches:
        encoded = [_passage_text(*t).encode("utf-8", "surrogatepass") for t in texts]
        starts = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=starts[1:])
        text = b"".join(encoded)
        if len(table) >= CHUNKS_LIMIT:  # bounded; a chunk forgotten is tokenized again, the same
            table.clear()
        slots, ends, at, size = table.pending(text, starts)
        counts = np.zeros(len(at), dtype=np.int64)
        flat = array.array("i")
        for k, (a, n) in enumerate(zip(at.tolist(), size.tolist(), strict=True)):
            found = textlib.chunk_tokens(text[a : a + n].decode("utf-8", "surrogatepass"))
            counts[k] = len(found)
            flat.extend(map(tokens.__getitem__, found))
        table.settle(text, at, size, counts, _array(flat, np.int32))
        if len(tokens.names) > len(stamp):
            more = max(len(stamp), len(tokens.names))
            stamp = np.concatenate([stamp, np.full(more, -1, dtype=np.int64)])
            renumber = np.concatenate([renumber, np.full(more, -1, dtype=np.int32)])
            used = np.concatenate([used, np.zeros(more, dtype=np.int32)])
        found_numbers, found_lengths = table.questions(slots, ends, query_tokens, stamp, serial)
        serial += len(encoded)
        found_numbers = found_numbers.copy()
        n_used = graph_chunks.first_use(lib, found_numbers, renumber, used, n_used)
        numbers.append(found_numbers)
        lengths.append(found_lengths)
    names = tokens.names
    vocabulary = [names[t] for t in used[:n_used].tolist()]
    if not numbers:
        return vocabulary, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    return vocabulary, np.concatenate(numbers), np.concatenate(lengths)


def _array(values: array.array, dtype) -> np.ndarray:
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _tokenize_share(share: tuple[int, int]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`tokenize_range` of the passages ids[a:b], on a connection of this process's own."""
    index, ids, query_tokens, forked = (_SHARED[k] for k in ("index", "ids", "query_tokens", "forked"))
    a, b = share
    if not forked:
        return tokenize_range(index.db, ids[a:b], query_tokens)
    # a connection of its own (one must not be used across a fork), without the index's memory map
    db = sqlite3.connect(f"file:{index.path}?mode=ro", uri=True)
    try:
        return tokenize_range(db, ids[a:b], query_tokens)
    finally:
        db.close()


def questions_of(index, ids: np.ndarray, query_tokens: int, workers: int):
    """Every passage's question (`graph_scoring.Questions`), tokenized by `workers` processes
    (each a run of the ids), merged in id order: the vocabulary numbered by first use."""
    from workbench.feedback.graph_scoring import Questions, _run, _shares

    if len(ids) == 0:
        return Questions(ids, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), [])
    _SHARED.update(index=index, ids=ids, query_tokens=query_tokens, forked=workers > 1)
    try:
        parts = _run(_tokenize_share, _shares(len(ids), workers), workers)
    finally:
        _SHARED.clear()
    vocabulary: dict[str, int] = {}
    merged, lengths = [], []
    for local, phrases, n in parts:
        mapping = np.fromiter(
            (vocabulary.setdefault(t, len(vocabulary)) for t in local), dtype=np.int32, count=len(local)
        )
        merged.append(mapping[phrases] if len(phrases) else phrases)
        lengths.append(n)
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    return Questions(ids, offsets, np.concatenate(merged), list(vocabulary))
