"""Expansion terms (SPEC §3 "Term selection"): seed analysis, term-weighting variants, top L.

A term-weighting variant is one function with this signature::

    def my_rule(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]

It receives one seed (its body's sentences with their expansion units, its score, the
seed scores of the round, the question tokens) and corpus statistics, and returns, for the
candidate terms it wants to propose, a priority and the components that explain it.
Register it with `register_term_weighting("name", my_rule)` (or load it from
`FILE.py:NAME`) and select it with `Params(term_weighting="name")`.

>>> sorted(TERM_WEIGHTINGS)[:3]
['bm25_feedback', 'no_idf', 'no_query_connection']
"""

from __future__ import annotations

import functools
import heapq
import importlib.util
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple, Protocol

from workbench import text as textlib
from workbench.collation import sort_key
from workbench.index.store import Index


class TermWeightingError(ValueError):
    """Unknown, unloadable or misbehaving term-weighting variant."""


@dataclass(frozen=True)
class Sentence:
    """One sentence u of a seed: 𝔅(u) (names as phrase units, other tokens) and T(u)."""

    text: str
    units: tuple[str, ...]  # 𝔅(u): ordinary tokens, then name terms, duplicates kept
    names: tuple[tuple[str, str], ...]  # (name term, surface text) in order of occurrence
    tokens: tuple[str, ...]  # distinct tokens of tokenize(u) (names included), first-occurrence order


