"""Block-max bounds for the corpus graph's kernel (issue 33): the rows cut into blocks of
2**SHIFT consecutive ids, each long list's largest contribution in each block, so a question
can rule out whole blocks of rows before reading the long lists of its common phrases.

A row's score for a question is at most its sum over the lists read so far plus, over the
unread phrases, the phrase's largest contribution in the row's block; a block's bound is the
largest of those (`block_bounds`, made once, after the seeds). Once the kernel knows theta (a lower
bound on the k-th best exact score), a block whose bound is below theta (with the kernel's
relative margin) holds no row that can be among the k best, nor tie with the k-th (ties go by
lower id, and such a row scores strictly less): its positions in the remaining lists are not
read (the random read of the row's place, most of the kernel's time) and its rows are not
candidates in the final pass. theta only rises, so a block once ruled out stays out; a row in
a block still in has had every list read that was read while its block was in, i.e. all of
them. As in block-max MaxScore (BMW and its kin): what is skipped cannot change the lists.

Passages of one document have adjacent ids and share their text, so a question's high bounds
gather in a few blocks. At 300k (200 questions, their final 8th best as theta) 93% of the
positions of lists of 1,000+ rows lie in blocks of 64 rows below it, 36% with blocks of 256,
5% with 1,024: hence small blocks (32 rows: at 600k 53k -> 11k positions read a passage; 64
rows: 20k). Lists of BLOCK_FROM rows or more keep one byte a block: their maxima in steps of
one unit (the kept lists' largest contribution / 254), rounded up, so a question adds them as
16-bit integers, 16 blocks an instruction or so; a question adds the shorter lists'
contributions into the blocks directly (their rows are read once, in order; a sum of a
block's contributions is at least their maximum). The final pass bounds a candidate's unread
phrases by their maxima in its block too (600k: 345 -> 108 look-ups a passage).

The C source is compiled with graph_kernel's (`SOURCE`, prepended to the kernel's).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import numpy as np

from workbench import ckernel

SHIFT = 5  # 32 rows a block
BLOCK_FROM = 4096  # lists of this many rows or more keep their blocks' maxima (1 byte a block each)

SOURCE = r"""
/* the blocks' slots: phrase p's maxima are bm_q[slot[p] * n_blocks ...] (slot -1: none kept) */
int64_t blockmax_plan(int64_t n_phrases, const int64_t *t_off, int64_t from, int32_t *slot) {
    int64_t n = 0;
    for (int64_t p = 0; p < n_phrases; p++) slot[p] = (t_off[p + 1] - t_off[p] >= from) ? (int32_t)n++ : -1;
    return n;
}

/* each block's largest contribution in steps of unit, rounded up: q > x / unit, so q x unit >= x
   (up to a rounding far below BOUND_SLACK); 0: no row there. unit: the kept lists' largest
   contribution / 254, one scale for every list, so a question adds its lists' bytes as integers */
void blockmax_fill(int64_t n_phrases, const int64_t *t_off, const int32_t *t_rows, const double *t_imp,
                   double unit, int32_t shift, int64_t n_blocks, const int32_t *slot, uint8_t *bm_q) {
    for (int64_t p = 0; p < n_phrases; p++) {
        if (slot[p] < 0) continue;
        uint8_t *q = bm_q + (int64_t)slot[p] * n_blocks;
        for (int64_t e = t_off[p]; e < t_off[p + 1]; e++) {
            double x = t_imp[e] / unit;
            int v = (x >= 254.0) ? 255 : (int)x + 1;
            int64_t b = t_rows[e] >> shift;
            if (v > q[b]) q[b] = (uint8_t)v;
        }
    }
}

typedef struct {
    int32_t shift; int64_t n_blocks; const int32_t *slot; const uint8_t *q; double unit;  /* block_maxima's */
    float *bound; uint16_t *steps;  /* the question's bounds (and their kept lists' part in steps) */
    float floor;  /* a block is still in when its bound is at least this */
} Blocks;

typedef uint8_t bm_u8x16 __attribute__((vector_size(16)));
typedef uint16_t bm_u16x16 __attribute__((vector_size(32)));
typedef float bm_f32x16 __attribute__((vector_size(64)));

/* the most a row of each block can score for the question, once the lists ord[0..from-1] are
   read (acc[t]: touched row row[t]'s sum over them): the block's largest sum so far plus each
   unread phrase's block maximum (kept, or the short list's contributions added in: a sum of a
   block's contributions is at least their largest). The kept maxima are added as integer steps
   (< 256 lists of < 256 steps: no overflow of 16 bits), 16 blocks at a time (vector extensions of
   gcc and clang). A bound only, in float: BOUND_SLACK covers its roundings (< 100 additions of
   2^-24 each) */
#define BOUND_SLACK 1e-4

/* S[b] += mx[b] for every block, 16 at a time */
static inline __attribute__((always_inline)) void add_steps_with(uint16_t *S, const uint8_t *mx, int64_t nb) {
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16) {
        bm_u8x16 v;
        bm_u16x16 u;
        memcpy(&v, mx + b, 16);
        memcpy(&u, S + b, sizeof u);
        u += __builtin_convertvector(v, bm_u16x16);
        memcpy(S + b, &u, sizeof u);
    }
    for (; b < nb; b++) S[b] += mx[b];
}

