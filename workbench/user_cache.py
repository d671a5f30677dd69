"""Where what we can rebuild is kept between processes: compiled kernels, model files,
embeddings, the collator."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """$XDG_CACHE_HOME/sag2wb/PARTS (~/.cache/sag2wb/...)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "sag2wb", *parts)
