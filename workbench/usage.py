"""A run's own usage: what its judge calls cost, counted per call, not read off a shared counter.

A judge's `usage()` is cumulative over everything it judged. A run's stats used to be the
difference between that counter at its end and at its start, which is right when one question
runs at a time; with questions at once on threads (`--concurrency`), sharing one JEV judge, it
also took in the requests other questions made meanwhile (the totals stayed right). Now a run
holds a `UsageScope` and makes its judge calls inside it (`scope.active()`); a judge that counts
per call (`usage_per_call = True`: the JEV judge behind its cache) adds each amount to the scope
of the call that caused it as well as to its totals (`count_usage`), on whatever thread or event
loop task the call's requests run (the scope is a context variable, handed on explicitly where a
call crosses threads). A judge without the flag keeps the difference rule.

>>> scope = UsageScope()
>>> with scope.active():
...     count_usage(requests=1, input_tokens=80)
>>> count_usage(requests=5)          # outside any scope: counted nowhere here
>>> scope.counters
{'requests': 1, 'input_tokens': 80}
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

_SCOPE: contextvars.ContextVar[UsageScope | None] = contextvars.ContextVar("sag2wb_usage_scope", default=None)


class UsageScope:
    """The counters of one run's judge calls (thread-safe)."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, amounts: dict) -> None:
        with self._lock:
            for k, v in amounts.items():
                self.counters[k] = self.counters.get(k, 0) + v

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.counters)

    @contextlib.contextmanager
    def active(self):
        """Judge calls made inside the block (and the requests they start) count here."""
        with using(self):
            yield self


@contextlib.contextmanager
def using(scope: UsageScope | None):
    """Make `scope` the current one for the block (None: none), e.g. on the thread or in the task
    that sends a call's requests."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def current_scope() -> UsageScope | None:
    """The scope of the judge call being made here, if any."""
    return _SCOPE.get()


def count_usage(**amounts) -> None:
    """Add `amounts` to the current call's scope (nothing outside one)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.add(amounts)
