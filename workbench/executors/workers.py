"""The worker side of the executors: what a process or Dask worker needs to rebuild the caller's
setting (`Recipe`), its environment (the index reopened, judges built from the tasks' specs, a
recording store for cached judges), and the outcome it sends back."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import pickle
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from workbench.index.store import Index
from workbench.judges.cached import CachedJudge
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgmentMemo
from workbench.protocols import BulkStore, close_judge, start_service_client, summed_usage
from workbench.safeio import InputError, atomic_write_bytes

JEV_REQUEST_LIMIT = 20  # jev CONCURRENCY: requests in flight per client (the paper's cap)


class RemoteTaskError(RuntimeError):
    """A worker's exception that could not be sent back as itself (its type name and message are kept)."""


class WorkerExit(RemoteTaskError, InputError):
    """A worker's task tried to end its process (SystemExit from a plug-in outside a judge call):
    a named error in the caller (exit 2), never the caller's own exit 0."""


@dataclass
class TaskOutcome:
    """One task's result, or the exception it raised, with what the worker learnt on the way."""

    key: object
    value: object = None
    error: BaseException | None = None
    # JudgmentMemo entries the task made, keys without the unit's text (the caller adds it back
    # from its index: most of the bytes otherwise); a cached judge's new store entries; usage
    judgments: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


def sendable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RemoteTaskError naming it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RemoteTaskError(f"{type(exc).__name__}: {exc}")


