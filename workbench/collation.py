"""pyuca's collator (the SPEC's tie-break between equal term priorities), made once per
process and kept as a pickle in the user's cache: parsing pyuca's allkeys table (~0.22 s)
was most of a first question's set-up; the pickle loads in ~0.08 s."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from workbench.safeio import atomic_write_bytes
from workbench.user_cache import user_cache_dir

_COLLATOR: list = []  # pyuca's, made once under a lock: questions on threads each built one
_COLLATOR_LOCK = threading.Lock()


def _collator():
    with _COLLATOR_LOCK:
        if not _COLLATOR:
            _COLLATOR.append(_load_collator())
    return _COLLATOR[0]


def _collator_cache() -> Path:
    from importlib.metadata import version

    from pyuca import Collator

    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return user_cache_dir("collation") / f"pyuca-{version('pyuca')}-uca{Collator.UCA_VERSION}-py{py}.pickle"


def _load_collator():
    """pyuca's collator, from the pickle in the user's cache when one is there. A file that
    does not load as a Collator is replaced by a fresh one; a cache that cannot be written
    only costs the parse."""
    import pickle

    from pyuca import Collator

    path = _collator_cache()
    try:
        with open(path, "rb") as f:
            collator = pickle.load(f)
        if isinstance(collator, Collator):
            return collator
    except Exception:  # missing, truncated or not ours: whatever it raises, it is rebuilt
        pass
    collator = Collator()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(collator, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass
    return collator
