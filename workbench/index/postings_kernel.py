"""Loops over stored postings compiled (C, through ctypes): decoding blobs, keeping a phrase's
start positions that the next token follows, round 0's top B (`top_bm25`, `top_of_short_lists`)
and the expansion's sums over its candidate rows (`add_among`).

A question at 600k decodes ~270k positions (the tokens of the phrases term selection counts and
scores). numpy needs a dozen passes over them (the varints' byte ranks, the running sums, the
key's three fields: ~40 ns a position); one loop over the bytes takes a few. The loop does the
same integer arithmetic as `postings.decode_keys`'s numpy path (uint64 gaps summed per blob,
the same shifts and masks), so the keys are equal (tests/test_question_kernel.py compares both
on random and real blobs). A phrase's starts are kept by one merge of two sorted arrays
(galloping through the longer) instead of a binary search per start, which costs most when
both tokens are common (10k-100k positions each); the same starts are kept
(tests/test_question_kernel.py compares with `find_sorted`).

The C source is compiled once per source, flags and compiler with the system's C compiler (`cc`,
or $CC) into $XDG_CACHE_HOME/sag2wb/kernels, written atomically (`workbench/ckernel.py`); without a
compiler, or with SAG2WB_POSTINGS_KERNEL=numpy, `load()` is None and the numpy path runs.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from workbench import ckernel

SOURCE = r"""
#include <stdint.h>

/* Blobs laid end to end in `data` (blob b ends at ends[b]); each is a header byte `ob`, then
   LEB128 varints of the gaps between v = row << (ob + 2) | column << ob | offset (the first from
   0). Writes the keys row << 32 | column << 24 | offset to `out` and each blob's number of keys
   to counts[b]; returns the number of keys, or -1 if they would pass `cap` or a blob ends inside
   a varint (not a blob the build wrote). */
int64_t decode_blobs(const uint8_t *data, const int64_t *ends, int64_t nblobs, int64_t *out, int64_t *counts,
                     int64_t cap) {
    int64_t i = 0, n = 0;
    for (int64_t b = 0; b < nblobs; b++) {
        int64_t end = ends[b], first = n;
        if (i < end) {
            uint64_t ob = data[i++];
            uint64_t mask = (((uint64_t)1) << ob) - 1, v = 0;
            while (i < end) {
                uint64_t part = 0;
                unsigned shift = 0;
                uint8_t byte;
                do {
                    byte = data[i++];
                    if (shift < 64) part |= (uint64_t)(byte & 0x7F) << shift;
                    shift += 7;
                } while ((byte & 0x80) && i < end);
                if ((byte & 0x80) || n == cap) return -1;
                v += part;
                out[n++] = (int64_t)(((v >> (ob + 2)) << 32) | (((v >> ob) & 3) << 24) | (v & mask));
            }
        }
        counts[b] = n - first;
    }
    return n;
}

