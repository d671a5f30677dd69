"""A touched row's bound from its unread phrases, for the corpus graph's kernel (`graph_kernel`):
the final pass and, since issue 33's seventh stop, each raise of the running top k ask whether a
row can still reach the k-th best before its exact score. Its unread phrases count only where
its signature has their bits, each at most the list's largest in the row's block, then they are
looked up one by one (largest bound first) until the bound falls below the k-th best. At 600k a
third of the raises' exact scores could not enter the top (32.5 -> 22.3 a passage, look-ups
820 -> 640); a row that passes keeps the contributions found for its exact score.

The C source is compiled with graph_kernel's (`SOURCE`, after its `search` and `exact`).
"""

SOURCE = r"""
/* what bounds a touched row's unread phrases: ord[from..m-1] are unread (ub: their largest
   contributions; block maxima too when blocks is set), base adds the row's left-out mass (beta, or
   NULL); at[], suf[], have[], val[]: work arrays of m (have all 0 between rows) */
typedef struct {
    const int32_t *ord; int64_t from; const double *ub; const double *beta; const Blocks *blocks;
    double margin, loose;
    int32_t *at; double *suf; uint8_t *have; double *val; int64_t searched;
} Unread;

/* 1 when row r (touched, its listed sum acc) cannot reach floor: its bound (acc, its left-out mass
   and its unread phrases' ubs) falls below it. The unread phrases whose bits the row's signature
   has count, each at most the list's largest in r's block; then they are looked up one by one,
   largest ub first, each ub replaced by the row's contribution, until the bound falls below the
   floor (most rows: after a few searches, where the exact score searches every phrase the row may
   have). 0: the row may reach it, its unread contributions are in U->val (U->have set) for exact */
static int cannot_reach(const Ctx *c, Unread *U, int32_t r, double acc, double floor, int64_t m) {
    const uint64_t *rs = c->sig + (int64_t)r * SIG_WORDS;
    const Blocks *B = U->blocks;
    double base = acc + (U->beta ? U->beta[r] : 0.0), margin = U->margin, loose = U->loose;
    int64_t nu = 0;
    for (int64_t j = U->from; j < m; j++)
        if (rs[c->q_word[U->ord[j]]] & c->q_bit[U->ord[j]]) U->at[nu++] = U->ord[j];
    U->suf[nu] = 0.0;
    for (int64_t v = nu - 1; v >= 0; v--) {
        int32_t p = c->q[U->at[v]];
        double u = U->ub[p];
        if (B && B->slot[p] >= 0) {  /* or the list's largest in r's block */
            double most = B->q[(int64_t)B->slot[p] * B->n_blocks + (r >> B->shift)] * B->unit;
            most *= 1 + BOUND_SLACK;
            u = (most < u) ? most : u;
        }
        U->suf[v] = U->suf[v + 1] + u;
    }
    if ((base + U->suf[0] + loose) * (1 + margin) < floor * (1 - margin)) return 1;
    for (int64_t v = 0; v < nu; v++) __builtin_prefetch(bucket_at(c, c->q[U->at[v]], r));
    int64_t lo1 = 0, hi1 = 0;
    if (nu) { bucket_of(c, c->q[U->at[0]], r, &lo1, &hi1); __builtin_prefetch(c->t_rows + lo1); }
    double known = 0.0;
    for (int64_t v = 0; v < nu; v++) {
        int64_t lo = lo1, hi = hi1;
        if (v + 1 < nu) { bucket_of(c, c->q[U->at[v + 1]], r, &lo1, &hi1); __builtin_prefetch(c->t_rows + lo1); }
        double x = search(c, lo, hi, r);
        U->searched++;
        if ((base + (known += x) + U->suf[v + 1] + loose) * (1 + margin) < floor * (1 - margin)) {
            while (v > 0) U->have[U->at[--v]] = 0;
            return 1;
        }
        U->have[U->at[v]] = 1;
        U->val[U->at[v]] = x;
    }
    return 0;
}

/* row r's exact score with its unread contributions as cannot_reach found them (U->have cleared) */
static double exact_after(const Ctx *c, Unread *U, int32_t r, int64_t m) {
    double s = exact(c, r, m, U->have, U->val);
    for (int64_t j = U->from; j < m; j++) U->have[U->ord[j]] = 0;
    return s;
}

/* the unread phrases from ord[from] on: their ubs' sum (smallest first), and the bounds' slack
   for the signature table's and the suffixes' sums in other orders, far below the margin */
static double unread_from(Unread *U, const int32_t *q, int64_t from, int64_t m) {
    double sum = 0.0;
    for (int64_t j = m - 1; j >= from; j--) sum += U->ub[q[U->ord[j]]];
    U->from = from;
    U->loose = sum * U->margin * 4;
    return sum;
}
"""
