"""The semantic judge's options as `semantic:NAME=VALUE` text gives them: how each is read and
the numeric ones' allowed ranges. Their own module, so that the registry (which parses specs)
and the semantic judge (which checks its arguments) share them without importing each other."""

from __future__ import annotations

from collections.abc import Callable

SEMANTIC_OPTIONS: dict[str, Callable[[str], object]] = {
    "gamma": float,
    "scale": float,
    "shift": float,
    "signals": lambda v: tuple(s.strip() for s in v.split("+")),
    "cjk": str.strip,
}

# the numeric options' allowed ranges (low, high, low included): outside them every call would
# fail or mean nothing — scale * (1 + |shift|) past ~709 overflows the sigmoid's exp, a negative
# scale ranks the least similar first, gamma mixes two signals in [0, 1]
SEMANTIC_RANGES: dict[str, tuple[float, float, bool]] = {
    "gamma": (0.0, 1.0, True),
    "scale": (0.0, 300.0, False),
    "shift": (-1.0, 1.0, True),
}


def check_semantic_option(name: str, value) -> float:
    """A numeric semantic option's value as a float, or a ValueError naming the allowed range.

    >>> check_semantic_option("scale", 20)
    20.0
    >>> check_semantic_option("scale", 1e6)
    Traceback (most recent call last):
    ...
    ValueError: scale must be in (0, 300], got 1000000.0
    """
    low, high, closed = SEMANTIC_RANGES[name]
    span = f"{'[' if closed else '('}{low:g}, {high:g}]"
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number in {span}, got {value!r}") from None
    if not (low <= number <= high if closed else low < number <= high):  # nan fails both
        raise ValueError(f"{name} must be in {span}, got {number!r}")
    return number