@functools.lru_cache(maxsize=1 << 14)
def analyze_body(body: str) -> tuple[Sentence, ...]:
    """Split a seed body into sentences and their expansion units (cached by text)."""
    out = []
    for sent in textlib.sentences(body):
        names = []
        ordinary: list[str] = []
        last = 0
        for start, end, surface in textlib.find_names(sent):
            # each gap is tokenized on its own: a name's words are not counted again
            ordinary.extend(textlib.tokenize(sent[last:start]))
            last = end
            term = textlib.phrase(surface)
            if term:
                names.append((term, surface))
        whole = textlib.tokenize(sent)
        ordinary.extend(textlib.tokenize(sent[last:]) if last else whole)  # no name: the gap is the sentence
        out.append(
            Sentence(
                text=sent,
                units=tuple(ordinary) + tuple(t for t, _ in names),
                names=tuple(names),
                tokens=tuple(dict.fromkeys(whole)),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class BodyTerms:
    """Question-independent counts of one seed body, cached by text (seeds recur across
    rounds, re-runs and questions)."""

    tf: dict  # term -> count over all 𝔅(u)
    kinds: dict  # term -> ("token" | "name", surface of its first occurrence)
    sentences_of: dict  # term -> indices of the sentences whose 𝔅(u) contains it
    sentence_tokens: tuple = ()  # per sentence: its distinct tokens T(u), first-occurrence order
    phrases: tuple = ()  # the terms made of several tokens, with their tokens

    def eligible(self, question_tokens) -> frozenset:
        """Terms not made only of question tokens (SPEC §3), by set operations: a seed
        proposes hundreds of terms and shares few tokens with the question."""
        q = question_tokens
        excluded = self.tf.keys() & q
        excluded.update(t for t, parts in self.phrases if all(x in q for x in parts))
        return frozenset(self.tf.keys() - excluded if excluded else self.tf)


def summarize_sentences(sentences) -> BodyTerms:
    tf: Counter = Counter()
    kinds: dict = {}  # the first occurrence decides: tokens before names within a sentence
    sentences_of: dict = {}
    where = sentences_of.get
    for i, u in enumerate(sentences):
        units = u.units
        tf.update(units)
        for t in dict.fromkeys(units[: len(units) - len(u.names)]):
            if t not in kinds:
                kinds[t] = ("token", t)
        for t, surface in u.names:
            if t not in kinds:
                kinds[t] = ("name", surface)
        for t in dict.fromkeys(units):
            sentences_of[t] = (*where(t, ()), i)
    return BodyTerms(
        dict(tf),
        kinds,
        sentences_of,
        tuple(u.tokens for u in sentences),
        tuple((t, tuple(t.split(" "))) for t in tf if " " in t),
    )


@functools.lru_cache(maxsize=1 << 14)
def body_terms(body: str) -> BodyTerms:
    return summarize_sentences(analyze_body(body))


def seed_terms(seed: SeedView) -> BodyTerms:
    """The seed's term counts: from the body-text cache when the body is given."""
    return body_terms(seed.body) if seed.body else summarize_sentences(seed.sentences)


class CorpusStats(Protocol):
    N: int

    def df(self, term: str) -> int: ...

    def idf(self, term: str) -> float: ...


@dataclass(frozen=True)
class SeedView:
    """What a term-weighting variant may look at for one seed."""

    unit_id: int
    rank: int  # 1-based position among this round's seeds
    title: str
    score: float  # the seed's latest judge score
    max_score: float  # m = max latest score over this round's seeds
    sentences: tuple[Sentence, ...]
    question_tokens: frozenset[str]
    candidate_terms: frozenset[str] = frozenset()  # eligible terms: not made only of question tokens
    body: str = ""  # the seed's body text; when given, per-body counts come from a cache


class TermWeight(NamedTuple):
    """A term's priority in one seed and the components that explain it (a NamedTuple:
    variants create one per term per seed, so it must be cheap)."""

    priority: float
    tf: int = 0
    df: int = 0
    idf: float = 0.0
    query_connection: float = 0.0
    seed_score: float = 0.0
    seed_weight: float = 0.0
    extra: tuple = ()  # variant-specific components as (name, value) pairs, for display


TermWeighting = Callable[[SeedView, CorpusStats], dict]


# ---- shared pieces of the paper's rule ------------------------------------------------------
def term_frequencies(seed: SeedView) -> Counter:
    """tf(t, d): count of t over all 𝔅(u) of the seed."""
    return Counter(seed_terms(seed).tf)


def sentence_connections(seed: SeedView, stats: CorpusStats) -> list[float]:
    """c(u) for each sentence: idf summed over its distinct question tokens, left to right
    in order of first occurrence (the float order decides ties between terms)."""
    q, idf = seed.question_tokens, stats.idf
    out = []
    for tokens in seed_terms(seed).sentence_tokens:
        c = 0.0
        for x in tokens:
            if x in q:
                c += idf(x)
        out.append(c)
    return out


def query_connections(seed: SeedView, stats: CorpusStats) -> dict[str, float]:
    """c(t, d) = max over sentences u whose 𝔅(u) contains t of c(u) (SPEC §3)."""
    cu = sentence_connections(seed, stats)
    return {t: cu[w[0]] if len(w) == 1 else max([cu[i] for i in w]) for t, w in seed_terms(seed).sentences_of.items()}


def paper_seed_weight(seed: SeedView) -> float:
    """w(d) = 0.5 + 0.5 * score(d) / m (0.5 when m = 0)."""
    return 0.5 if seed.max_score == 0 else 0.5 + 0.5 * seed.score / seed.max_score


def _rule(seed: SeedView, stats: CorpusStats, *, use_idf=True, use_connection=True, weight=None, use_tf=True):
    summary = seed_terms(seed)
    tf, sentences_of = summary.tf, summary.sentences_of
    cu = sentence_connections(seed, stats)
    w = paper_seed_weight(seed) if weight is None else weight
    candidates, idf_of, df_of, log, score = seed.candidate_terms, stats.idf, stats.df, math.log, seed.score
    make = functools.partial(tuple.__new__, TermWeight)  # skips NamedTuple's Python-level __new__
    out = {}
    for t in candidates if candidates.issubset(tf) else candidates.intersection(tf):
        n = tf[t]
        idf = idf_of(t)
        where = sentences_of[t]  # c(t, d): the best c(u) over the sentences holding t
        c = cu[where[0]] if len(where) == 1 else max([cu[i] for i in where])
        # ((1 + ln tf) * idf) * (1 + c) * w, multiplied in this order (ties depend on it)
        priority = (1 + log(n)) if use_tf else 1.0
        if use_idf:
            priority = priority * idf
        if use_connection:
            priority = priority * (1 + c)
        out[t] = make((priority * w, n, df_of(t), idf, c, score, w, ()))
    return out


def sag2_rule(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]:
    """The paper's rule: (1 + ln tf) * idf * (1 + c) * w."""
    return _rule(seed, stats)


def no_query_connection(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]:
    """Ablation: (1 + ln tf) * idf * w — sentence overlap with the question ignored."""
    return _rule(seed, stats, use_connection=False)


def uniform_seed_weight(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]:
    """Ablation: every seed weighs 1, whatever its judge score."""
    return _rule(seed, stats, weight=1.0)


def no_idf(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]:
    """Ablation: (1 + ln tf) * (1 + c) * w — corpus rarity ignored."""
    return _rule(seed, stats, use_idf=False)


def tf_only(seed: SeedView, stats: CorpusStats) -> dict[str, TermWeight]:
    """Ablation: 1 + ln tf alone (no rarity, no question overlap, no seed score)."""
    return _rule(seed, stats, use_idf=False, use_connection=False, weight=1.0)


RM3_MAX_DF_SHARE = 0.10  # paper B.3: RM3 drops terms found in more than 10% of indexed units
RM3_TOKEN_LENGTH = (2, 20)  # paper B.3: RM3 keeps tokens of 2-20 alphanumeric characters
BM25_REFERENCE_LENGTH = 100.0  # |d| normaliser: a seed of 100 expansion units counts as average


def bm25_feedback(
    seed: SeedView, stats: CorpusStats, k1: float = 1.2, b: float = 0.75, avg_len: float = BM25_REFERENCE_LENGTH
) -> dict[str, TermWeight]:
    """RM3-like relevance feedback (paper Appendix B.3, in spirit): BM25 weight of the term
    in the seed, times the seed's judge score as its relevance.

        bm25(t, d)     = idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avg_len))
        priority(t, d) = bm25(t, d) * score(d)

    with tf(t, d) and idf(t) as in the paper's rule, |d| = the seed's number of expansion
    units (sum of tf), k1 = 1.2, b = 0.75 and a fixed reference length avg_len = 100 (the
    per-seed signature has no corpus average length). As in the paper's RM3 configuration,
    terms in more than 10% of the indexed units (df > 0.1 N) and single tokens outside 2-20
    alphanumeric characters are not proposed; name phrases are kept. Where RM3 sums
    P(t|d)·P(q|d) over feedback passages, this variant takes the seed's judge score for P(q|d)
    and, like every variant, the maximum over seeds (choose_terms); there is no query-overlap
    factor, and the original query stays in every expansion expression (SPEC §3), which plays
    the part of RM3's interpolation with the original query.
    """
    tf = term_frequencies(seed)
    length = sum(tf.values())
    norm = k1 * (1 - b + b * length / avg_len)
    max_df = RM3_MAX_DF_SHARE * stats.N
    lo, hi = RM3_TOKEN_LENGTH
    out = {}
    for t, n in tf.items():
        if t not in seed.candidate_terms:
            continue
        if " " not in t and not (lo <= len(t) <= hi and t.isalnum()):
            continue
        df = stats.df(t)
        if df > max_df:
            continue
        idf = stats.idf(t)
        weight = n * (k1 + 1) / (n + norm) * idf
        out[t] = TermWeight(
            weight * seed.score,
            tf=n,
            df=df,
            idf=idf,
            seed_score=seed.score,
            seed_weight=seed.score,
            extra=(("bm25_weight", weight),),
        )
    return out


TERM_WEIGHTINGS: dict[str, TermWeighting] = {
    "sag2": sag2_rule,
    "no_query_connection": no_query_connection,
    "uniform_seed_weight": uniform_seed_weight,
    "no_idf": no_idf,
    "tf_only": tf_only,
    "bm25_feedback": bm25_feedback,
}


def register_term_weighting(name: str, fn: TermWeighting) -> TermWeighting:
    """Add (or replace) a named variant; returns `fn`.

    >>> register_term_weighting("half_idf", lambda seed, stats: {})   # doctest: +ELLIPSIS
    <function <lambda> at ...>
    >>> del TERM_WEIGHTINGS["half_idf"]
    """
    if not isinstance(name, str) or not name.strip() or ".py:" in name:
        raise TermWeightingError(
            f"term weighting name {name!r}: expected a non-empty name (FILE.py:NAME is the file form)"
        )
    if not callable(fn):
        raise TermWeightingError(f"term weighting {name!r}: {fn!r} is not callable")
    TERM_WEIGHTINGS[name] = fn
    return fn


def load_python_object(spec: str, what: str):
    """Load `path/to/file.py:name` (the function-judge and variant plug-in form)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise ValueError(f"{what} {spec!r}: expected FILE.py:NAME")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{what} {spec!r}: no such file {file}")
    module_name = f"sag2wb_plugin_{abs(hash(str(file.resolve())))}"
    mod_spec = importlib.util.spec_from_file_location(module_name, file)
    assert mod_spec is not None and mod_spec.loader is not None  # a .py path always gets a source loader
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise ValueError(f"{what} {spec!r}: {file} failed to load: {type(exc).__name__}: {exc}") from None
    obj = getattr(module, name, None)
    if obj is None:
        raise ValueError(f"{what} {spec!r}: {file} has no {name!r}")
    if not callable(obj):
        raise ValueError(f"{what} {spec!r}: {name!r} is not callable")
    return obj


@functools.lru_cache(maxsize=64)
def _load_file_variant(spec: str, identity) -> TermWeighting:
    # cached by the file's path, mtime and size: loaded once per run, reloaded when edited
    return load_python_object(spec, "term weighting")


def get_term_weighting(name: str) -> TermWeighting:
    """The variant registered under `name`, or loaded from `FILE.py:NAME`.

    >>> get_term_weighting("sag2") is sag2_rule
    True
    """
    if name in TERM_WEIGHTINGS:
        return TERM_WEIGHTINGS[name]
    if ":" in name and name.rpartition(":")[0].endswith(".py"):
        path = Path(name.rpartition(":")[0])
        try:
            st = path.stat()
            identity = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        except OSError:
            identity = None
        try:
            return _load_file_variant(name, identity)
        except ValueError as exc:
            raise TermWeightingError(str(exc)) from None
    raise TermWeightingError(
        f"unknown term weighting {name!r}; registered: {', '.join(sorted(TERM_WEIGHTINGS))} (or FILE.py:NAME)"
    )


def _code_text(code) -> str:
    # nested code objects (lambdas, inner functions) print with their address: recurse instead
    consts = [_code_text(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts]
    return "|".join([code.co_code.hex(), *consts, *code.co_names])


def variant_fingerprint(name: str) -> str:
    """A short hash of the variant's code (for result caches: editing a notebook cell's
    function changes it, so stale results are not reused).

    >>> len(variant_fingerprint("sag2"))
    12
    """
    import hashlib

    fn = get_term_weighting(name)
    target = getattr(fn, "func", fn)  # functools.partial
    code = getattr(target, "__code__", None)
    if code is None:  # a callable object: its class's __call__ (inherited too)
        call = next((vars(k)["__call__"] for k in type(target).__mro__ if "__call__" in vars(k)), None)
        code = getattr(call, "__code__", None)
    parts = [name, getattr(target, "__qualname__", type(target).__name__)]
    if code is not None:
        parts.append(_code_text(code))
    for attr in ("args", "keywords"):
        if hasattr(fn, attr):
            parts.append(repr(getattr(fn, attr)))
    defaults = getattr(target, "__defaults__", None)
    parts.append(repr(defaults))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:12]


@functools.lru_cache(maxsize=1 << 16)
def collation_key(term: str) -> tuple:
    """pyuca's default Unicode collation key: the SPEC's tie-break between equal priorities."""
    return sort_key(term)


class TermChoice(NamedTuple):
    """A term's winning weight over the seeds, with the seed it came from (a NamedTuple:
    one is made per eligible term per round)."""

    term: str
    kind: str  # "token" or "name"
    surface: str
    seed: int
    weight: TermWeight
    selected: bool = False
    order: int = 0  # 1-based priority order among selected terms
    resolved: str | None = None
    resolution: str | None = None


_INF = math.inf
# the built-in variants (the functions, not their names: a name can be re-registered),
# whose priority never falls when idf rises or df falls
_IDF_MONOTONE = frozenset({sag2_rule, no_query_connection, uniform_seed_weight, no_idf, tf_only, bm25_feedback})


class _Optimistic:
    """Corpus statistics that give a term whose df would need an FTS5 count the largest idf
    a matching term can have (df = 1), and note it as pending. Question tokens stay exact:
    their idf enters every term's query connection."""

    def __init__(self, stats, exact) -> None:
        self.stats, self.N, self.exact = stats, stats.N, exact
        self.cached_df = getattr(stats, "cached_df", lambda term: None)
        self.cached_idf = getattr(stats, "cached_idf", lambda term: None)
        self.pending: set[str] = set()
        df = 1
        self.idf_high = math.log(1 + (stats.N - df + 0.5) / (df + 0.5))  # as Index computes idf

    def df(self, term: str) -> int:
        value = self.cached_df(term)
        if value is not None:
            return value
        return self.stats.df(term) if self._exact(term) else self._defer(term, 1)

    def idf(self, term: str) -> float:
        value = self.cached_idf(term)
        if value is not None:
            return value
        return self.stats.idf(term) if self._exact(term) else self._defer(term, self.idf_high)

    def _exact(self, term: str) -> bool:
        return term not in self.pending and (term in self.exact or self.stats.cheap_df(term) is not None)

    def _defer(self, term: str, value):
        self.pending.add(term)
        return value


