"""FTS5's term positions of a chunk of units, computed from their SAG2 tokens instead of
inserting the chunk into a scratch FTS5 table and reading its instances back (~half a
worker's time beside the tokenizer; tested equal to that on whole corpora).

The index's FTS5 table (unicode61) indexes each column as its tokens joined by spaces; a
space always separates, so a column's terms are its tokens' terms in order. A token's terms
are learnt once per process: an ASCII token's are its runs of ASCII letters and digits,
lower-cased (unicode61's ASCII table: nothing else is a token character, no diacritics);
any other token's come from FTS5 itself, new tokens a batch at a time.

>>> terms, counts, keys = fts_positions([7], [(["role_id"], [], ["role", "3.5%"])])
>>> terms, counts, [(int(k) >> 32, int(k) >> 24 & 255, int(k) & 0xFFFFFF) for k in keys]
(['3', '5', 'id', 'role'], [1, 1, 1, 2], [(7, 2, 1), (7, 2, 2), (7, 0, 1), (7, 0, 0), (7, 2, 0)])
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Sequence

import numpy as np

_chain = itertools.chain.from_iterable
_ASCII_TERM = re.compile(r"[0-9A-Za-z]+")
_N_BITS = 24  # a token's number of terms (a unit has at most a few thousand characters)
_LIMIT = 1 << 20  # tokens remembered per process before the tables start afresh

_TERMS: list[str] = []  # FTS5 term id -> term (_TERM_ID below: term -> id)
_SPAN: dict[str, int] = {}  # SAG2 token -> (index of its first term id in _FLAT) << _N_BITS | its number of terms
_FLAT = np.zeros(0, dtype=np.int64)  # the term ids of the tokens, each token's together


def _fts5_terms(tokens: list[str]) -> list[list[str]]:
    """Each token's terms as FTS5's tokenizer gives them (one row per token)."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE fts USING fts5(body, content='')")
        db.executemany("INSERT INTO fts (rowid, body) VALUES (?, ?)", enumerate(tokens, 1))
        db.execute("CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, fts, 'instance')")
        found = sorted(db.execute("SELECT doc, offset, term FROM temp.instances"))
    finally:
        db.close()
    out: list[list[str]] = [[] for _ in tokens]
    for doc, _, term in found:
        out[doc - 1].append(term)
    return out


class _TermIds(dict):
    """FTS5 term -> id, a new term numbered on its first look-up."""

    def __missing__(self, term: str) -> int:
        i = self[term] = len(_TERMS)
        _TERMS.append(term)
        return i


_TERM_ID = _TermIds()


def _learn(tokens: set[str]) -> None:
    global _FLAT
    learnt: list[tuple[str, list[str]]] = []
    other = []
    for t in tokens:
        if not t.isascii():
            other.append(t)
        elif t.isalnum():  # nearly every token: itself, lower-cased
            learnt.append((t, [t.lower()]))
        else:
            learnt.append((t, [m.lower() for m in _ASCII_TERM.findall(t)]))
    if other:
        other.sort()
        learnt += zip(other, _fts5_terms(other))
    ids: list[int] = []
    first = len(_FLAT)
    get = _TERM_ID.__getitem__
    for token, terms in learnt:
        _SPAN[token] = (first + len(ids)) << _N_BITS | len(terms)
        ids.extend(map(get, terms))
    _FLAT = np.concatenate([_FLAT, np.array(ids, dtype=np.int64)])


def fts_positions(ids: list[int], columns: Sequence[Sequence[list[str]]]) -> tuple[list[str], list[int], np.ndarray]:
    """(terms, counts, keys) of the units `ids` whose (title, heading, body) tokens are
    `columns`, as `postings.read_instances` reads them from an FTS5 table holding those
    rows: terms sorted (FTS5's order: code points, as UTF-8 bytes), each term's number of
    positions, and the keys row << 32 | column << 24 | offset grouped by term, each group
    in key order."""
    global _FLAT
    if len(_SPAN) > _LIMIT:
        _TERM_ID.clear()
        _TERMS.clear()
        _SPAN.clear()
        _FLAT = np.zeros(0, dtype=np.int64)
    lists = list(_chain(columns))  # token lists in (row, column) order
    tokens = list(_chain(lists))
    span = np.fromiter(map(_SPAN.get, tokens, itertools.repeat(-1)), dtype=np.int64, count=len(tokens))
    missing = np.flatnonzero(span < 0).tolist()
    if missing:
        _learn({tokens[i] for i in missing})
        span[missing] = [_SPAN[tokens[i]] for i in missing]
    n = span & ((1 << _N_BITS) - 1)
    before = np.concatenate([[0], np.cumsum(n)])  # terms before each token
    total = int(before[-1])
    # each position's term: its token's run in _FLAT
    term = _FLAT[np.repeat((span >> _N_BITS) - before[:-1], n) + np.arange(total, dtype=np.int64)]
    token_ends = np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)))
    column_len = np.diff(before[np.concatenate([[0], token_ends])])
    n_columns = len(columns[0]) if columns else 3
    row = np.repeat(np.asarray(ids, dtype=np.int64), n_columns)
    column = np.tile(np.arange(n_columns, dtype=np.int64), len(ids))
    column_start = np.cumsum(column_len) - column_len
    keys = np.repeat(row << 32 | column << 24, column_len) + (
        np.arange(total, dtype=np.int64) - np.repeat(column_start, column_len)
    )
    uniq, inverse = np.unique(term, return_inverse=True)
    names = [_TERMS[i] for i in uniq.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names), dtype=np.int64)
    by_term = rank[inverse]
    return (
        [names[i] for i in order],
        np.bincount(by_term, minlength=len(names)).tolist(),
        keys[np.argsort(by_term, kind="stable")],  # stable: each term's keys stay in key order
    )
