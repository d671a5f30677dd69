"""A compiled loop for the corpus graph's scoring (`graph_scoring.top_neighbours`, the same
max-score pruning with the same levels, one passage at a time) in C, through ctypes.

numpy spends ~2.7 ms a passage on a dozen passes over the candidates' arrays; this loop
touches each listed position once and scores the few rows that can still reach the k-th best
(a running top-k: a row whose bound falls below the k-th exact score found so far is skipped),
~30x less. The exact scores add each row's contributions in question order from 0.0 with
plain double additions (no -ffast-math, no reordering), as `exact_scores` and `Index.search`
do, so the lists and scores are the numpy path's bit for bit (tests/test_graph_scale.py runs
both). A contribution is found by binary search in the phrase's list (ascending by row),
within the row's bucket on a long list (`list_buckets`), so the kernel needs no by-row copy
of the table (8 bytes per table entry: ~300 MB at 600k).

Where a passage's time goes (300k, after issue 33's third stop, ~0.28 ms CPU): reading the
essential lists (~22k positions: a random read of the row's place each), the exact scores
(~26: ~30 searches each) and the look-ups that refine the final candidates' bounds (~117).
theta is raised after the seeds and after each 4x growth of the positions read; the final
pass bounds a candidate by its partial sum and the unread phrases' bounds, then by its
signature (a table per question), then by looking its unread contributions up one by one.

Block-max bounds (`graph_blocks`, issue 33's fifth stop): after the seeds, each block of 32
rows gets the most a row there can score (its largest sum so far plus the unread lists'
block maxima); the positions of blocks below theta are not read (600k: 53k -> 11k positions a
passage) and the final candidates' unread phrases are bounded by their block maxima before
any look-up (345 -> 108 look-ups). The touched-row check reads one `where[r]` (4 bytes).

Issue 33's seventh stop: a raise's candidate, once the top holds k, is first bounded as the
final pass bounds one (`graph_unread`); the kept lists' block maxima are added with AVX2 where
the processor has it.

Issue 33's eighth stop: a look-up is two dependent cache misses (the bucket's start, then its
rows), so an exact score fetches all its buckets, then all their rows, before it searches, and
a bound's look-ups fetch their buckets at once and each next one's rows (kernel CPU 0.93x).

The C source below is compiled once per source, flags and compiler with the system's C compiler
(`cc`, or $CC) into $XDG_CACHE_HOME/sag2wb/kernels (~/.cache/...), written atomically
(`workbench/ckernel.py`); without a compiler, or with SAG2WB_GRAPH_KERNEL=numpy, `load()` is None
and the numpy path runs.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from workbench import ckernel
from workbench.feedback import graph_blocks, graph_buckets, graph_unread
from workbench.feedback.graph_buckets import Buckets, list_buckets

__all__ = ["Buckets", "list_buckets", "load", "phrase_bounds", "row_signatures", "score_share"]

SOURCE = (
    r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
"""
    + graph_buckets.SOURCE
    + graph_blocks.SOURCE
    + r"""

#define SIG_WORDS 8  /* a row's signature: 512 bits, one set per phrase it has (hashed) */

typedef struct {
    const int64_t *t_off; const int32_t *t_rows; const double *t_imp;
    const uint64_t *sig; const int32_t *q; int32_t *q_word; uint64_t *q_bit;
    const uint8_t *b_shift; const int64_t *b_off; const int32_t *b_first;  /* list_buckets (or NULL) */
    int32_t *e_j; int64_t *e_lo, *e_hi; double *e_val;  /* exact's work arrays (max_m each) */
} Ctx;

static void sig_bit(int32_t p, int32_t *word, uint64_t *bit) {
    uint32_t h = ((uint32_t)p * 2654435761u) >> 23;  /* 9 bits: 512 places */
    *word = (int32_t)(h >> 6); *bit = (uint64_t)1 << (h & 63);
}

/* every row's signature: the bits of the phrases whose lists hold it */
void row_signatures(int64_t n_phrases, const int64_t *t_off, const int32_t *t_rows, uint64_t *sig) {
    for (int64_t p = 0; p < n_phrases; p++) {
        int32_t w; uint64_t bit;
        sig_bit((int32_t)p, &w, &bit);
        for (int64_t e = t_off[p]; e < t_off[p + 1]; e++) sig[(int64_t)t_rows[e] * SIG_WORDS + w] |= bit;
    }
}

/* where phrase p's list (ascending by row) may hold row r: [*lo, *hi), r's bucket on a long list */
static inline void bucket_of(const Ctx *c, int32_t p, int32_t r, int64_t *lo, int64_t *hi) {
    *lo = c->t_off[p]; *hi = c->t_off[p + 1];
    if (c->b_off && c->b_off[p] >= 0) {
        const int32_t *first = c->b_first + c->b_off[p] + (r >> c->b_shift[p]);
        *hi = *lo + first[1];
        *lo += first[0];
    }
}

/* what bucket_of reads first (a bucket's start, or a short list's rows), to fetch it early */
static inline const int32_t *bucket_at(const Ctx *c, int32_t p, int32_t r) {
    return (c->b_off && c->b_off[p] >= 0) ? c->b_first + c->b_off[p] + (r >> c->b_shift[p]) : c->t_rows + c->t_off[p];
}

/* row r's contribution in [lo, hi) of the table (0.0: not there) */
static inline double search(const Ctx *c, int64_t lo, int64_t hi, int32_t r) {
    int64_t end = hi;
    while (lo < hi) {
        int64_t mid = lo + ((hi - lo) >> 1);
        if (c->t_rows[mid] < r) lo = mid + 1; else hi = mid;
    }
    return (lo < end && c->t_rows[lo] == r) ? c->t_imp[lo] : 0.0;
}

/* a row's BM25 for the question: contributions in question order from 0.0 (a phrase the row
   lacks adds 0.0, which changes no sum; the signature rules out most of those without a search).
   have[j]: phrase j's contribution already looked up (val[j]; have NULL: none). The searches are
   independent: their buckets are fetched first, all at once, then their rows */
static double exact(const Ctx *c, int64_t r, int64_t m, const uint8_t *have, const double *val) {
    const uint64_t *sig = c->sig + r * SIG_WORDS;
    int32_t *js = c->e_j;
    int64_t n = 0;
    for (int64_t j = 0; j < m; j++)
        if ((sig[c->q_word[j]] & c->q_bit[j]) && !(have && have[j])) {
            js[n++] = (int32_t)j;
            __builtin_prefetch(bucket_at(c, c->q[j], (int32_t)r));
        }
    for (int64_t x = 0; x < n; x++) {
        bucket_of(c, c->q[js[x]], (int32_t)r, &c->e_lo[x], &c->e_hi[x]);
        __builtin_prefetch(c->t_rows + c->e_lo[x]);
    }
    for (int64_t x = 0; x < n; x++) c->e_val[js[x]] = search(c, c->e_lo[x], c->e_hi[x], (int32_t)r);
    double s = 0.0;
    for (int64_t j = 0; j < m; j++)
        if (sig[c->q_word[j]] & c->q_bit[j]) s += (have && have[j]) ? val[j] : c->e_val[j];
    return s;
}

/* a before b in Index.search's order: higher score first, ties by lower id */
static int better(double sa, int64_t a, double sb, int64_t b) { return sa > sb || (sa == sb && a < b); }

/* insert into the sorted top list (size *n, capacity k) */
static void offer(double *ts, int64_t *tr, int64_t *n, int64_t k, double s, int64_t r) {
    if (*n == k && !better(s, r, ts[k - 1], tr[k - 1])) return;
    int64_t i = (*n < k) ? (*n)++ : k - 1;
    while (i > 0 && better(s, r, ts[i - 1], tr[i - 1])) { ts[i] = ts[i - 1]; tr[i] = tr[i - 1]; i--; }
    ts[i] = s; tr[i] = r;
}

/* the rows touched in a round, as a sparse set: row r is the idx-th touched (its partial sum
   acc[idx], done[idx]: exact-scored) when where[r] is idx + 1 (0: not touched). where[] is the
   only place a listed position reads at random, and it alone says whether the row is new (a
   check of row[idx] == r was a second, dependent random read: issue 33's fifth stop); 4 bytes a
   row (2.4 MB at 600k, against 8 with a round's stamp in the high half: fewer cache misses),
   so a new round clears the last round's nt entries, found in row[]. The touched rows' arrays
   are dense, read in order by the raises and the final pass (done[] is cleared over the last
   round's nt) */
typedef struct { uint32_t *where; int32_t *row; double *acc; uint8_t *done; int64_t nt; } Touched;

/* row r's listed contribution v added to its partial sum (a new row's place is nt: no branch) */
static inline void touch(uint32_t *where, int32_t *row, double *acc, int64_t *nt, int32_t r, double v) {
    uint32_t w = where[r];
    int fresh = w == 0;
    int64_t x = fresh ? *nt : (int64_t)w - 1;
    double was = acc[x];  /* read either way (acc[] is n_rows long), so no branch on fresh */
    double before = fresh ? 0.0 : was;
    where[r] = (uint32_t)x + 1;
    row[x] = r;
    acc[x] = before + v;
    *nt += fresh;
}

#define LIVE_CHUNK 256  /* a list's positions in blocks still in, gathered a chunk at a time */

"""
    + graph_unread.SOURCE
    + r"""
/* raise the running top k (ts, tr; *top of them): the cap best partial sums of the touched
   rows other than me (fs, fi: their places) are exact-scored, those not scored before in this
   round; returns how many were. Once the top holds k, a row that cannot reach its k-th best (its
   block ruled out, or cannot_reach) is not scored: it could not enter the top (the k-th best only
   rises), and is marked as scored */
static int64_t raise_top(const Ctx *c, Touched *T, Unread *U, int blocked, int64_t me, int64_t cap, double *fs,
                         int64_t *fi, double *ts, int64_t *tr, int64_t *top, int64_t k, int64_t m) {
    int64_t nf = 0;
    for (int64_t t = 0; t < T->nt; t++) {
        double s = T->acc[t];
        if (nf == cap && s <= fs[nf - 1]) continue;
        if (T->row[t] == me) continue;
        int64_t x = (nf < cap) ? nf++ : nf - 1;
        while (x > 0 && s > fs[x - 1]) { fs[x] = fs[x - 1]; fi[x] = fi[x - 1]; x--; }
        fs[x] = s; fi[x] = t;
    }
    int64_t scored = 0;
    for (int64_t f = 0; f < nf; f++) {
        if (T->done[fi[f]]) continue;
        T->done[fi[f]] = 1;
        int32_t r = T->row[fi[f]];
        if (*top == k) {
            const Blocks *B = U->blocks;
            if (blocked && B->bound[r >> B->shift] < B->floor) continue;  /* scores below theta */
            if (cannot_reach(c, U, r, T->acc[fi[f]], ts[k - 1], m)) continue;
            offer(ts, tr, top, k, exact_after(c, U, r, m), r);
        } else {
            offer(ts, tr, top, k, exact(c, r, m, NULL, NULL), r);
        }
        scored++;
    }
    return scored;
}

static int level_below(int32_t n_levels, const double *budgets, double score, double under, double margin) {
    int best = 0;
    for (int l = 0; l < n_levels; l++)
        if (budgets[l] < under && budgets[l] * (1 + margin) < score * (1 - margin)) best = l;
    return best;
}

#define SIG_TABLE_BITS 8  /* the unread phrases' signature bits a candidate's bound looks at */

int score_share(
    int64_t n_rows, int64_t n_phrases, int64_t k, int64_t extra,
    const int64_t *t_off, const int32_t *t_rows, const double *t_imp, const uint64_t *sig,
    int32_t n_levels, const double *budgets, const int64_t **l_off, const int32_t **l_ent, const double **l_beta,
    const double **l_ub,
    const int64_t *q_off, const int32_t *q_phr, const int64_t *ids, const uint8_t *skip, const int64_t *order,
    int64_t a, int64_t b, double margin, double start_share, double keep_share,
    int64_t seed_positions, double essential_share,
    const uint8_t *b_shift, const int64_t *b_off, const int32_t *b_first,
    int32_t bm_shift, double bm_unit, int64_t bm_blocks, const int32_t *bm_slot, const uint8_t *bm_q,
    int64_t *out_nb, double *out_sc, int64_t *stats)
{
    int64_t max_m = 1;
    /* questions order[a..b-1] (NULL: a..b-1), the j-th one's list in out row j - a */
    for (int64_t j = a; j < b; j++) {
        int64_t i = order ? order[j] : j;
        if (q_off[i + 1] - q_off[i] > max_m) max_m = q_off[i + 1] - q_off[i];
    }
    int64_t cap_first = k + extra;
    Touched T = {calloc(n_rows, sizeof(uint32_t)), calloc(n_rows, sizeof(int32_t)), malloc(n_rows * sizeof(double)),
                 calloc(n_rows, 1), 0};
    int32_t *ord = malloc(max_m * sizeof(int32_t));
    int32_t *q_word = malloc(max_m * sizeof(int32_t));
    uint64_t *q_bit = malloc(max_m * sizeof(uint64_t));
    double *fs = malloc(cap_first * sizeof(double)), *ts = malloc(k * sizeof(double));
    int64_t *fr = malloc(cap_first * sizeof(int64_t)), *tr = malloc(k * sizeof(int64_t));
    double sig_table[1 << SIG_TABLE_BITS];
    int32_t *cand = malloc(n_rows * sizeof(int32_t));  /* the final pass's candidates (touched places) */
    int32_t *u_at = malloc(max_m * sizeof(int32_t));  /* a candidate's unread phrases (places) */
    double *u_suf = malloc((max_m + 1) * sizeof(double));  /* and the sums of their ubs from each on */
    uint8_t *u_have = calloc(max_m, 1);  /* a candidate's contributions looked up (by question place) */
    double *u_val = malloc(max_m * sizeof(double));
    /* block-max bounds (graph_blocks; bm_slot NULL: none), used at level 0 (every position listed) */
    Blocks B = {bm_shift, bm_blocks, bm_slot, bm_q, bm_unit, NULL, NULL, 0.0f};
    int64_t keep[LIVE_CHUNK];
    if (bm_slot) {
        B.bound = malloc(bm_blocks * sizeof(float));
        B.steps = malloc(bm_blocks * sizeof(uint16_t));
    }
    int failed = !T.where || !T.row || !T.acc || !T.done || !ord || !q_word || !q_bit || !fs || !ts || !fr || !tr
                 || !u_at || !u_suf || !u_have || !u_val || !cand || (bm_slot && (!B.bound || !B.steps));
    if (failed) b = a;  /* no question scored: what was allocated is freed below, -1 returned */
    Ctx c = {t_off, t_rows, t_imp, sig, NULL, q_word, q_bit, b_shift, b_off, b_first,
             malloc(max_m * sizeof(int32_t)), malloc(max_m * sizeof(int64_t)), malloc(max_m * sizeof(int64_t)),
             malloc(max_m * sizeof(double))};
    if (!c.e_j || !c.e_lo || !c.e_hi || !c.e_val) { failed = 1; b = a; }
    int64_t n_skipped = 0, n_positions = 0, n_lists = 0, n_past = 0, n_exact = 0, n_raised = 0, n_searched = 0;
    double ratio = 0.5;
    for (int64_t j = a; j < b; j++) {
        int64_t i = order ? order[j] : j;
        int64_t m = q_off[i + 1] - q_off[i];
        if (skip[i] || m == 0) continue;
        const int32_t *q = q_phr + q_off[i];
        int64_t me = ids[i];
        c.q = q;
        for (int64_t j = 0; j < m; j++) sig_bit(q[j], &q_word[j], &q_bit[j]);
        /* the own score only chooses the first prefix level (none without levels) */
        double own = (n_levels > 1) ? exact(&c, me, m, NULL, NULL) : 0.0;
        int lv = (n_levels > 1) ? level_below(n_levels, budgets, start_share * ratio * own, 1e308, margin) : 0;
        int64_t top = 0;
        int full = 0;  /* read every list (set if level 0 with unread lists could not answer) */
        int bounded = 0;  /* B.bound holds this question's block bounds */
        for (;;) {
            /* max-score: the question's phrases by their largest listed contribution at this
               level (ub), largest first; the lists of the first few (the rare phrases: short
               lists) give a lower bound theta on the k-th best (the k-th best exact score of the
               best partial sums); the longest run of smallest-ub phrases whose ubs add up to below
               theta minus the level's budget (times essential_share) is non-essential: a row in
               none of the other lists scores less than the k-th best, so those lists are not
               read; each candidate's bound counts their ubs instead (sum_ne). theta is raised
               again each time the positions read have grown 4x, so later lists are left out
               sooner */
            const double *ub = l_ub[lv];
            for (int64_t j = 0; j < m; j++) {
                int64_t x = j;
                double u = ub[q[j]];
                while (x > 0 && ub[q[ord[x - 1]]] < u) { ord[x] = ord[x - 1]; x--; }
                ord[x] = (int32_t)j;
            }
            memset(T.done, 0, T.nt);  /* a new round: no row touched, none scored */
            for (int64_t t = 0; t < T.nt; t++) T.where[T.row[t]] = 0;
            T.nt = 0;
            top = 0;
            const int64_t *off = l_off[lv];
            const int32_t *ent = l_ent[lv];
            int blocked = 0;  /* B.floor rules out blocks (after the seeds, at level 0) */
            Unread U = {ord, 0, ub, l_beta[lv], (B.bound && !ent) ? &B : NULL, margin, 0.0,
                        u_at, u_suf, u_have, u_val, 0};
            int64_t scanned = 0, npos = 0;
            double budget = budgets[lv];
            double theta = 0.0;
            int64_t until = m, check = seed_positions;  /* the seeds: until seed_positions are read */
            for (;;) {
                while (scanned < until && (scanned == 0 || npos < check)) {
                    int32_t p = q[ord[scanned++]];
                    npos += off[p + 1] - off[p];
                    n_lists++;
                    n_skipped += blocked ? off[p + 1] - off[p] : 0;
                    /* the loop's cost is where[r], read at random: fetched 16 positions ahead,
                       and no branch on whether the row is new (a new row's place is nt) */
                    int64_t nt = T.nt, end = off[p + 1];
                    uint32_t *where = T.where;
                    int32_t *row = T.row;
                    double *acc = T.acc;
                    if (blocked) {  /* level 0: the positions of blocks still in, then those rows */
                        for (int64_t e0 = off[p]; e0 < end; e0 += LIVE_CHUNK) {
                            int64_t e1 = (end - e0 > LIVE_CHUNK) ? e0 + LIVE_CHUNK : end, nk = 0;
                            for (int64_t e = e0; e < e1; e++) {
                                keep[nk] = e;
                                nk += B.bound[t_rows[e] >> B.shift] >= B.floor;
                            }
                            n_skipped -= nk;
                            for (int64_t y = 0; y < nk; y++) {
                                if (y + 16 < nk) __builtin_prefetch(&where[t_rows[keep[y + 16]]]);
                                touch(where, row, acc, &nt, t_rows[keep[y]], t_imp[keep[y]]);
                            }
                        }
                    } else {
                        for (int64_t e = off[p]; e < end; e++) {
                            int64_t at = ent ? ent[e] : e;
                            if (e + 16 < end) __builtin_prefetch(&where[t_rows[ent ? ent[e + 16] : e + 16]]);
                            touch(where, row, acc, &nt, t_rows[at], t_imp[at]);
                        }
                    }
                    T.nt = nt;
                }
                if (scanned >= until) break;  /* every essential list read */
                /* theta from the best partial sums so far; the essential rest: stop where the
                   remaining ubs stay below the share */
                unread_from(&U, q, scanned, m);
                n_raised += raise_top(&c, &T, &U, blocked, me, cap_first, fs, fr, ts, tr, &top, k, m);
                if (top == k && ts[k - 1] > theta) theta = ts[k - 1];
                double tail = 0.0;
                until = m;
                while (until > scanned && !full) {
                    double next = tail + ub[q[ord[until - 1]]];
                    if ((next + budget) * (1 + margin) >= essential_share * theta * (1 - margin)) break;
                    tail = next;
                    until--;
                }
                check = 4 * npos;  /* the next raise: after 4x the positions read so far */
                /* lists left: rule out the blocks below theta (m <= 256: the steps' sums fit 16 bits) */
                if (B.bound && !ent && scanned < until && m <= 256) {
                    if (!bounded) block_bounds(&B, T.row, T.acc, T.nt, q, ord, scanned, m, ub, t_off, t_rows, t_imp);
                    bounded = 1;
                    block_floor(&B, theta, margin);
                    blocked = 1;
                }
            }
            n_positions += npos;  /* minus those skipped (n_skipped) */
            double sum_ne = unread_from(&U, q, scanned, m);  /* the unread phrases' ubs */
            /* a lower bound on the k-th best: the exact scores of the best partial sums */
            n_raised += raise_top(&c, &T, &U, blocked, me, cap_first, fs, fr, ts, tr, &top, k, m);
            if (top == k && ts[k - 1] > theta) theta = ts[k - 1];
            if (blocked) block_floor(&B, theta, margin);
            /* an unlisted row scores at most budget + sum_ne: the level answers if theta clears it */
            int clears = theta * (1 - margin) > (budget + sum_ne) * (1 + margin);
            int lower = level_below(n_levels, budgets, start_share * theta, budget, margin);
            int whole = budget == 0.0 && sum_ne == 0.0;  /* level 0, every list read */
            if (whole || (clears && (budgets[lower] == 0.0 || budget <= keep_share * theta))) {
                /* a candidate's bound: its listed sum, its left-out mass (beta) and the unread
                   phrases' ubs; the signature refines the last: an unread phrase whose bit the
                   row lacks adds nothing. The unread phrases' first SIG_TABLE_BITS distinct bits (largest
                   ubs first) index sig_table: sig_table[x] adds the ubs of the bits set in x and
                   every ub of the other bits (rest) */
                int nb = 0, built = 0;
                int32_t b_word[SIG_TABLE_BITS];
                uint64_t b_bit[SIG_TABLE_BITS];
                double b_ub[SIG_TABLE_BITS], rest = 0.0;
                const double *beta = l_beta[lv];
                /* the candidates past the coarse bound at the floor of now (it only rises), their
                   signatures fetched as they are found: then each one checked and scored */
                int64_t nc = 0;
                {
                    double floor = (top == k) ? ts[k - 1] : theta;
                    for (int64_t t = 0; t < T.nt; t++) {
                        int32_t r = T.row[t];
                        if (r == me || T.done[t]) continue;
                        if (blocked && B.bound[r >> B.shift] < B.floor) continue;  /* scores below theta */
                        double base = T.acc[t] + (beta ? beta[r] : 0.0);
                        if ((base + sum_ne) * (1 + margin) < floor * (1 - margin)) continue;
                        __builtin_prefetch(sig + (int64_t)r * SIG_WORDS);
                        cand[nc++] = (int32_t)t;
                    }
                }
                for (int64_t ci = 0; ci < nc; ci++) {
                    int64_t t = cand[ci];
                    int32_t r = T.row[t];
                    double floor = (top == k) ? ts[k - 1] : theta;
                    double base = T.acc[t] + (beta ? beta[r] : 0.0);
                    if ((base + sum_ne) * (1 + margin) < floor * (1 - margin)) continue;
                    n_past++;
                    if (!built) {  /* once a question, at its first candidate past the coarse bound */
                        built = 1;
                        for (int64_t j = scanned; j < m; j++) {
                            int32_t w = q_word[ord[j]];
                            uint64_t bit = q_bit[ord[j]];
                            double u = ub[q[ord[j]]];
                            int x = 0;
                            while (x < nb && !(b_word[x] == w && b_bit[x] == bit)) x++;
                            if (x < nb) b_ub[x] += u;
                            else if (nb < SIG_TABLE_BITS) { b_word[nb] = w; b_bit[nb] = bit; b_ub[nb++] = u; }
                            else rest += u;
                        }
                        for (int x = 0; x < (1 << nb); x++) {
                            double have = rest;
                            for (int y = 0; y < nb; y++) if (x >> y & 1) have += b_ub[y];
                            sig_table[x] = have;
                        }
                    }
                    if (nb) {
                        const uint64_t *rs = sig + (int64_t)r * SIG_WORDS;
                        int x = 0;
                        for (int y = 0; y < nb; y++) if (rs[b_word[y]] & b_bit[y]) x |= 1 << y;
                        if ((base + sig_table[x] + U.loose) * (1 + margin) < floor * (1 - margin)) continue;
                        if (cannot_reach(&c, &U, r, T.acc[t], floor, m)) continue;
                    }
                    n_exact++;
                    offer(ts, tr, &top, k, exact_after(&c, &U, r, m), r);
                }
                n_searched += U.searched;
                break;
            }
            n_searched += U.searched;
            if (budget == 0.0) full = 1;  /* cannot happen (essential_share <= 1); never loop */
            lv = lower;
        }
        for (int64_t t = 0; t < top; t++) { out_nb[(j - a) * k + t] = tr[t]; out_sc[(j - a) * k + t] = -1.0 * ts[t]; }
        if (n_levels > 1 && own > 0 && top == k) ratio = 0.9 * ratio + 0.1 * (ts[k - 1] / own);
    }
    free(c.e_j); free(c.e_lo); free(c.e_hi); free(c.e_val);
    free(cand); free(u_at); free(u_suf); free(u_have); free(u_val); free(q_word); free(q_bit); free(ord);
    free(T.where); free(T.row); free(T.acc);
    free(T.done); free(fs); free(ts); free(fr); free(tr); free(B.bound); free(B.steps);
    if (failed) return -1;
    if (stats) {  /* what the pruning left to do (tests/test_graph_maxscore.py, profiling) */
        stats[0] += n_positions - n_skipped; stats[1] += n_lists; stats[2] += n_past;
        stats[3] += n_exact + n_raised; stats[4] += n_searched;
    }
    return 0;
}
"""
)

