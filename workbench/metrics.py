"""The paper's retrieval metrics (SPEC §3 "Evaluation"), over plain lists: R@k and AE@k on
unique documents, per-question records, their means, and paired bootstrap intervals.

Significance across several rows against one baseline (`compare_rows`): the paired
randomization (sign-flip) test and the paired bootstrap, Holm and Bonferroni corrections
that leave the baseline's own row out, effect sizes with intervals.

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


# ---- significance across several comparisons (paired tests, corrections, effect sizes) ------
RANDOMIZATION_RESAMPLES = 10000  # sign-flip permutations when 2^n is larger (else all are enumerated)
RANDOMIZATION_SEED = BOOTSTRAP_SEED
EXACT_LIMIT = 16  # up to 2^16 sign patterns are enumerated: the exact permutation distribution
CORRECTIONS = ("holm", "bonferroni")


def _paired(a, b, what: str):
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"{what} needs the same questions on both sides ({a.shape[0]} vs {b.shape[0]})")
    if a.size == 0:
        raise ValueError(f"{what} needs at least one question")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(f"{what}: a question has no value (NaN); leave questions without gold out on both sides")
    return a - b


def paired_randomization(
    a, b, resamples: int = RANDOMIZATION_RESAMPLES, seed: int = RANDOMIZATION_SEED, exact: bool | None = None
) -> dict:
    """Two-sided paired randomization (sign-flip permutation) test of mean(a - b) = 0.

    Under the null each question's difference is as likely to carry either sign, so the
    p-value is the share of sign patterns whose mean is at least as far from 0 as the
    observed one. `exact=None`: every one of the 2^n patterns when n <= 16 (exact=True
    forces it, refused beyond 20), else `resamples` random patterns (seeded) with the
    (1 + hits) / (1 + resamples) estimate, which is never 0. The record says which.

    >>> test = paired_randomization([3.0, 1.0, 2.0], [0.0, 0.0, 0.0])   # 1 of 8 patterns each side
    >>> test["p"], test["exact"], test["permutations"], test["seed"]
    (0.25, True, 8, None)
    >>> paired_randomization([1.0, 0.0], [1.0, 0.0])["p"]   # no difference at all
    1.0
    """
    import numpy as np

    diff = _paired(a, b, "paired randomization test")
    n = diff.size
    observed = abs(diff.mean())
    # differences within rounding of the observed mean count as "as extreme"
    tol = 1e-9 * max(1.0, float(np.abs(diff).max()))
    if exact is None:
        exact = n <= EXACT_LIMIT
    if exact:
        if n > 20:
            raise ValueError(f"an exact randomization test enumerates 2^n patterns; n = {n} is too many (at most 20)")
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * -2 + 1  # every sign pattern once
        means = np.abs((patterns * diff).mean(axis=1))
        hits = int((means >= observed - tol).sum())
        p = hits / 2**n
        return {
            "test": "randomization",
            "questions": n,
            "difference": float(diff.mean()),
            "p": p,
            "exact": True,
            "permutations": 2**n,
            "seed": None,
        }
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, resamples, 1000):  # in blocks: 1000 x n signs at a time
        k = min(1000, resamples - start)
        signs = rng.integers(0, 2, size=(k, n)) * 2 - 1
        hits += int((np.abs((signs * diff).mean(axis=1)) >= observed - tol).sum())
    return {
        "test": "randomization",
        "questions": n,
        "difference": float(diff.mean()),
        "p": (1 + hits) / (1 + resamples),
        "exact": False,
        "permutations": resamples,
        "seed": seed,
    }


def bootstrap_p(a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """Two-sided paired bootstrap p-value of mean(a - b) = 0 (the same resamples as
    `paired_bootstrap`): the share of resampled means, shifted to mean 0, at least as far
    from 0 as the observed mean, as (1 + hits) / (1 + resamples).

    >>> round(bootstrap_p([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]), 4)   # only all-zero resamples reach 0
    0.002
    """
    import numpy as np

    diff = _paired(a, b, "paired bootstrap")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    observed = diff.mean()
    tol = 1e-9 * max(1.0, float(np.abs(diff).max()))
    hits = int((np.abs(means - observed) >= abs(observed) - tol).sum())
    return (1 + hits) / (1 + resamples)


def _pvalue_items(pvalues):
    """(keys, values) of a list or a {name: p} dict; None / NaN mean "no test" (a baseline's own row)."""
    items = list(pvalues.items()) if isinstance(pvalues, dict) else list(enumerate(pvalues))
    for k, p in items:
        if not is_missing(p) and not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"p-value of {k!r} must be in [0, 1] (or None for no test), got {p!r}")
    return items


def _shaped(pvalues, items, adjusted: dict):
    if isinstance(pvalues, dict):
        return {k: adjusted.get(k) for k, _ in items}
    return [adjusted.get(k) for k, _ in items]


def bonferroni(pvalues):
    """Bonferroni-adjusted p-values: min(1, m·p), m = the number of real tests. Missing
    p-values (None, NaN: the baseline compared with itself) stay None and do not count in m
    — counting them is the mistake PyTerrier's PR 440 fixed.

    >>> bonferroni([0.01, 0.04, 0.03])
    [0.03, 0.12, 0.09]
    >>> bonferroni({"H=2": None, "H=1": 0.01, "bm25": 0.04, "H=0": 0.03})
    {'H=2': None, 'H=1': 0.03, 'bm25': 0.12, 'H=0': 0.09}
    """
    items = _pvalue_items(pvalues)
    real = [(k, float(p)) for k, p in items if not is_missing(p)]
    m = len(real)
    return _shaped(pvalues, items, {k: _round(min(1.0, m * p)) for k, p in real})