/* first index i >= lo with a[i] >= x (m if none); a ascending */
static int64_t gallop(const int64_t *a, int64_t lo, int64_t m, int64_t x) {
    int64_t hi = lo, step = 1;
    while (hi < m && a[hi] < x) {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    if (hi > m) hi = m;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* the starts s (ascending) with s + k in `other` (ascending), written to out; returns how many */
int64_t keep_followed(const int64_t *starts, int64_t n, const int64_t *other, int64_t m, int64_t k, int64_t *out) {
    int64_t j = 0, c = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = (int64_t)((uint64_t)starts[i] + (uint64_t)k);
        j = gallop(other, j, m, x);
        if (j == m) break;
        if (other[j] == x) out[c++] = starts[i];
    }
    return c;
}

/* For each phrase p in query order, total[i] += terms[p][j] where among[i] == rows[p][j] (both
   ascending): the additions `Postings.bm25_among` makes, in its order. The shorter list of each
   pair is walked, galloping through the longer. */
void add_among(const int64_t *among, int64_t n, int64_t nphr, const int64_t *const *rows, const double *const *terms,
               const int64_t *lens, double *total) {
    for (int64_t p = 0; p < nphr; p++) {
        const int64_t *r = rows[p];
        const double *t = terms[p];
        int64_t m = lens[p], i = 0, j = 0;
        if (m <= n) {
            for (j = 0; j < m && i < n; j++) {
                i = gallop(among, i, n, r[j]);
                if (i < n && among[i] == r[j]) total[i] += t[j];
            }
        } else {
            for (i = 0; i < n && j < m; i++) {
                j = gallop(r, j, m, among[i]);
                if (j < m && r[j] == among[i]) total[i] += t[j];
            }
        }
    }
}

/* `add_among` through `slot` (every row's place in `among`, -1 when absent; -1 everywhere on
   entry and again on return): a list up to 16x longer than `among` is read straight through,
   each row looking up its place, instead of galloping. The same additions in the same order. */
void add_among_slots(const int64_t *among, int64_t n, int64_t nphr, const int64_t *const *rows,
                     const double *const *terms, const int64_t *lens, int32_t *slot, double *total) {
    for (int64_t i = 0; i < n; i++) slot[among[i]] = (int32_t)i;
    for (int64_t p = 0; p < nphr; p++) {
        const int64_t *r = rows[p];
        const double *t = terms[p];
        int64_t m = lens[p];
        if (m > 16 * n) {
            for (int64_t i = 0, j = 0; i < n && j < m; i++) {
                j = gallop(r, j, m, among[i]);
                if (j < m && r[j] == among[i]) total[i] += t[j];
            }
        } else {
            for (int64_t j = 0; j < m; j++) {
                int32_t at = slot[r[j]];
                if (at >= 0) total[at] += t[j];
            }
        }
    }
    for (int64_t i = 0; i < n; i++) slot[among[i]] = -1;
}

/* a before b in Index.search's order: lower bm25 (as FTS5 gives it) first, ties by lower row */
static int before(double sa, int64_t a, double sb, int64_t b) { return sa < sb || (sa == sb && a < b); }

/* `Postings.bm25` then `bm25_order`: total[r] gets each phrase's terms in query order (from 0.0;
   `total` and `hit` come zeroed, `size` rows long, and are left zeroed), and the first `limit` rows by (-1.0 * total,
   row) are written to top_rows / top_scores in that order; returns how many. */
int64_t top_bm25(int64_t nphr, const int64_t *const *rows, const double *const *terms, const int64_t *lens,
                 int64_t size, double *total, uint8_t *hit, int64_t limit, int64_t *top_rows, double *top_scores) {
    for (int64_t p = 0; p < nphr; p++) {
        const int64_t *r = rows[p];
        const double *t = terms[p];
        for (int64_t j = 0; j < lens[p]; j++) {
            total[r[j]] += t[j];
            hit[r[j]] = 1;
        }
    }
    int64_t n = 0;
    if (limit <= 0) return 0;
    for (int64_t r = 0; r < size; r++) {
        if (!hit[r]) continue;
        double s = -1.0 * total[r];
        if (n == limit && !before(s, r, top_scores[n - 1], top_rows[n - 1])) continue;
        int64_t i = (n < limit) ? n++ : n - 1;
        while (i > 0 && before(s, r, top_scores[i - 1], top_rows[i - 1])) {
            top_scores[i] = top_scores[i - 1];
            top_rows[i] = top_rows[i - 1];
            i--;
        }
        top_scores[i] = s;
        top_rows[i] = r;
    }
    for (int64_t p = 0; p < nphr; p++) /* zeroed again for the next call: only the touched rows */
        for (int64_t j = 0; j < lens[p]; j++) {
            total[rows[p][j]] = 0.0;
            hit[rows[p][j]] = 0;
        }
    return n;
}
"""


_P, _N = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {
    "decode_blobs": (_N, [ctypes.c_char_p, _P, _N, _P, _P, _N]),
    "keep_followed": (_N, [_P, _N, _P, _N, _N, _P]),
    "add_among": (None, [_P, _N, _N, _P, _P, _P, _P]),
    "add_among_slots": (None, [_P, _N, _N, _P, _P, _P, _P, _P]),
    "top_bm25": (_N, [_N, _P, _P, _P, _N, _P, _P, _N, _P, _P]),
}

# The compiled loops, or None (no compiler, a failed compile, SAG2WB_POSTINGS_KERNEL=numpy).
load = ckernel.loader("postings_kernel", SOURCE, "SAG2WB_POSTINGS_KERNEL", SIGNATURES)


def decode_blobs(lib: ctypes.CDLL, blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(the keys of all `blobs`, concatenated; how many keys each blob holds)."""
    data = b"".join(blobs)
    ends = np.cumsum(np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs)))
    # one key per byte that ends a varint, less each blob's header byte
    size = max(int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) < 0x80)) - len(blobs), 0)
    out = np.empty(size, dtype=np.int64)
    counts = np.empty(len(blobs), dtype=np.int64)
    n = lib.decode_blobs(data, ends.ctypes.data, len(blobs), out.ctypes.data, counts.ctypes.data, size)
    if n != size:
        raise ValueError("postings blobs that the build did not write (a varint cut short, or a header >= 0x80)")
    return out, counts


