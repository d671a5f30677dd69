"""A bounded cache that lets go of what was used longest ago, instead of everything at once.

Used by the postings (decoded token positions, phrase instances, phrases' BM25 terms and the
phrases' tokens, each within a budget) and by the JEV client's o200k counts of long texts. Emptying
a cache whole when it was full made the next questions read every common token again: at 600k,
after about 55 questions the 16M-position budget was reached and a third of all positions read in
100 questions were such re-reads, on the questions right after. Evicting the least recently used
entries keeps what every question touches; the budget, and so the memory, is the same. The values
are the same either way (a cache only saves reading them again); tests/test_recent_cache.py checks
the order of eviction. A leaf: it imports nothing of the workbench.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class Recent(OrderedDict):
    """key -> value, least recently used first; `put` evicts from the front until the values'
    sizes (`size(value)`, 1 each by default) fit within `limit` with the new one. `get` refreshes a
    key, and reads a stored None as absent (store a sentinel for "nothing"). Safe to share between
    threads as the dicts it replaces were: a key another thread evicted meanwhile is simply not
    there (the count of sizes may then run high, which only evicts sooner)."""

    def __init__(self, limit: int, size: Callable[[Any], int] | None = None):
        super().__init__()
        self.limit, self.size, self.total = limit, size or (lambda value: 1), 0

    def get(self, key, default=None):
        value = super().get(key)
        if value is None:
            return default
        try:  # noqa: SIM105 (contextlib.suppress costs more than the look-up it guards)
            self.move_to_end(key)
        except KeyError:  # evicted by another thread since
            pass
        return value

    def put(self, key, value) -> None:
        self.pop(key, None)
        n = self.size(value)
        while self and self.total + n > self.limit:
            try:
                _, old = self.popitem(last=False)
            except KeyError:
                break
            self.total -= self.size(old)
        self[key] = value
        self.total += n

    def pop(self, key, *default):
        if key in self:
            try:
                value = super().pop(key)
            except KeyError:
                pass
            else:
                self.total -= self.size(value)
                return value
        if default:
            return default[0]
        raise KeyError(key)

    def clear(self) -> None:
        super().clear()
        self.total = 0
