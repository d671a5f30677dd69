"""Many tasks at once: sequentially, on threads (judges that wait: JEV), on a process pool
(judges that compute: lexical, a neural judge) or on a Dask cluster, with results identical
to a sequential run. Generic: a task is a picklable callable `task(env, memo)` that the run
layer makes (workbench/runs/tasks.py); this module runs it and opens its worker's setting.

How identity with the sequential run is kept (docs/experiments.md, "Many questions at once"):
tasks run the sequential loop's code and the caller consumes results in its order
(`Stream.get(key)` blocks until that key's task is done): records, resume lines, traces and
metrics come out in the same order with the same bytes (only `stats` may differ). Threads
share the caller's judges, memo and disk cache (one JEV client: its semaphore bounds the
requests in flight, 20). Process and Dask workers open the index by path, read-only (or from
bytes shipped once per Dask worker), build their own judges from the tasks' `JudgeSpec`s (a
judge that waits gets a share of the 20 requests) and send back with each result the
judgments they made, which the caller takes into its memo and store as they arrive. A Dask
worker that dies mid-task loses nothing: the scheduler re-runs its tasks elsewhere and, tasks
being deterministic, the results are the same. A judge error is not retried: it is the
task's outcome, raised by `get` exactly where the sequential loop raises it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
from concurrent import futures as cf
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import connection as mp_connection
from pathlib import Path

from workbench.executors.workers import (
    INHERITABLE_INDEXES,
    Recipe,
    RemoteTaskError,
    TaskOutcome,
    load_outcome,
    run_remote,
    sendable,
)
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.machine import cores
from workbench.safeio import InputError

JEV_DEFAULT_CONCURRENCY = 8  # concurrent questions for a judge that waits on a service


class ParallelError(InputError):
    """Options that cannot run together, a cluster that cannot be reached, or a pool that broke
    (a worker process killed outside Dask); the message says which. The CLI exits 2."""


@contextlib.contextmanager
def heap_frozen():
    """Keep the cyclic garbage collector off every object that exists now until the block ends
    (`gc.freeze`, `gc.unfreeze`): a run's collections then scan what it made, not the results
    a notebook holds (200 traces held: ~0.2 s of a 2 s run, also in a process pool's caller,
    competing with the workers). A caller that froze objects itself is left as it was."""
    ours = gc.get_freeze_count() == 0
    if ours:
        gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()


def _waits(judge: str | JudgeSpec | None) -> bool:
    try:
        return judge not in (None, "") and JudgeSpec.parse(judge).kind.waits
    except JudgeError:  # an unknown judge: its error comes where it is built, with the rest
        return False


def default_concurrency(judge: str | JudgeSpec | None = None) -> int:
    """Concurrent questions when none is asked for: 8 for a judge that waits (JEV, on HTTP),
    1 otherwise (in-process judges hold the GIL; use processes for them).
    >>> default_concurrency("jev"), default_concurrency("lexical")
    (8, 1)
    """
    return JEV_DEFAULT_CONCURRENCY if _waits(judge) else 1


def default_processes(concurrency: int, judge: str | JudgeSpec | None = None) -> int:
    """Processes for `concurrency` questions at once when none is asked for: for a judge that
    waits, one per 8 questions, up to one per core (one GIL prepares the requests of ~8
    questions about as fast as a 200 ms service answers them: 16 at once on threads measured
    5.8x one at a time, 2 processes x 8 threads 8.0x in the same minutes, issue 33); 1 otherwise.
    >>> default_processes(8, "jev"), default_processes(16, "lexical"), default_processes(16, "jev") == min(2, cores())
    (1, 1, True)
    """
    return max(1, min(cores(), concurrency // JEV_DEFAULT_CONCURRENCY)) if _waits(judge) else 1


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
    """`n` tasks at once on threads sharing the caller's judges, memo and disk cache."""

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
    """A pool of `n` worker processes; each opens the index read-only and builds its own judges.
    `threads` > 1: each process runs that many tasks at once on threads sharing its judges (one
    JEV client per process): a judge that waits, with more questions in flight than one GIL
    can prepare, keeps several cores busy (`--processes 2 --concurrency 16`: 2 x 8).
    `start_method`: "fork" on Linux by default — a worker starts with the modules and jieba's
    dictionary the caller already loaded (spawning costs seconds per worker) and uses none of
    the caller's open connections or threads; "spawn" elsewhere (macOS, Windows)."""

    local = False

    def __init__(self, n: int, start_method: str | None = None, *, threads: int = 1):
        for what, v in (("processes", n), ("threads", threads)):
            if not isinstance(v, int) or v < 1:
                raise ParallelError(f"{what} {v!r}: expected a whole number >= 1")
        self.workers, self.threads = n, threads  # workers: processes, each with its own judges
        self.name = f"processes({n})" if threads == 1 else f"processes({n}x{threads})"
        self.start_method = start_method or ("fork" if sys.platform.startswith("linux") else "spawn")
        self._pool = None

    def __repr__(self) -> str:
        return f"Processes({self.workers}{'' if self.threads == 1 else f', threads={self.threads}'})"

    def pool(self):
        if self._pool is None:
            context = multiprocessing.get_context(self.start_method)
            if self.threads > 1:
                with heap_frozen():  # as below: forked at once, the caller's objects out of their collector
                    self._pool = ThreadedProcessPool(self.workers, self.threads, context)
                return self._pool
            pool = cf.ProcessPoolExecutor(self.workers, mp_context=context, initializer=_ignore_sigint)
            if self.start_method == "fork":
                # Fork every worker now with the caller's objects frozen out of the collector: its
                # collections never walk (and copy-on-write) what it inherited (gc.freeze docs)
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
        warmed and left for workers forked from now on to adopt (`Index.reopen_after_fork`):
        they start with its units, vocabulary, postings and per-term caches instead of reading
        them again each (the pool measured 0.5-0.8x one process on 2Wiki without this)."""
        if self.start_method == "fork" and index is not None:
            index.warm()
            INHERITABLE_INDEXES[(str(Path(index.path).resolve()), index.meta.get("fingerprint"))] = (os.getpid(), index)
        return None

    def close(self, wait: bool = False):
        """Stop the pool; `wait=True` waits for the workers to exit (RUSAGE_CHILDREN counts them then)."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None


