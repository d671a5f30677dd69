"""The learned judge: a logistic regression over `features.FEATURES`, read from a model file.

    sag2wb fit-judge --db DB --questions Q.jsonl --teacher oracle --out J.json
    sag2wb eval --db DB --questions Q.jsonl --judge learned:J.json --out OUT.json

`fit_logistic` fits weights on standardised features by Newton's method, minimising the mean
cross-entropy against targets in [0, 1] (soft targets: a teacher's probabilities) plus
`l2 / 2 * |w|^2` (the intercept is not penalised). It is numpy only, exact to the last digits
whatever the order of the examples' features, and fits 30,000 examples in well under a second.

The model file (`save_model` / `load_model`) is JSON: its schema name and version, the
features' version and names, the standardisation, weights and intercept, the context weights
(`model.context_weights`, when not "previous"), what it was fitted on and its cross-validation,
and `sha256` (of the canonical JSON of everything else). A file
that is missing, not JSON, of another schema or version, fitted on other features, or whose
content no longer matches its sha256 is a `LearnedModelError` (exit 2). The sha256 is in the
judge's cache key and its name (the trace's judge).

>>> import numpy as np
>>> X = np.array([[0.0], [0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [1.0]])
>>> y = np.array([0, 0, 0, 1, 0, 1, 1, 1.0])
>>> m = fit_logistic(X, y, ["coverage"], l2=0.0)
>>> [round(float(p), 4) for p in m.predict(np.array([[0.0], [1.0]]))]   # the two groups' rates
[0.25, 0.75]
>>> bool(abs(m.raw_weights()[0][0] - 2 * np.log(3)) < 1e-6)   # logit(.75) - logit(.25)
True
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

import numpy as np

from workbench.judges.features import (
    CONTEXT_WEIGHTS,
    FEATURES,
    FEATURES_VERSION,
    FeatureError,
    FeatureExtractor,
    check_names,
)
from workbench.judges.semantic import context_key
from workbench.judgment import JudgeError
from workbench.safeio import InputError, parse_json

SCHEMA = "sag2wb-learned-judge"
SCHEMA_VERSION = 1
# chosen by `bench_judges.py --only learned --learned-sections select`: leave one passage corpus out
# among 2Wiki, HotpotQA and the encyclopedia (never the internal docs); with relative context
# weights it picks 1 (mean R@10 90.44, against 90.33 for 0.1: within noise, but the rule's choice)
DEFAULT_L2 = 1.0
DEFAULT_MODEL = "default_learned_judge.json"  # package data beside this module


class LearnedModelError(JudgeError, InputError):
    """A learned judge's model file that cannot be used (missing, altered, another schema or
    features): bad input, exit 2."""


@dataclass
class LogisticModel:
    """p = sigmoid(bias + sum w_i (x_i - mean_i) / std_i)."""

    features: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    bias: float
    l2: float = DEFAULT_L2
    info: dict = field(default_factory=dict)
    context_weights: str = "previous"  # how the bridges weigh context passages (features.CONTEXT_WEIGHTS)

    def logits(self, X) -> np.ndarray:
        Z = (np.asarray(X, dtype=np.float64) - self.mean) / self.std
        return self.bias + Z @ self.weights

    def predict(self, X) -> np.ndarray:
        return _sigmoid(self.logits(X))

    def contributions(self, x) -> dict[str, float]:
        """Each feature's share of one row's logit (the intercept is `bias`)."""
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.std
        return {n: float(w * v) for n, w, v in zip(self.features, self.weights, z)}

    def raw_weights(self) -> tuple[np.ndarray, float]:
        """(weights, intercept) on the unstandardised features."""
        w = self.weights / self.std
        return w, float(self.bias - w @ self.mean)

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "features_version": FEATURES_VERSION,
            "features": list(self.features),
            "model": {
                "kind": "logistic-l2",
                "l2": self.l2,
                "mean": [float(v) for v in self.mean],
                "std": [float(v) for v in self.std],
                "weights": [float(v) for v in self.weights],
                "bias": float(self.bias),
                # written only when not version 1's rule: a file fitted before the choice existed
                # keeps its bytes and sha256
                **({} if self.context_weights == "previous" else {"context_weights": self.context_weights}),
            },
            **{k: v for k, v in self.info.items() if k not in ("schema", "version", "features", "model", "sha256")},
        }


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


def fit_logistic(
    X,
    y,
    features,
    *,
    l2: float = DEFAULT_L2,
    sample_weight=None,
    iterations: int = 50,
    context_weights: str = "previous",
) -> LogisticModel:
    """L2-regularised logistic regression by Newton's method on standardised features;
    `y` in [0, 1] (hard labels or a teacher's probabilities)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[1] != len(features):
        raise ValueError(f"X {X.shape} and y {y.shape} do not match {len(features)} features")
    if X.shape[0] == 0:
        raise ValueError("no examples to fit")
    if np.any((y < 0) | (y > 1)) or not np.all(np.isfinite(X)):
        raise ValueError("targets must be in [0, 1] and features finite")
    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    sw = sw / sw.sum()
    mean = (sw[:, None] * X).sum(axis=0)
    std = np.sqrt((sw[:, None] * (X - mean) ** 2).sum(axis=0))
    std = np.where(std > 1e-12, std, 1.0)  # a constant feature gets weight 0 (its z is 0)
    Z = np.hstack([np.ones((len(y), 1)), (X - mean) / std])
    k = Z.shape[1]
    penalty = np.full(k, float(l2))
    penalty[0] = 1e-9  # the intercept is (almost) free; the tiny ridge keeps separable data finite
    beta = np.zeros(k)
    ybar = float(np.clip(sw @ y, 1e-6, 1 - 1e-6))
    beta[0] = math.log(ybar / (1 - ybar))

    def loss(b):
        z = Z @ b
        # mean cross-entropy, stable for large |z|: log(1 + e^z) - y z
        return float(sw @ (np.logaddexp(0.0, z) - y * z)) + 0.5 * float(penalty @ (b * b))

    current = loss(beta)
    for _ in range(iterations):
        p = _sigmoid(Z @ beta)
        grad = Z.T @ (sw * (p - y)) + penalty * beta
        hess = (Z * (sw * p * (1 - p))[:, None]).T @ Z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-6:  # backtracking: a full Newton step can overshoot on near-separable data
            trial = beta - t * step
            new = loss(trial)
            if new <= current + 1e-4 * t * float(grad @ -step):
                break
            t /= 2
        beta, previous, current = trial, current, new
        if float(np.max(np.abs(t * step))) < 1e-9 or previous - current < 1e-13:
            break
    # context_weights: what the rows were computed with, so that the judge computes its rows the same way
    return LogisticModel(
        tuple(features), mean, std, beta[1:].copy(), float(beta[0]), float(l2), context_weights=context_weights
    )


# ---- the file ------------------------------------------------------------------------------
def _canonical(data: dict) -> bytes:
    body = {k: v for k, v in data.items() if k != "sha256"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def model_json(model: LogisticModel) -> str:
    """The file's text: the model's dict with its sha256."""
    data = model.to_dict()
    data["sha256"] = hashlib.sha256(_canonical(data)).hexdigest()
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def save_model(model: LogisticModel, path) -> str:
    """Write atomically (first removing the temporary files a writer killed mid-write left
    for this path); returns the sha256."""
    from workbench.safeio import atomic_write_text, clean_stale_temps

    text = model_json(model)
    path = Path(path)
    clean_stale_temps(path.parent if str(path.parent) else ".", path.name)
    atomic_write_text(path, text)
    return json.loads(text)["sha256"]


def default_model_path() -> Path:
    from importlib.resources import files

    return Path(str(files("workbench.judges") / DEFAULT_MODEL))


def load_model(path) -> tuple[LogisticModel, str]:
    """(the model, its sha256) from a model file, checked (LearnedModelError otherwise)."""
    path = Path(path)
    where = f"learned judge model {path}"
    if path.is_dir():
        raise LearnedModelError(f"{where}: is a folder; give the model file (from `sag2wb fit-judge --out J.json`)")
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LearnedModelError(f"{where}: no such file (fit one with `sag2wb fit-judge ... --out {path}`)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LearnedModelError(f"{where}: cannot read it ({exc})") from None
    try:
        data = parse_json(raw, where)  # too deep, a huge integer: named too
    except InputError as exc:
        raise LearnedModelError(str(exc)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise LearnedModelError(f"{where}: not a learned judge model (schema {SCHEMA!r} expected)")
    if not _is_int(data.get("version")) or data.get("version") != SCHEMA_VERSION:
        raise LearnedModelError(
            f"{where}: schema version {data.get('version')!r}, this workbench reads version {SCHEMA_VERSION}; refit it"
        )
    stored = data.get("sha256")
    try:
        actual = hashlib.sha256(_canonical(data)).hexdigest()
    except (ValueError, RecursionError) as exc:
        raise LearnedModelError(f"{where}: not canonical JSON ({exc})") from None
    if stored != actual:
        raise LearnedModelError(
            f"{where}: altered since it was fitted (sha256 {str(stored)[:12]}... recorded, {actual[:12]}... now); "
            f"refit it with `sag2wb fit-judge`"
        )
    if not _is_int(data.get("features_version")) or data.get("features_version") != FEATURES_VERSION:
        raise LearnedModelError(
            f"{where}: fitted on features version {data.get('features_version')!r}; this workbench computes "
            f"version {FEATURES_VERSION}: refit it"
        )
    try:
        features = data.get("features")
        if not isinstance(features, list) or not all(isinstance(n, str) for n in features):
            raise ValueError(f'"features" must be a list of feature names, not {_json_kind(features)}')
        names = check_names(features)
        m = data.get("model")
        if not isinstance(m, dict):
            raise ValueError(f'"model" must be an object, not {_json_kind(m)}')
        if m.get("kind") != "logistic-l2":
            raise ValueError(f'"model.kind" must be "logistic-l2", not {m.get("kind")!r}')
        mean, std, weights = (_numbers(m.get(key), f"model.{key}", len(names)) for key in ("mean", "std", "weights"))
        if not np.all(std > 0):
            raise ValueError('"model.std" must be positive')
        weighting = m.get("context_weights", "previous")
        if not isinstance(weighting, str) or weighting not in CONTEXT_WEIGHTS:
            raise ValueError(f"context_weights {weighting!r} is none of {', '.join(CONTEXT_WEIGHTS)}")
        l2 = _number(m.get("l2", DEFAULT_L2), "model.l2")
        bias = _number(m.get("bias"), "model.bias")
        if l2 < 0:
            raise ValueError('"model.l2" must be >= 0')
        model = LogisticModel(names, mean, std, weights, bias, l2, info=data, context_weights=weighting)
    except FeatureError as exc:
        raise LearnedModelError(f"{where}: fitted on other features ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise LearnedModelError(f"{where}: malformed model ({exc})") from None
    return model, actual


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _json_kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(v), "a number"
    )


def _number(v, name: str) -> float:
    """A finite JSON number (never a string, true/false or null)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f'"{name}" must be a finite number, not {_json_kind(v)}: {str(v)[:40]}')
    return float(v)


def _numbers(v, name: str, k: int) -> np.ndarray:
    """A list of k finite numbers, one per feature."""
    if not isinstance(v, list) or len(v) != k:
        raise ValueError(f'"{name}" must be a list of {k} numbers (one per feature), not {_json_kind(v)}')
    return np.array([_number(x, f"{name}[{i}]") for i, x in enumerate(v)], dtype=np.float64)


# ---- the judge -----------------------------------------------------------------------------
class LearnedJudge:
    """A judge from a fitted model (a file, or a LogisticModel in memory for cross-validation).

    >>> from workbench.engine import judge_items
    >>> ids = {title: i for i, title in enc_index.documents.items()}
    >>> film, director = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"]])
    >>> judge = LearnedJudge(enc_index)                                 # the shipped default model
    >>> q = "Where was the director of Glass Harbour born?"
    >>> s = judge.judge(q, [film, director], [dict(film, previous_score=0.9)])
    >>> all(0 < x < 1 for x in s), judge.key.startswith("learned-v1:")
    (True, True)
    >>> sentence, parts = judge.explain(q, [director], [dict(film, previous_score=0.9)])[0]
    >>> sentence.startswith("scored"), "bridge" in parts["contributions"]
    (True, True)
    """

    explains = True

    def __init__(
        self,
        index,
        path=None,
        *,
        model: LogisticModel | None = None,
        sha256: str | None = None,
        embedder=None,
        cache_dir=None,
        name: str | None = None,
    ):
        if model is None:
            path = default_model_path() if path is None else Path(path)
            model, sha256 = load_model(path)
            label = "learned" if path == default_model_path() else f"learned:{path}"
        else:
            sha256 = sha256 or hashlib.sha256(_canonical(model.to_dict())).hexdigest()
            label = "learned (in memory)"
        assert sha256 is not None
        self.model, self.sha256, self.path = model, sha256, path
        self.index = index
        self.extractor = FeatureExtractor(
            index, model.features, embedder=embedder, cache_dir=cache_dir, context_weights=model.context_weights
        )
        self.name = name or f"{label} (sha256 {sha256[:12]})"
        config: dict[str, str | None] = {"sha256": sha256}
        if self.extractor.needs_model:
            config["model"] = self.extractor.model_id()
        self.key = "learned-v1:" + json.dumps(config, sort_keys=True, separators=(",", ":"))
        # recent judge calls: (question, context key, [(unit id, text)], the call's arrays)
        self._calls: deque[tuple] = deque(maxlen=256)
        self._intercept = round(model.bias, 6)
        self._lock = threading.Lock()
        self._templates: dict[tuple, str] = {}
        self._feature_names = np.array(model.features, dtype=object)  # indexed by each row's top contributions

    def usage(self) -> dict:
        emb = self.extractor._embedder
        if emb is None:
            return {}
        s = emb.stats()
        return {"embedded": s["embedded"], "embedding_cache_hits": s["memory_hits"] + s["disk_hits"]}

    def judge(self, question, candidates, context):
        with self._lock:  # the judge server calls from several threads; the extractor's caches are not shared safely
            return self._judge(question, candidates, context)

    def _judge(self, question, candidates, context):
        if not candidates:
            return []
        X, named = self.extractor.matrix_and_names(question, candidates, context)
        model = self.model
        contrib = ((X - model.mean) / model.std) * model.weights  # each feature's share of the logit
        scores = _sigmoid(model.bias + contrib.sum(axis=1)).tolist()
        # what `explain` reports is kept as this call's arrays: its sentences and dicts are built when asked
        items = [(c.get("unit_id"), c["text"]) for c in candidates]
        self._calls.append((question, context_key(context), items, (X, contrib, named, scores)))
        return scores

    def _template(self, size: int, named: bool) -> str:
        """The sentence as one %-format (3x cheaper than formatted parts joined), made once per shape."""
        template = self._templates.get((size, named))
        if template is None:
            head = "scored %.2f: named by '%s'; logit " if named else "scored %.2f: logit "
            template = self._templates[(size, named)] = head + ", ".join(["%s %+.2f"] * size)
        return template

    def _scored_in(self, question, candidates, context) -> list[tuple]:
        """[(a judge call's arrays, positions in `candidates`, their rows in that call)]. The engine
        asks right after scoring, for the same candidates: the last call, compared item by item,
        answers at once. Otherwise the recent calls with this question and context are searched, and
        candidates found in none (scored elsewhere: a shared cache) are scored again, to the same numbers."""
        ckey = context_key(context)
        items = [(c.get("unit_id"), c["text"]) for c in candidates]
        if self._calls:
            q, k, last, call = self._calls[-1]
            if q == question and k == ckey and last == items:
                every = list(range(len(items)))
                return [(call, every, every)]
        where: dict = {}
        for q, k, got, call in self._calls:
            if q == question and k == ckey:
                where.update((item, (call, i)) for i, item in enumerate(got))
        found: list = [where.get(item) for item in items]
        missing = [j for j, f in enumerate(found) if f is None]
        if missing:
            self._judge(question, [candidates[j] for j in missing], context)
            call = self._calls[-1][3]
            for i, j in enumerate(missing):
                found[j] = (call, i)
        groups: dict[int, tuple] = {}
        for j, (call, i) in enumerate(found):
            group = groups.setdefault(id(call), (call, [], []))
            group[1].append(j)
            group[2].append(i)
        return list(groups.values())

    def explain(self, question, candidates, context) -> list[tuple[str, dict]]:
        """(sentence, components) per candidate: the features, each one's contribution to the
        logit (weight x standardised value) and the intercept."""
        with self._lock:
            groups = self._scored_in(question, candidates, context)
        out: list = [None] * len(candidates)
        features, intercept, names = self.model.features, self._intercept, self._feature_names
        for (X, contrib, named, scores), positions, rows in groups:
            if rows != list(range(len(scores))):  # else the engine's case: the whole call, in order, needs no copy
                X, contrib, named, scores = X[rows], contrib[rows], [named[i] for i in rows], [scores[i] for i in rows]
            part = np.round(contrib, 6)
            top = np.argsort(-np.abs(contrib), axis=1, kind="stable")[:, :3]  # unrounded: no new ties
            labels, values = names[top], np.take_along_axis(part, top, axis=1)
            # the sentence's columns: each candidate's three largest contributions and their names
            columns = (
                scores,
                *[c for k in range(top.shape[1]) for c in (labels[:, k].tolist(), values[:, k].tolist())],
            )
            plain = self._template(top.shape[1], False)
            sentences = [plain % t for t in zip(*columns)]
            # the components, a dict per candidate built by map (a third cheaper than a loop of dict(zip))
            comps = list(map(dict, map(zip, repeat(features), np.round(X, 6).tolist())))
            shares = list(map(dict, map(zip, repeat(features), part.tolist())))
            for r, (j, comp, sentence) in enumerate(zip(positions, comps, sentences)):
                comp["contributions"] = shares[r]
                comp["intercept"] = intercept
                by = named[r]
                if by:
                    comp["named_by"] = by
                    sentence = self._template(top.shape[1], True) % (scores[r], by, *[c[r] for c in columns[1:]])
                comp["score"] = scores[r]
                out[j] = (sentence, comp)
        return out


def feature_table() -> list[tuple[str, str]]:
    """(name, what it is) for every feature, in order."""
    return list(FEATURES.items())
