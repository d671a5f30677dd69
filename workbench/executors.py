"""Many questions at once: run the tasks of an evaluation or an experiment sequentially,
on threads (judges that wait: JEV), on a process pool (judges that compute: lexical, a
neural judge) or on a Dask cluster, with results identical to a sequential run.

>>> executor = make_executor(concurrency=16)                   # threads, for JEV      # doctest: +SKIP
>>> evaluate(index, questions, "jev", executor=executor, jev_options...)            # doctest: +SKIP
>>> make_executor(processes=2)                                 # all cores, lexical    # doctest: +SKIP
>>> make_executor(dask="tcp://scheduler:8786")                 # a cluster             # doctest: +SKIP
>>> Experiment(index, questions, configs).run(client=dask_client)                      # doctest: +SKIP

How identity with the sequential run is kept (docs/experiments.md, "Many questions at once"):
- Every task is computed by the same code as the sequential loop; the caller consumes the
  results in the sequential order (`Stream.get(key)` blocks until that key's task is done),
  so records, resume lines, traces and metrics come out in the same order with the same
  bytes. Only `stats` (memo hits, seconds, per-question usage) may differ.
- Threads share the caller's judge objects, judgment memo and disk cache. One JEV judge has
  one client whose semaphore bounds requests in flight (20) whatever the number of threads.
- Processes and Dask workers open the index by path, read-only (or from bytes shipped once
  per Dask worker), build their own judge, and send back with each result the judgments
  they made (memo entries, and JEV cache entries with their cache keys); the caller puts
  them into its memo and its disk cache as they arrive. A JEV client in a worker gets a
  share of the 20 requests so the whole pool stays under the limit.
- A Dask worker that dies mid-task loses nothing: the scheduler re-runs its tasks on
  another worker (up to `distributed.scheduler.allowed-failures` times) and, the tasks being
  deterministic, the results are the same. A judge error is not retried: it comes back as
  the task's outcome and is raised by `get`, exactly where the sequential loop raises it.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import pickle
import queue
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures as cf
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.judgment import JudgmentMemo
from workbench.safeio import InputError

JEV_DEFAULT_CONCURRENCY = 8  # concurrent questions for a judge that waits on a service
JEV_REQUEST_LIMIT = 20  # jev.CONCURRENCY: requests in flight per client (the paper's cap)


class ParallelError(InputError):
    """Options that cannot run together, a cluster that cannot be reached, or a pool that broke
    (a worker process killed outside Dask); the message says which. The CLI exits 2."""


class RemoteTaskError(RuntimeError):
    """A worker's exception that could not be sent back as itself (its type name and message are kept)."""


@contextlib.contextmanager
def heap_frozen():
    """Keep the cyclic garbage collector off every object that exists now until the block
    ends (`gc.freeze`, then `gc.unfreeze`). Around an evaluation, a collection then scans
    what the run made, not also the earlier results a notebook holds: with 200 traces held,
    a run's full collections took ~0.2 s of a 2 s run, in the caller of a process pool too,
    where they compete with the workers for the cores. Objects freed by reference counting
    are freed as always. A caller that froze objects itself is left as it was."""
    ours = gc.get_freeze_count() == 0
    if ours:
        gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()


def default_concurrency(judge: str) -> int:
    """Concurrent questions when none is asked for: 8 for JEV (it waits on HTTP), 1 otherwise
    (in-process judges hold the GIL; use processes for them).

    >>> default_concurrency("jev"), default_concurrency("lexical")
    (8, 1)
    """
    return JEV_DEFAULT_CONCURRENCY if judge == "jev" else 1


# ---- outcomes --------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One task's result, or the exception it raised, with what the worker learnt on the way."""

    key: object
    value: object = None
    error: BaseException | None = None
    judgments: dict = field(default_factory=dict)  # JudgmentMemo entries made by the task, keys without the
    # unit's text (remote only; the caller adds it back from its index: most of the bytes otherwise)
    cache: dict = field(default_factory=dict)  # JEV disk-cache entries {cache key: {"p", "model"}} (remote only)
    usage: dict = field(default_factory=dict)  # the worker judge's counters spent on the task (remote only)

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


def _sendable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RemoteTaskError naming it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RemoteTaskError(f"{type(exc).__name__}: {exc}")


# ---- executors -------------------------------------------------------------------------------
class Sequential:
    """One task after another in the caller's thread: exactly the loop the workbench always ran."""

    name = "sequential"
    local = True
    workers = 1

    def __repr__(self) -> str:
        return "Sequential()"

    def close(self):
        pass


