"""Paired tests, corrections and effect sizes (workbench/metrics.py): known p-values, the exact
randomization distribution enumerated independently, and PyTerrier PR 440's mistake (the
baseline's empty p-value counted in the correction) kept out."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from workbench.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bonferroni,
    bootstrap_p,
    compare_rows,
    correct,
    holm,
    paired_bootstrap,
    paired_effect,
    paired_randomization,
)


def test_holm_and_bonferroni_with_known_p_values():
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert bonferroni([0.01, 0.04, 0.03]) == [0.03, 0.12, 0.09]
    # step-down: 4 x 0.01, 3 x 0.02 = 0.06, then max(0.06, 2 x 0.03), max(0.06, 0.04)
    assert holm([0.01, 0.02, 0.03, 0.04]) == [0.04, 0.06, 0.06, 0.06]
    assert holm([0.5, 0.6]) == [1.0, 1.0] and bonferroni([0.7]) == [0.7]
    assert correct({"a": 0.2}, "bonferroni") == {"a": 0.2}
    with pytest.raises(ValueError, match="unknown correction 'bh'"):
        correct([0.1], "bh")
    with pytest.raises(ValueError, match="p-value of 1 must be in"):
        holm([0.1, 1.5])


@pytest.mark.parametrize("empty", [None, float("nan"), np.nan])
@pytest.mark.parametrize("method", [holm, bonferroni])
def test_the_baselines_empty_p_value_never_enters_the_correction(empty, method):
    """PyTerrier PR 440: a table whose baseline row has an empty p-value must give the same
    corrected p-values as the table without that row."""
    without = {"H=1": 0.01, "bm25": 0.04, "final-only": 0.03}
    with_baseline = {"H=2": empty, **without}
    got = method(with_baseline)
    assert got.pop("H=2") is None
    assert got == method(without)
    assert method([empty, 0.01, 0.04, 0.03])[1:] == method([0.01, 0.04, 0.03])


def test_compare_rows_leaves_the_baseline_out_of_m():
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2, 40).astype(float) * 100
    rows = {"H=2": base, "a": np.clip(base - 50 * rng.integers(0, 2, 40), 0, 100), "b": base.copy(), "c": base[::-1]}
    out = compare_rows(rows, "H=2")
    assert out["comparisons"] == 3 and out["rows"]["H=2"]["p"] is None and out["rows"]["H=2"]["p_holm"] is None
    raw = {k: out["rows"][k]["p"] for k in ("a", "b", "c")}
    assert {k: out["rows"][k]["p_holm"] for k in raw} == pytest.approx(holm(raw))
    assert {k: out["rows"][k]["p_bonferroni"] for k in raw} == pytest.approx(bonferroni(raw))
    assert out["rows"]["b"]["p"] == 1.0 and out["rows"]["b"]["difference"] == 0.0  # identical rows
    assert out["bootstrap"] == {"resamples": 2000, "seed": 20261015}
    assert out["randomization"]["seed"] == 20261015
    with pytest.raises(ValueError, match="baseline 'zz' is not among the rows"):
        compare_rows(rows, "zz")


def _enumerated_p(diff) -> float:
    """The exact two-sided sign-flip p-value, written out the slow way."""
    n = len(diff)
    observed = abs(sum(diff) / n)
    hits = 0
    for signs in itertools.product((1, -1), repeat=n):
        m = abs(sum(s * d for s, d in zip(signs, diff)) / n)
        hits += m >= observed - 1e-9 * max(1.0, max(abs(d) for d in diff))
    return hits / 2**n


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_randomization_test_is_exact_on_small_cases(n):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 5, n).astype(float) * 25
    b = rng.integers(0, 5, n).astype(float) * 25
    got = paired_randomization(a, b)
    assert got["exact"] and got["permutations"] == 2**n
    assert got["p"] == _enumerated_p(list(a - b))
    # the Monte Carlo path estimates the same distribution
    sampled = paired_randomization(a, b, resamples=20000, exact=False)
    assert not sampled["exact"] and sampled["seed"] == BOOTSTRAP_SEED
    assert abs(sampled["p"] - got["p"]) < 0.02


def test_randomization_hand_case():
    # differences 2, 2, 2: only all-plus and all-minus reach |mean| 2: 2 of 8
    assert paired_randomization([3.0, 3.0, 3.0], [1.0, 1.0, 1.0])["p"] == 0.25
    # differences 1, -1: every pattern's |mean| is 0 or 1, and the observed mean is 0: p = 1
    assert paired_randomization([1.0, 0.0], [0.0, 1.0])["p"] == 1.0
    with pytest.raises(ValueError, match="at most 20"):
        paired_randomization(np.zeros(21), np.zeros(21), exact=True)
    with pytest.raises(ValueError, match="same questions on both sides"):
        paired_randomization([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no value"):
        paired_randomization([1.0, float("nan")], [1.0, 2.0])


def test_randomization_on_large_sets_is_seeded():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.2, 1, 300), rng.normal(0, 1, 300)
    one, two = paired_randomization(a, b), paired_randomization(a, b)
    assert one == two and not one["exact"] and 0 < one["p"] <= 1
    assert paired_randomization(a, b, seed=1)["seed"] == 1 and one["seed"] == BOOTSTRAP_SEED  # recorded
    assert paired_randomization(a, a)["p"] == 1.0


def test_bootstrap_defaults_stay_the_papers():
    assert (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED) == (2000, 20261015)
    assert paired_bootstrap.__defaults__ == (2000, 20261015)
    effect = paired_effect([100.0, 50.0, 0.0, 100.0], [50.0, 50.0, 0.0, 0.0])
    assert (effect["difference"], effect["low"], effect["high"]) == tuple(
        round(x, 4) for x in paired_bootstrap([100.0, 50.0, 0.0, 100.0], [50.0, 50.0, 0.0, 0.0])
    )
    assert effect["resamples"] == 2000 and effect["seed"] == 20261015


def test_effect_sizes_by_hand():
    # differences 2, 0, 1, 1: mean 1, sd (n - 1) sqrt(2/3)
    e = paired_effect([3.0, 1.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])
    assert e["d_z"] == round(1 / math.sqrt(2 / 3), 4)
    assert e["d_z_low"] <= e["d_z"] <= e["d_z_high"]
    same = paired_effect([1.0, 2.0], [0.0, 1.0])  # every difference 1: no spread, no d_z
    assert same["d_z"] is None and same["difference"] == 1.0


def test_bootstrap_p_value():
    assert bootstrap_p([1.0, 2.0], [1.0, 2.0]) == 1.0
    rng = np.random.default_rng(5)
    a = rng.normal(1.0, 1.0, 200)
    assert bootstrap_p(a, np.zeros(200)) == 1 / 2001  # far from 0: no resample reaches it