def keep_followed(lib: ctypes.CDLL, starts: np.ndarray, other: np.ndarray, k: int) -> np.ndarray:
    """starts[find_sorted(other, starts + k)[1]] for ascending, duplicate-free int64 arrays."""
    if starts.dtype != np.int64 or other.dtype != np.int64:
        raise TypeError("keep_followed reads int64 keys")
    starts, other = np.ascontiguousarray(starts), np.ascontiguousarray(other)
    out = np.empty(len(starts), dtype=np.int64)
    n = lib.keep_followed(starts.ctypes.data, len(starts), other.ctypes.data, len(other), k, out.ctypes.data)
    return out[:n]


def _lists(lists: list[tuple[np.ndarray, np.ndarray]]) -> tuple:
    """ctypes arrays of the lists' row and term pointers and their lengths (kept alive by the caller)."""
    for rows, terms in lists:
        if (
            rows.dtype != np.int64
            or terms.dtype != np.float64
            or not (rows.flags.c_contiguous and terms.flags.c_contiguous)
        ):
            raise TypeError("the kernel reads contiguous int64 rows and float64 terms")
    n = len(lists)
    row_ptrs = (ctypes.c_void_p * n)(*[rows.ctypes.data for rows, _ in lists])
    term_ptrs = (ctypes.c_void_p * n)(*[terms.ctypes.data for _, terms in lists])
    lens = np.array([len(rows) for rows, _ in lists], dtype=np.int64)
    return row_ptrs, term_ptrs, lens


def add_among(
    lib: ctypes.CDLL, among: np.ndarray, lists: list[tuple[np.ndarray, np.ndarray]], slots: np.ndarray | None = None
) -> np.ndarray:
    """The sum, per row of `among` (ascending int64), of the terms of the `lists` (rows ascending,
    terms) that hold it, added list by list in the given order from 0.0. `slots`: an int32 array
    of -1 as long as the rows (a caller keeps it; left as it came), so that most lists are read
    straight through instead of galloping."""
    among = np.ascontiguousarray(among, dtype=np.int64)
    total = np.zeros(len(among), dtype=np.float64)
    row_ptrs, term_ptrs, lens = _lists(lists)
    args = (among.ctypes.data, len(among), len(lists), row_ptrs, term_ptrs, lens.ctypes.data)
    if slots is None:
        lib.add_among(*args, total.ctypes.data)
        return total
    if slots.dtype != np.int32 or not slots.flags.c_contiguous:
        raise TypeError("add_among's slots: a contiguous int32 array")
    ends = [(int(rows[0]), int(rows[-1])) for rows in [among, *(rows for rows, _ in lists)] if len(rows)]
    if any(first < 0 or last >= len(slots) for first, last in ends):
        raise IndexError("a row past add_among's slots")
    lib.add_among_slots(*args, slots.ctypes.data, total.ctypes.data)
    return total


