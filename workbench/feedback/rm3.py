"""RM3 pseudo-relevance feedback (Lavrenko and Croft 2001) as the paper configures it (B.3),
scored on the same FTS5 index and field weights as SAG2.

Exactly (Anserini's RM3, which the paper's settings are):
1. Feedback passages: the first `feedback_passages` (10) units of C0, the BM25 list of the
   question expression (round 0 of SAG2: the same repaired question, tokens, field weights).
   Passage d's weight is its BM25 score s(d) = -bm25(d) > 0 (FTS5 reports lower-is-better).
2. Each passage's term vector: tf(t, d) over the tokens of its title, heading and body
   (`text.tokenize`, SPEC §1), keeping only terms of `min_chars`-`max_chars` (2-20)
   alphanumeric characters (ASCII letters and digits with `ascii_only`, as Anserini's
   [a-z0-9]) and dropping terms that appear in more than `max_df` (10%) of the indexed units
   (a unit "has" t when its title, heading or body matches the phrase). The `terms_per_passage`
   (10) largest tf are kept (ties: the term in code-point order), then the vector is divided
   by its sum.
3. The relevance model: R(t) = sum over passages of s(d) · v_d(t); its `terms` (10) largest
   weights kept (same ties), divided by their sum.
4. The query model: Q(t) = 1/|Q| over the expression's distinct tokens (unfiltered, as
   Anserini analyses the query). Final weight w(t) = λ·Q(t) + (1 - λ)·R(t), λ =
   `original_weight` (0.5); terms of weight 0 are dropped.
5. Candidates: every unit matching a term; score(u) = sum over t of w(t) · s_t(u), s_t(u) =
   -bm25 of the phrase t alone with the run's field weights — weighted BM25 contributions
   summed before the candidates are selected (FTS5 has no per-term query weights). The
   first B by score (ties: lower id).

>>> expansion = rm3_expansion(index, "How are refunds approved?")
>>> [(t.term, round(t.weight, 3)) for t in expansion.selected[:3]]
[('partner', 0.139), ('integrations', 0.093), ('apps', 0.046)]
>>> index.unit(expansion.ranking[0]).document
'api/partners.md'
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, fields

from workbench import text as textlib
from workbench.engine import initial_candidates, question_expression
from workbench.index.store import Index, query_expression, quote
from workbench.params import Params, ParamsError
from workbench.trace import Candidate


@dataclass(frozen=True)
class RM3Params:
    """RM3's settings, the paper's (B.3) by default. Each is checked with a message naming it.

    >>> RM3Params(original_weight=1.5)
    Traceback (most recent call last):
    ...
    workbench.params.ParamsError: original_weight (the original query's weight λ) must be a number in [0, 1], got 1.5
    """

    feedback_passages: int = 10  # top BM25 passages the model is estimated from
    terms_per_passage: int = 10  # terms kept in each feedback passage's vector
    terms: int = 10  # terms kept in the combined relevance model
    original_weight: float = 0.5  # λ: the original query's share of the final query
    min_chars: int = 2  # a feedback term has at least this many characters...
    max_chars: int = 20  # ...and at most this many
    ascii_only: bool = True  # ...all ASCII letters or digits (False: any Unicode letter or digit)
    max_df: float = 0.10  # terms in more than this fraction of the indexed units are dropped

    def __post_init__(self):
        def need(ok: bool, name: str, what: str, rule: str):
            if not ok:
                raise ParamsError(f"{name} ({what}) must be {rule}, got {getattr(self, name)!r}")

        def integer(name: str) -> bool:
            v = getattr(self, name)
            return isinstance(v, int) and not isinstance(v, bool)

        def number(name: str) -> bool:
            v = getattr(self, name)
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        for name, what in (
            ("feedback_passages", "feedback passages"),
            ("terms_per_passage", "terms kept per feedback passage"),
            ("terms", "terms in the relevance model"),
            ("min_chars", "shortest feedback term"),
        ):
            need(integer(name) and getattr(self, name) >= 1, name, what, "an integer >= 1")
        need(
            integer("max_chars") and self.max_chars >= self.min_chars,
            "max_chars",
            "longest feedback term",
            f"an integer >= min_chars ({self.min_chars})",
        )
        need(
            number("original_weight") and 0 <= self.original_weight <= 1,
            "original_weight",
            "the original query's weight λ",
            "a number in [0, 1]",
        )
        need(number("max_df") and 0 < self.max_df <= 1, "max_df", "largest unit fraction of a term", "in (0, 1]")
        need(isinstance(self.ascii_only, bool), "ascii_only", "ASCII-only feedback terms", "true or false")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class FeedbackTerm:
    """One term of the relevance model: its final weight w(t) and how it was reached."""

    term: str
    weight: float  # w(t) = λ·Q(t) + (1 - λ)·R(t); 0 for a term pruned from the model
    relevance: float  # R(t) after pruning and normalising (0 when pruned)
    raw: float  # sum over passages of s(d)·v_d(t), before pruning
    query_weight: float  # λ·Q(t): the part from the original query (0 for a new term)
    passages: tuple[int, ...]  # feedback passages whose vector kept the term, best contribution first
    tf: int  # its tf in the first of those passages
    df: int  # units matching it (title, heading or body)
    selected: bool


@dataclass(frozen=True)
class RM3Expansion:
    """What RM3 did for one question: the feedback passages and weights, the model, the final
    weighted query and its ranking."""

    question: str  # after name repair
    expression: str  # round 0's (the feedback passages' list)
    initial: tuple[Candidate, ...]  # C0
    feedback: tuple[tuple[int, float], ...]  # (unit id, s(d)) of the feedback passages
    model: tuple[FeedbackTerm, ...]  # the selected terms (best first), then the pruned ones
    query: tuple[tuple[str, float], ...]  # the final weighted query: (term, w(t)), best first
    candidates: tuple[Candidate, ...]  # the first B by weighted BM25 (Candidate.bm25 = -score)

    @property
    def selected(self) -> tuple[FeedbackTerm, ...]:
        return tuple(t for t in self.model if t.selected)

    @property
    def ranking(self) -> tuple[int, ...]:
        return tuple(c.unit_id for c in self.candidates)

    @property
    def final_expression(self) -> str:
        """The OR of every weighted term: the expression whose matches are the candidates."""
        return query_expression([t for t, _ in self.query])


def term_allowed(term: str, params: RM3Params) -> bool:
    """The token rule: `min_chars`-`max_chars` characters, all letters or digits (ASCII ones
    with `ascii_only`).

    >>> [term_allowed(t, RM3Params()) for t in ("ok", "a", "role_id", "x" * 21, "müller", "3d")]
    [True, False, False, False, False, True]
    """
    if not params.min_chars <= len(term) <= params.max_chars:
        return False
    return bool(_ASCII_ALNUM.fullmatch(term)) if params.ascii_only else term.isalnum()


_ASCII_ALNUM = re.compile(r"[a-z0-9]+")


def unit_frequency(index: Index, term: str) -> int:
    """Units whose title, heading or body contains the term (the df the 10% rule counts)."""
    return len(index.matches(term))


def passage_vector(index: Index, unit, params: RM3Params, df_limit: float | None = None) -> dict[str, float]:
    """A feedback passage's term vector (rules 2): allowed terms, df cut, the top
    `terms_per_passage` by tf, normalised to sum 1. Returns {term: v_d(t)}; raw counts in
    `passage_counts`."""
    counts = passage_counts(index, unit, params, df_limit)
    total = sum(counts.values())
    return {t: n / total for t, n in counts.items()} if total else {}


def passage_counts(index: Index, unit, params: RM3Params, df_limit: float | None = None) -> dict[str, int]:
    """tf of the terms a feedback passage keeps (rules 2, before normalising)."""
    limit = params.max_df * index.N if df_limit is None else df_limit
    text = "\n".join(x for x in (unit.title, unit.heading, unit.body) if x)
    tf = Counter(t for t in textlib.tokenize(text) if term_allowed(t, params))
    kept = {t: n for t, n in tf.items() if unit_frequency(index, t) <= limit}
    best = sorted(kept.items(), key=lambda x: (-x[1], x[0]))[: params.terms_per_passage]
    return dict(best)


def relevance_model(vectors, weights, terms: int) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """Rule 3: (the `terms` best (term, R(t)) normalised, every raw sum) from passage vectors
    and their weights.

    >>> relevance_model([{"a": 0.5, "b": 0.5}, {"b": 1.0}], [2.0, 1.0], 1)
    ([('b', 1.0)], {'a': 1.0, 'b': 2.0})
    """
    raw: dict[str, float] = {}
    for v, w in zip(vectors, weights):
        for t, x in v.items():
            raw[t] = raw.get(t, 0.0) + w * x
    best = sorted(raw.items(), key=lambda x: (-x[1], x[0]))[:terms]
    total = sum(x for _, x in best)
    return [(t, x / total) for t, x in best] if total > 0 else [], raw


def weighted_scores(index: Index, query: dict[str, float], weights) -> dict[int, float]:
    """Rule 5: score(u) = sum of w(t) · (-bm25 of t alone), over every unit matching a term
    (terms in code-point order, so the floating-point sum does not depend on dict order)."""
    scores: dict[int, float] = {}
    for term in sorted(query):
        w = query[term]
        for u, bm25 in index.bm25_all(quote(term), weights).items():
            scores[u] = scores.get(u, 0.0) - w * bm25
    return scores


def rm3_expansion(index: Index, question: str, params: Params | None = None, rm3: RM3Params | None = None):
    """RM3 for one question (rules 1-5 above). None when the question has no tokens; an
    expansion without feedback when nothing matches it."""
    params, rm3 = params or Params(), rm3 or RM3Params()
    repaired, expression = question_expression(index, question, params)
    if not expression:
        return None
    c0 = initial_candidates(index, expression, params)
    qtokens = list(dict.fromkeys(textlib.tokenize(repaired)))[: params.query_tokens]
    feedback = [(c.unit_id, -c.bm25) for c in c0[: rm3.feedback_passages]]
    limit = rm3.max_df * index.N
    counts = [passage_counts(index, rec, rm3, limit) for rec in index.units([u for u, _ in feedback])]
    vectors = [{t: n / sum(c.values()) for t, n in c.items()} if c else {} for c in counts]
    model, raw = relevance_model(vectors, [s for _, s in feedback], rm3.terms)
    lam = rm3.original_weight
    query = {t: lam / len(qtokens) for t in qtokens}
    for t, r in model:
        query[t] = query.get(t, 0.0) + (1 - lam) * r
    query = {t: w for t, w in query.items() if w > 0}
    scores = weighted_scores(index, query, params.field_weights)
    top = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[: params.B]
    candidates = tuple(Candidate(u, i + 1, -s) for i, (u, s) in enumerate(top))
    selected = dict(model)
    rows = []
    for t, x in sorted(raw.items(), key=lambda x: (-x[1], x[0])):
        contributors = sorted(
            (i for i, v in enumerate(vectors) if t in v), key=lambda i: (-feedback[i][1] * vectors[i][t], i)
        )
        q = lam / len(qtokens) if t in qtokens else 0.0
        rows.append(
            FeedbackTerm(
                term=t,
                weight=query.get(t, 0.0) if t in selected else 0.0,
                relevance=selected.get(t, 0.0),
                raw=x,
                query_weight=q,
                passages=tuple(feedback[i][0] for i in contributors),
                tf=counts[contributors[0]][t],
                df=unit_frequency(index, t),
                selected=t in selected,
            )
        )
    rows.sort(key=lambda r: (not r.selected, -r.raw, r.term))
    return RM3Expansion(
        question=repaired,
        expression=expression,
        initial=c0,
        feedback=tuple(feedback),
        model=tuple(rows),
        query=tuple(sorted(query.items(), key=lambda x: (-x[1], x[0]))),
        candidates=candidates,
    )
