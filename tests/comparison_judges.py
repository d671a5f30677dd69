"""Deterministic judges shared by this workbench and an independent implementation.

Both sides must see identical scores for identical inputs, so every judge here is a pure
function of the question, the candidate's title/text and the context titles (and previous
scores), with the workbench's function-judge signature:
``judge(question, candidates, context) -> list[float]``.

Test-only, standard library only: the comparison suite (tests/comparison) and the benchmarks
import it from this folder, and benchmarks/reference_adapter.py loads it in the reference
implementation's own environment, where the workbench is not installed. As a judge file:
``sag2wb eval ... --judge tests/comparison_judges.py:hash_judge``.
"""

from __future__ import annotations

import hashlib


def _unit_float(*parts: str) -> float:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    # 53 bits -> an exactly representable float in [0, 1), identical on every platform
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)


def hash_judge(question: str, candidates: list[dict], context: list[dict]) -> list[float]:
    """Pseudo-random but deterministic scores that depend on the context (so context
    construction differences show up as score differences)."""
    context_key = "|".join(f"{item['title']}={item.get('previous_score')!r}" for item in context)
    return [_unit_float(question, c["title"], context_key) for c in candidates]


def hash_judge_context_free(question: str, candidates: list[dict], context: list[dict]) -> list[float]:
    """Same, but ignores context: isolates candidate-policy differences from context ones."""
    return [_unit_float(question, c["title"]) for c in candidates]