class ThreadedProcessPool:
    """`processes` workers, each taking tasks off one shared queue on `threads` threads, with
    `submit` and `shutdown` as a ProcessPoolExecutor's (which runs one task per process at a
    time). A worker that dies breaks the pool: every unfinished future fails with
    BrokenProcessPool and the other workers are stopped, so the caller never waits forever."""

    def __init__(self, processes: int, threads: int, context):
        self._tasks = context.Queue()  # its put never blocks: a feeder thread writes the pipe
        self._tasks.cancel_join_thread()  # at exit, do not wait to send what no worker will read
        self._results = context.SimpleQueue()
        self._futures: dict[int, cf.Future] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._broken: str | None = None
        self._closing = False
        self._slots = processes * threads
        self._workers = [
            context.Process(target=_serve, args=(self._tasks, self._results, threads), daemon=True)
            for _ in range(processes)
        ]
        for w in self._workers:
            w.start()
        threading.Thread(target=self._collect, name="sag2wb-pool-results", daemon=True).start()

    def submit(self, fn, *args) -> cf.Future:
        data = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)  # here: an unpicklable task raises here
        future: cf.Future = cf.Future()
        with self._lock:
            if self._broken or self._closing:
                raise BrokenProcessPool(self._broken or "the pool is shut down")
            i = next(self._ids)
            self._futures[i] = future
        self._tasks.put((i, data))
        return future

    def _collect(self) -> None:
        reader, ended = self._results._reader, {w.sentinel: w for w in self._workers}
        while True:
            ready = mp_connection.wait([reader, *ended])
            if reader in ready:  # results first: what a worker sent before it ended still counts
                i, ok, value = self._results.get()
                with self._lock:
                    future = self._futures.pop(i, None)
                with contextlib.suppress(cf.InvalidStateError):  # cancelled meanwhile
                    if future is not None:
                        future.set_result(value) if ok else future.set_exception(value)
                continue
            if not self._closing:
                w = ended[ready[0]]
                w.join(5)  # its pipe closes a moment before it can be reaped: then its exit code is known
                self._break(f"a worker process (pid {w.pid}) ended with exit code {w.exitcode} mid-run")
            return

    def _break(self, why: str) -> None:
        with self._lock:
            self._broken, futures = why, list(self._futures.values())
            self._futures.clear()
        for w in self._workers:
            w.terminate()
        for future in futures:
            with contextlib.suppress(cf.InvalidStateError):
                future.set_exception(BrokenProcessPool(why))

    def shutdown(self, wait: bool = True, cancel_futures: bool = True) -> None:
        """Stop the workers: at once when tasks are unfinished (their futures are cancelled: nobody
        will read them), else once each thread takes its end-of-work marker."""
        with self._lock:
            self._closing, futures = True, list(self._futures.values())
            self._futures.clear()
        for future in futures:
            future.cancel()
        if futures or self._broken:
            for w in self._workers:
                w.terminate()
        else:
            for _ in range(self._slots):
                self._tasks.put(None)
        if wait:
            for w in self._workers:
                w.join()


