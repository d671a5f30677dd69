"""SAG2 parameters: one frozen dataclass (a configuration is a dict key and a cache-key part).

>>> Params(H=1).H
1
>>> Params(H=3)
Traceback (most recent call last):
...
workbench.params.ParamsError: H (expansion rounds) must be 0, 1 or 2, got 3
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


class ParamsError(ValueError):
    """An invalid parameter value, naming the parameter."""


@dataclass(frozen=True)
class Params:
    B: int = 100  # candidates per round (and ranking length)
    s: int = 10  # seeds per round
    L: int = 20  # expansion terms per round
    H: int = 2  # expansion rounds, 0-2
    p: int = 5  # protected initial BM25 passages
    query_tokens: int = 80  # distinct question tokens in the round-0 expression
    incoming_limit: int = 20  # unseen units admitted in the final round (round 2)
    context_size: int = 10  # final-round context: previous ranking's top n
    fusion_constant: int = 60  # fusion = 1 / (fusion_constant + retrieval rank)
    field_weights: tuple[float, float, float] = (2.0, 2.0, 1.0)  # BM25 title, heading, body
    term_weighting: str = "sag2"  # a name in workbench.terms.TERM_WEIGHTINGS, or FILE.py:NAME
    diversity: bool = True  # greedy DPP reordering of the final top 10
    use_context: bool = True  # False: the judge never sees context (the no-context ablation)

    def __post_init__(self):
        def need(cond: bool, message: str):
            if not cond:
                raise ParamsError(message)

        for name in ("B", "s", "L", "p", "query_tokens", "incoming_limit", "context_size", "fusion_constant", "H"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool), f"{name} must be an integer, got {value!r}")
        need(self.B >= 1, f"B (candidates per round) must be >= 1, got {self.B}")
        need(self.s >= 1, f"s (seeds per round) must be >= 1, got {self.s}")
        need(self.L >= 1, f"L (expansion terms) must be >= 1, got {self.L}")
        need(self.H in (0, 1, 2), f"H (expansion rounds) must be 0, 1 or 2, got {self.H}")
        need(self.p >= 0, f"p (protected passages) must be >= 0, got {self.p}")
        need(self.query_tokens >= 1, f"query_tokens must be >= 1, got {self.query_tokens}")
        need(self.incoming_limit >= 0, f"incoming_limit must be >= 0, got {self.incoming_limit}")
        need(self.context_size >= 0, f"context_size must be >= 0, got {self.context_size}")
        need(self.fusion_constant >= 0, f"fusion_constant must be >= 0, got {self.fusion_constant}")
        weights = tuple(self.field_weights)
        need(
            len(weights) == 3, f"field_weights must be three numbers (title, heading, body), got {self.field_weights!r}"
        )
        for w in weights:
            need(
                isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0,
                f"field_weights must be finite and non-negative, got {self.field_weights!r}",
            )
        need(any(w > 0 for w in weights), "field_weights: at least one weight must be positive")
        object.__setattr__(self, "field_weights", tuple(float(w) for w in weights))
        need(isinstance(self.term_weighting, str) and self.term_weighting != "", "term_weighting must be a name")
        need(isinstance(self.diversity, bool), f"diversity must be true or false, got {self.diversity!r}")
        need(isinstance(self.use_context, bool), f"use_context must be true or false, got {self.use_context!r}")

    def replace(self, **changes) -> Params:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["field_weights"] = list(self.field_weights)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Params:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ParamsError(f"unknown parameter(s) {unknown}; known: {sorted(known)}")
        d = dict(d)
        if "field_weights" in d:
            d["field_weights"] = tuple(d["field_weights"])
        return cls(**d)

    def with_assignments(self, assignments: list[str]) -> Params:
        """Apply CLI-style `name=value` strings: `["B=50", "field_weights=2,2,1", "diversity=false"]`."""
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(self)}
        for item in assignments:
            name, sep, raw = item.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or name not in types:
                raise ParamsError(f"--param {item!r}: expected name=value with name one of {sorted(types)}")
            current = getattr(self, name)
            value: bool | int | tuple[float, ...] | str
            try:
                if isinstance(current, bool):
                    if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError(raw)
                    value = raw.lower() in ("true", "1", "yes")
                elif isinstance(current, int):
                    value = int(raw)
                elif isinstance(current, tuple):
                    value = tuple(float(x) for x in raw.split(","))
                else:
                    value = raw
            except ValueError:
                raise ParamsError(f"--param {item!r}: {raw!r} is not a valid {type(current).__name__}") from None
            changes[name] = value
        return replace(self, **changes)

    def _repr_html_(self) -> str:
        default = Params()
        rows = "".join(
            f"<tr><td>{k}</td><td>{'<b>' if v != getattr(default, k) else ''}{v}</td></tr>"
            for k, v in self.__dict__.items()
        )
        return f"<table><thead><tr><th>parameter</th><th>value</th></tr></thead>{rows}</table>"


def earliest_affected_round(old: Params, new: Params) -> int:
    """First round whose state can differ between two configurations (re-run from there).
    Returns a round past the last (3) when only the final diversity ordering changes."""
    changed = {f.name for f in fields(Params) if getattr(old, f.name) != getattr(new, f.name)}
    first_round = {
        "B": 0,
        "query_tokens": 0,
        "field_weights": 0,
        "fusion_constant": 0,
        "s": 1,
        "L": 1,
        "p": 1,
        "term_weighting": 1,
        "use_context": 1,
        "incoming_limit": 2,
        "context_size": 2,
    }
    rounds = [first_round[name] for name in changed if name in first_round]
    if "H" in changed:
        rounds.append(min(old.H, new.H) + 1)
    return min(rounds, default=3)
