"""What the notebook API accepts for a run's arguments, checked at the edge: `Run(...)`,
`Run.rerun(...)` and the dashboard read them through these functions, so a wrong value is
refused by name (the argument, the value, what to give) instead of failing rounds later.

>>> base = Params()
>>> params_from({"L": 10, "field_weights": [2, 2, 0]}, base).L
10
>>> params_from({"l": 10}, base)
Traceback (most recent call last):
...
workbench.params.ParamsError: params: unknown parameter 'l'; known: B, s, L, H, ...
>>> judge_from("semantic", index=None, gold=())
Traceback (most recent call last):
...
workbench.judgment.JudgeError: judge='semantic' is a judge's name; give a judge: JudgeSpec.parse('semantic') ...
>>> pins_from({(1, 7): 0.9})
{(1, 7): 0.9}
>>> round_from(-1)
Traceback (most recent call last):
...
workbench.run_arguments.RunArgumentError: from_round=-1: give a round number >= 0, or None ...

A leaf beside `params` and `judgment`: it imports nothing above them (a JudgeSpec is
recognised by what it does, `build(index, gold)`, not imported from the judges layer).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import fields

from workbench.judgment import JudgeError, describe_value
from workbench.params import Params, ParamsError
from workbench.protocols import is_judge_object
from workbench.safeio import InputError

# an integer parameter past this is no count of passages or terms (and SQLite's LIMIT overflows)
_LARGEST = 2**62


class RunArgumentError(InputError):
    """A run argument (a round number, pins) of the wrong type or out of range."""


def params_from(value, base: Params, what: str = "params") -> Params:
    """`value` as Params: None is `base`, a Params is itself, a dict of overrides
    (`{"L": 10}`) is `base` with them; anything else, an unknown name or a bad value is a
    ParamsError naming it."""
    if value is None:
        return base
    if isinstance(value, Params):
        return value
    known = [f.name for f in fields(Params)]
    if not isinstance(value, Mapping):
        raise ParamsError(
            f"{what}={describe_value(value)}: give a Params or a dict of overrides such as {{'L': 10}} "
            f"(names: {', '.join(known)})"
        )
    for name, v in value.items():
        if name not in known:
            raise ParamsError(f"{what}: unknown parameter {describe_value(name)}; known: {', '.join(known)}")
        if isinstance(v, numbers.Integral) and not isinstance(v, bool) and abs(int(v)) > _LARGEST:
            raise ParamsError(f"{what}: {name}={describe_value(v)} is too large")
    try:
        return base.replace(**dict(value))
    except TypeError as exc:  # a value of a type the dataclass cannot even read (field_weights=5)
        raise ParamsError(f"{what}: {exc}") from None


def judge_from(value, *, index, gold):
    """`value` as the judge a run uses: a judge object (with `judge(question, candidates,
    context)`) as is, None for the BM25 baseline, a JudgeSpec (anything with `build(index,
    gold)`, e.g. `JudgeSpec.parse("semantic")`) built for this index and gold. A name, a
    plain function or another value is a JudgeError that says what to give."""
    if isinstance(value, str):
        raise JudgeError(
            f"judge={value!r} is a judge's name; give a judge: JudgeSpec.parse({value!r}) (from workbench.judges; "
            f"it is built for the run's index), a judge object, or None for BM25"
        )
    if value is None or is_judge_object(value):
        return value
    if callable(getattr(value, "build", None)):
        return value.build(index, tuple(gold) or None)
    if callable(value):
        raise JudgeError(
            f"judge={describe_value(value)}: a plain function; wrap it: FunctionJudge(fn) (from workbench.judges)"
        )
    raise JudgeError(
        f"judge={describe_value(value)}: not a judge; give a judge object, a JudgeSpec (JudgeSpec.parse('lexical')), "
        f"or None for BM25"
    )


def pins_from(value, current: dict | None = None) -> dict:
    """`value` as pins {(round, unit_id): score in [0, 1]}; None keeps `current`."""
    if value is None:
        return dict(current or {})
    if not isinstance(value, Mapping):
        raise RunArgumentError(
            f"pins={describe_value(value)}: give a dict {{(round, unit_id): score}}, e.g. {{(1, 7): 0.9}}"
        )
    out = {}
    for key, score in value.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(_is_count(k) for k in key)):
            raise RunArgumentError(
                f"pins: key {describe_value(key)} is not a (round, unit_id) pair of integers >= 0, e.g. (1, 7)"
            )
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not 0.0 <= float(score) <= 1.0:
            raise RunArgumentError(f"pins[{key!r}]={describe_value(score)}: a pinned score is a number in [0, 1]")
        out[(int(key[0]), int(key[1]))] = float(score)
    return out


def pin_change_rounds(old: dict, new: dict) -> list[int]:
    """The rounds whose pins differ between two pin sets."""
    return [r for r, u in set(old) | set(new) if old.get((r, u)) != new.get((r, u))]


def round_from(value) -> int | None:
    """`from_round` as a round number >= 0 (None: the first round the change affects)."""
    if value is None:
        return None
    if not _is_count(value):
        raise RunArgumentError(
            f"from_round={describe_value(value)}: give a round number >= 0, or None for the first round the change "
            f"affects"
        )
    return int(value)


def _is_count(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= int(v) <= _LARGEST
