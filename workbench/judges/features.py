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
from workbench.judges.lexical import passage_tokens
from workbench.judges.semantic import NameMatcher, name_bridge

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
BM25_DEPTH = 200
_FIXED = 2**32  # idf in fixed point for the overlap bridge's exact integer sums


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

    def __init__(self, index, names=tuple(FEATURES), *, embedder=None, cache_dir=None) -> None:
        self.index = index
        self.names = check_names(names)
        self.cache_dir = cache_dir
        self._embedder = embedder
        self.matcher = NameMatcher()
        self._questions: OrderedDict[str, dict] = OrderedDict()
        self._titles: dict[str, tuple[frozenset, float]] = {}
        self._idf: dict[str, float] = {}
        self._vocab: dict[str, int] = {}  # token -> id, for the overlap bridge's integer sums
        self._unit_tokens: dict[tuple, object] = {}
        self._by_text: dict[tuple, int] | None = None
        import numpy as np

        self._fixed = np.zeros(0, dtype=np.int64)

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
            rows = self.index.search(expression, BM25_DEPTH, params.field_weights) if expression else []
            got["bm25_rank"] = {u: i + 1 for i, (u, _) in enumerate(rows)}
            top = rows[0][1] if rows else 0.0
            got["bm25_top"] = top
            # every matching unit's score (one query, cached by the index): candidates from
            # expansion rounds are often below the first BM25_DEPTH
            got["bm25"] = self.index.bm25_all(expression, params.field_weights) if expression else {}
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
        import numpy as np

        names = set(self.names)
        qi = self._question(question)
        n = len(candidates)
        cols: dict[str, list[float]] = {}
        round1 = float(bool(context) and all(c.get("previous_score") is None for c in context))
        round2 = float(any(c.get("previous_score") is not None for c in context))
        if "round1" in names:
            cols["round1"] = [round1] * n
        if "round2" in names:
            cols["round2"] = [round2] * n
        cos = [0.0] * n
        if names & MODEL_FEATURES and candidates:
            from workbench.judges.embeddings import passage_text

            vecs = self.embedder.embed([question] + [passage_text(c["title"], c["text"]) for c in candidates])
            # row by row in float64 (not a matrix product, whose blocking follows the batch size):
            # a passage's cosine does not depend on the passages judged with it
            v = np.asarray(vecs, dtype=np.float64)
            cos = (v[1:] * v[0]).sum(axis=1).tolist()
        cov = [self._coverage(qi, c) for c in candidates] if names & {"coverage", "coverage_x_bridge"} else [0.0] * n
        bridges = [name_bridge(self.matcher, c, context) for c in candidates]
        bridge = [b for b, _ in bridges]
        named = [None if by is None else by["title"] for _, by in bridges]
        for name, values in (("cosine", cos), ("coverage", cov), ("bridge", bridge)):
            if name in names:
                cols[name] = values
        if "bridge_coverage" in names:  # the question coverage of the passage that gives the bridge
            cols["bridge_coverage"] = [0.0 if by is None else self._coverage(qi, by) for _, by in bridges]
        if "overlap_bridge" in names:
            cols["overlap_bridge"] = self._overlap_bridges(qi, candidates, context)
        if "title_in_question" in names:
            cols["title_in_question"] = [self._title_in_question(qi, c) for c in candidates]
        if "title_overlap" in names:
            cols["title_overlap"] = [self._title_overlap(qi, c) for c in candidates]
        if names & {"bm25", "bm25_rank"}:
            units = self._unit_ids(candidates)
            if "bm25" in names:
                cols["bm25"] = [self._bm25(qi, u) for u in units]
            if "bm25_rank" in names:
                cols["bm25_rank"] = [self._bm25_rank(qi, u) for u in units]
        if "cosine_x_bridge" in names:
            cols["cosine_x_bridge"] = [a * b for a, b in zip(cos, bridge)]
        if "coverage_x_bridge" in names:
            cols["coverage_x_bridge"] = [a * b for a, b in zip(cov, bridge)]
        return cols, named

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
            vocab = self._vocab
            got = np.array(
                [vocab.setdefault(t, len(vocab)) for t in passage_tokens(item["title"], item["text"])], dtype=np.int64
            )
            self._unit_tokens[key] = got
        return got

    def _overlap_bridges(self, qi, candidates, context) -> list[float]:
        """The lexical judge's bridge for every candidate at once: idf masses as integers
        (fixed point, 2^-32), so sums are exact in any order; one gather and one sum per
        call give every (candidate, context passage) shared mass."""
        import numpy as np

        if not context or not candidates:
            return [0.0] * len(candidates)
        q_ids = {self._vocab.setdefault(t, len(self._vocab)) for t in qi["tokens"]}
        rows, weights, ids = [], [], []
        for item in context:
            toks = [t for t in self._token_ids(item).tolist() if t not in q_ids]
            if toks:
                prev = item.get("previous_score")
                rows.append(toks)
                weights.append(1.0 if prev is None else float(prev))
                ids.append(item.get("unit_id"))
        if not rows:
            return [0.0] * len(candidates)
        cand_ids = [self._token_ids(c) for c in candidates]  # may grow the vocabulary: sized after
        size = len(self._vocab)
        if len(self._fixed) < size:  # idf in fixed point, per vocabulary id
            names = sorted(self._vocab, key=self._vocab.__getitem__)[len(self._fixed) :]
            more = np.rint(np.array([self._idf_of(t) for t in names], dtype=np.float64) * _FIXED).astype(np.int64)
            self._fixed = np.concatenate([self._fixed, more])
        W = np.zeros((len(rows), size), dtype=np.int64)
        for r, toks in enumerate(rows):
            W[r, toks] = self._fixed[toks]
        mass = W.sum(axis=1)
        lengths = np.array([len(c) for c in cand_ids])
        flat = np.concatenate(cand_ids) if lengths.sum() else np.zeros(0, dtype=np.int64)
        gathered = W[:, flat]  # context rows x every candidate token
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        shared = np.zeros((len(rows), len(candidates)), dtype=np.int64)
        nonempty = lengths > 0
        if flat.size:
            shared[:, nonempty] = np.add.reduceat(gathered, starts[nonempty], axis=1)
        values = (shared / np.where(mass > 0, mass, 1)[:, None]) * np.array(weights)[:, None]
        for i, c in enumerate(candidates):  # a passage never bridges to itself
            u = c.get("unit_id")
            if u is not None and u in ids:
                values[[k for k, v in enumerate(ids) if v == u], i] = 0.0
        return [float(v) for v in values.max(axis=0)]

    def _title_in_question(self, qi, cand) -> float:
        pattern = self.matcher.pattern(cand["title"])
        return float(pattern is not None and pattern.search(qi["folded"]) is not None)

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