class Threads:
    """`n` questions at once on threads sharing the caller's judges, memo and disk cache."""

    local = True

    def __init__(self, n: int):
        if not isinstance(n, int) or n < 1:
            raise ParallelError(f"concurrency {n!r}: expected a whole number >= 1")
        self.workers = n
        self.name = f"threads({n})"
        self._pool = None

    def __repr__(self) -> str:
        return f"Threads({self.workers})"

    def pool(self):
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(self.workers, thread_name_prefix="sag2wb-question")
        return self._pool

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _ignore_sigint():
    # Ctrl-C reaches the whole process group: the parent stops the pool, workers just go
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Processes:
    """A pool of `n` worker processes; each opens the index read-only and builds its own judge.

    `start_method`: "fork" on Linux by default — a worker starts with the modules and jieba's
    dictionary the caller already loaded (spawning costs seconds per worker) and uses none of
    the caller's open connections or threads; "spawn" elsewhere (macOS, Windows)."""

    local = False

    def __init__(self, n: int, start_method: str | None = None):
        if not isinstance(n, int) or n < 1:
            raise ParallelError(f"processes {n!r}: expected a whole number >= 1")
        self.workers = n
        self.name = f"processes({n})"
        self.start_method = start_method or ("fork" if sys.platform.startswith("linux") else "spawn")
        self._pool = None

    def __repr__(self) -> str:
        return f"Processes({self.workers})"

    def pool(self):
        if self._pool is None:
            import multiprocessing

            pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(self.start_method),
                                          initializer=_ignore_sigint)
            if self.start_method == "fork":
                # Fork every worker now with the caller's objects frozen out of the collector: a
                # worker's collections then never walk (and copy-on-write) the index, caches and
                # modules it inherited (Python's gc.freeze docs)
                with heap_frozen():
                    pool.submit(os.getpid)  # with "fork", the first submit forks every worker, then returns
            self._pool = pool
        return self._pool

    def submit(self, fn, *args, priority=0, key=None):
        return self.pool().submit(fn, *args)

    @staticmethod
    def wait_any(pending):
        done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
        return done

    def ship_index(self, index):
        """None: same machine, the path is enough. With "fork", the caller's index is first
        warmed and left for workers forked from now on to adopt (`_open_index`): they start
        with its units, vocabulary, postings and per-term caches instead of reading them
        again each (the pool measured 0.5-0.8x one process on 2Wiki without this)."""
        if self.start_method == "fork" and index is not None:
            index.warm()
            _INHERITABLE[(str(Path(index.path).resolve()), index.meta.get("fingerprint"))] = (os.getpid(), index)
        return None

    def close(self, wait: bool = False):
        """Stop the pool; `wait=True` also waits for the workers to exit (their CPU time is
        then counted in resource.RUSAGE_CHILDREN, which benchmarks report)."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None


class Dask:
    """Tasks on a dask.distributed cluster: `Dask("tcp://host:8786")` connects a Client,
    `Dask(client)` uses one you made (e.g. on a LocalCluster) and leaves it open.

    `ship_index`: None (default) ships the index file's bytes once per worker only when
    some worker cannot see it at the same path; True always ships; False never."""

    local = False

    def __init__(self, client_or_address, *, ship_index: bool | None = None):
        try:
            from distributed import Client
        except ImportError:
            raise ParallelError("--dask needs dask.distributed: pip install 'sag2-workbench[dask]'") from None
        if isinstance(client_or_address, str):
            try:
                self.client = Client(client_or_address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ParallelError(f"--dask {client_or_address}: no Dask scheduler answered ({exc}); start one with "
                                    "`dask scheduler` and workers with `dask worker ADDRESS`") from None
            self._own = True
        else:
            self.client, self._own = client_or_address, False
        self.ship = ship_index
        self.name = f"dask({self.client.scheduler.address})"

    def __repr__(self) -> str:
        return f"Dask({self.client.scheduler.address!r})"

    @property
    def workers(self) -> int:
        """Task slots: the threads of all workers (at least 1)."""
        info = self.client.scheduler_info()
        return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    def submit(self, fn, *args, priority=0, key=None):
        # pure=False: a task is never merged with an equal-looking one; priority: the order
        # the caller will consume results in. No `retries`: a judge error is an answer, not a
        # fault; a dead worker's tasks are re-run by the scheduler anyway.
        return self.client.submit(fn, *args, priority=priority, pure=False, key=key)

    @staticmethod
    def wait_any(pending):
        from distributed import wait

        return wait(list(pending), return_when="FIRST_COMPLETED").done

    def ship_index(self, index):
        """None when every worker sees the index file (same path, same size); else a future of
        its bytes, replicated to every worker once."""
        path = str(Path(index.path).resolve())
        size = Path(path).stat().st_size
        ship = self.ship
        if ship is None:
            seen = self.client.run(_file_size, path)
            ship = any(v != size for v in seen.values())
        if not ship:
            return None
        return self.client.scatter(Path(path).read_bytes(), broadcast=True, hash=False)

    def close(self):
        if self._own:
            self.client.close()


def _file_size(path: str):
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def make_executor(concurrency: int | None = None, processes: int | None = None, dask=None, *,
                  judge: str = "lexical"):
    """The executor for CLI-style options: `dask` (an address or a Client) wins over
    `processes`, which wins over `concurrency` (default: `default_concurrency(judge)`).

    >>> make_executor(judge="lexical"), make_executor(4)
    (Sequential(), Threads(4))
    """
    given = [name for name, v in (("--concurrency", concurrency), ("--processes", processes), ("--dask", dask))
             if v is not None]
    if len(given) > 1:
        raise ParallelError(f"choose one of {' and '.join(given)}: they are different ways to run questions at once")
    if dask is not None:
        return Dask(dask)
    if processes is not None:
        return Sequential() if processes == 1 else Processes(processes)
    n = default_concurrency(judge) if concurrency is None else concurrency
    if not isinstance(n, int) or n < 1:
        raise ParallelError(f"concurrency {n!r}: expected a whole number >= 1")
    return Sequential() if n == 1 else Threads(n)


# ---- what a remote worker needs ----------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """Everything a worker needs to rebuild the caller's setting (picklable, no secrets:
    a JEV worker reads its API key from its own environment)."""

    index_path: str
    index_fingerprint: str | None
    judge_options: tuple = ()  # sorted (name, value) pairs for the jev judge
    jev_request_limit: int = JEV_REQUEST_LIMIT
    run: str = ""  # one evaluation or experiment: its judges are built fresh, the index is reused
    # send the judgments made back for the caller's memo: off when that memo dies with the
    # evaluation (nothing reads it; JEV cache entries are sent regardless)
    judgments: bool = True

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps([self.index_path, self.index_fingerprint, list(self.judge_options),
                                          self.jev_request_limit], default=str).encode()).hexdigest()


def recipe_for(index, judge_options: dict | None, workers: int, *, judgments: bool = True) -> Recipe:
    """A Recipe; a JEV client in each of `workers` slots gets an equal share of the 20 requests.
    The JEV cache folder is made absolute (workers read it when they see it)."""
    opts = dict(judge_options or {})
    if opts:
        from workbench.judges.jev.core import DEFAULT_CACHE_DIR

        cache_dir = opts.get("cache_dir") or os.environ.get("SAG2WB_JEV_CACHE") or DEFAULT_CACHE_DIR
        opts["cache_dir"] = str(Path(cache_dir).resolve())
    limit = max(1, JEV_REQUEST_LIMIT // max(1, workers))
    return Recipe(str(Path(index.path).resolve()), index.meta.get("fingerprint"), tuple(sorted(opts.items())), limit,
                  os.urandom(8).hex(), judgments)


class _RecordingCache:
    """Stands for a JEV judge's disk cache in a worker: reads the caller's cache when the
    worker can see it, keeps new (validated) entries to send back instead of writing them."""

    def __init__(self, reader=None):
        self.reader = reader
        self.new: dict = {}
        self._lock = threading.Lock()

    def get(self, key, default=None):
        with self._lock:
            if key in self.new:
                return self.new[key]
        return self.reader.get(key, default) if self.reader is not None else default

    def set(self, key, value):
        with self._lock:
            self.new[key] = value

    def transact(self):
        return contextlib.nullcontext()

    def drain(self) -> dict:
        with self._lock:
            out, self.new = self.new, {}
        return out

    def close(self):
        if self.reader is not None:
            self.reader.close()


_INDEXES: dict = {}  # (path, fingerprint, shipped) -> Index, opened once per worker process
_INHERITABLE: dict = {}  # (path, fingerprint) -> (pid, the caller's warm Index), for forked workers
_FOREIGN_CONNECTIONS: list = []  # the caller's connections as forked: kept, never used nor closed here


def _adopt(index):
    """The caller's Index as this forked worker inherited it (caches and all, copy-on-write),
    on a connection of its own: an SQLite connection must not be used across a fork."""
    from workbench.index.store import Index

    fresh = Index(index.path)
    _FOREIGN_CONNECTIONS.append(index.db)
    # the alias map and the title-phrase set keep what they looked up (the caller's, warm) and
    # read on the worker's own connection
    index.db = index.aliases.db = index.title_phrases.db = fresh.db
    index._postings_lock = threading.Lock()  # a lock held by a caller's thread at the fork stays held
    postings = index.__dict__.get("postings")  # a cached_property: set only if it was read
    if postings is not None:
        postings.db, postings._lock, postings._scratch = fresh.db, threading.Lock(), False  # temp tables are per connection
    return index


def _open_index(recipe: Recipe, index_bytes: bytes | None):
    from workbench.index.store import Index

    where = (recipe.index_path, recipe.index_fingerprint, index_bytes is not None)
    if where in _INDEXES:
        return _INDEXES[where]
    inherited = _INHERITABLE.get(where[:2]) if index_bytes is None else None
    if inherited is not None and inherited[0] != os.getpid():  # a forked worker
        _INDEXES[where] = _adopt(inherited[1])
        return _INDEXES[where]
    path = Path(recipe.index_path)
    if index_bytes is not None:
        path = _local_copy(index_bytes, recipe.index_fingerprint)
    elif not path.exists():
        raise InputError(f"{path}: the index is not on this worker ({os.uname().nodename}); put it on a shared "
                         "filesystem at the same path or let the client ship it (Dask(..., ship_index=True))")
    index = Index(path)  # read-only (mode=ro)
    if recipe.index_fingerprint and index.meta.get("fingerprint") != recipe.index_fingerprint:
        raise InputError(f"{path} on worker {os.uname().nodename} is another index than the client's "
                         f"(fingerprint {index.meta.get('fingerprint')} vs {recipe.index_fingerprint})")
    _INDEXES[where] = index
    return index


class WorkerEnv:
    """One per worker process and run: the index (opened once per process) and the judges
    built for this run (fresh each run, like the caller's)."""

    def __init__(self, recipe: Recipe, index_bytes: bytes | None):
        self.index = _open_index(recipe, index_bytes)
        self.recipe = recipe
        self.judges: dict = {}
        self.caches: list[_RecordingCache] = []
        self.lock = threading.Lock()

    def judge_for(self, spec: str, question):
        """The worker's judge for a question (one per spec and process; oracle per question)."""
        from workbench.runs.evaluation import judge_factory

        with self.lock:
            factory = self.judges.get(spec)
            if factory is None:
                factory = self.judges[spec] = judge_factory(spec, self.index, **self._options(spec))
                judge = factory(question)
                if hasattr(judge, "cache") and hasattr(judge, "client"):  # a JEV judge: record, do not write
                    reader = judge.cache
                    judge.cache = _RecordingCache(reader)
                    self.caches.append(judge.cache)
        return factory(question)

    def _options(self, spec: str) -> dict:
        if spec != "jev":
            return {}
        opts = dict(self.recipe.judge_options)
        opts.setdefault("concurrency", self.recipe.jev_request_limit)
        if opts.get("cache_dir") and not Path(opts["cache_dir"]).is_dir() and not opts.get("cache_only"):
            # the caller's cache is not visible here: start from an empty private one (entries
            # made here still go back to the caller's cache)
            opts["cache_dir"] = tempfile.mkdtemp(prefix="sag2wb-jev-worker-")
        return opts

    def close(self) -> None:
        for spec, factory in self.judges.items():
            close = getattr(factory(None), "close", None) if spec != "oracle" else None
            if close is not None:
                close()

    def usage(self) -> dict:
        from workbench.engine import judge_usage

        total: dict = {}
        for spec, factory in self.judges.items():
            if spec == "oracle":
                continue
            for k, v in judge_usage(factory(None)).items():
                total[k] = total.get(k, 0) + v
        return total


_ENVS: dict = {}  # (recipe key, run) -> WorkerEnv; the last few runs only
_ENVS_LOCK = threading.Lock()
_RUNS_KEPT = 4


def worker_env(recipe: Recipe, index_bytes: bytes | None = None) -> WorkerEnv:
    with _ENVS_LOCK:
        key = (recipe.key, recipe.run)
        env = _ENVS.get(key)
        if env is None:
            env = _ENVS[key] = WorkerEnv(recipe, index_bytes)
            while len(_ENVS) > _RUNS_KEPT:  # a long-lived Dask worker: close the judges of old runs
                _ENVS.pop(next(iter(_ENVS))).close()
        return env


def _local_copy(data: bytes, fingerprint: str | None) -> Path:
    """The shipped index written once per machine (atomically) under the temp folder."""
    from workbench.safeio import atomic_write_bytes

    name = f"sag2wb-index-{fingerprint or hashlib.sha256(data).hexdigest()[:16]}-{len(data)}.sqlite"
    path = Path(tempfile.gettempdir()) / name
    if not path.exists() or path.stat().st_size != len(data):
        atomic_write_bytes(path, data)
    return path


def run_remote(recipe: Recipe, index_bytes, task, key, args) -> bytes:
    """Run `task(env, memo, *args)` in a worker; the outcome carries the value or the
    exception, plus the judgments made (memo entries, JEV cache entries) and usage spent.
    It travels pickled by us (`load_outcome` in the caller), not by the pool."""
    env = None
    memo = JudgmentMemo()
    before: dict = {}
    try:
        env = worker_env(recipe, index_bytes)
        before = env.usage()
        value, error = task(env, memo, *args), None
    except Exception as exc:  # sent back and raised by the caller where the sequential loop raises
        value, error = None, _sendable(exc)
    cache, usage = {}, {}
    if env is not None:
        for c in env.caches:
            cache.update(c.drain())
        usage = {k: v - before.get(k, 0) for k, v in env.usage().items()}
    # a memo key is (judge key, question, context key, unit id, unit text); the text is the
    # unit's body in the index (engine.judge_items), which the caller has too
    judgments = {k[:4]: v for k, v in memo.scores.items()} if recipe.judgments else {}
    return pickle.dumps(Outcome(key, _without_units(value), error, judgments, cache, usage),
                        protocol=pickle.HIGHEST_PROTOCOL)


def load_outcome(data: bytes) -> Outcome:
    """Unpickle an outcome with the cyclic garbage collector paused: a trace is ~10,000 small
    objects, and the collections their allocation set off (scanning everything the caller
    holds) were ~3/4 of the time of unpickling 100 outcomes, the caller's largest cost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(data)
    finally:
        if enabled:
            gc.enable()


def _without_units(value):
    """Traces (alone, in an evaluate.Outcome or in component_traces' list) with their `units`
    dict cut to a tuple of ids: the titles and sources are the caller's index's
    (engine.unit_infos), a third of the bytes pickled back per question (~28 of ~90 KB on 2Wiki)."""
    from workbench.runs.evaluation import Outcome as QuestionOutcome
    from workbench.trace import Trace

    if isinstance(value, Trace):
        return replace(value, units=tuple(value.units))
    if isinstance(value, QuestionOutcome) and value.trace is not None:
        return replace(value, trace=_without_units(value.trace))
    if type(value) in (list, tuple):  # component_traces: [(config name, trace, error)]
        return type(value)(_without_units(v) for v in value)
    return value


def _with_units(value, index):
    """The inverse of `_without_units`, in the caller: the same UnitInfo, in the same order."""
    from workbench.engine import unit_infos
    from workbench.runs.evaluation import Outcome as QuestionOutcome
    from workbench.trace import Trace

    if isinstance(value, Trace) and isinstance(value.units, tuple):
        return replace(value, units=unit_infos(index, value.units))
    if isinstance(value, QuestionOutcome) and value.trace is not None:
        return replace(value, trace=_with_units(value.trace, index))
    if type(value) in (list, tuple):
        return type(value)(_with_units(v, index) for v in value)
    return value


# ---- the stream of results -------------------------------------------------------------------
class Stream:
    """Results of `keys` (in the order the caller will consume them), computed by `executor`.

    `local(key)` computes a key in this process (sequential and threads); remote executors
    call `task(env, memo, *remote_args(key))` in a worker via `run_remote`. `absorb(outcome)`
    takes a remote outcome's judgments into the caller's memo and cache as it arrives.

    >>> stream = Stream(Threads(4), keys, local=lambda k: compute(k))   # doctest: +SKIP
    >>> [stream.get(k) for k in keys]                                   # in order, like a loop  # doctest: +SKIP
    """

    def __init__(self, executor, keys, local, *, task=None, remote_args=None, recipe: Recipe | None = None,
                 index=None, absorb=None, on_arrival=None):
        self.executor = executor
        self.keys = list(keys)
        self.local = local
        self.absorb = absorb
        self.on_arrival = on_arrival
        self.index = index
        self.outcomes: dict = {}  # arrived, not yet taken
        self.taken: set = set()
        self._futures: dict = {}
        self._pending: dict = {}  # future -> key
        self._done: queue.SimpleQueue = queue.SimpleQueue()  # futures as they finish (their done-callbacks)
        if isinstance(executor, Sequential) or not self.keys:
            return
        if executor.local:
            pool = executor.pool()
            for k in self.keys:
                self._futures[k] = pool.submit(local, k)
            return
        if task is None or recipe is None:
            raise ParallelError(f"{executor!r} needs a picklable task and a recipe")
        payload = executor.ship_index(index) if index is not None else None
        n = len(self.keys)
        for i, k in enumerate(self.keys):
            fut = executor.submit(run_remote, recipe, payload, task, k, remote_args(k), priority=n - i,
                                  key=f"sag2wb-{i}-{os.urandom(6).hex()}")
            self._futures[k] = fut
            self._pending[fut] = k
            fut.add_done_callback(self._done.put)

    def get(self, key):
        """The value of `key`'s task (blocking until it is done), or its exception raised here."""
        if isinstance(self.executor, Sequential):
            return self.local(key)
        self.taken.add(key)
        if self.executor.local:
            fut = self._futures[key]
            return fut.result()
        if key not in self.outcomes:
            fut = self._futures.get(key)
            if fut not in self._pending:
                raise ParallelError(f"no task for {key!r}")
            # wait for the one future the caller needs, then take in whatever else has finished,
            # as their callbacks queued them: waiting on (or asking) every pending future per
            # result was O(questions^2) work in the caller
            self.executor.wait_any([fut])
            self._arrive(fut)  # its own callback may not have run yet
            while True:
                try:
                    f = self._done.get_nowait()
                except queue.Empty:
                    break
                if f in self._pending:
                    self._arrive(f)
        return self.outcomes.pop(key).get()

    def _arrive(self, fut) -> None:
        key = self._pending.pop(fut)
        try:
            outcome = load_outcome(fut.result())
        except Exception as exc:  # the pool itself failed (a killed pool process, a lost cluster)
            outcome = Outcome(key, error=ParallelError(
                f"{self.executor.name} failed running a task ({type(exc).__name__}: {exc}); finished questions "
                "are kept for resume: rerun the same command"))
        if self.index is not None:
            outcome.value = _with_units(outcome.value, self.index)
        if self.absorb is not None:
            self.absorb(outcome)
        if self.on_arrival is not None:
            self.on_arrival(outcome)
        self.outcomes[key] = outcome

    def finished(self) -> list:
        """(key, value) of tasks that finished without error but were not taken yet, in key
        order: what an interrupted caller saves for resume."""
        out = []
        if isinstance(self.executor, Sequential):
            return out
        if self.executor.local:
            for k in self.keys:
                f = self._futures.get(k)
                if k not in self.taken and f is not None and f.done() and not f.cancelled() and f.exception() is None:
                    out.append((k, f.result()))
            return out
        for fut in [f for f in self._pending if f.done()]:
            self._arrive(fut)
        for k in self.keys:
            o = self.outcomes.get(k)
            if o is not None and o.error is None:
                out.append((k, o.value))
        return out

    def close(self) -> None:
        """Cancel what has not run (running thread tasks finish on their own)."""
        for f in self._futures.values():
            f.cancel()
        self._futures.clear()
        self._pending.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- progress ----------------------------------------------------------------------------------
class Progress:
    """One tqdm bar over questions × configurations with judgments/s and, for JEV, requests
    and cost so far. `judge`: the caller's judge, whose counters are read (local executors);
    remote outcomes add theirs with `add_usage`.

    >>> bar = Progress(100, "jev", judge=jev_judge); bar.update(1, judgments=212)   # doctest: +SKIP
    """

    def __init__(self, total: int, desc: str, enabled: bool = True, judge=None):
        from workbench.engine import judge_usage
        from workbench.runs.evaluation import progress_bar

        self.bar = progress_bar(total, desc, enabled)
        usage = (lambda: judge_usage(judge)) if judge is not None else None
        self.usage_fn = usage
        self.remote: dict = {}
        self.judgments = 0
        self.t0 = time.perf_counter()
        self._start = dict(usage()) if usage else {}

    def add_usage(self, usage: dict) -> None:
        for k, v in usage.items():
            self.remote[k] = self.remote.get(k, 0) + v

    def usage(self) -> dict:
        now = dict(self.usage_fn()) if self.usage_fn else {}
        out = {k: v - self._start.get(k, 0) for k, v in now.items()}
        for k, v in self.remote.items():
            out[k] = out.get(k, 0) + v
        return out

    def update(self, n: int = 1, judgments: int = 0) -> None:
        self.judgments += judgments
        seconds = max(time.perf_counter() - self.t0, 1e-9)
        postfix = {"judgments/s": f"{self.judgments / seconds:.0f}"}
        u = self.usage()
        if u.get("requests"):
            postfix["requests"] = u["requests"]
            postfix["cost"] = f"{u.get('cost', 0):.4g}"
        if hasattr(self.bar, "set_postfix"):
            self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def memo_absorber(memo: JudgmentMemo, index, judges, progress: Progress | None = None):
    """An `absorb` for Stream: remote judgments into `memo` (unit texts from `index`), JEV
    entries into the disk cache of the caller's JEV judge (from `judges()`, the judge objects
    in use), usage into the bar."""

    def absorb(outcome: Outcome) -> None:
        for (judge_key, question, context_key, unit_id), score in outcome.judgments.items():
            memo.scores[(judge_key, question, context_key, unit_id, index.unit(unit_id).body)] = score
        if outcome.cache:
            for judge in judges():
                cache = getattr(judge, "cache", None)
                if cache is not None and hasattr(judge, "client"):
                    with cache.transact():
                        for k, v in outcome.cache.items():
                            cache.set(k, v)
                    break
        if progress is not None and outcome.usage:
            progress.add_usage(outcome.usage)

    return absorb



# ---- the tasks ---------------------------------------------------------------------------------
def question_task(env, memo, judge: str, params, question):
    """One question of an evaluation in a worker: the `evaluate.Outcome` (record and trace)
    the sequential loop makes. The record is made here, not by the caller, which would
    otherwise do it for every question while the workers use both cores (~0.15 s of the
    caller's CPU per 100 2Wiki questions)."""
    from workbench.runs.evaluation import run_question

    return run_question(env.index, question, params, env.judge_for(judge, question), memo)


def question_record_task(env, memo, judge: str, params, question):
    """`question_task` for an evaluation that keeps no traces: its Outcome without the trace."""
    return replace(question_task(env, memo, judge, params, question), trace=None)


def component_traces(experiment, configs, question, known: dict) -> list:
    """The traces of `configs` (a set closed under sources, in run order) on one question:
    [(config name, trace or None, exception or None)]. `known`: {config name: judgments} of
    records already resumed (a matched-budget row reads its source's count)."""
    records = {name: {question.id: {"judgments": j}} for name, j in known.items()}
    out = []
    for c in configs:
        try:
            trace = experiment.trace(c, question, records)
        except Exception as exc:  # raised by the caller at this (configuration, question)
            out.append((c.name, None, _sendable(exc)))
            continue
        records.setdefault(c.name, {})[question.id] = {"judgments": trace.judgments}
        out.append((c.name, trace, None))
    return out


def component_task(env, memo, all_configs, names, question, known, judge_options):
    """`component_traces` in a worker, on an Experiment rebuilt there around the worker's
    index, judges and this task's memo."""
    from workbench.runs.experiment import Experiment

    experiment = Experiment(env.index, [question], list(all_configs), memo=memo, progress=False,
                            judge_options=dict(judge_options))
    specs = {c.judge for c in all_configs if c.judge != "bm25"}
    experiment._judges = {s: (lambda q, s=s: env.judge_for(s, q)) for s in specs}
    by_name = {c.name: c for c in all_configs}
    return component_traces(experiment, [by_name[n] for n in names], question, known)


def components(configs, run_order) -> list[list]:
    """Configurations grouped so that a row and its source are in one group (each group in
    run order, groups in the order of their first row): one task per group and question."""
    parent = {c.name: c.name for c in configs}

    def root(n):
        while parent[n] != n:
            n = parent[n]
        return n

    for c in configs:
        if c.source:
            parent[root(c.name)] = root(c.source)
    groups: dict[str, list] = {}
    for c in run_order:
        groups.setdefault(root(c.name), []).append(c)
    return list(groups.values())


# ---- evaluate --------------------------------------------------------------------------------
class QuestionMap:
    """`evaluate(..., executor=...)`'s `map_outcomes`: the questions to run -> their
    `evaluate.Outcome`s in question order, computed by `executor`.

    Also `usage()`: the judge's counters spent during the map, measured once for all threads
    (per-question differences overlap when questions run at once), and `finished()`: outcomes
    done but not yet consumed, which an interrupted `evaluate` saves for resume."""

    def __init__(self, executor, index, judge: str, params, memo, judge_for, jev_options: dict, progress=None,
                 on_arrival=None, keep_judgments: bool = True, keep_traces: bool = True):
        self.executor, self.index, self.judge, self.params = executor, index, judge, params
        self.memo, self.judge_for, self.jev_options = memo, judge_for, dict(jev_options or {})
        self.keep_judgments = keep_judgments  # False: the memo is the evaluation's own, read by nothing after it
        # False: workers send each question's record, not its trace (~60 kB pickled on 2Wiki,
        # most of the caller's work per question); the record is made by the same function
        self.keep_traces = keep_traces
        self.progress, self.on_arrival = progress, on_arrival
        self.stream: Stream | None = None
        self._questions: dict = {}
        self._usage_start: dict = {}
        self._shared = None

    def __call__(self, fn, todo):
        from workbench.engine import judge_usage

        todo = list(todo)
        self._questions = {q.id: q for q in todo}
        if todo and self.judge != "oracle":
            self._shared = self.judge_for(todo[0])  # built before any thread starts: one client for all
            self._usage_start = judge_usage(self._shared)
        if self.executor.local:
            self.stream = Stream(self.executor, list(self._questions), lambda qid: fn(self._questions[qid]))
        else:
            recipe = recipe_for(self.index, self.jev_options, self.executor.workers, judgments=self.keep_judgments)
            self.stream = Stream(
                self.executor, list(self._questions), None,
                task=question_task if self.keep_traces else question_record_task,
                remote_args=lambda qid: (self.judge, self.params, self._questions[qid]), recipe=recipe,
                index=self.index,
                absorb=memo_absorber(self.memo, self.index, lambda: [self._shared], self.progress),
                on_arrival=self.on_arrival)
        return self._outcomes()

    def _outcomes(self):
        try:
            for qid in self._questions:
                yield self.stream.get(qid)  # an evaluate.Outcome, made locally or by question_task
        finally:
            self.stream.close()

    def finished(self) -> list:
        """Outcomes finished (without failure) but not consumed yet, in question order."""
        if self.stream is None:
            return []
        out = []
        for _qid, o in self.stream.finished():
            if o.failure is None:
                out.append(o)
        return out

    def usage(self) -> dict | None:
        """Thread runs: the shared judge's counters spent since the map started; None otherwise."""
        from workbench.engine import judge_usage

        if not self.executor.local or isinstance(self.executor, Sequential) or self._shared is None:
            return None
        now = judge_usage(self._shared)
        return {k: v - self._usage_start.get(k, 0) for k, v in now.items()}


# ---- experiments -------------------------------------------------------------------------------
class ComponentFetch:
    """`Experiment.run`'s source of traces when an executor runs questions at once: one task
    per (group of configurations linked by sources, question), submitted in the order the
    run consumes them; `fetch(config, question, records)` stands for `experiment.trace(...)`
    and raises the same exception at the same (configuration, question).

    >>> fetch = ComponentFetch(experiment, Threads(8), run_order, todo, known)   # doctest: +SKIP
    """

    def __init__(self, experiment, executor, run_order, todo: set, known: dict, progress: Progress | None = None,
                 on_arrival=None):
        self.experiment = experiment
        self.executor = executor
        groups = components(experiment.configs, run_order)
        self.group_of = {c.name: i for i, g in enumerate(groups) for c in g}
        by_name = {c.name: c for c in experiment.configs}
        self.questions = {q.id: q for q in experiment.questions}
        self.tasks: dict = {}  # (group, question id) -> (names to compute, {name: known judgments})
        for i, g in enumerate(groups):
            for q in experiment.questions:
                names = [c.name for c in g if (c.name, q.id) in todo]
                if names:
                    self.tasks[(i, q.id)] = (names, {c.name: known[(c.name, q.id)] for c in g
                                                     if (c.name, q.id) in known})
        self.results: dict = {}  # (config name, question id) -> (trace, error), not taken yet
        specs = sorted({c.judge for c in experiment.configs if c.judge != "bm25"})
        judges = [experiment._factory(s) for s in specs]  # built before any thread: one JEV client for all
        self._jev = [f(None) for s, f in zip(specs, judges) if s == "jev"]
        if executor.local:
            def local(key):
                names, known_here = self.tasks[key]
                return component_traces(experiment, [by_name[n] for n in names], self.questions[key[1]], known_here)
            self.stream = Stream(executor, list(self.tasks), local)
        else:
            recipe = recipe_for(experiment.index, experiment.judge_options, executor.workers)
            configs = tuple(experiment.configs)
            self.stream = Stream(
                executor, list(self.tasks), None, task=component_task, recipe=recipe, index=experiment.index,
                remote_args=lambda key: (configs, self.tasks[key][0], self.questions[key[1]], self.tasks[key][1],
                                         tuple(sorted(experiment.judge_options.items()))),
                absorb=memo_absorber(experiment.memo, experiment.index, lambda: self._jev, progress),
                on_arrival=on_arrival)

    def __call__(self, config, question, records=None):
        k = (config.name, question.id)
        if k not in self.results:
            for name, trace, error in self.stream.get((self.group_of[config.name], question.id)):
                self.results[(name, question.id)] = (trace, error)
        trace, error = self.results.pop(k)
        if error is not None:
            raise error
        return trace

    def finished(self) -> list:
        """[(config name, question, trace)] computed without error but not taken yet."""
        for key, value in self.stream.finished():
            for name, trace, error in value:
                self.results.setdefault((name, key[1]), (trace, error))
        return [(name, self.questions[qid], trace) for (name, qid), (trace, error) in self.results.items()
                if error is None]

    def close(self):
        self.stream.close()