def top_bm25(
    lib: ctypes.CDLL, lists: list[tuple[np.ndarray, np.ndarray]], size: int, limit: int, scratch=None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, bm25) of the first `limit` rows by (bm25, row), bm25 = -1.0 * the sum of the lists'
    terms in the given order from 0.0; rows below `size`. `scratch`: (float64 sums, uint8 marks),
    `size` long and zeroed, which the call leaves zeroed (a caller keeps them: fresh arrays of
    every row cost their pages' first touch, ~3 ms a call at 600k rows)."""
    row_ptrs, term_ptrs, lens = _lists(lists)
    if any(len(rows) and (rows[0] < 0 or rows[-1] >= size) for rows, _ in lists):
        raise IndexError("a row past the index's row sizes")
    total, hit = scratch if scratch is not None else (np.zeros(size, dtype=np.float64), np.zeros(size, dtype=np.uint8))
    if len(total) < size or len(hit) < size or total.dtype != np.float64 or hit.dtype != np.uint8:
        raise TypeError("top_bm25's scratch: float64 and uint8 arrays of every row")
    limit = max(int(limit), 0)
    rows = np.empty(limit, dtype=np.int64)
    scores = np.empty(limit, dtype=np.float64)
    args = (total.ctypes.data, hit.ctypes.data, limit, rows.ctypes.data, scores.ctypes.data)
    n = lib.top_bm25(len(lists), row_ptrs, term_ptrs, lens.ctypes.data, size, *args)
    return rows[:n], scores[:n]


def sorted_unique(ids: np.ndarray) -> np.ndarray:
    """np.unique(ids) by a sort and a neighbour test: numpy 2's np.unique hashes first, ~10x
    slower on the ~30k unit ids of an expansion's lists."""
    ids = np.sort(ids)
    first = np.empty(len(ids), dtype=bool)
    first[:1] = True
    np.not_equal(ids[1:], ids[:-1], out=first[1:])
    return ids[first]


def bm25_order(rows: np.ndarray, scores: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the first `limit` rows in `Index.search`'s order: best BM25 first (lower is
    better, as FTS5 gives it), ties by lower unit id (then by position, as a stable sort)."""
    limit = max(limit, 0)
    if len(scores) > 4 * limit + 64:
        # only rows at least as good as the limit-th best can be among the first `limit`
        # (ties at that score included): sort those alone
        worst = np.partition(scores, limit - 1)[limit - 1] if limit else -np.inf
        near = np.flatnonzero(scores <= worst)
        return near[np.lexsort((rows[near], scores[near]))[:limit]]
    return np.lexsort((rows, scores))[:limit]


_SEED_LISTS = 128  # round 0's seed rows: a shortest list up to this many times B, when none has 16 B or fewer


def top_of_short_lists(kernel, lists: list[tuple[np.ndarray, np.ndarray]], limit: int, slots=None):
    """`top`'s answer without scoring every row, when it is provably the same (max-score): the
    rows of the short lists are scored exactly (all lists' terms in query order, `add_among`), and
    their limit-th best sum, theta, is a floor for the answer's. The lists whose largest terms add
    up to below theta (with a margin for rounding), smallest first, can lift no row that is in
    none of the others past it; the rows of the others are scored exactly and ranked. None: not
    provable, or no list long enough to leave out: score every row."""
    long = 16 * max(limit, 1)
    shortest = min((len(rows) for rows, _ in lists), default=0)
    if long < shortest <= _SEED_LISTS * max(limit, 1):
        # no list that short (9 of the 100 dev questions at 600k: each question token is in 1.8k-6k
        # rows or more): the shortest list's rows give theta instead; any rows do, each scored exactly
        long = shortest
    short = [rows for rows, _ in lists if len(rows) <= long]
    if limit <= 0 or not short or len(short) == len(lists):
        return None
    seed = sorted_unique(np.concatenate(short))
    if len(seed) < limit:
        return None
    seed_scores = -1.0 * add_among(kernel, seed, lists, slots)
    theta = -float(seed_scores[bm25_order(seed, seed_scores, limit)[-1]])
    maxima = [float(term.max()) for _, term in lists]
    left_out: list[int] = []
    for p in sorted(range(len(lists)), key=maxima.__getitem__):
        if not math.fsum([maxima[q] for q in [*left_out, p]]) * (1.0 + 1e-9) < theta:
            break
        left_out.append(p)
    kept = [lists[p][0] for p in range(len(lists)) if p not in left_out and len(lists[p][0]) > long]
    if not left_out:
        return None
    rows = sorted_unique(np.concatenate([seed, *kept])) if kept else seed
    scores = -1.0 * add_among(kernel, rows, lists, slots) if kept else seed_scores
    order = bm25_order(rows, scores, limit)
    return rows[order], scores[order]
