"""A postings block's names merged in C (through ctypes): the distinct names of a block's chunks
(their terms, or their diversity tokens), sorted, and each chunk's names' ranks among them.

The chunks' names come packed (`build.pack`: one string each, names between new lines) and
Python unpacked them, made a set of ~500k strings, sorted its ~100k and looked each one up
again: ~250 ms of a block's ~350 ms in its worker at 300k. Here one hash table finds the
distinct names in the packed UTF-8 bytes and `qsort` orders them by bytes, which for UTF-8 is
code point order, Python's `sorted` and SQLite's BINARY order (tests/test_names_kernel.py
compares with `sorted`). Without a compiler, or with SAG2WB_POSTINGS_KERNEL=numpy, `merge`
returns None and `build` keeps its Python path.
"""

from __future__ import annotations

import ctypes

import numpy as np

from workbench import ckernel

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const unsigned char *p; int64_t len, id; } Name;

static int by_bytes(const void *x, const void *y) {
    const Name *a = x, *b = y;
    int c = memcmp(a->p, b->p, (size_t)(a->len < b->len ? a->len : b->len));
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static uint64_t fnv1a(const unsigned char *s, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

/* `text`: `count` names, each followed by a new line but the last. Writes each name's rank among
   the distinct names sorted by bytes to rank_of[k], and the distinct names in that order, new
   lines between, to `out` (room for len bytes) with their byte length in *out_len. Returns the
   number of distinct names: -1 out of memory, -2 when `text` does not hold `count` names. */
int64_t nk_merge(const unsigned char *text, int64_t len, int64_t count, int64_t *rank_of, unsigned char *out,
                 int64_t *out_len) {
    int64_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    int64_t *slot = malloc((size_t)cap * sizeof(int64_t)), *rank = malloc((size_t)(count + 1) * sizeof(int64_t));
    Name *names = malloc((size_t)(count + 1) * sizeof(Name));
    int64_t d = -1;
    if (!slot || !rank || !names) goto done;
    memset(slot, 0xff, (size_t)cap * sizeof(int64_t));  /* -1: an empty slot */
    d = 0;
    int64_t i = 0;
    for (int64_t k = 0; k < count; k++, i++) {
        const unsigned char *s = text + i;
        while (i < len && text[i] != '\n') i++;
        int64_t n = text + i - s, at = (int64_t)(fnv1a(s, n) & (uint64_t)(cap - 1));
        if (n == 0) { d = -2; goto done; }  /* a name is never empty: fewer names than count */
        for (;; at = (at + 1) & (cap - 1)) {
            int64_t id = slot[at];
            if (id < 0) {
                slot[at] = d; names[d].p = s; names[d].len = n; names[d].id = d;
                rank_of[k] = d++;
                break;
            }
            if (names[id].len == n && !memcmp(names[id].p, s, (size_t)n)) { rank_of[k] = id; break; }
        }
    }
    if (i < len) { d = -2; goto done; }  /* more names than count */
    qsort(names, (size_t)d, sizeof(Name), by_bytes);
    int64_t o = 0;
    for (int64_t r = 0; r < d; r++) {
        rank[names[r].id] = r;
        if (r) out[o++] = '\n';
        memcpy(out + o, names[r].p, (size_t)names[r].len);
        o += names[r].len;
    }
    for (int64_t k = 0; k < count; k++) rank_of[k] = rank[rank_of[k]];
    *out_len = o;
done:
    free(slot); free(rank); free(names);
    return d;
}
"""


_P, _N = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {"nk_merge": (_N, [ctypes.c_char_p, _N, _N, _P, _P, _P])}

# the compiled merge, or None (no compiler, a failed compile, SAG2WB_POSTINGS_KERNEL=numpy)
load = ckernel.loader("names_kernel", SOURCE, "SAG2WB_POSTINGS_KERNEL", SIGNATURES)


def merge(packed: list[str], counts: list[int]) -> tuple[str, np.ndarray, int] | None:
    """(the distinct names sorted, packed; the rank among them of each chunk's names, one chunk
    after another; the number of distinct names) of chunks whose names are `packed`, `counts[k]`
    in chunk k; None without the compiled loop."""
    lib = load()
    if lib is None:
        return None
    text = "\n".join(p for p in packed if p).encode()
    count = sum(counts)
    rank_of, out, out_len = np.empty(count, np.int64), np.empty(len(text) + 1, np.uint8), ctypes.c_int64(0)
    args = (ckernel.pointer(rank_of), ckernel.pointer(out), ctypes.byref(out_len))
    found = lib.nk_merge(text, len(text), count, *args)
    if found == -1:
        raise MemoryError("build: no memory to merge a block's names")
    if found < 0:
        raise ValueError("the packed names do not match their counts")
    return str(out[: out_len.value].data, "utf-8"), rank_of, found