_P, _N, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_double
_SCORE_SHARE = [
    _N, _N, _N, _N, _P, _P, _P, _P,  # n_rows .. sig
    _I, _P, _P, _P, _P, _P,  # n_levels .. l_ub
    _P, _P, _P, _P, _P, _N, _N, _D, _D, _D, _N, _D,  # q_off .. essential_share
    _P, _P, _P, _I, _D, _N, _P, _P,  # b_shift .. bm_q
    _P, _P, _P,  # out_nb, out_sc, stats
]  # fmt: skip
SIGNATURES: dict[str, ckernel.Signature] = {
    "row_signatures": (None, [_N, _P, _P, _P]),
    "score_share": (ctypes.c_int, _SCORE_SHARE),
    **graph_buckets.SIGNATURES,
    **graph_blocks.SIGNATURES,
}

# The compiled kernel, or None (no compiler, a failed compile, SAG2WB_GRAPH_KERNEL=numpy).
load = ckernel.loader("graph_kernel", SOURCE, "SAG2WB_GRAPH_KERNEL", SIGNATURES)


_p = functools.partial(ckernel.pointer, who="graph kernel")


def phrase_bounds(table, level) -> np.ndarray:
    """Each phrase's largest contribution among the level's listed positions (0.0: none
    listed): what a row can get from the phrase when it is in the phrase's list. Cached on the
    level (computed once before the scoring workers fork)."""
    if level.bounds is not None:
        return level.bounds
    positions = table.impacts if level.entries is None else table.impacts[level.entries]
    lengths = np.diff(level.offsets)
    bounds = np.zeros(len(lengths), dtype=np.float64)
    some = lengths > 0
    if some.any():
        bounds[some] = np.maximum.reduceat(positions, level.offsets[:-1][some])
    level.bounds = bounds
    return bounds


