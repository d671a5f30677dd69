"""Each long list's buckets for the corpus graph's kernel (`graph_kernel.impact`): phrase p's
rows [b << shift, (b + 1) << shift) start at a stored list position, so a contribution is
found by searching a bucket of ~8-16 positions instead of halving the whole list (a cache
miss a step on long lists). The C source is compiled with graph_kernel's (`SOURCE`)."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import numpy as np

from workbench import ckernel

SOURCE = r"""
/* a long list's buckets: phrase p's rows [b << shift, (b + 1) << shift) start at list position
   b_first[b_off[p] + b] (from the list's start), so a search reads a bucket of ~8-16 positions
   instead of halving the whole list (a cache miss a step on long lists). Lists shorter than
   BUCKET_FROM have none (b_off -1) */
#define BUCKET_FROM 64
#define BUCKET_SIZE 8

int64_t bucket_plan(int64_t n_phrases, const int64_t *t_off, int64_t n_rows, uint8_t *b_shift, int64_t *b_off) {
    int64_t total = 0;
    for (int64_t p = 0; p < n_phrases; p++) {
        int64_t len = t_off[p + 1] - t_off[p];
        b_shift[p] = 0;
        b_off[p] = -1;
        if (len < BUCKET_FROM || n_rows < 1) continue;
        int s = 0;
        while (((n_rows - 1) >> s) + 1 > len / BUCKET_SIZE) s++;
        b_shift[p] = (uint8_t)s;
        b_off[p] = total;
        total += ((n_rows - 1) >> s) + 2;  /* the buckets' starts and the list's end */
    }
    return total;
}

void bucket_fill(int64_t n_phrases, const int64_t *t_off, const int32_t *t_rows, int64_t n_rows,
                 const uint8_t *b_shift, const int64_t *b_off, int32_t *b_first) {
    for (int64_t p = 0; p < n_phrases; p++) {
        if (b_off[p] < 0) continue;
        int s = b_shift[p];
        int64_t nb = ((n_rows - 1) >> s) + 1, e = t_off[p], end = t_off[p + 1];
        int32_t *first = b_first + b_off[p];
        for (int64_t b = 0; b <= nb; b++) {
            while (e < end && (int64_t)(t_rows[e] >> s) < b) e++;
            first[b] = (int32_t)(e - t_off[p]);
        }
    }
}
"""


_P, _N = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {  # declared with graph_kernel's
    "bucket_plan": (_N, [_N, _P, _N, _P, _P]),
    "bucket_fill": (None, [_N, _P, _P, _N, _P, _P, _P]),
}

_p = functools.partial(ckernel.pointer, who="graph buckets")


@dataclass
class Buckets:
    """Each long list's buckets (the C side's bucket_plan): `shift[p]`, `offsets[p]` (-1: no
    buckets) and `first`, the buckets' starting positions."""

    shift: np.ndarray
    offsets: np.ndarray
    first: np.ndarray


def list_buckets(lib, table, n_rows: int) -> Buckets:
    """The buckets of every list of at least 64 positions: about one per 8-16 positions, so a
    contribution is found in a bucket rather than by halving a list of up to N rows. 4 bytes
    per bucket (~1/2 byte per listed position) and 9 bytes per phrase."""
    n = len(table.offsets) - 1
    shift = np.zeros(n, dtype=np.uint8)
    offsets = np.zeros(n, dtype=np.int64)
    total = lib.bucket_plan(
        ctypes.c_int64(n),
        _p(table.offsets, np.int64),
        ctypes.c_int64(n_rows),
        _p(shift, np.uint8),
        _p(offsets, np.int64),
    )
    first = np.zeros(total, dtype=np.int32)
    lib.bucket_fill(
        ctypes.c_int64(n),
        _p(table.offsets, np.int64),
        _p(table.rows, np.int32),
        ctypes.c_int64(n_rows),
        _p(shift, np.uint8),
        _p(offsets, np.int64),
        _p(first, np.int32),
    )
    return Buckets(shift, offsets, first)
