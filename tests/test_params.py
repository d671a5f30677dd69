import pytest

from workbench.params import Params, ParamsError, earliest_affected_round


def test_defaults_match_the_paper():
    p = Params()
    assert (p.B, p.s, p.L, p.H, p.p, p.query_tokens, p.incoming_limit, p.context_size, p.fusion_constant) == (
        100,
        10,
        20,
        2,
        5,
        80,
        20,
        10,
        60,
    )
    assert p.field_weights == (2.0, 2.0, 1.0) and p.term_weighting == "sag2" and p.diversity


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"H": 3}, "H \\(expansion rounds\\) must be 0, 1 or 2, got 3"),
        ({"B": 0}, "B \\(candidates per round\\) must be >= 1"),
        ({"field_weights": (2, -1, 1)}, "non-negative"),
        ({"field_weights": (0, 0, 0)}, "at least one weight"),
        ({"field_weights": (1, 2)}, "three numbers"),
        ({"s": 1.5}, "s must be an integer"),
        ({"diversity": "yes"}, "diversity must be true or false"),
    ],
)
def test_invalid_values_are_named(changes, message):
    with pytest.raises(ParamsError, match=message):
        Params(**changes)


def test_params_are_hashable_keys_and_round_trip():
    a, b = Params(L=10), Params(L=10)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert Params.from_dict(a.to_dict()) == a


def test_cli_assignments():
    p = Params().with_assignments(["L=10", "field_weights=1,1,1", "diversity=false", "term_weighting=no_idf"])
    assert (p.L, p.field_weights, p.diversity, p.term_weighting) == (10, (1.0, 1.0, 1.0), False, "no_idf")
    with pytest.raises(ParamsError, match="expected name=value"):
        Params().with_assignments(["bogus=1"])
    with pytest.raises(ParamsError, match="'x' is not a valid int"):
        Params().with_assignments(["L=x"])


def test_earliest_affected_round():
    p = Params()
    assert earliest_affected_round(p, p.replace(B=50)) == 0
    assert earliest_affected_round(p, p.replace(L=5)) == 1
    assert earliest_affected_round(p, p.replace(incoming_limit=5)) == 2
    assert earliest_affected_round(p, p.replace(H=1)) == 2
    assert earliest_affected_round(p.replace(H=0), p) == 1
    assert earliest_affected_round(p, p.replace(diversity=False)) == 3
