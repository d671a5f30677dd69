"""o200k_base token counts by one C loop (through ctypes), without loading quicktok's tokenizer:
its `get_encoding("o200k_base")` costs 0.66-0.80 s of CPU in every process that counts (building
its tables in C++), about a sixth of the JEV client's CPU on 30 questions (issue 33). This kernel
reads the same two files from quicktok's installed data folder, the vocabulary (`o200k.vocab`:
a count, then a length, the bytes and the rank of each token) and the Unicode classes its
pre-tokenizer uses (`uniclass_o200k.bin`: five lists of code point ranges, L N \\s and the o200k
"upper" and "lower" letter sets), into a hash table and a table of class bits in ~20 ms.

Reading quicktok's class table rather than generating one from `unicodedata` keeps the split
equal to quicktok's by construction: quicktok's table comes from the `regex` module's Unicode
(16.0 at its build), Python 3.11's `unicodedata` is 14.0, and the two differ on the code points
assigned since (tests/test_o200k_kernel.py lists them and checks the rest agree).

The split is the published o200k_base pattern, alternatives tried in order at each position:

    [^\\r\\n\\p{L}\\p{N}]?[UP]*[LO]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    [^\\r\\n\\p{L}\\p{N}]?[UP]+[LO]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    \\p{N}{1,3}
     ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*
    \\s*[\\r\\n]+
    \\s+(?!\\S)
    \\s+

with UP = [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}], LO = [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]; the contractions
match ASCII letters in either case only (quicktok counts "'ſ" as two pieces, as `re` would not).
Each alternative's backtracking is resolved in closed form (comments in the C). A piece in the
vocabulary is one token; otherwise its bytes are merged pair by pair, the lowest rank first and
the leftmost of equal ranks (a linear scan for short pieces, a heap for long ones: the same
order). Counts equal quicktok's `count` (tests/test_o200k_kernel.py: every code point in
contexts, every 2Wiki title and passage, adversarial strings). Text that UTF-8 cannot encode (lone
surrogates) goes to quicktok, which refuses it as before. Without a compiler, with data files
other than those checked (their sha256 in CHECKED: another quicktok), or with
SAG2WB_O200K_KERNEL=quicktok (or =numpy, as the other kernels), quicktok counts."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
from pathlib import Path

from workbench import ckernel

VARIABLE = "SAG2WB_O200K_KERNEL"

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { C_L = 1, C_N = 2, C_S = 4, C_UP = 8, C_LO = 16 };
#define NONE UINT32_MAX

static uint8_t *cls;                  /* class bits of each code point 0..0x10FFFF */
static uint8_t *blob;                 /* the tokens' bytes, end to end */
/* Open addressing, one word a token (0 = empty), so that a look-up touches its slot and, when the
   tag and length agree, the token's bytes: no side arrays (the look-ups are most of the count's
   time). Bits 0-17 the rank, 18-38 the offset in blob, 39-46 the length, 47-63 a tag (the hash's
   top 17 bits; the slot comes from its low bits). */
static uint64_t *slots;
static uint64_t mask;
#define RANK_BITS 18
#define OFF_BITS 21
static int64_t maxlen, heap_from = 256;

static uint64_t hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = 1469598103934665603ULL;  /* FNV-1a */
    for (int64_t i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h ^ (h >> 29);
}

static uint32_t rank_of(const uint8_t *p, int64_t n) {
    if (n > maxlen) return NONE;
    uint64_t h = hash_bytes(p, n), want = (h >> 47) << 8 | (uint64_t)n;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t e = slots[i];
        if (!e) return NONE;
        if (e >> (RANK_BITS + OFF_BITS) == want) {
            const uint8_t *t = blob + (e >> RANK_BITS & ((1u << OFF_BITS) - 1));
            int64_t k = 0;
            while (k < n && t[k] == p[k]) k++;
            if (k == n) return (uint32_t)(e & ((1u << RANK_BITS) - 1));
        }
    }
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 0 when both files parsed; negative for a malformed file (the caller keeps quicktok). */
int o200k_load(const uint8_t *vocab, int64_t vn, const uint8_t *classes, int64_t cn) {
    if (slots) return 0; /* loaded already: the tables are read by other threads, never rebuilt */
    if (vn < 4) return -1;
    int64_t count = rd32(vocab), p = 4, total = 0;
    uint64_t size = 1;
    while (size < (uint64_t)count * 2 + 2) size <<= 1;
    blob = malloc((size_t)vn);
    slots = calloc((size_t)size, sizeof(uint64_t));
    cls = calloc(0x110000, 1);
    if (!blob || !slots || !cls) return -2;
    mask = size - 1;
    maxlen = 0;
    for (int64_t t = 0; t < count; t++) {
        if (p + 2 > vn) return -3;
        int64_t len = vocab[p] | vocab[p + 1] << 8;
        p += 2;
        if (len == 0 || p + len + 4 > vn) return -3;
        uint64_t rank = rd32(vocab + p + len), h = hash_bytes(vocab + p, len);
        /* a vocabulary whose fields do not fit the slot's bits: the caller keeps quicktok */
        if (len > 255 || rank >= 1u << RANK_BITS || total + len > 1 << OFF_BITS) return -5;
        memcpy(blob + total, vocab + p, (size_t)len);
        if (len > maxlen) maxlen = len;
        uint64_t i = h & mask;
        while (slots[i]) i = (i + 1) & mask;
        slots[i] = ((h >> 47) << 8 | (uint64_t)len) << (RANK_BITS + OFF_BITS) | (uint64_t)total << RANK_BITS | rank;
        total += len;
        p += len + 4;
    }
    if (p != vn) return -3;
    p = 0;
    for (int k = 0; k < 5; k++) {
        if (p + 4 > cn) return -4;
        int64_t ranges = rd32(classes + p);
        p += 4;
        if (p + 8 * ranges > cn) return -4;
        for (int64_t r = 0; r < ranges; r++, p += 8) {
            uint32_t lo = rd32(classes + p), hi = rd32(classes + p + 4);
            if (lo > hi || hi > 0x10FFFF) return -4;
            for (uint32_t c = lo; c <= hi; c++) cls[c] |= (uint8_t)(1 << k);
        }
    }
    return p == cn ? 0 : -4;
}

void o200k_set_heap_from(int64_t n) { heap_from = n; }

/* The code point at byte i of valid UTF-8 (Python's strict encoding) and its width. */
static inline uint32_t cp_at(const uint8_t *s, int64_t i, int *w) {
    uint8_t c = s[i];
    if (c < 0x80) { *w = 1; return c; }
    if (c < 0xE0) { *w = 2; return (uint32_t)(c & 0x1F) << 6 | (s[i + 1] & 0x3F); }
    uint32_t b1 = s[i + 1] & 0x3F;
    if (c < 0xF0) { *w = 3; return (uint32_t)(c & 0x0F) << 12 | b1 << 6 | (s[i + 2] & 0x3F); }
    *w = 4;
    return (uint32_t)(c & 0x07) << 18 | b1 << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
}

static inline uint8_t cls_at(const uint8_t *s, int64_t n, int64_t i, int *w) {
    if (i >= n) { *w = 0; return 0; }
    return cls[cp_at(s, i, w)];
}

/* The end of the run of characters having a bit of `want`, from byte i. */
static int64_t run_end(const uint8_t *s, int64_t n, int64_t i, uint8_t want) {
    int w;
    while (i < n && (cls_at(s, n, i, &w) & want)) i += w;
    return i;
}

static int lower_ascii(uint8_t b) { return b >= 'A' && b <= 'Z' ? b + 32 : b; }

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at byte e: ASCII letters of either case only. */
static int64_t contraction(const uint8_t *s, int64_t n, int64_t e) {
    if (e + 1 >= n || s[e] != '\'') return e;
    int a = lower_ascii(s[e + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return e + 2;
    if (e + 2 >= n) return e;
    int b = lower_ascii(s[e + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return e + 3;
    return e;
}

/* The end of the piece starting at byte i (the first alternative that matches there). */
static int64_t piece_end(const uint8_t *s, int64_t n, int64_t i) {
    int w, w2;
    uint32_t c = cp_at(s, i, &w);
    uint8_t k = cls[c];
    /* the optional leading character: neither \r, \n, a letter nor a number */
    int lead = !(c == '\r' || c == '\n' || (k & (C_L | C_N)));
    /* 1: [lead]? UP* LO+ ; with the lead first, then without. UP* takes the whole run [st, j)
       first; LO+ then matches at j if j is LO (and runs on), else the engine gives back UP
       characters one by one until one is also LO: LO+ takes just that one, as the character
       after it is not LO. So the match ends after the run's last LO character. */
    for (int opt = lead ? 0 : 1; opt < 2; opt++) {
        int64_t st = opt == 0 ? i + w : i, j = st, last_lo = -1;
        while (j < n) {
            uint8_t kj = cls_at(s, n, j, &w2);
            if (!(kj & C_UP)) break;
            j += w2;
            if (kj & C_LO) last_lo = j;
        }
        if (cls_at(s, n, j, &w2) & C_LO) return contraction(s, n, run_end(s, n, j, C_LO));
        if (last_lo >= 0) return contraction(s, n, last_lo);
    }
    /* 2: [lead]? UP+ LO* */
    for (int opt = lead ? 0 : 1; opt < 2; opt++) {
        int64_t st = opt == 0 ? i + w : i;
        if (cls_at(s, n, st, &w2) & C_UP) return contraction(s, n, run_end(s, n, run_end(s, n, st, C_UP), C_LO));
    }
    /* 3: \p{N}{1,3} */
    if (k & C_N) {
        int64_t e = i + w;
        for (int m = 1; m < 3 && (cls_at(s, n, e, &w2) & C_N); m++) e += w2;
        return e;
    }
    /* 4: ' '? [^\s\p{L}\p{N}]+ [\r\n/]* */
    {
        int64_t st = -1;
        if (c == ' ' && i + 1 < n && !(cls_at(s, n, i + 1, &w2) & (C_S | C_L | C_N))) st = i + 1;
        else if (!(k & (C_S | C_L | C_N))) st = i;
        if (st >= 0) {
            int64_t e = st;
            while (e < n && !(cls_at(s, n, e, &w2) & (C_S | C_L | C_N))) e += w2;
            while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/')) e++;
            return e;
        }
    }
    if (k & C_S) {
        /* the whitespace run [i, j); the end of its last \r or \n; the start of its last character */
        int64_t j = i, last_nl = -1, last_start = i;
        while (j < n && (cls_at(s, n, j, &w2) & C_S)) {
            last_start = j;
            if (s[j] == '\r' || s[j] == '\n') last_nl = j + 1;
            j += w2;
        }
        if (last_nl >= 0) return last_nl;  /* 5: \s* gives back down to the last \r or \n */
        if (j == n) return n;              /* 6: (?!\S) holds at the end */
        if (last_start > i) return last_start; /* 6: give back the last space, before the \S */
        return j;                          /* 7 */
    }
    return i + w; /* not reached with consistent classes: every character is L, N, \s or else */
}

/* BPE of one piece: how many tokens. The lowest rank merges first, the leftmost of equals. */
static int64_t merge_scan(const uint8_t *p, int64_t len) {
    int64_t st[258];
    uint32_t rk[258];
    int64_t m = len + 1; /* part starts, the last one the end */
    for (int64_t i = 0; i <= len; i++) {
        st[i] = i;
        rk[i] = i + 2 <= len ? rank_of(p + i, 2) : NONE;
    }
    for (;;) {
        int64_t best = -1;
        uint32_t low = NONE;
        for (int64_t i = 0; i + 2 < m; i++)
            if (rk[i] < low) { low = rk[i]; best = i; }
        if (best < 0) break;
        /* part best absorbs part best + 1 */
        memmove(st + best + 1, st + best + 2, sizeof(int64_t) * (size_t)(m - best - 2));
        memmove(rk + best + 1, rk + best + 2, sizeof(uint32_t) * (size_t)(m - best - 2));
        m--;
        rk[best] = best + 2 < m ? rank_of(p + st[best], st[best + 2] - st[best]) : NONE;
        if (best > 0) rk[best - 1] = rank_of(p + st[best - 1], st[best + 1] - st[best - 1]);
    }
    return m - 1;
}

typedef struct { uint32_t rank; int64_t pos, end; } entry;

static int before(const entry *a, const entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void push(entry *h, int64_t *hn, entry e) {
    int64_t i = (*hn)++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!before(&e, &h[up])) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = e;
}

static entry pop(entry *h, int64_t *hn) {
    entry top = h[0], last = h[--(*hn)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *hn) break;
        if (c + 1 < *hn && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*hn > 0) h[i] = last;
    return top;
}

/* The same merges for long pieces in O(n log n): part starts linked through nxt/prv, each
   adjacent pair in a heap by (rank, start); an entry whose pair has changed is skipped. */
static int64_t merge_heap(const uint8_t *p, int64_t len) {
    int64_t *nxt = malloc(sizeof(int64_t) * (size_t)(len + 1)), *prv = malloc(sizeof(int64_t) * (size_t)(len + 1));
    uint8_t *alive = malloc((size_t)len + 1);
    entry *h = malloc(sizeof(entry) * (size_t)(3 * len + 3));
    if (!nxt || !prv || !alive || !h) { free(nxt); free(prv); free(alive); free(h); return -1; }
    int64_t hn = 0, parts = len;
    for (int64_t i = 0; i <= len; i++) { nxt[i] = i + 1; prv[i] = i - 1; alive[i] = 1; }
    for (int64_t i = 0; i + 2 <= len; i++) {
        uint32_t r = rank_of(p + i, 2);
        if (r != NONE) push(h, &hn, (entry){r, i, i + 2});
    }
    while (hn) {
        entry e = pop(h, &hn);
        int64_t a = e.pos;
        if (!alive[a] || nxt[a] >= len || nxt[nxt[a]] != e.end) continue;
        int64_t q = nxt[a], r = e.end;
        alive[q] = 0;
        nxt[a] = r;
        prv[r] = a;
        parts--;
        if (r < len) {
            uint32_t rr = rank_of(p + a, nxt[r] - a);
            if (rr != NONE) push(h, &hn, (entry){rr, a, nxt[r]});
        }
        if (a > 0) {
            int64_t b = prv[a];
            uint32_t rr = rank_of(p + b, r - b);
            if (rr != NONE) push(h, &hn, (entry){rr, b, r});
        }
    }
    free(nxt); free(prv); free(alive); free(h);
    return parts;
}

static int64_t piece_tokens(const uint8_t *p, int64_t len) {
    if (len <= 1 || rank_of(p, len) != NONE) return len ? 1 : 0;
    if (len < heap_from && len <= 256) return merge_scan(p, len);
    return merge_heap(p, len);
}

/* o200k_base tokens of UTF-8 text s[0..n), or -1 when memory runs out. */
int64_t o200k_count(const uint8_t *s, int64_t n) {
    int64_t i = 0, total = 0;
    while (i < n) {
        int64_t e = piece_end(s, n, i), t = piece_tokens(s + i, e - i);
        if (t < 0) return -1;
        total += t;
        i = e;
    }
    return total;
}
"""

