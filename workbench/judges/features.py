"""What a learned judge sees: one row of numbers per (question, candidate, context).

Every feature is computed from what any judge is given (the question, the candidate, the
context passages with their previous scores) and the index, so a model fitted on these rows
can judge wherever a judge runs (eval, experiments, the dashboard, the judge server).
Features (`FEATURES`, version `FEATURES_VERSION`; docs/judges.md, "The learned judge"):

- **cosine**: cosine of the question and the passage (title, newline, text) under the
  semantic judge's model (all-MiniLM-L6-v2, workbench/judges/embeddings.py);
- **coverage**: idf mass of the question's tokens found in the passage / idf mass of the
  question (the lexical and semantic judges' `direct` term);
- **bridge**: the semantic judge's name bridge: the best weight (previous score in the
  final round, 1 before) of a context passage whose text names the candidate's title;
- **bridge_coverage**: the question coverage of the context passage that gives the bridge (0
  without one): a bridge from a passage about the question counts more than one from a stray one;
- **overlap_bridge**: the lexical judge's bridge: the best weight(c) * share of c's
  non-question idf mass found in the candidate (follows shared identifiers across files);
- **title_in_question**: 1 when the question names the candidate's title (the name bridge's
  matching rules: folded, word boundaries, disambiguator dropped), else 0;
- **title_overlap**: idf mass of the title's tokens found in the question / the title's mass;
- **bm25**: the candidate's BM25 score for the question's round-0 expression (the engine's
  default parameters) over the best score of that expression in the corpus (0: no match);
- **bm25_rank**: 1 / log2(1 + rank) of the candidate in that BM25 ranking (first 200; else 0);
- **round1**, **round2**: where the call is in the trajectory, read from the context: no
  context is round 0; context without previous scores round 1; with them round 2;
- **cosine_x_bridge**, **coverage_x_bridge**: products, so that the bridge can weigh
  differently for relevant and irrelevant passages (the semantic judge's noisy-or does this).

**Context weights** (`context_weights`, stored in the model file): the bridges' weight of a
context passage is its previous score (`"previous"`, version 1's rule and the semantic judge's),
or that score over the best previous score in the context (`"relative"`, `relative_context`):
the bridges then do not depend on how confident the judge that scored the context was. A
model fitted on the oracle's 0/1 scores meets its own, much lower, scores when it drives, and on
a corpus it was not fitted on they are lower still; relative weights keep the scale it was
fitted on. Before the final round every weight is 1 either way.

What a judge is not given cannot be a feature: the candidate's retrieval rank in its round
and the kind of term that brought it in (name, title phrase, ...) are the engine's, not the
judge's, and a judge served over HTTP never sees them.

>>> from workbench.engine import judge_items
>>> ids = {title: i for i, title in enc_index.documents.items()}
>>> film, director = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"]])
>>> ex = FeatureExtractor(enc_index, names=("coverage", "bridge", "title_in_question", "round1"))
>>> rows = ex.rows("Where was the director of Glass Harbour born?", [film, director], [film])
>>> [{k: round(v, 2) for k, v in r.items() if k != "_named_by"} for r in rows]
[{'coverage': 0.56, 'bridge': 0.0, 'title_in_question': 1.0, 'round1': 1.0},
 {'coverage': 0.44, 'bridge': 1.0, 'title_in_question': 0.0, 'round1': 1.0}]
"""

from __future__ import annotations

import math
from collections import OrderedDict

from workbench import text as textlib
from workbench.index.store import bm25_order
from workbench.judges.lexical import passage_tokens
from workbench.judges.semantic import NameMatcher, name_bridges

