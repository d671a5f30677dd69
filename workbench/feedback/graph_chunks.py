"""The graph questions' compiled loop (`graph_questions`): a table of normalised chunks (UTF-8
bytes -> their tokens' numbers) and the two passes over a batch of passages' normalised texts.

1. `pending`: every chunk of the batch (split as `str.split()` splits: at each code point
   `str.isspace` names) not in the table is added, its tokens unknown, and reported; Python
   tokenizes these (`textlib.chunk_tokens`) and `settle` stores their numbers.
2. `questions`: each passage's chunks' numbers, each number kept once (a stamp per number), up
   to `limit` of them: `dict.fromkeys` over the chunks' tokens, cut at the limit.
No Python object is made per chunk or token: the Python loop was ~45 us a passage, ~35 s of a
600k graph. The table is emptied by `clear` between batches (bounded memory; a chunk met again
is tokenized again, the same). SAG2WB_GRAPH_KERNEL=numpy (or no compiler) keeps the Python path.
"""

from __future__ import annotations

import ctypes

import numpy as np

from workbench import ckernel

SOURCE = (
    ckernel.GROW
    + r"""
#include <string.h>

/* a slot of the open-addressed table is the entry itself (one cache line holds all a look-up
   reads for a chunk of <= 16 bytes with one token); key_len 0: empty */
typedef struct {
    uint32_t hash; int32_t key_len; int32_t tok_n; int32_t tok;  /* tok_n 1: the token; > 1: its offset in toks */
    union { unsigned char key[16]; int64_t key_at; } k;           /* the key, or its offset in keys (> 16 bytes) */
} Entry;
typedef struct {
    Entry *e; int64_t cap, n;
    unsigned char *keys; int64_t keys_len, keys_cap;
    int32_t *toks; int64_t toks_len, toks_cap;
} Table;

void *qt_new(void) { return calloc(1, sizeof(Table)); }

void qt_clear(Table *t) {
    free(t->e); free(t->keys); free(t->toks);
    memset(t, 0, sizeof(Table));
}

void qt_free(Table *t) { if (t) { qt_clear(t); free(t); } }

int64_t qt_size(Table *t) { return t->n; }

static uint32_t hash_of(const unsigned char *s, int32_t n) {  /* 8 bytes at a time, multiplied and mixed */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) { memcpy(&w, s + i, 8); h = (h ^ w) * 0xbf58476d1ce4e5b9ULL; h ^= h >> 31; }
    if (i < n) { w = 0; memcpy(&w, s + i, (size_t)(n - i)); h = (h ^ w) * 0x94d049bb133111ebULL; h ^= h >> 29; }
    h *= 0xbf58476d1ce4e5b9ULL; h ^= h >> 32;
    return (uint32_t)h;
}

static const unsigned char *key_of(Table *t, Entry *e) { return e->key_len <= 16 ? e->k.key : t->keys + e->k.key_at; }

/* the entry of the chunk, or the empty slot where it would go */
static Entry *find(Table *t, const unsigned char *s, int32_t n, uint32_t h) {
    int64_t mask = t->cap - 1, i = (int64_t)(h & (uint64_t)mask);
    for (;;) {
        Entry *e = &t->e[i];
        if (!e->key_len) return e;
        if (e->hash == h && e->key_len == n && !memcmp(key_of(t, e), s, (size_t)n)) return e;
        i = (i + 1) & mask;
    }
}

static int rehash(Table *t) {
    int64_t cap = t->cap ? t->cap * 2 : 1 << 16;
    Entry *old = t->e, *e = calloc((size_t)cap, sizeof(Entry));
    if (!e) return -1;
    for (int64_t k = 0; k < t->cap; k++) {
        if (!old[k].key_len) continue;
        int64_t i = (int64_t)(old[k].hash & (uint64_t)(cap - 1));
        while (e[i].key_len) i = (i + 1) & (cap - 1);
        e[i] = old[k];
    }
    free(old); t->e = e; t->cap = cap;
    return 0;
}

/* the byte length of the code point at s[i] if it is white space (str.isspace), else 0 */
static int space_at(const unsigned char *s, int64_t i, int64_t end) {
    unsigned char c = s[i];
    if (c < 0x80) return (c == 32 || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    if (c == 0xC2 && i + 1 < end) return (s[i + 1] == 0x85 || s[i + 1] == 0xA0) ? 2 : 0;
    if (i + 2 >= end) return 0;
    unsigned char d = s[i + 1], f = s[i + 2];
    if (c == 0xE1) return (d == 0x9A && f == 0x80) ? 3 : 0;                        /* U+1680 */
    if (c == 0xE2 && d == 0x80) return (f <= 0x8A || f == 0xA8 || f == 0xA9 || f == 0xAF) ? 3 : 0;
    if (c == 0xE2 && d == 0x81) return f == 0x9F ? 3 : 0;                          /* U+205F */
    if (c == 0xE3) return (d == 0x80 && f == 0x80) ? 3 : 0;                        /* U+3000 */
    return 0;
}

static int lead_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* the next chunk of text[*at:end]: its start and length, or -1 when none is left */
static int64_t next_chunk(const unsigned char *s, int64_t *at, int64_t end, int32_t *len) {
    int64_t i = *at, w;
    while (i < end && (w = space_at(s, i, end))) i += w;
    if (i >= end) { *at = end; return -1; }
    int64_t start = i;
    for (;;) {  /* printable ASCII other than the space is never white space */
        while (i < end && s[i] > 32 && s[i] < 127) i++;
        if (i >= end || space_at(s, i, end)) break;
        i += lead_len(s[i]);
    }
    if (i > end) i = end;
    *at = i; *len = (int32_t)(i - start);
    return start;
}

/* pass 1: the table slot of every chunk of passages 0..n-1 into slot_of (ends[p]: passage p's
   end there); chunks not in the table are added with unknown tokens and their starts and lengths
   written to miss_at, miss_len. Returns the misses' count (-1: out of memory). A table grown
   midway moves its entries: the batch is gone over again (the added chunks are found). */
int64_t qt_pending(Table *t, const unsigned char *text, const int64_t *starts, int64_t n,
                   int64_t *slot_of, int64_t *ends, int64_t *miss_at, int32_t *miss_len) {
    int64_t m = 0;
again:
    for (int64_t p = 0, w = 0; p < n; p++) {
        int64_t at = starts[p], end = starts[p + 1], start;
        int32_t len;
        while ((start = next_chunk(text, &at, end, &len)) >= 0) {
            uint32_t h = hash_of(text + start, len);
            if ((t->n + 1) * 2 > t->cap) {
                if (rehash(t)) return -1;
                if (p || w) goto again;
            }
            Entry *e = find(t, text + start, len, h);
            slot_of[w++] = e - t->e;
            if (e->key_len) continue;
            if (len > 16) {
                if (grow((void **)&t->keys, &t->keys_cap, t->keys_len + len, 1)) return -1;
                memcpy(t->keys + t->keys_len, text + start, (size_t)len);
                e->k.key_at = t->keys_len;
                t->keys_len += len;
            } else {
                memcpy(e->k.key, text + start, (size_t)len);
            }
            e->hash = h; e->key_len = len; e->tok_n = -1; e->tok = 0;
            miss_at[m] = start; miss_len[m] = len;
            t->n++; m++;
        }
        ends[p] = w;
    }
    return m;
}

/* the tokens' numbers of m pending chunks (text[at[k]:at[k] + len[k]]): chunk k's are
   flat[..counts[k]], one after another */
int qt_settle(Table *t, const unsigned char *text, const int64_t *at, const int32_t *len,
              const int64_t *counts, const int32_t *flat, int64_t m) {
    int64_t total = 0;
    for (int64_t k = 0; k < m; k++) total += counts[k] > 1 ? counts[k] : 0;
    if (grow((void **)&t->toks, &t->toks_cap, t->toks_len + total, sizeof(int32_t))) return -1;
    for (int64_t k = 0; k < m; k++) {
        Entry *e = find(t, text + at[k], len[k], hash_of(text + at[k], len[k]));
        e->tok_n = (int32_t)counts[k];
        if (counts[k] == 1) e->tok = flat[0];
        else if (counts[k] > 1) {
            e->tok = (int32_t)t->toks_len;
            memcpy(t->toks + t->toks_len, flat, (size_t)counts[k] * sizeof(int32_t));
            t->toks_len += counts[k];
        }
        flat += counts[k];
    }
    return 0;
}

/* pass 2: each passage's distinct numbers in order, up to limit, into out, from its chunks'
   slots (pass 1); lengths[p] their count; stamp[x] == serial0 + p marks x as passage p's already
   (stamp: one per number) */
int64_t qt_questions(Table *t, const int64_t *slot_of, const int64_t *ends, int64_t n, int32_t limit,
                     int64_t *stamp, int64_t serial0, int32_t *out, int64_t *lengths) {
    int64_t w = 0;
    for (int64_t p = 0, c = 0; p < n; p++) {
        int64_t serial = serial0 + p;
        int32_t count = 0;
        for (; c < ends[p] && count < limit; c++) {
            const Entry *e = &t->e[slot_of[c]];
            if (e->tok_n < 0) return -1;  /* left unsettled: cannot be */
            const int32_t *x = e->tok_n == 1 ? &e->tok : t->toks + e->tok;
            for (int32_t j = 0; j < e->tok_n && count < limit; j++) {
                if (stamp[x[j]] == serial) continue;
                stamp[x[j]] = serial;
                out[w++] = x[j];
                count++;
            }
        }
        c = ends[p];
        lengths[p] = count;
    }
    return w;
}

/* numbers renumbered in place by first use: renumber[x] (-1: not yet) is x's new number, and
   each x met first is appended to used[*n_used] */
void qt_first_use(int32_t *numbers, int64_t n, int32_t *renumber, int32_t *used, int64_t *n_used) {
    int64_t k = *n_used;
    for (int64_t i = 0; i < n; i++) {
        int32_t x = numbers[i];
        if (renumber[x] < 0) { renumber[x] = (int32_t)k; used[k++] = x; }
        numbers[i] = renumber[x];
    }
    *n_used = k;
}
"""
)

