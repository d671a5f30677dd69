"""How many workers a build, a corpus graph and a run start: the cores this process may use
(its affinity), not the machine's count."""

from __future__ import annotations

import os

import pytest

from workbench.executors.pools import default_processes
from workbench.feedback.graph_scoring import PARALLEL_FROM
from workbench.feedback.graph_scoring import default_workers as graph_workers
from workbench.index.build import default_workers as build_workers
from workbench.machine import cores

pinnable = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a process that may run on two cores or more",
)


@pinnable
def test_one_pinned_core_means_one_worker_everywhere():
    allowed = os.sched_getaffinity(0)
    assert build_workers() == 2 and graph_workers(PARALLEL_FROM) == 2  # unpinned, as before
    os.sched_setaffinity(0, {min(allowed)})  # as `taskset -c N` would
    try:
        assert cores() == 1
        assert build_workers() == 1  # os.cpu_count() said 2 here and started 2 workers on one core
        assert graph_workers(PARALLEL_FROM) == 1
        assert default_processes(16, "jev") == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert cores() == len(allowed)


def test_small_graphs_stay_in_one_process():
    assert graph_workers(PARALLEL_FROM - 1) == 1