/* the same loop compiled for AVX2 where the processor has it (a 16-block step is one instruction
   of each kind there, against two with the default SSE2): integer sums, the same on either path */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2"))) static void add_steps_avx2(uint16_t *S, const uint8_t *mx, int64_t nb) {
    add_steps_with(S, mx, nb);
}
static void add_steps(uint16_t *S, const uint8_t *mx, int64_t nb) {
    if (__builtin_cpu_supports("avx2")) add_steps_avx2(S, mx, nb);
    else add_steps_with(S, mx, nb);
}
#else
static void add_steps(uint16_t *S, const uint8_t *mx, int64_t nb) { add_steps_with(S, mx, nb); }
#endif

static void block_bounds(Blocks *B, const int32_t *row, const double *acc, int64_t nt, const int32_t *q,
                         const int32_t *ord, int64_t from, int64_t m, const double *ub, const int64_t *t_off,
                         const int32_t *t_rows, const double *t_imp) {
    float *U = B->bound;
    uint16_t *S = B->steps;
    int64_t nb = B->n_blocks;
    memset(U, 0, nb * sizeof(float));
    memset(S, 0, nb * sizeof(uint16_t));
    for (int64_t t = 0; t < nt; t++) {
        int64_t b = row[t] >> B->shift;
        if ((float)acc[t] > U[b]) U[b] = (float)acc[t];
    }
    for (int64_t j = from; j < m; j++) {
        int32_t p = q[ord[j]];
        if (B->slot[p] >= 0) {
            add_steps(S, B->q + (int64_t)B->slot[p] * nb, nb);
        } else {
            for (int64_t e = t_off[p]; e < t_off[p + 1]; e++) U[t_rows[e] >> B->shift] += (float)t_imp[e];
        }
    }
    float unit = (float)B->unit;
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16) {
        bm_u16x16 v;
        bm_f32x16 u;
        memcpy(&v, S + b, sizeof v);
        memcpy(&u, U + b, sizeof u);
        u += __builtin_convertvector(v, bm_f32x16) * unit;
        memcpy(U + b, &u, sizeof u);
    }
    for (; b < nb; b++) U[b] += unit * S[b];
}

/* a block is out when its bound is below theta, by the margins (the float's rounding of the floor,
   2^-24, is far inside BOUND_SLACK) */
static void block_floor(Blocks *B, double theta, double margin) {
    B->floor = (float)(theta * (1 - margin) / (1 + BOUND_SLACK));
}
"""


@dataclass
class BlockMaxima:
    """`slot[p]` (-1: none kept) and `maxima[slot * n_blocks + b]`: phrase p's largest
    contribution among rows [b << shift, (b + 1) << shift), in steps of `unit` (rounded up)."""

    shift: int
    unit: float
    n_blocks: int
    slot: np.ndarray
    maxima: np.ndarray


_P, _N = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernel.Signature] = {  # declared with graph_kernel's
    "blockmax_plan": (_N, [_N, _P, _N, _P]),
    "blockmax_fill": (None, [_N, _P, _P, _P, ctypes.c_double, ctypes.c_int32, _N, _P, _P]),
}

_p = functools.partial(ckernel.pointer, who="graph blocks")


def block_maxima(lib, table, n_rows: int, bounds: np.ndarray, shift: int | None = None, from_rows: int | None = None):
    """The blocks' maxima of every list of `from_rows` rows or more (None: BLOCK_FROM) in blocks
    of 2**shift rows (None: SHIFT); `bounds`: each phrase's largest contribution
    (`graph_kernel.phrase_bounds` of level 0). n_blocks bytes a kept list: 18,750 at 600k, 19 MiB
    for the lists of 4,096+ rows."""
    shift = SHIFT if shift is None else shift
    from_rows = BLOCK_FROM if from_rows is None else from_rows
    n = len(table.offsets) - 1
    n_blocks = ((max(n_rows, 1) - 1) >> shift) + 1
    slot = np.zeros(n, dtype=np.int32)
    kept = lib.blockmax_plan(
        ctypes.c_int64(n), _p(table.offsets, np.int64), ctypes.c_int64(from_rows), _p(slot, np.int32)
    )
    maxima = np.zeros(kept * n_blocks, dtype=np.uint8)
    largest = float(bounds[slot >= 0].max()) if kept else 0.0
    unit = largest / 254.0 if largest > 0.0 else 1.0
    lib.blockmax_fill(
        ctypes.c_int64(n),
        _p(table.offsets, np.int64),
        _p(table.rows, np.int32),
        _p(table.impacts, np.float64),
        ctypes.c_double(unit),
        ctypes.c_int32(shift),
        ctypes.c_int64(n_blocks),
        _p(slot, np.int32),
        _p(maxima, np.uint8),
    )
    return BlockMaxima(shift, unit, n_blocks, slot, maxima)
