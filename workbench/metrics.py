"""The paper's retrieval metrics (SPEC §3 "Evaluation"), over plain lists: R@k and AE@k on
unique documents, per-question records, their means, and paired bootstrap intervals.

A leaf: it imports nothing from the workbench, so evaluation, experiments, file formats and
ir_measures all score a ranking the same way. A ranking is a list of document names in rank
order with duplicates removed (first occurrences kept); `gold` is the question's gold
documents. Percentages (0-100) are the paper's scale; a question without gold has no value
(NaN or None, `is_missing`) and is left out of means.

>>> question_metrics(["a", "x", "b"], ["a", "b"])
{'R@5': 100.0, 'R@10': 100.0, 'AE@10': 100.0}
"""

from __future__ import annotations

import math

METRICS = ("R@5", "R@10", "AE@10")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261015


def is_missing(v) -> bool:
    """True for a metric that has no value: None, or a float NaN (numpy floats included).

    >>> [is_missing(v) for v in (None, float("nan"), 0.0, 50, "nan")]
    [True, True, False, False, False]
    """
    return v is None or (isinstance(v, float) and math.isnan(v))


def recall_at(ranking_docs, gold, k: int) -> float:
    """|G ∩ top-k| / |G| over unique documents (first occurrences kept); NaN without gold.

    >>> recall_at(["a", "x", "b", "y"], ["a", "b", "c"], 2)   # a of {a, b, c} in the top 2
    0.3333333333333333
    >>> recall_at(["a", "x", "b", "y"], ["a", "b"], 3)
    1.0
    >>> recall_at(["a"], [], 5)
    nan
    """
    gold = set(gold)
    return len(gold & set(ranking_docs[:k])) / len(gold) if gold else float("nan")


def all_evidence_at(ranking_docs, gold, k: int) -> float:
    """1.0 when every gold document is in the top k, else 0.0; NaN without gold.

    >>> all_evidence_at(["a", "x", "b"], ["a", "b"], 3), all_evidence_at(["a", "x", "b"], ["a", "b"], 2)
    (1.0, 0.0)
    """
    gold = set(gold)
    return float(gold <= set(ranking_docs[:k])) if gold else float("nan")


def question_metrics(ranking_docs, gold) -> dict:
    """R@5, R@10, AE@10 in percent; None each when the question has no gold (excluded from means).

    >>> question_metrics(["x1", "x2", "x3", "x4", "x5", "a"], ["a", "b"])   # a is 6th, b not found
    {'R@5': 0.0, 'R@10': 50.0, 'AE@10': 0.0}
    >>> question_metrics(["a"], [])
    {'R@5': None, 'R@10': None, 'AE@10': None}
    """
    if not gold:
        return {m: None for m in METRICS}
    return {
        "R@5": 100 * recall_at(ranking_docs, gold, 5),
        "R@10": 100 * recall_at(ranking_docs, gold, 10),
        "AE@10": 100 * all_evidence_at(ranking_docs, gold, 10),
    }


def mean_metrics(rows: list[dict]) -> dict:
    """Means over the rows that have a value (questions without gold have none), rounded to 2
    places; None when no row has.

    >>> mean_metrics([{"R@5": 50.0, "R@10": 100.0, "AE@10": 100.0},
    ...               {"R@5": 0.0, "R@10": 100 / 3, "AE@10": 0.0},
    ...               {"R@5": None, "R@10": None, "AE@10": None}])    # the last has no gold
    {'R@5': 25.0, 'R@10': 66.67, 'AE@10': 50.0}
    >>> mean_metrics([{"R@5": None, "R@10": float("nan"), "AE@10": None}])
    {'R@5': None, 'R@10': None, 'AE@10': None}
    """
    out = {}
    for m in METRICS:
        vals = [r[m] for r in rows if not is_missing(r[m])]
        out[m] = round(sum(vals) / len(vals), 2) if vals else None
    return out


def paired_bootstrap(
    a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """Mean of (a - b) and its paired 95% percentile interval over question resamples
    (`a[i]` and `b[i]` are the same question; seeded, so the interval is reproducible).

    >>> paired_bootstrap([100.0, 50.0, 0.0], [50.0, 0.0, -50.0])   # every question +50: no spread
    (50.0, 50.0, 50.0)
    >>> paired_bootstrap([1.0, 0.0], [1.0, 0.0])
    (0.0, 0.0, 0.0)
    >>> paired_bootstrap([1.0, 0.0], [1.0])
    Traceback (most recent call last):
    ValueError: paired bootstrap needs the same questions on both sides (2 vs 1)
    """
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs the same questions on both sides ({a.shape[0]} vs {b.shape[0]})")
    diff = a - b
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(lo), float(hi)
