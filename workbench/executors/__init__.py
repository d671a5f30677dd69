"""Executors: many tasks at once (sequentially, on threads, on a process pool or a Dask
cluster) with results identical to a sequential run; `pools` runs them, `workers` is what a
worker process needs. Generic: a task is a picklable callable `task(env, memo)` from the run layer.

>>> from workbench.executors import make_executor
>>> make_executor(concurrency=1), make_executor(concurrency=4)
(Sequential(), Threads(4))
"""

from workbench.deprecation import keep_old_names
from workbench.executors.pools import (
    JEV_DEFAULT_CONCURRENCY,
    Dask,
    ParallelError,
    Processes,
    Sequential,
    Stream,
    Threads,
    default_concurrency,
    heap_frozen,
    make_executor,
)
from workbench.executors.workers import (
    JEV_REQUEST_LIMIT,
    Recipe,
    RecordingStore,
    RemoteTaskError,
    TaskOutcome,
    WorkerEnv,
    load_outcome,
    recipe_for,
    run_remote,
    sendable,
    worker_env,
)

# names older code imported from here, readable with a DeprecationWarning (docs/deprecations.md)
keep_old_names(__name__, {"usage_of": "workbench.protocols:summed_usage"})

__all__ = [
    "JEV_DEFAULT_CONCURRENCY",
    "JEV_REQUEST_LIMIT",
    "Dask",
    "ParallelError",
    "Processes",
    "Recipe",
    "RecordingStore",
    "RemoteTaskError",
    "Sequential",
    "Stream",
    "TaskOutcome",
    "Threads",
    "WorkerEnv",
    "default_concurrency",
    "heap_frozen",
    "load_outcome",
    "make_executor",
    "recipe_for",
    "run_remote",
    "sendable",
    "worker_env",
]
