"""The order the corpus graph's questions are scored in (issue 33): questions that share their
least common phrase one after another, so the lists they read and search stay in the caches.

A question's rarest phrase held by another passage names its closest passages' shared text (a
document's passages, a set of near copies), and their questions read mostly the same lists
and search the same rows' contributions; scored in id order, those lists were read from main
memory again for each. The order changes the cost only: each question's list is computed alone
(graph_scoring puts every list back in its passage's row). At 300k, 30,000 questions: 0.48-0.60
ms CPU a passage in this order against 0.70-0.76 in id order (the same positions read).
"""

from __future__ import annotations

import numpy as np

_NONE = np.int64(1) << 62  # a question without a phrase of two or more rows: last, in id order


def locality_order(table_offsets: np.ndarray, question_offsets: np.ndarray, phrases: np.ndarray) -> np.ndarray:
    """Question numbers (int64) by their key, ties by number: the key of a question is its
    phrase of fewest rows among those with two or more (the passage itself and another), ties
    by lower phrase id."""
    n = len(question_offsets) - 1
    keys = np.full(n, _NONE, dtype=np.int64)
    for a in range(0, n, 1 << 16):  # by slices of questions: int64 temporaries of ~40 MB at most
        b = min(n, a + (1 << 16))
        starts = question_offsets[a:b]
        some = np.flatnonzero(question_offsets[a + 1 : b + 1] > starts)
        if not len(some):
            continue
        p = phrases[int(starts[0]) : int(question_offsets[b])].astype(np.int64)
        rows = table_offsets[p + 1] - table_offsets[p]
        best = np.where(rows >= 2, (rows << 32) | p, _NONE)
        keys[a + some] = np.minimum.reduceat(best, starts[some] - starts[0])
    return np.lexsort((np.arange(n, dtype=np.int64), keys)).astype(np.int64)