FEATURES_VERSION = 1
FEATURES: dict[str, str] = {
    "cosine": "cosine of question and passage under the semantic judge's MiniLM model",
    "coverage": "idf mass of the question's tokens in the passage / the question's idf mass",
    "bridge": "best weight of a context passage that names the candidate's title (name bridge)",
    "bridge_coverage": "question coverage of the context passage that gives the bridge",
    "overlap_bridge": "the lexical judge's bridge: weight x share of a context passage's rare tokens found",
    "title_in_question": "1 when the question names the candidate's title",
    "title_overlap": "idf mass of the title's tokens found in the question / the title's idf mass",
    "bm25": "BM25 of the question's round-0 expression / the best BM25 of that expression",
    "bm25_rank": "1 / log2(1 + rank) in the question's BM25 ranking (first 200), else 0",
    "round1": "1 in round 1 (context without previous scores)",
    "round2": "1 in the final round (context with previous scores)",
    "cosine_x_bridge": "cosine x bridge",
    "coverage_x_bridge": "coverage x bridge",
}
MODEL_FEATURES = frozenset({"cosine", "cosine_x_bridge"})  # need the embedding model
# the features that do not depend on the context, in `_static_rows` order
STATIC = ("cosine", "coverage", "title_in_question", "title_overlap", "bm25", "bm25_rank")
BM25_DEPTH = 200
_FIXED = 2**32  # idf in fixed point for the overlap bridge's exact integer sums


def bm25_ranking(scores: dict, depth: int) -> list:
    """The first `depth` unit ids of {unit id: BM25} in `Index.search`'s order (`bm25_order`), from
    the scores already read: one BM25 query per question instead of two.

    >>> bm25_ranking({7: -2.0, 3: -5.0, 5: -2.0, 9: -1.0}, 3)
    [3, 5, 7]
    """
    import numpy as np

    if not scores:
        return []
    ids = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    return ids[bm25_order(ids, values, depth)].tolist()


CONTEXT_WEIGHTS = ("previous", "relative")


def relative_context(context: list[dict]) -> list[dict]:
    """The context with each previous score divided by the context's best (0 when the best is 0);
    passages without a previous score (before the final round) are left as they are.

    >>> [c.get("previous_score") for c in relative_context(
    ...     [{"previous_score": 0.04}, {"previous_score": 0.01}, {"previous_score": 0.0}])]
    [1.0, 0.25, 0.0]
    >>> relative_context([{"unit_id": 1}])   # round 1: no previous scores, every weight is 1
    [{'unit_id': 1}]
    """
    best = max((c["previous_score"] for c in context if c.get("previous_score") is not None), default=None)
    if best is None or best == 1.0:
        return context
    return [
        c
        if c.get("previous_score") is None
        else {**c, "previous_score": c["previous_score"] / best if best > 0 else 0.0}
        for c in context
    ]


class FeatureError(ValueError):
    """A feature name this code does not compute."""


def check_names(names) -> tuple[str, ...]:
    names = tuple(names)
    unknown = [n for n in names if n not in FEATURES]
    if unknown or not names or len(set(names)) != len(names):
        raise FeatureError(
            f"features {list(names)!r}: unknown or repeated {unknown or 'names'}; known (version "
            f"{FEATURES_VERSION}): {', '.join(FEATURES)}"
        )
    return names