def holm(pvalues):
    """Holm's step-down adjusted p-values: sorted ascending p_(1) <= ... <= p_(m), the i-th
    becomes max over j <= i of min(1, (m - j + 1)·p_(j)). Missing p-values (None, NaN) stay
    None and do not count in m (PyTerrier PR 440's regression). Ties keep input order.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    >>> holm({"H=2": float("nan"), "a": 0.01, "b": 0.04, "c": 0.03})
    {'H=2': None, 'a': 0.03, 'b': 0.06, 'c': 0.06}
    """
    items = _pvalue_items(pvalues)
    real = [(k, float(p)) for k, p in items if not is_missing(p)]
    m = len(real)
    order = sorted(range(m), key=lambda i: real[i][1])  # stable: ties keep input order
    adjusted, running = {}, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * real[i][1]))
        adjusted[real[i][0]] = _round(running)
    return _shaped(pvalues, items, adjusted)


def _round(p: float) -> float:
    return round(p, 12)  # 3 * 0.01 is 0.030000000000000002 in floats; the corrections report 0.03


def correct(pvalues, method: str = "holm"):
    """`holm` or `bonferroni` by name (`CORRECTIONS`)."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; known: {', '.join(CORRECTIONS)}")
    return holm(pvalues) if method == "holm" else bonferroni(pvalues)


def paired_effect(a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Effect sizes of a paired comparison with 95% percentile bootstrap intervals (the same
    question resamples for both): the mean difference, and the standardised paired effect
    d_z = mean(a - b) / sd(a - b) (sd with n - 1). d_z is None when every question has the
    same difference (sd = 0: no spread to standardise by); resamples with sd = 0 are left out
    of its interval.

    >>> paired_effect([3.0, 1.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])["d_z"]   # differences 2, 0, 1, 1: 1 / sqrt(2/3)
    1.2247
    """
    import numpy as np

    diff = _paired(a, b, "paired effect")
    mean, lo, hi = paired_bootstrap(a, b, resamples, seed)
    n = diff.size
    sd = float(diff.std(ddof=1)) if n > 1 else 0.0
    dz = dz_lo = dz_hi = None
    if sd > 0:
        dz = float(diff.mean() / sd)
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(resamples, n))
        sample = diff[idx]
        sds = sample.std(axis=1, ddof=1)
        ok = sds > 0
        if ok.any():
            dz_lo, dz_hi = (float(x) for x in np.percentile(sample.mean(axis=1)[ok] / sds[ok], [2.5, 97.5]))

    def r(v):
        return None if v is None else round(v, 4)

    return {
        "difference": round(mean, 4),
        "low": round(lo, 4),
        "high": round(hi, 4),
        "d_z": r(dz),
        "d_z_low": r(dz_lo),
        "d_z_high": r(dz_hi),
        "resamples": resamples,
        "seed": seed,
    }


def compare_rows(
    rows: dict,
    baseline: str,
    *,
    correction: str = "holm",
    test: str = "randomization",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    permutations: int = RANDOMIZATION_RESAMPLES,
) -> dict:
    """Every row against one baseline, per question (paired): mean difference and d_z with
    bootstrap intervals, the randomization and bootstrap p-values, and both corrections
    across the comparisons — m = the rows other than the baseline, whose own entry has no
    test (None everywhere) and never enters a correction. `rows`: {name: per-question values
    in one question order}. `test` picks the p-value the corrections adjust. The record keeps
    the seeds and resample counts.

    >>> rows = {"H=2": [1.0, 1.0, 0.0, 1.0], "bm25": [0.0, 1.0, 0.0, 0.0], "H=1": [1.0, 1.0, 0.0, 1.0]}
    >>> out = compare_rows(rows, "H=2")
    >>> out["rows"]["bm25"]["difference"], out["rows"]["bm25"]["p"], out["rows"]["bm25"]["p_holm"]
    (-0.5, 0.5, 1.0)
    >>> out["rows"]["H=2"]["p_holm"], out["comparisons"]
    (None, 2)
    """
    if baseline not in rows:
        raise ValueError(f"baseline {baseline!r} is not among the rows: {', '.join(map(str, rows))}")
    if test not in ("randomization", "bootstrap"):
        raise ValueError(f"test must be 'randomization' or 'bootstrap', got {test!r}")
    base = rows[baseline]
    out: dict = {}
    for name, values in rows.items():
        if name == baseline:
            out[name] = {
                "difference": None,
                "low": None,
                "high": None,
                "d_z": None,
                "d_z_low": None,
                "d_z_high": None,
                "p_randomization": None,
                "p_bootstrap": None,
                "p": None,
            }
            continue
        effect = paired_effect(values, base, resamples, seed)
        perm = paired_randomization(values, base, permutations, seed)
        p_boot = bootstrap_p(values, base, resamples, seed)
        effect.pop("resamples"), effect.pop("seed")
        out[name] = {
            **effect,
            "p_randomization": round(perm["p"], 6),
            "p_bootstrap": round(p_boot, 6),
            "p": round(perm["p"] if test == "randomization" else p_boot, 6),
        }
    ps = {name: r["p"] for name, r in out.items()}
    for method in CORRECTIONS:
        for name, p in correct(ps, method).items():
            out[name][f"p_{method}"] = None if p is None else round(p, 6)
    return {
        "baseline": baseline,
        "test": test,
        "correction": correction,
        "comparisons": sum(1 for p in ps.values() if p is not None),
        "bootstrap": {"resamples": resamples, "seed": seed},
        "randomization": {"resamples": permutations, "seed": seed, "exact_up_to_questions": EXACT_LIMIT},
        "rows": out,
    }
