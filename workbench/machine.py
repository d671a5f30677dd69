"""What of the machine this process may use."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on: its CPU affinity (`taskset`, a container's cpuset), not
    the machine's count, so a build or graph pinned to one core starts one worker, not two."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
