"""What a judge is, and what else it may do: one runtime-checkable Protocol per capability
(and what a judgment store may offer a cache wrapper besides get and set).

A judge has `name`, `key` and `judge(question, candidates, context)`. Everything else is
optional, declared here, and tested with `isinstance` (as PyTerrier's `inspect.py` tests a
transformer's optional methods); the workbench asks for nothing else a judge may have.

>>> class Half:
...     name, key = "half", "half-v1"
...     def judge(self, question, candidates, context):
...         return [0.5] * len(candidates)
...     def usage(self):
...         return {"calls": 1}
>>> isinstance(Half(), Judge), isinstance(Half(), HasUsage), isinstance(Half(), Explains)
(True, True, False)
>>> usage_of(Half()), usage_of(object()), can_explain(Half())
({'calls': 1}, {}, False)

`isinstance` checks only that the members exist, so a flag (`explains`, `batch_dependent`,
`answers_in_parts`) is read by its helper here (`can_explain`, `is_batch_dependent`,
`streams`), and a value that may be None (`answered_model`) by `answered_model`. A wrapper
declares a capability only when it has it (its class has the member, or it has none).

A leaf: it imports nothing of the workbench.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Judge(Protocol):
    """The one interface the engine calls: one probability per candidate."""

    name: str
    key: str  # everything that changes its answers (the memo's and the caches' key)

    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]: ...


@runtime_checkable
class Explains(Protocol):
    """Says why it scored each candidate, when `explains` is true: [(sentence, components)]
    (asked after a round is scored, so an explanation never changes a score)."""

    explains: bool

    def explain(self, question: str, candidates: list[dict], context: list[dict]) -> list[tuple[str, dict]]: ...


@runtime_checkable
class HasUsage(Protocol):
    """Keeps cumulative counters ({name: number}: requests, tokens, cost, cache hits...)."""

    def usage(self) -> dict: ...


@runtime_checkable
class Closable(Protocol):
    """Holds something to release (a client's thread, a store, a model session)."""

    def close(self) -> None: ...


@runtime_checkable
class BatchDependent(Protocol):
    """When `batch_dependent` is true, an answer depends on the other candidates of its call
    (JEV stateful: a request's state holds its batch), so a memo keys whole calls."""

    batch_dependent: bool


@runtime_checkable
class AsyncJudge(Protocol):
    """Has an async API; cancelling it cancels the work in flight."""

    async def ajudge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]: ...


@runtime_checkable
class Streams(Protocol):
    """When `answers_in_parts` is true, it answers in parts (JEV: one HTTP request per batch):
    `judge(..., on_answered=None)` (and `ajudge`, if it has one) calls `on_answered(indices,
    probabilities, model)` with each part's validated answers as they arrive."""

    answers_in_parts: bool

    def judge(self, question: str, candidates: list[dict], context: list[dict], on_answered=None) -> list[float]: ...


@runtime_checkable
class HasCacheKeys(Protocol):
    """Names the store key of each candidate's judgment (else a cache derives one from `key`)."""

    def cache_keys(self, question: str, candidates: list[dict], context: list[dict]) -> list[str]: ...


@runtime_checkable
class PlansCache(Protocol):
    """The groups it asks together, [(indices, keys, ...)], or None: a group is reused only
    whole, else sent whole via `judge(..., plan=[the missing groups])`."""

    def cache_plan(self, question: str, candidates: list[dict], context: list[dict]) -> list[tuple] | None: ...


@runtime_checkable
class Reusable(Protocol):
    """Whether a stored judgment may be reused now (True, False, or None: not known yet)."""

    def reusable(self, value: dict) -> bool | None: ...


@runtime_checkable
class CountsPerCall(Protocol):
    """When `usage_per_call` is true, every counter in `usage()` is also counted to the run whose
    call caused it (workbench/usage.py), so a run's stats are its own under `--concurrency`."""

    usage_per_call: bool


@runtime_checkable
class ReportsModel(Protocol):
    """The model that answered it last: None until it has answered in this process."""

    answered_model: str | None


@runtime_checkable
class NamesCacheMiss(Protocol):
    """The error a replay (cache-only) run raises when a judgment is not stored."""

    def cache_miss_error(self, question: str, missing: list[dict], where) -> Exception: ...


@runtime_checkable
class JudgesSagRequests(Protocol):
    """A served judge that reads a whole SAG2 request (its batch layout), not just its candidates."""

    def judge_sag(self, sag) -> list[float]: ...


@runtime_checkable
class StartsClient(Protocol):
    """Talks to a service through a client it can set up before its first call (`start_client()`:
    JEV's event loop and HTTP threads, in the background); read by `start_service_client`."""

    def start_client(self) -> None: ...


@runtime_checkable
class ReadsModelFile(Protocol):
    """Reads a model file, named by its sha256 (the learned judge's)."""

    sha256: str


# ---- what a judgment store may offer (the store behind `judges.cached.CachedJudge`) -----------
@runtime_checkable
class BulkStore(Protocol):
    """Reads and writes many judgments at once: `get_many(keys)` -> {key: value} of the keys
    present, `set_many([(key, value)])` all in one transaction (JEV's JudgmentStore); a store
    without them is read and written key by key."""

    def get_many(self, keys: list[str]) -> dict: ...

    def set_many(self, pairs: list[tuple[str, dict]]) -> None: ...


