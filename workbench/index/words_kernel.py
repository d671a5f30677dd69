"""The build workers' word loop compiled (C, through ctypes): a table of normalised chunks
(whitespace-free pieces of text, as UTF-8) numbered in order of first look-up, and the FTS5
text of each column put together from its chunks' joined tokens.

Python did both a word at a time (`tokenized._Words`: a dict look-up per word in a table of up
to 2M chunks, then a second pass over the words to join their tokens): ~35% of a worker's CPU
at 300k. Here a batch of columns goes in as one UTF-8 buffer and comes out as the chunks'
numbers and one buffer of the columns' texts; no Python object is made per word. Without a
compiler, or with SAG2WB_WORDS_KERNEL=numpy, `load()` is None and `tokenized` keeps the Python
loop (the same numbers, texts and tables: tests/test_words_kernel.py).
"""

from __future__ import annotations

import ctypes

import numpy as np

from workbench import ckernel

SOURCE = (
    ckernel.GROW
    + r"""
#include <string.h>

/* open addressing; a key of up to 16 bytes sits in its slot (one cache line per look-up) */
typedef struct { uint64_t hash; int32_t id, len; unsigned char key[16]; } Slot;
typedef struct {
    Slot *slot; int64_t cap, n;
    unsigned char *keys; int64_t keys_len, keys_cap;    /* keys longer than 16 bytes */
    int64_t *key_at; int64_t by_id_cap;                 /* by id: a long key's offset in keys */
    int64_t *text_at; int32_t *text_len, *text_chars;   /* by id: its joined tokens in texts */
    int64_t text_cap;
    unsigned char *texts; int64_t texts_len, texts_cap;
} Words;

void *wk_new(void) { return calloc(1, sizeof(Words)); }

void wk_free(Words *w) {
    if (!w) return;
    free(w->slot); free(w->keys); free(w->key_at); free(w->text_at); free(w->text_len); free(w->text_chars);
    free(w->texts); free(w);
}

int64_t wk_size(Words *w) { return w->n; }

static uint64_t hash_bytes(const unsigned char *s, int32_t n) {
    uint64_t h = 0xcbf29ce484222325ULL + (uint64_t)n, x;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) { memcpy(&x, s + i, 8); h = (h ^ x) * 0x9fb21c651e98df25ULL; h ^= h >> 29; }
    if (i < n) { x = 0; memcpy(&x, s + i, (size_t)(n - i)); h = (h ^ x) * 0x9fb21c651e98df25ULL; h ^= h >> 29; }
    h ^= h >> 32; h *= 0xd6e8feb86659fd93ULL; h ^= h >> 32;
    return h | 1;  /* 0 marks an empty slot */
}

static int resize(Words *w) {
    int64_t cap = w->cap ? w->cap * 2 : 1 << 15;
    Slot *s = calloc((size_t)cap, sizeof(Slot));
    if (!s) return -1;
    for (int64_t k = 0; k < w->cap; k++) {
        if (!w->slot[k].hash) continue;
        int64_t i = (int64_t)(w->slot[k].hash & (uint64_t)(cap - 1));
        while (s[i].hash) i = (i + 1) & (cap - 1);
        s[i] = w->slot[k];
    }
    free(w->slot); w->slot = s; w->cap = cap;
    return 0;
}

/* the id of chunk s[0:n], a new one (w->n) if it is not there yet (*added set to 1); -1: no memory */
static int64_t id_of(Words *w, const unsigned char *s, int32_t n, int *added) {
    if ((w->n + 1) * 4 > w->cap * 3 && resize(w)) return -1;
    uint64_t h = hash_bytes(s, n);
    int64_t mask = w->cap - 1, i = (int64_t)(h & (uint64_t)mask);
    for (;; i = (i + 1) & mask) {
        Slot *e = &w->slot[i];
        if (!e->hash) break;
        if (e->hash == h && e->len == n && !memcmp(n <= 16 ? e->key : w->keys + w->key_at[e->id], s, (size_t)n))
            return e->id;
    }
    int64_t id = w->n;
    if (grow((void **)&w->key_at, &w->by_id_cap, id + 1, sizeof(int64_t))) return -1;
    Slot *e = &w->slot[i];
    if (n <= 16) memcpy(e->key, s, (size_t)n);
    else {
        if (grow((void **)&w->keys, &w->keys_cap, w->keys_len + n, 1)) return -1;
        memcpy(w->keys + w->keys_len, s, (size_t)n);
        w->key_at[id] = w->keys_len;
        w->keys_len += n;
    }
    e->hash = h; e->len = n; e->id = (int32_t)id;
    w->n++;
    *added = 1;
    return id;
}

/* the byte length of the code point at s (its lead byte says), and the code point into *cp */
static int decode(const unsigned char *s, uint32_t *cp) {
    unsigned char b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    if (b < 0xE0) { *cp = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F); return 2; }
    if (b < 0xF0) { *cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F); return 3; }
    *cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    return 4;
}

/* str.isspace: what str.split() splits at */
static int white(uint32_t c) {
    if (c < 0x80) return c == 32 || (c >= 9 && c <= 13) || (c >= 28 && c <= 31);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029
        || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Columns of text end to end, column c holding chars[c] code points: each chunk's id into ids,
   each column's number of chunks into counts, and each chunk first met here as its byte start and
   length into new_at, new_len (ids w->n before the call, + 1, ...). Returns the number of chunks
   met first (-1: no memory). */
int64_t wk_lookup(Words *w, const unsigned char *text, const int64_t *chars, int64_t ncols, int64_t *ids,
                  int64_t *counts, int64_t *new_at, int32_t *new_len) {
    int64_t i = 0, k = 0, m = 0, start = -1;
    for (int64_t c = 0; c < ncols; c++) {
        int64_t before = k;
        for (int64_t left = chars[c]; left >= 0; left--) {
            uint32_t cp = 32;
            int n = left ? decode(text + i, &cp) : 0;  /* a column's end ends its last chunk */
            if (!white(cp)) {
                if (start < 0) start = i;
            } else if (start >= 0) {
                int added = 0;
                int64_t id = id_of(w, text + start, (int32_t)(i - start), &added);
                if (id < 0) return -1;
                if (added) { new_at[m] = start; new_len[m] = (int32_t)(i - start); m++; }
                ids[k++] = id;
                start = -1;
            }
            i += n;
        }
        counts[c] = k - before;
    }
    return m;
}

/* the joined tokens of ids first, first + 1, ...: m texts end to end in text, text k being
   len[k] bytes and chars[k] code points */
int wk_settle(Words *w, int64_t first, int64_t m, const unsigned char *text, const int32_t *len,
              const int32_t *chars) {
    int64_t total = 0;
    for (int64_t k = 0; k < m; k++) total += len[k];
    if (first + m > w->text_cap) {  /* the three arrays by id share one capacity */
        int64_t c = w->text_cap ? w->text_cap : 4096;
        while (c < first + m) c *= 2;
        void *a = realloc(w->text_at, (size_t)c * sizeof(int64_t));
        if (a) w->text_at = a;
        void *b = realloc(w->text_len, (size_t)c * sizeof(int32_t));
        if (b) w->text_len = b;
        void *d = realloc(w->text_chars, (size_t)c * sizeof(int32_t));
        if (d) w->text_chars = d;
        if (!a || !b || !d) return -1;
        w->text_cap = c;
    }
    if (grow((void **)&w->texts, &w->texts_cap, w->texts_len + total, 1)) return -1;
    memcpy(w->texts + w->texts_len, text, (size_t)total);
    for (int64_t k = 0; k < m; k++) {
        w->text_at[first + k] = w->texts_len;
        w->text_len[first + k] = len[k];
        w->text_chars[first + k] = chars[k];
        w->texts_len += len[k];
    }
    return 0;
}

/* each column's text: the non-empty joined tokens of its chunks, one space between. With out
   NULL, only the bytes it takes; else written to out, with each column's end in code points into
   ends. Returns the bytes. */
int64_t wk_texts(Words *w, const int64_t *ids, const int64_t *counts, int64_t ncols, unsigned char *out,
                 int64_t *ends) {
    int64_t o = 0, chars = 0, k = 0;
    for (int64_t c = 0; c < ncols; c++) {
        int first = 1;
        for (int64_t end = k + counts[c]; k < end; k++) {
            int64_t id = ids[k];
            int32_t n = w->text_len[id];
            if (!n) continue;
            if (!first) { if (out) out[o] = ' '; o++; chars++; }
            if (out) memcpy(out + o, w->texts + w->text_at[id], (size_t)n);
            o += n; chars += w->text_chars[id];
            first = 0;
        }
        if (out) ends[c] = chars;
    }
    return o;
}
"""
)