def _serve(tasks, results, threads: int) -> None:
    """A ThreadedProcessPool worker: `threads` threads run tasks until each takes a None."""
    _ignore_sigint()

    def work():
        while (item := tasks.get()) is not None:
            i, data = item
            try:
                fn, args = pickle.loads(data)
                reply = (i, True, fn(*args))
            except BaseException as exc:  # the task's outcome, raised by its future as a pool's would
                reply = (i, False, sendable(exc))
            try:
                results.put(reply)
            except Exception as exc:  # a value that does not pickle
                results.put((i, False, RemoteTaskError(f"{type(exc).__name__}: {exc}")))

    pool = [threading.Thread(target=work, name=f"sag2wb-question-{k}") for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


class Dask:
    """Tasks on a dask.distributed cluster: `Dask("tcp://host:8786")` connects a Client,
    `Dask(client)` uses one you made (e.g. on a LocalCluster) and leaves it open.
    `ship_index`: None (default) ships the index file's bytes once per worker only when
    some worker cannot see it at the same path; True always ships; False never."""

    local = False

    def __init__(self, client_or_address, *, ship_index: bool | None = None):
        try:
            from distributed import Client, wait  # an optional extra, and a heavy import: only when Dask is asked for
        except ImportError:
            raise ParallelError("--dask needs dask.distributed: pip install 'sag2-workbench[dask]'") from None
        if isinstance(client_or_address, str):
            try:
                self.client = Client(client_or_address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ParallelError(
                    f"--dask {client_or_address}: no Dask scheduler answered ({exc}); start one with "
                    "`dask scheduler` and workers with `dask worker ADDRESS`"
                ) from None
            self._own = True
        else:
            self.client, self._own = client_or_address, False
        self.ship = ship_index
        self._wait = wait
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

    def wait_any(self, pending):
        return self._wait(list(pending), return_when="FIRST_COMPLETED").done

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
    with contextlib.suppress(OSError):
        return os.stat(path).st_size


def make_executor(
    concurrency: int | None = None,
    processes: int | None = None,
    dask=None,
    *,
    judge: str | JudgeSpec | None = "lexical",
):
    """The executor for CLI-style options: `dask` (an address or a Client) alone; `processes`
    with `concurrency`: that many questions at once over the processes, on threads in each
    (ceil(concurrency / processes) per process); `processes` alone: a process pool;
    `concurrency` alone: on threads, over `default_processes(concurrency, judge)` processes
    (more than one only for a judge that waits, 16 at once or more); neither:
    `default_concurrency(judge)` on threads.

    >>> make_executor(judge="lexical"), make_executor(concurrency=16), make_executor(processes=2)  # dask=ADDRESS
    (Sequential(), Threads(16), Processes(2))
    >>> make_executor(16, 2), make_executor(16, 3), make_executor(16, 1), make_executor(2, 4)
    (Processes(2, threads=8), Processes(3, threads=6), Threads(16), Processes(2))
    """
    for name, v in (("--concurrency", concurrency), ("--processes", processes)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise ParallelError(f"{name[2:]} {v!r}: expected a whole number >= 1")
    if dask is not None:
        if concurrency is not None or processes is not None:
            given = " and ".join(n for n, v in (("--concurrency", concurrency), ("--processes", processes)) if v)
            raise ParallelError(f"choose --dask or {given}: the cluster's workers decide how many run at once")
        return Dask(dask)
    if concurrency is None:
        if processes is None:
            n = default_concurrency(judge)
            return Sequential() if n == 1 else Threads(n)
        return Sequential() if processes == 1 else Processes(processes)
    if processes is None:
        processes = default_processes(concurrency, judge)
    processes = min(processes, concurrency)  # never more at once than asked for
    if processes == 1:  # this process, on threads
        return Sequential() if concurrency == 1 else Threads(concurrency)
    return Processes(processes, threads=-(-concurrency // processes))


# ---- the stream of results -------------------------------------------------------------------
class Stream:
    """Results of `keys` (in the order the caller will consume them), computed by `executor`:
    `local(key)` in this process (sequential and threads), else `remote(key)` (a picklable
    `task(env, memo)`) in a worker via `run_remote`. As a remote outcome arrives, `unpack(value)`
    restores what the task left out to send it and `absorb(outcome)` takes in its judgments.

    >>> stream = Stream(Threads(2), ["a", "bb", "ccc"], local=len); [stream.get(k) for k in stream.keys]
    [1, 2, 3]
    """

    def __init__(
        self,
        executor,
        keys,
        local,
        *,
        remote=None,
        recipe: Recipe | None = None,
        index=None,
        absorb=None,
        unpack=None,
        on_arrival=None,
    ):
        self.executor, self.keys, self.local = executor, list(keys), local
        self.absorb, self.unpack, self.on_arrival = absorb, unpack, on_arrival
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
        if remote is None or recipe is None:
            raise ParallelError(f"{executor!r} needs picklable tasks and a recipe")
        payload = executor.ship_index(index) if index is not None else None
        n = len(self.keys)
        for i, k in enumerate(self.keys):
            fut = executor.submit(
                run_remote, recipe, payload, remote(k), k, priority=n - i, key=f"sag2wb-{i}-{os.urandom(6).hex()}"
            )
            self._futures[k] = fut
            self._pending[fut] = k
            fut.add_done_callback(self._done.put)

    def get(self, key):
        """The value of `key`'s task (blocking until it is done), or its exception raised here."""
        if isinstance(self.executor, Sequential):
            return self.local(key)
        self.taken.add(key)
        if self.executor.local:
            return self._futures[key].result()
        if key not in self.outcomes:
            fut = self._futures.get(key)
            if fut not in self._pending:
                raise ParallelError(f"no task for {key!r}")
            # wait for the one future needed, then take in whatever else has finished, as their
            # callbacks queued them (asking every pending future per result was O(questions^2))
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
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # the pool itself failed (a killed pool process, a lost cluster, a SystemExit)
            outcome = TaskOutcome(
                key,
                error=ParallelError(
                    f"{self.executor.name} failed running a task ({type(exc).__name__}: {exc}); finished questions "
                    "are kept for resume: rerun the same command"
                ),
            )
        if self.unpack is not None and outcome.error is None:
            outcome.value = self.unpack(outcome.value)
        if self.absorb is not None:
            self.absorb(outcome)
        if self.on_arrival is not None:
            self.on_arrival(outcome)
        self.outcomes[key] = outcome

    def finished(self) -> list:
        """(key, value) of tasks that finished without error but were not taken yet, in key
        order: what an interrupted caller saves for resume."""
        out: list = []
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