@runtime_checkable
class CountsJudgments(Protocol):
    """Says how many judgments it holds (read by `judgments_held`: a diskcache.Cache has a `count`
    too, its setting, a number)."""

    def count(self) -> int: ...


# ---- the one place each capability is read --------------------------------------------------
def start_service_client(judge) -> None:
    """Set `judge`'s service client up now, if it has one (StartsClient): a process pool's worker
    does so when it builds its judges, so the setup overlaps its first questions' work."""
    if isinstance(judge, StartsClient):
        judge.start_client()


def is_judge_object(value) -> bool:
    """Whether `value` is a judge object (it has a callable `judge`), not a plain function or a spec.

    >>> class Half:
    ...     def judge(self, question, candidates, context): return [0.5] * len(candidates)
    >>> is_judge_object(Half()), is_judge_object(len), is_judge_object("lexical")
    (True, False, False)
    """
    return callable(getattr(value, "judge", None))


def can_explain(judge) -> bool:
    """Whether a judge explains its scores (`Explains`, and its `explains` is true).

    >>> class Explaining:
    ...     explains = True
    ...     def explain(self, question, candidates, context): return [("why", {})] * len(candidates)
    >>> class Quiet(Explaining):
    ...     explains = False
    >>> can_explain(Explaining()), can_explain(Quiet()), can_explain(None)
    (True, False, False)
    """
    return isinstance(judge, Explains) and bool(judge.explains)


def usage_of(judge) -> dict:
    """A judge's cumulative counters (a copy), or {} for a judge that keeps none.

    >>> class Counting:
    ...     def usage(self): return {"requests": 2}
    >>> usage_of(Counting()), usage_of(None)
    ({'requests': 2}, {})
    """
    return dict(judge.usage()) if isinstance(judge, HasUsage) and callable(judge.usage) else {}


def summed_usage(judges: Iterable) -> dict:
    """The counters of several judges, summed (a judge that keeps none adds nothing).

    >>> class Counting:
    ...     def usage(self): return {"requests": 2}
    >>> summed_usage([Counting(), Counting(), None])
    {'requests': 4}
    """
    total: dict = {}
    for judge in judges:
        for k, v in usage_of(judge).items():
            total[k] = total.get(k, 0) + v
    return total


def close_judge(judge) -> None:
    """Close a judge that holds something (`Closable`); any other is left as it is.

    >>> class Holding:
    ...     closed = False
    ...     def close(self): self.closed = True
    >>> held = Holding(); close_judge(held); close_judge(None); held.closed
    True
    """
    if isinstance(judge, Closable) and callable(judge.close):
        judge.close()


def is_batch_dependent(judge) -> bool:
    """Whether a judge's answers depend on the other candidates of its call (`batch_dependent` true).

    >>> class Stateful:
    ...     batch_dependent = True
    >>> is_batch_dependent(Stateful()), is_batch_dependent(None)
    (True, False)
    """
    return isinstance(judge, BatchDependent) and bool(judge.batch_dependent)


def counts_per_call(judge) -> bool:
    """Whether a judge counts its usage per call too (`CountsPerCall`, `usage_per_call` true).

    >>> class PerCall:
    ...     usage_per_call = True
    >>> counts_per_call(PerCall()), counts_per_call(None)
    (True, False)
    """
    return isinstance(judge, CountsPerCall) and judge.usage_per_call is True


def streams(judge) -> bool:
    """Whether a judge answers in parts through `on_answered` (`Streams`, `answers_in_parts` true).

    >>> class InParts:
    ...     answers_in_parts = True
    ...     def judge(self, question, candidates, context, on_answered=None): return []
    >>> streams(InParts()), streams(None)
    (True, False)
    """
    return isinstance(judge, Streams) and bool(judge.answers_in_parts)


def answered_model(judge) -> str | None:
    """The model that answered a judge last, or None (not known yet, or a judge that never says).

    >>> class Served:
    ...     answered_model = "m-2"
    >>> answered_model(Served()), answered_model(None)
    ('m-2', None)
    """
    return judge.answered_model if isinstance(judge, ReportsModel) else None


def model_sha256(judge) -> str | None:
    """The sha256 of the model file a judge reads, or None for a judge without one.

    >>> class Learned:  # workbench.judges.learned.LearnedJudge keeps its model's sha256 so
    ...     sha256 = "cd68c0e05dcb" + "0" * 52
    >>> model_sha256(Learned())[:12], model_sha256(None)
    ('cd68c0e05dcb', None)
    """
    sha256 = judge.sha256 if isinstance(judge, ReadsModelFile) else None
    return sha256 if isinstance(sha256, str) else None


def judgments_held(store) -> int | None:
    """How many judgments a store holds, or None for a store that does not say (`CountsJudgments`
    with a callable `count`).

    >>> class Counted:
    ...     def count(self): return 3
    >>> class Setting:            # diskcache.Cache: `count` is one of its settings, not a method
    ...     count = 0
    >>> judgments_held(Counted()), judgments_held(Setting()), judgments_held(None)
    (3, None, None)
    """
    return store.count() if isinstance(store, CountsJudgments) and callable(store.count) else None
