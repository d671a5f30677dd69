"""out.json's per-type and per-hop tables (`group_means`, without pandas) hold the numbers
`EvalResult.by` (pandas) computes, to the bit."""

from __future__ import annotations

import math
import random

from workbench.metrics import METRICS
from workbench.runs.evaluation import EvalResult, group_means


def pandas_tables(records: list[dict], column: str) -> dict:
    """What to_dict wrote with pandas (before group_means)."""
    table = EvalResult({}, records).by(column)

    def plain(v):
        return None if isinstance(v, float) and math.isnan(v) else float(v)

    return {str(k): {m: plain(v) for m, v in row.items()} for k, row in table.iterrows()}


def random_records(rng: random.Random) -> list[dict]:
    some_hops_missing = rng.random() < 0.3
    types = ["comparison", "bridge", "compositional", None] if rng.random() < 0.5 else ["a", "b"]
    records = []
    for i in range(rng.randint(1, 120)):
        den = rng.choice([1, 2, 3, 6, 7, 9, 11])  # recall-like fractions: sums that round differently

        def value(den=den):
            return None if rng.random() < 0.05 else 100 * rng.randint(0, den) / den

        records.append(
            {
                "_id": str(i),
                "type": rng.choice(types),
                "hops": None if some_hops_missing and rng.random() < 0.3 else rng.choice([2, 3, 4]),
                **{m: value() for m in METRICS},
                "judgments": rng.randint(0, 500),
                "stop": "budget",
            }
        )
    return records


def test_group_means_equal_the_pandas_tables_on_random_records():
    rng = random.Random(33)
    for _ in range(300):
        records = random_records(rng)
        for column in ("type", "hops"):
            assert group_means(records, column) == pandas_tables(records, column)


def test_a_column_without_values_gives_no_table():
    records = [{"_id": "q", "type": None, "hops": None, "R@5": 1.0, "R@10": 1.0, "AE@10": 1.0, "judgments": 1}]
    assert group_means(records, "hops") == pandas_tables(records, "hops") == {}
