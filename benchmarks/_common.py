"""Shared helpers for the benchmark scripts (they print figures; they assert nothing)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"


def data_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        default=os.environ.get("SAG2WB_SHARED_DATA", str(DEFAULT_DATA)),
        help="folder holding 2wiki/ (default ../shared/data)",
    )


def need(path: Path) -> Path:
    if not path.exists():
        sys.exit(f"benchmark data not found: {path} (pass --data)")
    return path


def rss_mib() -> float:
    """Current resident set size of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
