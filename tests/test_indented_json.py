"""`eval --out`'s JSON text (cli/outputs.indented_json): json.dumps(indent=1)'s exact bytes, faster
(issue 33: the result file is written after the last question, on the run's wall time)."""

import json
import math
import random
from collections import OrderedDict

import numpy as np
import pytest

from workbench.cli.outputs import indented_json


def reference(data) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)


def test_hand_checked_text():
    data = {"q": [{"ranking": ["B", "Ä"], "scores": {"B": 0.25, "Ä": 1.0}, "n": 2}], "e": [], "m": {}}
    assert indented_json(data) == (
        '{\n "q": [\n  {\n   "ranking": [\n    "B",\n    "Ä"\n   ],\n   "scores": {\n    "B": 0.25,\n'
        '    "Ä": 1.0\n   },\n   "n": 2\n  }\n ],\n "e": [],\n "m": {}\n}'
    )
    assert indented_json(data) == reference(data)


def random_value(rng: random.Random, depth: int):
    scalars = [
        lambda: rng.choice(["", "a", 'é\n"q"\\', "北京", "\u2028", "\x00", "x" * 30]),
        lambda: rng.randint(-(10**20), 10**20),
        lambda: rng.uniform(-1e6, 1e6),
        lambda: rng.choice([0.0, -0.0, 1e-300, 1e300, 0.1, 5e-324]),
        lambda: rng.choice([None, True, False]),
    ]
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(scalars)()
    n = rng.choice([0, 1, 2, 5])
    kind = rng.choice(["list", "tuple", "dict", "flat"])
    if kind == "dict":
        return {f"k{rng.randint(0, 9)}é{i}": random_value(rng, depth - 1) for i in range(n)}
    if kind == "flat":  # the fast path: a container of scalars only
        return (
            {str(i): rng.choice(scalars)() for i in range(n)}
            if rng.random() < 0.5
            else [rng.choice(scalars)() for _ in range(n)]
        )
    items = [random_value(rng, depth - 1) for _ in range(n)]
    return items if kind == "list" else tuple(items)


def test_equal_to_json_dumps_on_random_documents():
    rng = random.Random(33)
    for _ in range(400):
        data = random_value(rng, 5)
        assert indented_json(data) == reference(data)


@pytest.mark.parametrize(
    "data",
    [
        {"a": [1, {2: "int key"}]},  # non-string key below the top: json.dumps's conversion
        {"a": [{"x": [1]}, OrderedDict(b=1)]},  # a dict subclass
        {"a": [[np.float64(0.5), np.int64(3)]]},  # numpy scalars (float64 subclasses float)
        {"a": [{"k": [True]}], "b": [1, [2, 1.5]]},
        [[1, (2, 3)], {"t": (4,)}],
    ],
)
def test_the_rest_is_json_dumps_text(data):
    try:
        expected = reference(data)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            indented_json(data)
    else:
        assert indented_json(data) == expected


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_raise_as_json_dumps_does(bad):
    for data in ({"a": [bad]}, {"a": [{"b": bad}, [1]]}, {"a": {"b": [bad], "c": [1, [2]]}}):
        with pytest.raises(ValueError, match="JSON compliant"):
            indented_json(data)


def test_circular_reference_raises_as_json_dumps_does():
    data: dict = {"a": [1, [2]]}
    data["a"][1].append(data)
    with pytest.raises(ValueError, match="Circular reference"):
        indented_json(data)
