"""C loops compiled once per machine, for the numpy paths that need them (the corpus graph's
scoring, the postings' decoding and sums).

The system's compiler ($CC, else cc or gcc) builds a source into the user's cache folder under a
name holding the source's digest: a changed source is a new file, never a stale library. The
library is written to a temporary folder beside it, synced, and renamed into place, so processes
that race build the same file and each sees it whole or not at all. Without a compiler, or when
the build or the load fails, `compiled` returns None and the caller keeps its numpy path. The
flags keep IEEE arithmetic as written (no fast-math, no fused multiply-add), so the C sums equal
numpy's bit for bit where a caller adds in the same order."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from workbench.user_cache import user_cache_dir

FLAGS = ("-O2", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC")


def kernels_dir() -> Path:
    return user_cache_dir("kernels")


def turned_off(variable: str) -> bool:
    """True when $variable asks for the numpy path (`numpy`, any case)."""
    return os.environ.get(variable, "").strip().lower() == "numpy"


def load_once(loaded: list, lock: threading.Lock, variable: str, build) -> ctypes.CDLL | None:
    """`build()`'s library, built at most once per process and kept in `loaded` (its one entry:
    the library or None), or None when $variable asks for the numpy path. Under `lock`: threads
    of one process (16 questions at once) would otherwise each compile and load it."""
    if turned_off(variable):
        return None
    if not loaded:
        with lock:
            if not loaded:
                loaded.append(build())
    return loaded[0]


def pointer(array, dtype=None, who: str = "a compiled loop") -> ctypes.c_void_p:
    """`array`'s memory as a C argument (NULL for None). With `dtype`, an array of another dtype
    or not contiguous is refused: the C side reads raw memory."""
    if array is None:
        return ctypes.c_void_p(None)
    if dtype is not None and (array.dtype != dtype or not array.flags.c_contiguous):
        import numpy as np

        raise TypeError(f"{who}: an array of {array.dtype} where {np.dtype(dtype)} (contiguous) is read")
    return ctypes.c_void_p(array.ctypes.data)


def loader(name: str, source: str, variable: str, setup=None):
    """A kernel's `load()`: `compiled(name, source)` at most once per process (`load_once`), with
    `setup(lib)` declaring its functions' types, or None when $variable asks for the numpy path."""
    loaded: list = []
    lock = threading.Lock()

    def build() -> ctypes.CDLL | None:
        lib = compiled(name, source)
        if lib is not None and setup is not None:
            setup(lib)
        return lib

    return lambda: load_once(loaded, lock, variable, build)


def compiled(name: str, source: str) -> ctypes.CDLL | None:
    """The library built from `source` (C), or None when it cannot be built or loaded. A cached
    library that does not load (a truncated or foreign file) is built again once."""
    target = kernels_dir() / f"{name}-{hashlib.sha256(source.encode()).hexdigest()[:16]}.so"
    for _ in range(2):
        if not target.exists() and not _build(name, source, target):
            return None
        try:
            return ctypes.CDLL(str(target))
        except OSError:
            try:
                target.unlink()
            except OSError:
                return None
    return None


def _build(name: str, source: str, target: Path) -> bool:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            src, out = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
            src.write_text(source, encoding="utf-8")
            done = subprocess.run([compiler, *FLAGS, str(src), "-o", str(out)], capture_output=True, timeout=120)
            if done.returncode != 0:
                return False
            with open(out, "rb") as f:  # on disk before the rename: a crash leaves no torn library
                os.fsync(f.fileno())
            os.replace(out, target)  # atomic: another process sees the whole library or none
    except (OSError, subprocess.SubprocessError):
        return False
    return True