# The sha256 of the files the counts were checked on (quicktok 0.4.0, tests/test_o200k_kernel.py):
# other files (another quicktok) are counted by quicktok itself, whose format and tables they are.
CHECKED = {
    "o200k.vocab": "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe",
    "uniclass_o200k.bin": "8dd93d0b36e25eecc2ac43f4bc99f56fbd360fb01bb144778152fa75a6518d6d",
}

_TEXT, _N = ctypes.c_char_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {
    "o200k_load": (ctypes.c_int, [_TEXT, _N, _TEXT, _N]),
    "o200k_count": (_N, [_TEXT, _N]),
    "o200k_set_heap_from": (None, [_N]),
}


def data_dir() -> Path | None:
    """quicktok's data folder, found without importing quicktok (its import loads its C++)."""
    spec = importlib.util.find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _compile() -> ctypes.CDLL | None:
    folder = data_dir()
    if folder is None:
        return None
    try:
        vocab = (folder / "o200k.vocab").read_bytes()
        classes = (folder / "uniclass_o200k.bin").read_bytes()
    except OSError:
        return None
    for name, data in (("o200k.vocab", vocab), ("uniclass_o200k.bin", classes)):
        if hashlib.sha256(data).hexdigest() != CHECKED[name]:  # ~2 ms for both
            return None
    lib = load.library()
    if lib is None or lib.o200k_load(vocab, len(vocab), classes, len(classes)) != 0:
        return None
    return lib


# The compiled counter with its tables loaded, or None (no compiler, no quicktok data, data files
# other than those checked, SAG2WB_O200K_KERNEL=quicktok or numpy).
load = ckernel.loader("o200k_kernel", SOURCE, VARIABLE, SIGNATURES, build=_compile, off=("quicktok", "numpy"))


def count(lib: ctypes.CDLL, text: str) -> int | None:
    """o200k_base tokens of `text` by the kernel, or None when UTF-8 cannot encode it (lone
    surrogates: the caller asks quicktok, which refuses them)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    n = lib.o200k_count(data, len(data))
    if n < 0:
        raise MemoryError("o200k_count: out of memory")
    return n