class FeatureExtractor:
    """Rows of features (`rows`, dicts) or a matrix (`matrix`, numpy) for one judge call.
    `embedder`: an Embedder, made on first use when a model feature is asked for."""

    def __init__(
        self, index, names=tuple(FEATURES), *, embedder=None, cache_dir=None, context_weights: str = "previous"
    ) -> None:
        if context_weights not in CONTEXT_WEIGHTS:
            raise FeatureError(f"context weights {context_weights!r}: choose from {', '.join(CONTEXT_WEIGHTS)}")
        self.index = index
        self.names = check_names(names)
        self.context_weights = context_weights
        self.cache_dir = cache_dir
        self._embedder = embedder
        self.matcher = NameMatcher()
        self._questions: OrderedDict[str, dict] = OrderedDict()
        self._titles: dict[str, tuple[frozenset, float]] = {}
        self._idf: dict[str, float] = {}
        self._vocab: dict[str, int] = {}  # token -> id, for the overlap bridge's integer sums
        self._tokens: list[str] = []  # id -> token
        self._unit_tokens: dict[tuple, object] = {}
        self._by_text: dict[tuple, int] | None = None
        import numpy as np

        self._fixed = np.zeros(0, dtype=np.int64)
        self._slot = np.zeros(0, dtype=np.int64)  # scratch: vocabulary id -> context column (-1: none)

    @property
    def needs_model(self) -> bool:
        return bool(MODEL_FEATURES & set(self.names))

    @property
    def embedder(self):
        if self._embedder is None:
            from workbench.judges.embeddings import Embedder

            self._embedder = Embedder(self.cache_dir)
        return self._embedder

    def model_id(self) -> str | None:
        return self.embedder.model_id if self.needs_model else None

    # ---- per question (kept for the last 64 questions) -------------------------------------
    def forget_questions(self) -> None:
        """Drop what is remembered per question (benchmarks: a question seen again costs what a new one does)."""
        self._questions.clear()

    def _question(self, question: str) -> dict:
        got = self._questions.get(question)
        if got is not None:
            self._questions.move_to_end(question)
            return got
        idf = self.index.idf
        q = frozenset(textlib.tokenize(question))
        got = {"tokens": q, "mass": math.fsum(idf(t) for t in q), "folded": self.matcher.folded(question)}
        if {"bm25", "bm25_rank"} & set(self.names):
            from workbench.engine import question_expression
            from workbench.params import Params

            params = Params()
            _, expression = question_expression(self.index, question, params)
            # every matching unit's score (one query, cached by the index): candidates from
            # expansion rounds are often below the first BM25_DEPTH
            scores = self.index.bm25_all(expression, params.field_weights) if expression else {}
            got["bm25"] = scores
            ranking = bm25_ranking(scores, BM25_DEPTH)
            got["bm25_rank"] = {u: i + 1 for i, u in enumerate(ranking)}
            got["bm25_top"] = scores[ranking[0]] if ranking else 0.0
        self._questions[question] = got
        if len(self._questions) > 64:
            self._questions.popitem(last=False)
        return got

    def _idf_of(self, t: str) -> float:
        v = self._idf.get(t)
        if v is None:
            if len(self._idf) > 500_000:
                self._idf.clear()
            v = self._idf[t] = self.index.idf(t)
        return v

    def _mass(self, tokens) -> float:
        # fsum is exact: the sum does not follow the set's (hash-seeded) order
        idf = self._idf
        if len(idf) > 500_000:
            idf.clear()
        out = []
        for t in tokens:
            v = idf.get(t)
            if v is None:
                v = idf[t] = self.index.idf(t)
            out.append(v)
        return math.fsum(out)

    def _coverage(self, qi: dict, item: dict) -> float:
        if qi["mass"] <= 0:
            return 0.0
        return self._mass(qi["tokens"] & passage_tokens(item["title"], item["text"])) / qi["mass"]

    def _bm25(self, qi: dict, unit_id) -> float:
        top = qi["bm25_top"]
        s = qi["bm25"].get(unit_id, 0.0)
        # FTS5's bm25 is negative (more negative is better) in some builds: compare magnitudes
        return min(1.0, abs(s) / abs(top)) if top else 0.0

    # ---- rows ------------------------------------------------------------------------------
    def rows(self, question: str, candidates: list[dict], context: list[dict]) -> list[dict]:
        """One {feature: value} per candidate, plus '_named_by' (the bridging passage's title)."""
        cols, named = self.columns(question, candidates, context)
        return [{**{n: cols[n][i] for n in self.names}, "_named_by": named[i]} for i in range(len(candidates))]

    def matrix(self, question: str, candidates: list[dict], context: list[dict]):
        """The features as a float64 array (candidates x features, in `names` order)."""
        return self.matrix_and_names(question, candidates, context)[0]

    def matrix_and_names(self, question: str, candidates: list[dict], context: list[dict]):
        """(the array, the title of the context passage that names each candidate or None)."""
        import numpy as np

        cols, named = self.columns(question, candidates, context)
        # C order: a row's sums then run over its own 13 contiguous values, whatever the batch size
        X = np.ascontiguousarray(np.array([cols[n] for n in self.names], dtype=np.float64).T)
        X = X.reshape(len(candidates), len(self.names))
        return X, named

    def columns(self, question: str, candidates: list[dict], context: list[dict]) -> tuple[dict, list]:
        """{feature: [value per candidate]} for the features in `names`, and the naming passages."""
        names = set(self.names)
        qi = self._question(question)
        n = len(candidates)
        cols: dict[str, list[float]] = {}
        round1 = float(bool(context) and all(c.get("previous_score") is None for c in context))
        round2 = float(any(c.get("previous_score") is not None for c in context))
        if self.context_weights == "relative":
            context = relative_context(context)
        if "round1" in names:
            cols["round1"] = [round1] * n
        if "round2" in names:
            cols["round2"] = [round2] * n
        rows = self._static(question, qi, candidates)
        static = {name: [r[i] for r in rows] for i, name in enumerate(STATIC)}
        cos, cov = static["cosine"], static["coverage"]
        bridges = name_bridges(self.matcher, candidates, context)
        bridge = [b for b, _ in bridges]
        named = [None if by is None else by["title"] for _, by in bridges]
        for name in STATIC:
            if name in names:
                cols[name] = static[name]
        if "bridge" in names:
            cols["bridge"] = bridge
        if "bridge_coverage" in names:  # the question coverage of the passage that gives the bridge
            cols["bridge_coverage"] = [0.0 if by is None else self._coverage(qi, by) for _, by in bridges]
        if "overlap_bridge" in names:
            cols["overlap_bridge"] = self._overlap_bridges(qi, candidates, context)
        if "cosine_x_bridge" in names:
            cols["cosine_x_bridge"] = [a * b for a, b in zip(cos, bridge)]
        if "coverage_x_bridge" in names:
            cols["coverage_x_bridge"] = [a * b for a, b in zip(cov, bridge)]
        return cols, named

    def _static(self, question: str, qi: dict, candidates: list[dict]) -> list[tuple]:
        """Per candidate, its features that do not depend on the context (`STATIC` order; 0.0 for
        those not asked for), remembered for the question: a third of a question's candidates
        come back in a later round."""
        memo = qi.setdefault("static", {})
        keys = [(c.get("unit_id"), c["title"], c["text"]) for c in candidates]
        todo = list({k: c for k, c in zip(keys, candidates) if k not in memo}.items())
        if todo:
            memo.update(zip([k for k, _ in todo], self._static_rows(question, qi, [c for _, c in todo])))
        return [memo[k] for k in keys]

    def _static_rows(self, question: str, qi: dict, candidates: list[dict]) -> list[tuple]:
        import numpy as np

        names = set(self.names)
        n = len(candidates)
        zeros = [0.0] * n
        cos = zeros
        if names & MODEL_FEATURES:
            from workbench.judges.embeddings import passage_text

            vecs = self.embedder.embed([question] + [passage_text(c["title"], c["text"]) for c in candidates])
            # row by row in float64 (not a matrix product, whose blocking follows the batch size):
            # a passage's cosine does not depend on the passages judged with it
            v = np.asarray(vecs, dtype=np.float64)
            cos = (v[1:] * v[0]).sum(axis=1).tolist()
        cov = [self._coverage(qi, c) for c in candidates] if names & {"coverage", "coverage_x_bridge"} else zeros
        tiq = [self._title_in_question(qi, c) for c in candidates] if "title_in_question" in names else zeros
        tov = [self._title_overlap(qi, c) for c in candidates] if "title_overlap" in names else zeros
        b25 = rank = zeros
        if names & {"bm25", "bm25_rank"}:
            units = self._unit_ids(candidates)
            b25 = [self._bm25(qi, u) for u in units]
            rank = [self._bm25_rank(qi, u) for u in units]
        return list(zip(cos, cov, tiq, tov, b25, rank))

    def _unit_ids(self, candidates) -> list:
        """Each candidate's unit id in this index. A judge served over HTTP is given ids of its
        own (numbered per request): a candidate whose id does not name its text is found by its
        title and text (a map of the corpus, made once, on the first such candidate)."""
        ids = [c.get("unit_id") for c in candidates]
        docs = self.index.documents
        valid = [u for u in ids if isinstance(u, int) and u in docs]
        recs = {r.id: r for r in self.index.units(valid)} if valid else {}
        out = []
        for c, u in zip(candidates, ids):
            r = recs.get(u)
            if r is not None and r.title == c["title"] and r.body == c["text"]:
                out.append(u)
            else:
                if self._by_text is None:
                    self._by_text = {(r.title, r.body): r.id for r in self.index.units(sorted(docs))}
                out.append(self._by_text.get((c["title"], c["text"])))
        return out

    # ---- the less obvious features ---------------------------------------------------------
    def _token_ids(self, item: dict):
        """The passage's distinct tokens as ids of this extractor's vocabulary (cached per text)."""
        import numpy as np

        key = (item["title"], item["text"])
        got = self._unit_tokens.get(key)
        if got is None:
            if len(self._unit_tokens) > 20_000:
                self._unit_tokens.clear()
            vocab, tokens, ids = self._vocab, self._tokens, []
            for t in passage_tokens(item["title"], item["text"]):
                i = vocab.get(t)
                if i is None:
                    i = vocab[t] = len(tokens)
                    tokens.append(t)
                ids.append(i)
            got = np.array(ids, dtype=np.int64)
            self._unit_tokens[key] = got
        return got

    def _overlap_bridges(self, qi, candidates, context) -> list[float]:
        """The lexical judge's bridge for every candidate at once: idf masses as integers
        (fixed point, 2^-32), so sums are exact in any order; one gather and one sum per
        call give every (candidate, context passage) shared mass."""
        import numpy as np

        n = len(candidates)
        if not context or not n:
            return [0.0] * n
        ctx_ids = [self._token_ids(item) for item in context]  # first: they may add question tokens
        q_ids = {self._vocab[t] for t in qi["tokens"] if t in self._vocab}  # others are in no context passage
        rows, weights, ids = [], [], []
        for item, tok_ids in zip(context, ctx_ids):
            toks = [t for t in tok_ids.tolist() if t not in q_ids]
            if toks:
                prev = item.get("previous_score")
                rows.append(toks)
                weights.append(1.0 if prev is None else float(prev))
                ids.append(item.get("unit_id"))
        if not rows:
            return [0.0] * n
        cand_ids = [self._token_ids(c) for c in candidates]  # may grow the vocabulary: sized after
        size = len(self._vocab)
        if len(self._fixed) < size:  # idf in fixed point, and a column slot, per vocabulary id
            names = self._tokens[len(self._fixed) :]
            more = np.rint(np.array([self._idf_of(t) for t in names], dtype=np.float64) * _FIXED).astype(np.int64)
            self._fixed = np.concatenate([self._fixed, more])
            self._slot = np.concatenate([self._slot, np.full(len(more), -1, dtype=np.int64)])
        # columns: only the context's own tokens, not the whole vocabulary
        every = np.fromiter((t for toks in rows for t in toks), dtype=np.int64)
        cols, col = np.unique(every, return_inverse=True)
        W = np.zeros((len(rows), len(cols)), dtype=np.int64)
        W[np.repeat(np.arange(len(rows)), [len(t) for t in rows]), col] = self._fixed[every]
        mass = W.sum(axis=1)
        lengths = np.array([len(c) for c in cand_ids])
        flat = np.concatenate(cand_ids) if lengths.sum() else np.zeros(0, dtype=np.int64)
        slot = self._slot
        slot[cols] = np.arange(len(cols))
        at = slot[flat]  # each candidate token's context column, -1 when no context passage has it
        slot[cols] = -1
        hit = at >= 0
        owner = np.repeat(np.arange(n), lengths)[hit]  # sorted: flat runs candidate by candidate
        counts = np.bincount(owner, minlength=n)
        shared = np.zeros((len(rows), n), dtype=np.int64)
        some = counts > 0
        if some.any():
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[some]
            shared[:, some] = np.add.reduceat(W[:, at[hit]], starts, axis=1)
        values = (shared / np.where(mass > 0, mass, 1)[:, None]) * np.array(weights)[:, None]
        rows_of: dict = {}
        for k, u in enumerate(ids):
            if u is not None:
                rows_of.setdefault(u, []).append(k)
        for i, c in enumerate(candidates):  # a passage never bridges to itself
            own = rows_of.get(c.get("unit_id"))
            if own:
                values[own, i] = 0.0
        return values.max(axis=0).tolist()

    def _title_in_question(self, qi, cand) -> float:
        return float(self.matcher.names(cand["title"], qi["folded"]))

    def _title_overlap(self, qi, cand) -> float:
        title = self._titles.get(cand["title"])
        if title is None:
            if len(self._titles) > 100_000:
                self._titles.clear()
            toks = frozenset(textlib.tokenize(cand["title"]))
            title = self._titles[cand["title"]] = (toks, self._mass(toks))
        toks, mass = title
        return self._mass(toks & qi["tokens"]) / mass if mass > 0 else 0.0

    @staticmethod
    def _bm25_rank(qi, unit_id) -> float:
        r = qi["bm25_rank"].get(unit_id)
        return 1.0 / math.log2(1 + r) if r else 0.0
