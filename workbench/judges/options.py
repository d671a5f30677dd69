"""Judge options as their kinds declare them (as ir_measures' `ParamInfo` does): each option's
type, default, range and help, and whether the kind's text carries it (`semantic:gamma=0.5`) or
it is given beside the text (JEV's endpoint and cache). The registry (which parses and prints
specs) reads these declarations; the semantic judge checks its arguments by the same table
without importing the registry.

>>> GAMMA = SEMANTIC_OPTIONS[0]
>>> GAMMA.value("0.5"), GAMMA.value(1), GAMMA.text(0.5), GAMMA.usage
(0.5, 1.0, '0.5', 'gamma=G')
>>> GAMMA.value("2")
Traceback (most recent call last):
...
ValueError: gamma must be in [0, 1], got 2.0
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class OptionInfo:
    """One declared option of a judge kind.

    `type` is float, int, bool, str, tuple (names joined by "+" in text, e.g. signals) or Path
    (a file or folder, held as its text). `default` is what the judge uses when the option is
    not given (None: the judge's own default, said in `help`). `range` is (low, high, low
    included) for numbers, high always included, None for no bound. `none`: None is a value
    ("no limit", "the endpoint's model"). `read` replaces the type's reading when an option
    has a rule of its own (the function judge's time limit)."""

    name: str
    type: type
    default: Any = None
    help: str = ""
    range: tuple[float | None, float | None, bool] | None = None
    choices: tuple[str, ...] | None = None
    in_text: bool = True
    none: bool = False
    metavar: str = ""
    read: Callable[[Any], Any] | None = None

    @property
    def usage(self) -> str:
        """How help writes it: `name=METAVAR`."""
        return f"{self.name}={self.metavar or self.name.upper()}"

    def value(self, given) -> Any:
        """The option's value from its text or from a value of its type; a ValueError saying
        what it must be otherwise. Reading a value it returned gives it back unchanged."""
        if self.read is not None:
            return self.read(given)
        if given is None or (self.none and isinstance(given, str) and given.strip().lower() == "none"):
            if self.none:
                return None
            raise ValueError(f"{self.name} must be {self.expected()}, got None")
        if self.type in (float, int):
            return self._number(given)
        if self.type is bool:
            return self._bool(given)
        if self.type is tuple:
            return self._names(given)
        if self.type is Path:
            if not isinstance(given, (str, os.PathLike)) or not os.fspath(given):
                raise ValueError(f"{self.name} must be a path, got {given!r}")
            return str(os.fspath(given))
        if not isinstance(given, str):
            raise ValueError(f"{self.name} must be {self.expected()}, got {given!r}")
        if self.choices is not None and given not in self.choices:
            raise ValueError(f"{self.name} must be {self.expected()}, got {given!r}")
        return given

    def text(self, value) -> str:
        """How the kind's text writes a value: `value(text(v)) == v`."""
        if isinstance(value, tuple):
            return "+".join(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        return repr(value) if isinstance(value, float) else str(value)

    def expected(self) -> str:
        """What a value must be, in words: `a number in [0, 1]`, `'coverage' or 'model'`."""
        if self.type in (float, int):
            kind = "a whole number" if self.type is int else "a number"
            return f"{kind} {self.span()}".strip()
        if self.type is bool:
            return "true or false"
        if self.choices is not None:
            quoted = [repr(c) for c in self.choices]
            return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]
        return "a text"

    def span(self) -> str:
        """The range as `[0, 1]`, `(0, 300]`, `>= 0`, or "" for none."""
        if self.range is None:
            return ""
        low, high, closed = self.range
        if high is None:
            return "" if low is None else f"{'>=' if closed else '>'} {low:g}"
        if low is None:
            return f"<= {high:g}"
        return f"in {'[' if closed else '('}{low:g}, {high:g}]"

    def _number(self, given):
        try:
            if isinstance(given, str):
                number = int(given.strip()) if self.type is int else float(given.strip())
            elif isinstance(given, bool) or not isinstance(given, numbers.Real):
                raise TypeError
            elif self.type is int:
                if not isinstance(given, numbers.Integral):
                    raise TypeError
                number = int(given)
            else:
                number = float(given)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{self.name} must be {self.expected()}, got {given!r}") from None
        if not self._within(number):
            raise ValueError(f"{self.name} must be {self.span()}, got {number!r}")
        return number

    def _within(self, number) -> bool:
        if isinstance(number, float) and not math.isfinite(number):
            return False  # nan fails every bound; inf is never a usable setting
        if self.range is None:
            return True
        low, high, closed = self.range
        above = low is None or (low <= number if closed else low < number)
        return above and (high is None or number <= high)

    def _bool(self, given) -> bool:
        if isinstance(given, bool):
            return given
        if isinstance(given, str) and given.strip().lower() in TRUE + FALSE:
            return given.strip().lower() in TRUE
        raise ValueError(f"{self.name} must be true or false, got {given!r}")

    def _names(self, given) -> tuple[str, ...]:
        names = given.split("+") if isinstance(given, str) else given
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{self.name} must be names joined by '+', got {given!r}")
        names = tuple(n.strip() for n in names)
        if self.choices is not None and (not names or any(n not in self.choices for n in names)):
            raise ValueError(f"{self.name} must be a non-empty subset of {self.choices}, got {names!r}")
        return names


# ---- the semantic judge (and lexical-bridge, its model-free setting) ----------------------------
SIGNALS = ("model", "coverage", "bridge")

# the numeric options' ranges: outside them every call would fail or mean nothing — scale * (1 +
# |shift|) past ~709 overflows the sigmoid's exp, a negative scale ranks the least similar first,
# gamma mixes two signals in [0, 1]
SEMANTIC_OPTIONS: tuple[OptionInfo, ...] = (
    OptionInfo("gamma", float, 0.8, "the name bridge's weight in the score", (0.0, 1.0, True), metavar="G"),
    OptionInfo("scale", float, 10.0, "the model signal's sigmoid slope", (0.0, 300.0, False), metavar="S"),
    OptionInfo("shift", float, 0.3, "the cosine at the model signal's midpoint", (-1.0, 1.0, True), metavar="T"),
    OptionInfo("signals", tuple, SIGNALS, "the signals it combines", choices=SIGNALS, metavar="model+coverage+bridge"),
    OptionInfo(
        "cjk",
        str,
        "model",
        "for questions in CJK script: keep the model signal, or score coverage alone",
        choices=("coverage", "model"),
        metavar="model|coverage",
    ),
)


def check_semantic_option(name: str, value) -> float:
    """A numeric semantic option's value as a float, or a ValueError naming the allowed range.

    >>> check_semantic_option("scale", 20)
    20.0
    >>> check_semantic_option("scale", 1e6)
    Traceback (most recent call last):
    ...
    ValueError: scale must be in (0, 300], got 1000000.0
    """
    return next(o for o in SEMANTIC_OPTIONS if o.name == name and o.type is float).value(value)


def __getattr__(name: str):
    """`SEMANTIC_RANGES`, the old table of ranges, now read from the declarations (docs/deprecations.md)."""
    if name == "SEMANTIC_RANGES":
        from workbench.deprecation import deprecated

        deprecated(f"{__name__}.SEMANTIC_RANGES is deprecated: read each OptionInfo's range in SEMANTIC_OPTIONS")
        return {o.name: o.range for o in SEMANTIC_OPTIONS if o.range is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- the learned judge --------------------------------------------------------------------------
LEARNED_OPTIONS: tuple[OptionInfo, ...] = (
    OptionInfo("path", Path, None, "the model file from `sag2wb fit-judge` (none: the shipped one)", metavar="PATH"),
)

# ---- hosted JEV: its text carries the instructions; the rest is given beside it -----------------
_AT_LEAST_ONE: tuple[float | None, float | None, bool] = (1, None, True)
_SECONDS: tuple[float | None, float | None, bool] = (0, None, True)
JEV_OPTIONS: tuple[OptionInfo, ...] = (
    OptionInfo("instructions", str, None, "the decision instructions: a registered template or a .json/.toml file",
               none=True, metavar="NAME|FILE"),
    OptionInfo("endpoint", str, None, "typesafe, openrouter or a full URL (none: the default endpoint)",
               in_text=False, none=True),
    OptionInfo("model", str, None, "the model the endpoint uses (none: the endpoint's)", in_text=False, none=True),
    OptionInfo("payload_style", str, "stateful", "stateful: passages sent once, then named; inline: every time",
               choices=("inline", "stateful"), in_text=False, none=True),
    OptionInfo("cache_dir", Path, None, "the judgment cache folder (none: $SAG2WB_JEV_CACHE or .sag2wb/jev-cache)",
               in_text=False, none=True),
    OptionInfo("cache_only", bool, False, "replay: answer from the cache, fail on a miss", in_text=False),
    OptionInfo("timeout", float, None, "seconds per HTTP request (default: the client's)", (0, None, False),
               in_text=False),
    OptionInfo("attempts", int, None, "tries per request (default: the client's)", _AT_LEAST_ONE, in_text=False),
    OptionInfo("concurrency", int, None, "requests in flight (default: the client's)", _AT_LEAST_ONE, in_text=False),
    OptionInfo("backoff_base", float, None, "seconds before the first retry (default: the client's)", _SECONDS,
               in_text=False),
    OptionInfo("backoff_max", float, None, "the longest wait between retries (default: the client's)", _SECONDS,
               in_text=False),
    OptionInfo("retry_after_max", float, None, "the longest Retry-After honoured (default: the client's)", _SECONDS,
               in_text=False),
    OptionInfo("unreachable_hold", float, None, "seconds a down service is not retried (default: the client's)",
               _SECONDS, in_text=False),
    OptionInfo("require_key", bool, None, "refuse to start without an API key (default: yes)", in_text=False),
    OptionInfo("max_request_tokens", int, None, "a new request starts above this many tokens (default 64,000)",
               _AT_LEAST_ONE, in_text=False),
    OptionInfo("max_questions", int, None, "candidates per request (none: no cap)", _AT_LEAST_ONE, in_text=False,
               none=True),
)  # fmt: skip