_P, _N, _TEXT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p
SIGNATURES: dict[str, ckernel.Signature] = {
    "wk_new": (_P, []),
    "wk_free": (None, [_P]),
    "wk_size": (_N, [_P]),
    "wk_lookup": (_N, [_P, _TEXT, _P, _N, _P, _P, _P, _P]),
    "wk_settle": (ctypes.c_int, [_P, _N, _N, _TEXT, _P, _P]),
    "wk_texts": (_N, [_P, _P, _P, _N, _P, _P]),
}

# the compiled loop, or None (no compiler, a failed compile, SAG2WB_WORDS_KERNEL=numpy)
load = ckernel.loader("words_kernel", SOURCE, "SAG2WB_WORDS_KERNEL", SIGNATURES)


_p = ckernel.pointer


class WordTable(ckernel.Owned):
    """Chunks numbered 0, 1, 2, ... in order of first look-up, and their joined tokens, in C
    memory (freed with the object)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        super().__init__(lib.wk_new, lib.wk_free, lib.wk_size, "build: no memory for the word table")

    def lookup(self, columns: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(ids, counts, new): the ids of each column's chunks one column after another, each
        column's number of chunks, and the chunks met for the first time (in id order)."""
        data = "".join(columns).encode()
        chars = np.fromiter(map(len, columns), dtype=np.int64, count=len(columns))
        # a chunk and the white space after it take 2 bytes at least, but a column's end needs none
        cap = (len(data) + len(columns)) // 2 + 1
        ids, counts = np.empty(cap, np.int64), np.empty(len(columns), np.int64)
        new_at, new_len = np.empty(cap, np.int64), np.empty(cap, np.int32)
        m = self.lib.wk_lookup(
            self.handle, data, _p(chars), ctypes.c_int64(len(columns)), _p(ids), _p(counts), _p(new_at), _p(new_len)
        )
        if m < 0:
            raise MemoryError("build: no memory for the word table")
        new = [data[a : a + n].decode() for a, n in zip(new_at[:m].tolist(), new_len[:m].tolist())]
        return ids[: int(counts.sum())], counts, new

    def settle(self, first: int, joined: list[str]) -> None:
        """Ids first, first + 1, ... get their joined tokens `joined`."""
        data = [j.encode() for j in joined]
        lengths = np.fromiter(map(len, data), dtype=np.int32, count=len(data))
        chars = np.fromiter(map(len, joined), dtype=np.int32, count=len(joined))
        args = (ctypes.c_int64(first), ctypes.c_int64(len(joined)), b"".join(data), _p(lengths), _p(chars))
        if self.lib.wk_settle(self.handle, *args):
            raise MemoryError("build: no memory for the word table")

    def texts(self, ids: np.ndarray, counts: np.ndarray) -> list[str]:
        """Each column's text: its chunks' non-empty joined tokens, one space between."""
        ncols = ctypes.c_int64(len(counts))
        size = self.lib.wk_texts(self.handle, _p(ids), _p(counts), ncols, None, None)
        out, ends = np.empty(size, np.uint8), np.empty(len(counts), np.int64)
        self.lib.wk_texts(self.handle, _p(ids), _p(counts), ncols, _p(out), _p(ends))
        text = str(out.data, "utf-8")
        stops = ends.tolist()
        return [text[a:b] for a, b in zip([0, *stops[:-1]], stops)]
