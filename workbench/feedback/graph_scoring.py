"""The corpus graph's neighbour lists for every passage at once (paper B.3), equal to one
`Index.search(passage_expression(unit), k + 1)` per passage with the passage left out, bit
for bit, at a fraction of the cost.

Each passage's question is the OR of its first distinct tokens (`passage_tokens`). A phrase's
BM25 contribution to a row does not depend on the question it is in: `phrase_table` computes
it once per distinct phrase from the index's postings, with the operations and the order of
`Postings.bm25` (f added in position order by bincount, then idf * (f * (k1 + 1)) / (f + norm)),
so each contribution is the float the search path adds. A row's score for a question is the
sum of its phrases' contributions in question order; `Index.search` adds them in that order
too, starting from 0.0.

Most rows cannot be among a passage's best k, and the work is to skip them (max-score
pruning, as search engines do for top-k):
1. the question's `SEEDS` phrases of highest bound (the largest contribution the phrase makes
   to any row: its rarest, best-scoring phrases) give candidates whose partial scores are
   lower bounds: the k-th best, theta, bounds the k-th best score from below;
2. the phrases of least bound whose bounds add up to less than theta are non-essential: a row
   that has none of the other (essential) phrases cannot reach theta; the essential phrases'
   rows are the candidates, their partial sums plus the non-essential bounds an upper bound;
3. candidates that cannot reach theta are dropped; the rest get the non-essential phrases'
   contributions; those within a hair of the k-th best are scored exactly, in question order
   (`exact_scores`), and ordered as `Index.search` orders (`bm25_order`: best first, ties by
   lower id).
Every comparison keeps a relative margin (`MARGIN`, far above the 80-term rounding error of
~1e-14), so a pruned row is one that could not be in the list whatever the order of addition;
the lists equal the per-passage search's (tests/test_graph_scale.py, on every bundled corpus
and 2Wiki).

The per-passage loop (`top_neighbours`) runs as compiled C (`graph_kernel`, the same pruning
with a running top-k and one level, `KERNEL_FRACTIONS`) when a C compiler is there, else in
numpy; both give the definition's lists (tests/test_graph_scale.py runs both).

With `workers` > 1 (default: up to 2 cores, for corpora of `PARALLEL_FROM` passages or more)
the passages are tokenized and scored in forked processes, each a share of the passages;
each passage's list is computed alone, so the result is the same for any number of workers.

>>> ids, neighbours, scores = score_all(index, sorted(index.documents), k=3, query_tokens=80, weights=(2.0, 2.0, 1.0))
>>> [index.unit(u).document for u in neighbours[ids.tolist().index(7)]]
['auth/login.md', 'auth/sso.md', 'zh/login.md']
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench import text as textlib
from workbench.feedback import graph_blocks, graph_kernel, graph_order, graph_questions, graph_table
from workbench.index.postings import K1, Postings, column_weights
from workbench.index.store import Index, bm25_order, query_expression
from workbench.machine import cores

MARGIN = 1e-9  # relative; float sums of <= 80 positive terms differ by ~1e-14 at most
BULK_TABLE = True  # the phrase table from one merged read of the postings (graph_table); False: a look-up per phrase
PARALLEL_FROM = 20_000  # passages: below this one process does it all (forking costs more)
RELEASE_EVERY = 64 << 20  # bytes of parts joined between two releases of freed memory (_joined)
_ROW_BITS = 32
_ROW_MASK = (1 << _ROW_BITS) - 1


def passage_tokens(unit, query_tokens: int) -> list[str]:
    """A passage's text as a question's tokens: its first distinct tokens, title first."""
    text = graph_questions.passage_text(unit.title, unit.heading, unit.body)
    return list(dict.fromkeys(textlib.tokenize(text)))[:query_tokens]


@dataclass
class Questions:
    """Every passage's question as phrase ids: `phrases[offsets[i]:offsets[i + 1]]` is
    passage `ids[i]`'s, in question order; `vocabulary[p]` is phrase p's text."""

    ids: np.ndarray
    offsets: np.ndarray
    phrases: np.ndarray
    vocabulary: list[str]

    def of(self, i: int) -> np.ndarray:
        return self.phrases[self.offsets[i] : self.offsets[i + 1]]


@dataclass
class PhraseTable:
    """Each phrase's rows and its contribution to each: phrase p's are `rows[offsets[p]:
    offsets[p + 1]]` (ascending) and `impacts[...]`. `missing[p]`: a phrase FTS5 splits into
    no token (its questions are left to `Index.search`)."""

    offsets: np.ndarray
    rows: np.ndarray
    impacts: np.ndarray
    missing: np.ndarray


def phrase_contributions(postings: Postings, phrase: str, column_weight: np.ndarray):
    """(rows, contribution to each) of one phrase, as `Postings.bm25` computes them, or None
    for a phrase without tokens. Reads `Postings.phrase` (rows, instance -> row, instance
    column), `row_norm` and `n_rows`; the phrase is not kept in the postings' cache (a corpus's
    every phrase would not fit)."""
    found = postings.phrase(phrase)
    cache = getattr(postings, "_phrases", None)
    if isinstance(cache, dict):
        cache.pop(phrase, None)
    if found is None:
        return None
    rows, where, cols = found
    if not len(rows):
        return rows, np.zeros(0, dtype=np.float64)
    # the same expressions as Postings.bm25, so the same floats
    f = np.bincount(where, weights=column_weight[cols], minlength=len(rows))
    n_hit = len(rows)
    idf = math.log((postings.n_rows - n_hit + 0.5) / (n_hit + 0.5))
    if idf <= 0.0:
        idf = 1e-6
    return rows, idf * ((f * (K1 + 1.0)) / (f + postings.row_norm[rows]))


def phrase_table(postings: Postings, vocabulary: Sequence[str], weights) -> PhraseTable:
    """The contributions of every phrase in `vocabulary` (see PhraseTable), one look-up each:
    the definition `graph_table.stored_order_table` is tested against."""
    column_weight = np.array(column_weights(weights))
    n = len(vocabulary)
    lengths = np.zeros(n, dtype=np.int64)
    missing = np.zeros(n, dtype=bool)
    rows_of: list[np.ndarray] = []
    impacts_of: list[np.ndarray] = []
    for p, phrase in enumerate(vocabulary):
        graph_table.keep_parts(
            phrase_contributions(postings, phrase, column_weight), p, lengths, missing, rows_of, impacts_of
        )
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    rows, impacts = _joined(rows_of, np.int32), _joined(impacts_of, np.float64)
    return PhraseTable(offsets, rows, impacts, missing)


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    """np.concatenate(parts), emptying `parts`: each part is let go once copied, and the
    result's pages are touched only as they are filled, so the parts and the result together
    hold about one table's memory (np.concatenate: two)."""
    out = np.empty(sum(len(x) for x in parts), dtype=dtype)
    at = copied = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at : at + len(part)] = part
        at += len(part)
        copied += part.nbytes
        del part
        if copied >= RELEASE_EVERY:  # freed parts back to the system as the result grows
            release_memory()
            copied = 0
    release_memory()
    return out


