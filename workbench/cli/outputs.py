"""What the commands write: files replaced atomically and recorded as sag2wb's, and JSON of numpy values."""

from __future__ import annotations

from pathlib import Path

from workbench import safeio
from workbench.runs.resume import naming_path

ABLATION_TABLE_MARKER = "<!-- written by sag2wb ablate -->"  # says so to a reader; replacing is by provenance


def write(path: Path, text: str, record: str = "sag2wb") -> None:
    """Atomic write (temp file, fsync, rename): a kill or a full disk leaves the old file whole.
    The file is recorded as ours (`record`: what wrote it), so a rerun may replace it."""
    with naming_path(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        safeio.atomic_write_text(path, text, record=record)


def json_default(v):
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")