# ---- what a remote worker needs ----------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """Everything a worker needs to rebuild the caller's setting (picklable, no secrets: a JEV
    worker reads its API key from its own environment). The judges travel in the tasks, as specs."""

    index_path: str
    index_fingerprint: str | None
    request_limit: int = JEV_REQUEST_LIMIT  # requests in flight per judge that waits, in each worker
    run: str = ""  # one evaluation or experiment: its judges are built fresh, the index is reused
    # send judgments back for the caller's memo: off when nobody reads that memo afterwards
    judgments: bool = True  # (a cached judge's new store entries are sent regardless)

    @property
    def key(self) -> str:
        return hashlib.sha256(
            json.dumps([self.index_path, self.index_fingerprint, self.request_limit], default=str).encode()
        ).hexdigest()


def recipe_for(index, workers: int, *, judgments: bool = True) -> Recipe:
    """A Recipe; a judge that waits, in each of `workers` slots, gets an equal share of the 20 requests."""
    limit = max(1, JEV_REQUEST_LIMIT // max(1, workers))
    return Recipe(str(Path(index.path).resolve()), index.meta.get("fingerprint"), limit, os.urandom(8).hex(), judgments)


_ABSENT = object()


class RecordingStore:
    """Stands for a cached judge's store in a worker: reads the caller's store when the worker
    can see it, keeps new (validated) entries to send back instead of writing them."""

    def __init__(self, reader=None):
        self.reader, self.new, self._lock = reader, {}, threading.Lock()

    def get(self, key, default=None):
        with self._lock:
            if key in self.new:
                return self.new[key]
        return self.reader.get(key, default) if self.reader is not None else default

    def set(self, key, value):
        with self._lock:
            self.new[key] = value

    # in bulk (BulkStore), as the caller's JEV store: a round's look-ups in one read, not one each
    def get_many(self, keys: list) -> dict:
        with self._lock:
            found = {k: self.new[k] for k in keys if k in self.new}
        rest = [k for k in keys if k not in found]
        if rest and self.reader is not None:
            if isinstance(self.reader, BulkStore):
                found.update(self.reader.get_many(rest))
            else:
                found.update((k, v) for k in rest if (v := self.reader.get(k, _ABSENT)) is not _ABSENT)
        return found

    def set_many(self, pairs: list) -> None:
        with self._lock:
            self.new.update(pairs)

    transact = staticmethod(contextlib.nullcontext)  # writes are kept in memory: nothing to group

    def drain(self) -> dict:
        with self._lock:
            out, self.new = self.new, {}
        return out

    def close(self):
        if self.reader is not None:
            self.reader.close()


_INDEXES: dict = {}  # (path, fingerprint, shipped) -> Index, opened once per worker process


INHERITABLE_INDEXES: dict = {}  # (path, fingerprint) -> (pid, the caller's warm Index), for forked workers


def _open_index(recipe: Recipe, index_bytes: bytes | None):
    where = (recipe.index_path, recipe.index_fingerprint, index_bytes is not None)
    if where in _INDEXES:
        return _INDEXES[where]
    inherited = INHERITABLE_INDEXES.get(where[:2]) if index_bytes is None else None
    if inherited is not None and inherited[0] != os.getpid():  # a forked worker
        _INDEXES[where] = inherited[1].reopen_after_fork()
        return _INDEXES[where]
    path = Path(recipe.index_path)
    if index_bytes is not None:
        path = _local_copy(index_bytes, recipe.index_fingerprint)
    elif not path.exists():
        raise InputError(
            f"{path}: the index is not on this worker ({os.uname().nodename}); put it on a shared "
            "filesystem at the same path or let the client ship it (Dask(..., ship_index=True))"
        )
    index = Index(path)  # read-only (mode=ro)
    if recipe.index_fingerprint and index.meta.get("fingerprint") != recipe.index_fingerprint:
        raise InputError(
            f"{path} on worker {os.uname().nodename} is another index than the client's "
            f"(fingerprint {index.meta.get('fingerprint')} vs {recipe.index_fingerprint})"
        )
    _INDEXES[where] = index
    return index


class WorkerEnv:
    """One per worker process and run: the index (opened once per process) and the judges
    built for this run from their specs (fresh each run, like the caller's)."""

    def __init__(self, recipe: Recipe, index_bytes: bytes | None):
        self.index = _open_index(recipe, index_bytes)
        self.recipe = recipe
        self.judges: dict = {}  # spec -> judge (None for bm25)
        self.stores: list[RecordingStore] = []
        self.lock = threading.Lock()

    def judge(self, spec: JudgeSpec):
        """The worker's one judge for `spec` (a cached judge records its new entries, to send back)."""
        with self.lock:
            if spec not in self.judges:
                self.judges[spec] = self._build(spec)
            return self.judges[spec]

    def _build(self, spec: JudgeSpec):
        if spec.kind.waits and "concurrency" not in dict(spec.options):
            spec = spec.with_options(concurrency=self.recipe.request_limit)
        cache_dir = spec.get("cache_dir")
        if cache_dir and not Path(cache_dir).is_dir() and not spec.get("cache_only"):
            # the caller's store is not visible here: an empty private one (new entries go back)
            spec = spec.with_options(cache_dir=tempfile.mkdtemp(prefix="sag2wb-jev-worker-"))
        judge = spec.build(self.index)
        if isinstance(judge, CachedJudge):  # record, do not write
            store = RecordingStore(judge.store)
            self.stores.append(store)
            judge = judge.with_store(store)
        start_service_client(judge)  # a judge that waits on a service: set up beside the first questions' work
        return judge

    def close(self) -> None:
        for judge in list(self.judges.values()):
            close_judge(judge)

    def usage(self) -> dict:
        return summed_usage(self.judges.values())


_ENVS: dict = {}  # (recipe key, run) -> WorkerEnv; the last few runs only


_ENVS_LOCK = threading.Lock()


_RUNS_KEPT = 4


def worker_env(recipe: Recipe, index_bytes: bytes | None = None) -> WorkerEnv:
    with _ENVS_LOCK:
        key = (recipe.key, recipe.run)
        if (env := _ENVS.get(key)) is None:
            env = _ENVS[key] = WorkerEnv(recipe, index_bytes)
            while len(_ENVS) > _RUNS_KEPT:  # a long-lived Dask worker: close the judges of old runs
                _ENVS.pop(next(iter(_ENVS))).close()
        return env


def _local_copy(data: bytes, fingerprint: str | None) -> Path:
    """The shipped index written once per machine (atomically) under the temp folder."""
    name = f"sag2wb-index-{fingerprint or hashlib.sha256(data).hexdigest()[:16]}-{len(data)}.sqlite"
    path = Path(tempfile.gettempdir()) / name
    if not path.exists() or path.stat().st_size != len(data):
        atomic_write_bytes(path, data)
    return path


def run_remote(recipe: Recipe, index_bytes, task, key) -> bytes:
    """Run `task(env, memo)` in a worker: its value or exception, the judgments made (memo and store
    entries) and the usage spent, pickled by us (`load_outcome` in the caller), not by the pool."""
    env = None
    memo = JudgmentMemo()
    before: dict = {}
    try:
        env = worker_env(recipe, index_bytes)
        before = env.usage()
        value, error = task(env, memo), None
    except Exception as exc:  # sent back and raised by the caller where the sequential loop raises
        value, error = None, sendable(exc)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # sys.exit() in a worker: raised as itself the caller would exit 0
        value, error = None, WorkerExit(f"a worker's task raised {type(exc).__name__} ({exc!r}); no results written")
    cache, usage = {}, {}
    if env is not None:
        for store in env.stores:
            cache.update(store.drain())
        usage = {k: v - before.get(k, 0) for k, v in env.usage().items()}
    # a memo key is (judge key, question, context key, unit id, unit text); the text is the
    # unit's body in the index (engine.judge_items), which the caller has too
    judgments = {k[:4]: v for k, v in memo.scores.items()} if recipe.judgments else {}
    return pickle.dumps(TaskOutcome(key, value, error, judgments, cache, usage), protocol=pickle.HIGHEST_PROTOCOL)


def load_outcome(data: bytes) -> TaskOutcome:
    """Unpickle an outcome with the cyclic garbage collector paused: a trace is ~10,000 small objects,
    whose collections (scanning all the caller holds) were ~3/4 of the caller's time unpickling."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(data)
    finally:
        if enabled:
            gc.enable()