def release_memory() -> None:
    """Free heap pages back to the system (glibc's malloc_trim; elsewhere nothing): numpy
    arrays of a few MB come from the heap, and a process that freed many of them keeps their
    pages resident, which a worker forked later would inherit."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


@dataclass
class RowLists:
    """The table by row: row r's table positions are `entries[offsets[r]:offsets[r + 1]]`,
    its most common phrase first (df descending, then phrase id)."""

    offsets: np.ndarray
    entries: np.ndarray
    phrases: np.ndarray  # the phrase of each entry


def row_lists(table: PhraseTable, n_rows: int) -> RowLists:
    lengths = np.diff(table.offsets)
    counts = np.bincount(table.rows, minlength=n_rows)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    entries = np.empty(int(offsets[-1]), dtype=np.int32)
    phrases = np.empty(int(offsets[-1]), dtype=np.int32)
    cursor = offsets[:-1].copy()
    for p in np.lexsort((np.arange(len(lengths)), -lengths)).tolist():  # most common first
        a, b = int(table.offsets[p]), int(table.offsets[p + 1])
        if b > a:
            rows = table.rows[a:b]
            at = cursor[rows]
            entries[at] = np.arange(a, b, dtype=np.int32)
            phrases[at] = p
            cursor[rows] += 1
    return RowLists(offsets, entries, phrases)


@dataclass
class Level:
    """Prefix lists (all-pairs similarity search's prefix filtering): each row leaves out of
    the lists its most common phrases whose contributions add up to at most `budget` (`beta`:
    what a row left out, a bound), so a row found in no list of a question's phrases scores at
    most its beta <= budget for that question. Phrase p's listed table positions:
    `entries[offsets[p]:offsets[p + 1]]`. Budget 0: every position (the table itself)."""

    budget: float
    offsets: np.ndarray
    entries: np.ndarray | None
    beta: np.ndarray | None
    bounds: np.ndarray | None = None  # per phrase, the largest listed contribution (graph_kernel.phrase_bounds)


SLACK = 1e-6  # absolute, on a row's left-out mass: chunked cumulative sums round by ~1e-9


def row_masses(table: PhraseTable, by_row: RowLists) -> np.ndarray:
    """Each row's sum of contributions over every phrase it has (its score for a question of
    all of them, the most any question can give it)."""
    return np.bincount(table.rows, weights=table.impacts, minlength=len(by_row.offsets) - 1)


def levels(table: PhraseTable, by_row: RowLists, budgets: Sequence[float]) -> list[Level]:
    """Level 0 (the whole table) and one level per budget (ascending)."""
    n_rows = len(by_row.offsets) - 1
    listed: list[list[np.ndarray]] = [[] for _ in budgets]
    betas = [np.zeros(n_rows) for _ in budgets]
    for a in range(0, n_rows, 20_000):
        b = min(n_rows, a + 20_000)
        lo = int(by_row.offsets[a])
        entries = by_row.entries[lo : int(by_row.offsets[b])]
        lengths = np.diff(by_row.offsets[a : b + 1])
        starts = by_row.offsets[a:b] - lo
        impacts = table.impacts[entries]
        total = np.cumsum(impacts)
        has = lengths > 0
        base = np.zeros(b - a)
        base[has] = total[starts[has]] - impacts[starts[has]]
        within = total - np.repeat(base, lengths)  # each row's running sum, most common phrase first
        row_of = np.repeat(np.arange(b - a), lengths)
        for j, budget in enumerate(budgets):
            left_out = within <= budget - SLACK  # a run at the start of each row (the sums only grow)
            listed[j].append(entries[~left_out])
            count = np.bincount(row_of[left_out], minlength=b - a)
            some = count > 0
            betas[j][a:b][some] = within[starts[some] + count[some] - 1] + SLACK
    out = [Level(0.0, table.offsets, None, None)]
    for j, budget in enumerate(budgets):
        entries = np.concatenate(listed[j]) if listed[j] else np.zeros(0, dtype=np.int32)
        listed[j] = []
        entries.sort()  # in place: no third copy of the level
        offsets = np.searchsorted(entries, table.offsets).astype(np.int64)
        out.append(Level(float(budget), offsets, entries, betas[j]))
    return out


@dataclass
class Scratch:
    """Per-process work arrays: `acc` (float, one per row, kept zero), `stamp` (one per row),
    `position` (one per phrase, kept -1: a phrase's place in the current question); `ratio`:
    the k-th best score over the passage's own, as seen lately (where to start; not results)."""

    acc: np.ndarray
    stamp: np.ndarray
    position: np.ndarray
    ratio: float = 0.5
    seen: list = field(default_factory=list)

    @classmethod
    def of(cls, n_rows: int, n_phrases: int) -> Scratch:
        return cls(np.zeros(n_rows), np.zeros(n_rows, dtype=np.int64), np.full(n_phrases, -1, dtype=np.int64))

    def learn(self, ratio: float) -> None:
        self.seen.append(ratio)
        if len(self.seen) >= 64:
            self.ratio = float(np.median(self.seen))
            del self.seen[:32]


def _segments(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The positions start..end-1 of every segment, concatenated."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


def exact_scores(table: PhraseTable, by_row: RowLists, question: np.ndarray, rows: np.ndarray, position) -> np.ndarray:
    """Rows' BM25 for a question as `Index.search` returns it: the phrases' contributions
    added in question order from 0.0 (cumsum adds sequentially; a phrase the row lacks adds
    0.0, which changes no sum), negated. `position[p]`: phrase p's place in the question."""
    if not len(rows):
        return np.zeros(0)
    starts, ends = by_row.offsets[rows], by_row.offsets[rows + 1]
    listed = _segments(starts, ends)
    column = np.repeat(np.arange(len(rows)), ends - starts)
    at = position[by_row.phrases[listed]]
    hit = at >= 0
    matrix = np.zeros((len(question), len(rows)))
    matrix[at[hit], column[hit]] = table.impacts[by_row.entries[listed[hit]]]
    return -1.0 * np.cumsum(matrix, axis=0)[-1]


def _kth(values: np.ndarray, k: int) -> float:
    return float(np.partition(values, len(values) - k)[len(values) - k])


# level budgets, as fractions of a typical row's mass: a question whose k-th best neighbour
# scores theta is answered from the lists of the largest budget below theta
BUDGET_FRACTIONS = (0.05, 0.12, 0.2, 0.3, 0.4)
# the compiled kernel uses no prefix level (it prunes on the question side, below): with one level
# (0.3) 51% of the questions at 60k found their 8th best below its budget and read every list anyway
KERNEL_FRACTIONS: tuple[float, ...] = ()
START_SHARE = 0.8  # first level: the largest budget below this share of the expected k-th best score
# a level answers if its budget is at most this share of theta (else a lower one: fewer rows to score)
KEEP_SHARE = 0.9
EXTRA = 8  # candidates scored exactly for the first lower bound, beyond k
# the compiled kernel's max-score (question side): a question's rarest phrases' lists are read up to
# SEED_POSITIONS positions for a first bound theta0; the phrases of least bound summing below
# ESSENTIAL_SHARE x (theta0 - budget) are not read (0.9: theta rises as lists are read and the final pass
# bounds candidates by signature, so a loose bound costs little; docs/performance.md, issue 33's third stop)
SEED_POSITIONS = 2000
ESSENTIAL_SHARE = 0.9


def top_neighbours(table, by_row, levels_, question, me: int, k: int, scratch: Scratch):
    """(rows, scores) of the best `k` rows other than `me` for a question of phrase ids, in
    `Index.search`'s order.

    At a level of budget B, a row in no list of the question's phrases scores at most B, so
    once k rows are known to score theta > B, the lists hold every row that can be among the
    k best. Which level is tried first only changes the cost: the start is the largest budget
    below a share of the score theta is expected to have (the passage's score for its own
    question times the ratio seen on earlier questions)."""
    if not len(question):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    scratch.position[question] = np.arange(len(question))
    try:
        own = -float(exact_scores(table, by_row, question, np.array([me]), scratch.position)[0])
        level = _level_below(levels_, START_SHARE * scratch.ratio * own)
        while True:
            candidates, partial = _listed(table, level, question, scratch)
            mine = candidates != me
            candidates, partial = candidates[mine], partial[mine]
            # a lower bound on the k-th best score: the exact scores of the candidates whose
            # listed contributions are largest
            m = min(len(candidates), k + EXTRA)
            first = np.argpartition(-partial, m - 1)[:m] if len(candidates) > m else np.arange(len(candidates))
            theta = 0.0
            if len(first) >= k:
                theta = _kth(-exact_scores(table, by_row, question, candidates[first], scratch.position), k)
            clears = theta * (1 - MARGIN) > level.budget * (1 + MARGIN)
            lower = _level_below(levels_, START_SHARE * theta, level.budget)
            if level.budget == 0.0 or (clears and (lower.budget == 0.0 or level.budget <= KEEP_SHARE * theta)):
                bound = partial if level.beta is None else partial + level.beta[candidates]
                keep = candidates[bound * (1 + MARGIN) >= theta * (1 - MARGIN)]
                scores = exact_scores(table, by_row, question, keep, scratch.position)
                best = bm25_order(keep, scores, k)
                if own > 0 and len(best) == k:
                    scratch.learn(-float(scores[best[-1]]) / own)
                return keep[best].astype(np.int64), scores[best]
            level = lower
    finally:
        scratch.position[question] = -1


def _level_below(levels_: list[Level], score: float, under: float = math.inf) -> Level:
    """The level of largest budget below both `score` and `under` (level 0 if none)."""
    fitting = [lv for lv in levels_ if lv.budget < under and lv.budget * (1 + MARGIN) < score * (1 - MARGIN)]
    return fitting[-1] if fitting else levels_[0]


def _listed(table: PhraseTable, level: Level, question: np.ndarray, scratch: Scratch):
    """Rows in the level's lists of the question's phrases, and each one's sum of listed
    contributions (in no particular order of addition: a bound, never a result)."""
    positions = _segments(level.offsets[question], level.offsets[question + 1])
    if level.entries is not None:
        positions = level.entries[positions]
    rows = table.rows[positions]
    # each row's slot in `stamp` takes the place of its last occurrence: that place names the
    # row's group, and bincount over the groups adds without a sort or a corpus-sized array
    at = np.arange(len(rows), dtype=np.int64)
    stamp = scratch.stamp
    stamp[rows] = at
    group = stamp[rows]
    sums = np.bincount(group, weights=table.impacts[positions], minlength=len(rows))
    last = group == at
    return rows[last].astype(np.int64), sums[last]


# ---- the whole corpus, in one process or several ---------------------------------------------
_SHARED: dict = {}  # what forked workers inherit: set before the fork, read in the child


def _score_share(share: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours and scores (k columns, -1 and 0.0 padding) of questions order[a..b-1]."""
    table, by_row, levels_, questions, k = (_SHARED[k] for k in ("table", "by_row", "levels", "questions", "k"))
    n_rows, skip, order = _SHARED["n_rows"], _SHARED["skip"], _SHARED["order"]
    a, b = share
    kernel = graph_kernel.load()
    if kernel is not None:
        constants = (MARGIN, EXTRA, START_SHARE, KEEP_SHARE, SEED_POSITIONS, ESSENTIAL_SHARE)
        signatures, buckets, blocks = _SHARED["signatures"], _SHARED["buckets"], _SHARED.get("blocks")
        if blocks is None:  # made by each scoring process (0.1 s at 600k): 19 MiB less in the parent
            bounds = graph_kernel.phrase_bounds(table, levels_[0])  # (made before the fork)
            blocks = _SHARED["blocks"] = graph_blocks.block_maxima(kernel, table, n_rows, bounds)
        return graph_kernel.score_share(
            kernel, table, signatures, levels_, questions, skip, k, a, b, constants, None, buckets, order, blocks
        )
    neighbours = np.full((b - a, k), -1, dtype=np.int64)
    scores = np.zeros((b - a, k), dtype=np.float64)
    scratch = Scratch.of(n_rows, len(table.missing))
    ids = questions.ids
    for j, i in enumerate(order[a:b].tolist()):
        if skip[i]:
            continue  # left to Index.search by the caller
        rows, s = top_neighbours(table, by_row, levels_, questions.of(i), int(ids[i]), k, scratch)
        neighbours[j, : len(rows)], scores[j, : len(rows)] = rows, s
    return neighbours, scores


def _shares(n: int, parts: int) -> list[tuple[int, int]]:
    step = max(1, -(-n // max(parts, 1)))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def _run(func: Callable, shares: list[tuple[int, int]], workers: int) -> list:
    # a daemonic process (a pool's worker, e.g. of `eval --processes`) may not start processes
    if workers <= 1 or len(shares) <= 1 or multiprocessing.current_process().daemon:
        return [func(s) for s in shares]
    textlib.tokenize("warm up")  # the tokenizer's dictionary loaded once, before the fork
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(func, shares, chunksize=1)


def _table_share(share: tuple[int, int]) -> PhraseTable:
    index, vocabulary, weights, reopen = (_SHARED[k] for k in ("index", "vocabulary", "weights", "reopen"))
    if reopen:
        index.reopen_after_fork()
    a, b = share
    return phrase_table(index.postings, vocabulary[a:b], weights)


def _phrase_table_by(index: Index, vocabulary: list[str], weights, workers: int) -> PhraseTable:
    """`phrase_table` of the vocabulary, a share of the phrases per process, joined in order."""
    if index.postings is None:  # read here, before the fork: every worker inherits the row sizes
        raise RuntimeError("the phrase table needs the index's stored postings (max_postings=0 has none)")
    _SHARED.update(index=index, vocabulary=vocabulary, weights=weights, reopen=workers > 1)
    try:
        parts = _run(_table_share, _shares(len(vocabulary), 1 if workers <= 1 else workers * 2), workers)
    finally:
        _SHARED.clear()
    if len(parts) == 1:
        return parts[0]
    lengths = np.concatenate([np.diff(t.offsets) for t in parts]) if parts else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    missing = np.concatenate([t.missing for t in parts]) if parts else np.zeros(0, dtype=bool)
    rows = np.empty(int(offsets[-1]), dtype=np.int32)
    impacts = np.empty(int(offsets[-1]), dtype=np.float64)
    at = 0
    while parts:  # each part copied into place and let go: one table and one part at the peak
        part = parts.pop(0)
        rows[at : at + len(part.rows)], impacts[at : at + len(part.rows)] = part.rows, part.impacts
        at += len(part.rows)
        del part
    return PhraseTable(offsets, rows, impacts, missing)


questions_of = graph_questions.questions_of  # this module's face (tests)


def skipped_questions(offsets: np.ndarray, phrases: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """1 for each question with a phrase the table lacks (`missing`), else 0 (uint8). Found from
    the few positions of such phrases (np.repeat of each question's index was an 8-byte array
    per position: 200 MB at 600k, the parent's peak while the table is held)."""
    skip = np.zeros(len(offsets) - 1, dtype=np.uint8)
    at = np.flatnonzero(missing[phrases])
    skip[np.searchsorted(offsets, at, side="right") - 1] = 1  # the question whose run holds each
    return skip


def default_workers(n: int) -> int:
    return 1 if n < PARALLEL_FROM else max(1, min(2, cores()))


def score_all(
    index: Index,
    ids: Sequence[int],
    *,
    k: int,
    query_tokens: int,
    weights,
    workers: int | None = None,
    stages: dict | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, neighbours, scores): each passage's `k` BM25 neighbours by its own text, as
    `build_graph_by_queries` finds them (neighbours -1 and scores 0.0 where there are fewer).
    Questions with a phrase FTS5 splits into no token go through `Index.search`. `stages`: a
    dict that receives each stage's wall seconds (questions, table, lists, scoring)."""
    stages = {} if stages is None else stages
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        stages[name] = round(now - clock, 3)
        clock = now

    ids_array = np.array(sorted(ids), dtype=np.int64)
    workers = default_workers(len(ids_array)) if workers is None else max(1, int(workers))
    questions = graph_questions.questions_of(index, ids_array, query_tokens, workers)
    lap("questions")
    postings = index.postings
    if postings is None:
        raise RuntimeError("score_all needs the index's stored postings (max_postings=0 has none)")
    # by `workers` processes, each a run of the terms written to a file (forked table workers that
    # sent their parts back held copies of their blobs and part, ~0.8 GB at 300k)
    if BULK_TABLE:  # phrases renumbered into the postings' order, read in one merged pass
        table = graph_table.stored_order_table(postings, questions, weights, workers)
    else:
        table = _phrase_table_by(index, questions.vocabulary, weights, 1)
    # questions the table cannot score go to Index.search: their phrases' texts kept, the vocabulary let go
    skip = skipped_questions(questions.offsets, questions.phrases, table.missing)
    skipped = np.flatnonzero(skip).tolist()
    texts = {p: questions.vocabulary[p] for i in skipped for p in questions.of(i).tolist()}
    questions.vocabulary = []
    lap("table")
    n_rows = max(len(postings.row_norm), int(ids_array.max()) + 1 if len(ids_array) else 0)
    kernel = graph_kernel.load() is not None  # loaded before the fork
    fractions = KERNEL_FRACTIONS if kernel else BUDGET_FRACTIONS
    by_row = None
    levels_ = [Level(0.0, table.offsets, None, None)]
    if fractions or not kernel:  # prefix levels and the numpy path's exact scores read the table by row
        by_row = row_lists(table, n_rows)
        masses = row_masses(table, by_row)
        typical = float(np.median(masses[masses > 0])) if (masses > 0).any() else 0.0
        levels_ = levels(table, by_row, [f * typical for f in fractions])
        if kernel:
            by_row = None  # the kernel finds contributions in the phrases' lists
    signatures = buckets = None
    if kernel:
        for level in levels_:  # before the fork: every worker inherits them
            graph_kernel.phrase_bounds(table, level)
        signatures = graph_kernel.row_signatures(graph_kernel.load(), table, n_rows)
        buckets = graph_kernel.list_buckets(graph_kernel.load(), table, n_rows)
    release_memory()
    lap("lists")
    _SHARED.update(table=table, by_row=by_row, levels=levels_, questions=questions, k=k, n_rows=n_rows, skip=skip)
    order = graph_order.locality_order(table.offsets, questions.offsets, questions.phrases)
    _SHARED.update(signatures=signatures, buckets=buckets, order=order)
    try:
        parts = _run(_score_share, _shares(len(ids_array), workers * 4), workers)
    finally:
        _SHARED.clear()
    lap("scoring")
    del table, levels_, by_row, signatures, buckets  # ~0.5 GB at 600k, let go before the lists are joined
    neighbours, scores = np.full((len(ids_array), k), -1, dtype=np.int64), np.zeros((len(ids_array), k))
    if parts:  # each list back in its passage's row
        neighbours[order], scores[order] = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    for i in skipped:  # the few questions the table cannot score
        expression = query_expression([texts[p] for p in questions.of(i).tolist()])
        hits = [(u, s) for u, s in index.search(expression, k + 1, weights) if u != ids_array[i]][:k]
        for j, (u, s) in enumerate(hits):
            neighbours[i, j], scores[i, j] = u, s
    return ids_array, neighbours, scores