def row_signatures(lib, table, n_rows: int) -> np.ndarray:
    """Each row's 512-bit signature (8 uint64): a bit per phrase whose list holds it (a hash of
    the phrase id). A bit unset: the row lacks the phrase, its contribution is not searched for.
    40 MB at 600k, against 300 MB for the table by row."""
    sig = np.zeros((n_rows, 8), dtype=np.uint64)
    lib.row_signatures(
        ctypes.c_int64(len(table.offsets) - 1),
        _p(table.offsets, np.int64),
        _p(table.rows, np.int32),
        _p(sig, np.uint64),
    )
    return sig


def score_share(
    lib,
    table,
    signatures,
    levels_,
    questions,
    skip: np.ndarray,
    k: int,
    a: int,
    b: int,
    constants,
    stats=None,
    buckets: Buckets | None = None,
    order: np.ndarray | None = None,
    blocks: graph_blocks.BlockMaxima | None = None,
):
    """Neighbours and scores (k columns, -1 and 0.0 padding) of questions a..b-1, as
    `graph_scoring._score_share` computes them. `signatures`: `row_signatures` of the table.
    `constants`: (margin, extra, start_share, keep_share, seed_positions, essential_share).
    `stats`: None, or an int64 array of 5 the counts are added to: positions read, lists read,
    candidates past the coarse bound (listed sum + the unread lists' bounds) in the final
    pass, exact scores (the own score, computed only with prefix levels, not counted), and the
    searches that refined candidates' bounds past the signature table. `buckets`:
    `list_buckets` of the table (None: every search halves the whole list; the same results).
    `order`: int64 question numbers; then the questions order[a..b-1] are scored, the j-th
    one's list in row j - a (None: questions a..b-1). `blocks`: `graph_blocks.block_maxima` of
    the table (None: no block is ruled out; the same results)."""
    margin, extra, start_share, keep_share, seed_positions, essential_share = constants
    if not 0.0 <= essential_share <= 1.0:
        raise ValueError(f"essential_share must be in [0, 1], got {essential_share}")
    neighbours = np.full((b - a, k), -1, dtype=np.int64)
    scores = np.zeros((b - a, k), dtype=np.float64)
    n = len(levels_)
    offsets = [np.ascontiguousarray(lv.offsets, dtype=np.int64) for lv in levels_]
    entries = [None if lv.entries is None else np.ascontiguousarray(lv.entries, dtype=np.int32) for lv in levels_]
    betas = [None if lv.beta is None else np.ascontiguousarray(lv.beta, dtype=np.float64) for lv in levels_]
    bounds = [np.ascontiguousarray(phrase_bounds(table, lv), dtype=np.float64) for lv in levels_]
    ptrs = ctypes.c_void_p * n
    budgets = np.array([lv.budget for lv in levels_], dtype=np.float64)
    rc = lib.score_share(
        ctypes.c_int64(len(signatures)),
        ctypes.c_int64(len(table.missing)),
        ctypes.c_int64(k),
        ctypes.c_int64(extra),
        _p(table.offsets, np.int64),
        _p(table.rows, np.int32),
        _p(table.impacts, np.float64),
        _p(signatures, np.uint64),
        ctypes.c_int32(n),
        _p(budgets, np.float64),
        ptrs(*[_p(x, np.int64) for x in offsets]),
        ptrs(*[_p(x, np.int32) for x in entries]),
        ptrs(*[_p(x, np.float64) for x in betas]),
        ptrs(*[_p(x, np.float64) for x in bounds]),
        _p(questions.offsets, np.int64),
        _p(questions.phrases, np.int32),
        _p(questions.ids, np.int64),
        _p(skip, np.uint8),
        _p(order, np.int64),
        ctypes.c_int64(a),
        ctypes.c_int64(b),
        ctypes.c_double(margin),
        ctypes.c_double(start_share),
        ctypes.c_double(keep_share),
        ctypes.c_int64(seed_positions),
        ctypes.c_double(essential_share),
        _p(None if buckets is None else buckets.shift, np.uint8),
        _p(None if buckets is None else buckets.offsets, np.int64),
        _p(None if buckets is None else buckets.first, np.int32),
        ctypes.c_int32(0 if blocks is None else blocks.shift),
        ctypes.c_double(0.0 if blocks is None else blocks.unit),
        ctypes.c_int64(0 if blocks is None else blocks.n_blocks),
        _p(None if blocks is None else blocks.slot, np.int32),
        _p(None if blocks is None else blocks.maxima, np.uint8),
        _p(neighbours, np.int64),
        _p(scores, np.float64),
        _p(stats, np.int64),
    )
    if rc != 0:
        raise MemoryError("the corpus graph's scoring could not allocate its work arrays")
    return neighbours, scores