def _weigh(weighting, weighting_name: str, seed: SeedView, stats) -> tuple[dict, float | None]:
    """The variant's weights for one seed, checked (a dict of finite priorities >= 0 for
    eligible terms only; numbers become TermWeights), and the seed weight it reported
    (None if it gave no TermWeight)."""
    weights = weighting(seed, stats)
    if not isinstance(weights, dict):
        raise TermWeightingError(
            f"term weighting {weighting_name!r} returned {type(weights).__name__}, expected a dict"
        )
    seed_weight = next((w.seed_weight for w in weights.values() if isinstance(w, TermWeight)), None)
    eligible, u = seed.candidate_terms, seed.unit_id
    weights = {t: w for t, w in weights.items() if t in eligible}  # a variant may propose anything
    for t, w in weights.items():
        if type(w) is not TermWeight:
            weights[t] = TermWeight(_checked_priority(w, weighting_name, t, u))
        elif type(w[0]) is not float or not 0.0 <= w[0] < _INF:  # also NaN
            _checked_priority(w[0], weighting_name, t, u)
    return weights, seed_weight


def _merge(best: dict, weights: dict, seed: int, kinds: dict) -> None:
    """Keep each term's best weight; a later seed wins only with a strictly higher priority."""
    get = best.get
    for t, w in weights.items():
        current = get(t)
        if current is None or w[0] > current[0]:
            best[t] = (w[0], seed, w, kinds)


