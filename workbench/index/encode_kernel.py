"""The build's postings encoding as one C loop (through ctypes): `encode_groups` of
`postings.py` writes the same bytes with a dozen numpy passes over a block's ~2M keys (the
byte ranks, the shifts, the scattered writes); the loop reads each key once and writes its
varint. Compiled once per machine by `workbench/ckernel.py`; without a compiler, or with
SAG2WB_POSTINGS_KERNEL=numpy, `encode_groups` runs numpy's path. The same integer arithmetic
(uint64 fields, shifts and gaps; `ob` is the bit length of a group's largest offset, what
numpy's frexp gives), so the blobs are equal byte for byte (tests/test_encode_kernel.py)."""

from __future__ import annotations

import ctypes

import numpy as np

from workbench import ckernel
from workbench.index import postings

SOURCE = r"""
#include <stdint.h>

/* Groups of sorted keys row << 32 | column << 24 | offset, counts[g] keys each, end to end in
   `keys`. Writes each group's blob to `out` (a header byte ob, the bit length of its largest
   offset, then LEB128 varints of the gaps between successive v = row << (ob + 2) | column << ob
   | offset, the first from 0) and the end of group g's blob to ends[g]; returns the bytes
   written. `out` holds ngroups + 10 * (number of keys) bytes. */
int64_t encode_groups(const int64_t *keys, const int64_t *counts, int64_t ngroups, uint8_t *out, int64_t *ends) {
    int64_t k = 0, o = 0;
    for (int64_t g = 0; g < ngroups; g++) {
        int64_t n = counts[g];
        const int64_t *group = keys + k;
        uint64_t top = 0, ob = 0, prev = 0;
        for (int64_t i = 0; i < n; i++) {
            uint64_t offset = (uint64_t)group[i] & 0xFFFFFF;
            if (offset > top) top = offset;
        }
        while (ob < 64 && (top >> ob) != 0) ob++;
        out[o++] = (uint8_t)ob;
        for (int64_t i = 0; i < n; i++) {
            uint64_t key = (uint64_t)group[i];
            uint64_t v = ((key >> 32) << (ob + 2)) | (((key >> 24) & 0xFF) << ob) | (key & 0xFFFFFF);
            uint64_t gap = i == 0 ? v : v - prev;
            prev = v;
            while (gap >= 0x80) {
                out[o++] = (uint8_t)((gap & 0x7F) | 0x80);
                gap >>= 7;
            }
            out[o++] = (uint8_t)gap;
        }
        k += n;
        ends[g] = o;
    }
    return o;
}
"""


_P, _N = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {"encode_groups": (_N, [_P, _P, _N, _P, _P])}

# The compiled loop, or None (no compiler, a failed compile, SAG2WB_POSTINGS_KERNEL=numpy).
load = ckernel.loader("encode_kernel", SOURCE, "SAG2WB_POSTINGS_KERNEL", SIGNATURES)


def encode_groups(keys: np.ndarray, counts) -> list[bytes]:
    """`postings.encode_groups(keys, counts)`, by the C loop when it is there."""
    lib = load()
    if lib is None:
        return postings.encode_groups(keys, counts)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    if int(counts.sum()) != len(keys) or (len(counts) and int(counts.min()) <= 0):
        raise ValueError("every group needs at least one key, and the counts must add up to the keys")
    # at most 10 bytes a varint; pages of the buffer that stay unwritten are never touched
    out = np.empty(len(counts) + 10 * len(keys), dtype=np.uint8)
    ends = np.empty(len(counts), dtype=np.int64)
    size = lib.encode_groups(keys.ctypes.data, counts.ctypes.data, len(counts), out.ctypes.data, ends.ctypes.data)
    data = out[:size].tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [data[a:b] for a, b in zip(starts, ends.tolist())]
