"""Sets of unit ids as ascending int64 arrays: the expansion's per-term matches, their union and
each match's place in it (`engine.retrieve_expansion`).

A selected term such as "film" or "american" matches 100k-200k of 600k passages, and the union of
a round's 20 terms then holds about a third of the corpus. Finding each term's rows in that union
by binary search took 10-16 ms a round (a search per row over a 200k array, most of them cache
misses), and dropping the units seen so far from each term's rows, a search per row over the seen
ids, 2-7 ms. Here a row's place is read from an int32 array indexed by row, and the seen ids (a
few hundred) are searched in the rows instead. The results are the same arrays
(tests/test_row_sets.py compares them with the binary searches).
"""

from __future__ import annotations

import numpy as np

from workbench.index.postings import sorted_unique

# at least this many rows in the union: places from an array indexed by row (its pages cost ~0.3 ms at 600k)
_DENSE_PLACES = 4096


def unseen(rows: np.ndarray, seen_ids: np.ndarray) -> np.ndarray:
    """The ascending, duplicate-free `rows` not in `seen_ids` (ascending, duplicate-free)."""
    if not len(seen_ids) or not len(rows):
        return rows
    at = np.searchsorted(rows, seen_ids)  # the few seen ids in the many rows, not each row in them
    inside = at < len(rows)
    at = at[inside]
    at = at[rows[at] == seen_ids[inside]]
    if not len(at):
        return rows
    keep = np.ones(len(rows), dtype=bool)
    keep[at] = False
    return rows[keep]


def union(rows: list[np.ndarray]) -> np.ndarray:
    """The ascending union of ascending unit-id arrays (marks in an array as long as the
    largest id: the terms' lists overlap and together can hold a large share of the corpus)."""
    count = sum(len(r) for r in rows)
    if not count:
        return np.zeros(0, dtype=np.int64)
    top = max(int(r[-1]) for r in rows if len(r))
    if 16 * count < top:  # few: sorting them is cheaper than a pass over every id
        return sorted_unique(np.concatenate(rows))
    marked = np.zeros(top + 1, dtype=bool)
    for r in rows:
        marked[r] = True
    return np.flatnonzero(marked)


def places(among: np.ndarray, rows: list[np.ndarray]) -> list[np.ndarray]:
    """`np.searchsorted(among, r)` for each `r` of `rows`, whose ids are all in `among` (ascending,
    duplicate-free, ids >= 0)."""
    if len(among) < _DENSE_PLACES:
        return [np.searchsorted(among, r) for r in rows]
    place = np.empty(int(among[-1]) + 1, dtype=np.int32)  # only the ids of `among` are ever read
    place[among] = np.arange(len(among), dtype=np.int32)
    return [place[r] for r in rows]