def _checked_priority(p, weighting_name: str, term: str, seed: int) -> float:
    if isinstance(p, (int, float)) and 0 <= p < _INF:
        return float(p)
    raise TermWeightingError(
        f"term weighting {weighting_name!r} gave term {term!r} of seed {seed} the priority {p!r}; "
        "priorities must be finite and >= 0"
    )


_RECOUNT_BATCH = 8  # pending terms counted together: one read of their tokens, then the floor rises


def _count_pending(
    best: dict, pending: set, views: list, stats, variant: tuple[object, str], keep: int, prefetch
) -> None:
    """Weigh with their own df, into `best`, the pending terms (weighed with df = 1) that can still
    reach the first `keep` rows; drop the others. Highest bound first, a batch at a time: each batch
    can raise the floor (the keep-th best exact priority so far), which never falls, and a term whose
    bound is below it cannot reach the kept rows (~12% fewer phrases counted at 600k)."""
    df = stats.df
    floor_heap = heapq.nlargest(keep, [v[0] for t, v in best.items() if t not in pending and df(t) != 0])
    heapq.heapify(floor_heap)  # the keep best exact priorities so far, smallest first
    bounds = sorted([(best[t][0], t) for t in pending if t in best], reverse=True)
    for t in pending:
        best.pop(t, None)
    for i in range(0, len(bounds), _RECOUNT_BATCH):
        floor = floor_heap[0] if len(floor_heap) >= keep else -_INF
        batch = [t for bound, t in bounds[i : i + _RECOUNT_BATCH] if bound >= floor]
        if not batch:  # bounds fall: every later one is below the floor too
            break
        if prefetch is not None:
            prefetch(sorted(batch))
        mine_all = frozenset(batch)
        for view, kinds, proposed in views:
            mine = mine_all.intersection(proposed)
            if mine:
                counted, _ = _weigh(variant[0], variant[1], replace(view, candidate_terms=mine), stats)
                _merge(best, counted, view.unit_id, kinds)
        for t in batch:
            if t in best and df(t) != 0:
                (heapq.heappushpop if len(floor_heap) >= keep else heapq.heappush)(floor_heap, best[t][0])