_P, _N, _TEXT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p
SIGNATURES: dict[str, ckernel.Signature] = {
    "qt_new": (_P, []),
    "qt_clear": (None, [_P]),
    "qt_free": (None, [_P]),
    "qt_size": (_N, [_P]),
    "qt_pending": (_N, [_P, _TEXT, _P, _N, _P, _P, _P, _P]),
    "qt_settle": (ctypes.c_int, [_P, _TEXT, _P, _P, _P, _P, _N]),
    "qt_questions": (_N, [_P, _P, _P, _N, ctypes.c_int32, _P, _N, _P, _P]),
    "qt_first_use": (None, [_P, _N, _P, _P, _P]),
}

# The compiled loop, or None (no compiler, a failed compile, SAG2WB_GRAPH_KERNEL=numpy).
load = ckernel.loader("graph_chunks", SOURCE, "SAG2WB_GRAPH_KERNEL", SIGNATURES)


_p = ckernel.pointer


class ChunkTable(ckernel.Owned):
    """A table of chunks in C memory (freed with the object)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        super().__init__(lib.qt_new, lib.qt_free, lib.qt_size, "graph questions: no memory for the chunk table")

    def clear(self) -> None:
        self.lib.qt_clear(self.handle)

    def pending(self, text: bytes, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk slots, passage ends, miss starts, miss lengths): the table slot of each chunk of
        the passages text[starts[p]:starts[p + 1]], where each passage's end in them, and where in
        `text` the chunks not yet in the table are (now added unsettled)."""
        cap = (len(text) + len(starts)) // 2 + 1  # a chunk and the space after it: 2 bytes at least
        slots, ends = np.empty(cap, np.int64), np.empty(len(starts) - 1, np.int64)
        at, lengths = np.empty(cap, np.int64), np.empty(cap, np.int32)
        n = self.lib.qt_pending(
            self.handle, text, _p(starts), ctypes.c_int64(len(starts) - 1), _p(slots), _p(ends), _p(at), _p(lengths)
        )
        if n < 0:
            raise MemoryError("graph questions: no memory for the chunk table")
        return slots, ends, at[:n], lengths[:n]

    def settle(self, text: bytes, at: np.ndarray, lengths: np.ndarray, counts: np.ndarray, flat: np.ndarray) -> None:
        """The pending chunks text[at[k]:at[k] + lengths[k]] get their tokens' numbers: chunk k's
        are `counts[k]` of `flat`, one chunk's after another."""
        args = (_p(at), _p(lengths), _p(counts), _p(flat), ctypes.c_int64(len(at)))
        if self.lib.qt_settle(self.handle, text, *args):
            raise MemoryError("graph questions: no memory for the chunk table")

    def questions(self, slots: np.ndarray, ends: np.ndarray, limit: int, stamp: np.ndarray, serial: int):
        """(numbers, lengths): each passage's first `limit` distinct numbers, one after another."""
        n = len(ends)
        out, lengths = np.empty(n * limit, np.int32), np.empty(n, np.int64)
        w = self.lib.qt_questions(
            self.handle, _p(slots), _p(ends), ctypes.c_int64(n), ctypes.c_int32(limit), _p(stamp),
            ctypes.c_int64(serial), _p(out), _p(lengths),
        )  # fmt: skip
        if w < 0:
            raise RuntimeError("graph questions: a chunk left unsettled")
        return out[:w], lengths


def first_use(lib, numbers: np.ndarray, renumber: np.ndarray, used: np.ndarray, n_used: int) -> int:
    """`numbers` (int32) renumbered in place in order of first use, continuing from `n_used`
    numbers met before (`renumber`: old -> new or -1; `used`: new -> old); the new count."""
    count = ctypes.c_int64(n_used)
    lib.qt_first_use(_p(numbers), ctypes.c_int64(len(numbers)), _p(renumber), _p(used), ctypes.byref(count))
    return int(count.value)
