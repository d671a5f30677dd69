"""Two loops over stored postings compiled (C, through ctypes): decoding blobs, and keeping a
phrase's start positions that the next token follows.

A question at 600k decodes ~270k positions (the tokens of the phrases term selection counts and
scores). numpy needs a dozen passes over them (the varints' byte ranks, the running sums, the
key's three fields: ~40 ns a position); one loop over the bytes takes a few. The loop does the
same integer arithmetic as `postings.decode_keys`'s numpy path (uint64 gaps summed per blob,
the same shifts and masks), so the keys are equal (tests/test_question_decode.py compares both
on random and real blobs). A phrase's starts are kept by one merge of two sorted arrays
(galloping through the longer) instead of a binary search per start, which costs most when
both tokens are common (10k-100k positions each); the same starts are kept
(tests/test_question_decode.py compares with `find_sorted`).

The C source is compiled once per source version with the system's C compiler (`cc`, or $CC)
into $XDG_CACHE_HOME/sag2wb/kernels, written atomically; without a compiler, or with
SAG2WB_POSTINGS_KERNEL=numpy, `load()` is None and the numpy path runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from workbench.user_cache import user_cache_dir

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

_LOADED: list = []  # [the library or None], once per process
_LOAD_LOCK = threading.Lock()


def _compile() -> ctypes.CDLL | None:
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    target = user_cache_dir("kernels") / f"postings_kernel-{digest}.so"
    if not target.exists():
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not compiler:
            return None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                src, out = Path(tmp) / "postings_kernel.c", Path(tmp) / "postings_kernel.so"
                src.write_text(SOURCE, encoding="utf-8")
                cmd = [
                    compiler,
                    "-O2",
                    "-fno-fast-math",
                    "-ffp-contract=off",
                    "-shared",
                    "-fPIC",
                    str(src),
                    "-o",
                    str(out),
                ]
                if subprocess.run(cmd, capture_output=True, timeout=120).returncode != 0:
                    return None
                with open(out, "rb") as f:  # on disk before the rename: a crash leaves no torn library
                    os.fsync(f.fileno())
                os.replace(out, target)  # atomic: another process sees the whole library or none
        except (OSError, subprocess.SubprocessError):
            return None
    try:
        lib = ctypes.CDLL(str(target))
    except OSError:
        return None
    lib.decode_blobs.restype = ctypes.c_int64
    lib.decode_blobs.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    lib.keep_followed.restype = ctypes.c_int64
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    lib.keep_followed.argtypes = [pointer, size, pointer, size, size, pointer]
    lib.add_among.restype = None
    lib.add_among.argtypes = [pointer, size, size, pointer, pointer, pointer, pointer]
    lib.top_bm25.restype = ctypes.c_int64
    lib.top_bm25.argtypes = [size, pointer, pointer, pointer, size, pointer, pointer, size, pointer, pointer]
    return lib


def load() -> ctypes.CDLL | None:
    """The compiled loops, or None (no compiler, a failed compile, SAG2WB_POSTINGS_KERNEL=numpy)."""
    if os.environ.get("SAG2WB_POSTINGS_KERNEL", "").strip().lower() == "numpy":
        return None
    if not _LOADED:
        with _LOAD_LOCK:
            if not _LOADED:
                _LOADED.append(_compile())
    return _LOADED[0]


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


def add_among(lib: ctypes.CDLL, among: np.ndarray, lists: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The sum, per row of `among` (ascending int64), of the terms of the `lists` (rows ascending,
    terms) that hold it, added list by list in the given order from 0.0."""
    among = np.ascontiguousarray(among, dtype=np.int64)
    total = np.zeros(len(among), dtype=np.float64)
    row_ptrs, term_ptrs, lens = _lists(lists)
    lib.add_among(among.ctypes.data, len(among), len(lists), row_ptrs, term_ptrs, lens.ctypes.data, total.ctypes.data)
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