def choose_terms(
    seeds: list[SeedView], stats: CorpusStats, weighting_name: str, L: int, keep: int | None = None
) -> tuple[list[TermChoice], dict[int, float | None]]:
    """Every eligible term with its best seed (or the first `keep` of them), in priority
    order, the top L (priority desc, collation key) selected; and each seed's weight as the
    variant set it (None if it proposed no term).

    Excluded (SPEC §3): terms whose tokens are all question tokens, and terms with df = 0."""
    weighting = get_term_weighting(weighting_name)
    # Counting a phrase's df is an FTS5 query; most phrases of a round end far below the
    # kept rows. For the built-in variants (priority never falls as idf rises) phrases are
    # first weighed with the largest idf a matching term can have, and counted only if that
    # bound reaches the kept rows as counted so far (`_count_pending`); the kept rows are the
    # same as with every df counted.
    bounded = keep is not None and weighting in _IDF_MONOTONE and hasattr(stats, "cheap_df")
    first_stats = _Optimistic(stats, frozenset().union(*(s.question_tokens for s in seeds))) if bounded else stats
    # term -> (priority, seed, weight, kinds of that seed)
    best: dict[str, tuple[float, int, TermWeight, dict[str, tuple[str, str]]]] = {}
    seed_weights: dict[int, float | None] = {}
    views = []
    # an index counts many terms' df together faster than one by one (same values): here the
    # single tokens (its cheap ones), below the phrases the bound cannot rule out
    prefetch = stats.prefetch_df if bounded and isinstance(stats, Index) else None
    summaries = [seed_terms(seed) for seed in seeds]
    eligible = [(seed, summary, summary.eligible(seed.question_tokens)) for seed, summary in zip(seeds, summaries)]
    if prefetch is not None:
        prefetch([t for _, _, terms in eligible for t in terms], phrases=False)
    for seed, summary, terms in eligible:  # ranking order; a later seed wins only with a strictly higher priority
        view = replace(seed, candidate_terms=terms)
        weights, seed_weights[seed.unit_id] = _weigh(weighting, weighting_name, view, first_stats)
        _merge(best, weights, seed.unit_id, summary.kinds)
        views.append((view, summary.kinds, weights.keys()))
    if bounded and isinstance(first_stats, _Optimistic) and first_stats.pending:  # bounded: always _Optimistic
        assert keep is not None  # bounded implies keep
        _count_pending(best, first_stats.pending, views, stats, (weighting, weighting_name), keep, prefetch)
    df = stats.df
    # df is the term's own, so a df = 0 term (no unit's body matches it) is dropped once here;
    # (-priority, term) tuples sort in C (terms are unique, so the third item is never compared)
    ordered = sorted([(-v[0], t, v) for t, v in best.items() if df(t) != 0])
    # The SPEC's tie-break is pyuca collation; computing it is slow, so it is applied to the
    # tie groups that reach into the top L (the order further down is display only).
    i = 0
    while i < min(L, len(ordered)):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1][0] == ordered[i][0]:
            j += 1
        if j > i:
            ordered[i : j + 1] = sorted(ordered[i : j + 1], key=lambda row: collation_key(row[1]))
        i = j + 1
    choices = [
        TermChoice(t, *v[3][t], v[1], v[2], i < L, i + 1 if i < L else 0)
        for i, (_, t, v) in enumerate(ordered[:keep] if keep is not None else ordered)
    ]
    return choices, seed_weights
