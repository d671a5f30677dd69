"""C loops compiled once per machine, for the numpy paths that need them (the corpus graph's
scoring, the postings' decoding and sums).

The system's compiler ($CC, else cc or gcc) builds a source into the user's cache folder under a
name holding the digest of the source, the flags and the compiler command (`digest`): a change of
any of them is a new file, never a stale library. The
library is written to a temporary folder beside it, synced, and renamed into place, so processes
that race build the same file and each sees it whole or not at all. Without a compiler, or when
the build or the load fails, `compiled` returns None and the caller keeps its numpy path. A
library is loaded only when its bytes' sha256 is the one recorded beside it when it was built
(`NAME.so.sha256`): a damaged one is built again instead of killing the process. The
flags keep IEEE arithmetic as written (no fast-math, no fused multiply-add), so the C sums equal
numpy's bit for bit where a caller adds in the same order.

A kernel module states its C functions' types as data (`SIGNATURES`: name -> (result type,
argument types)) and gets its `load()` from `loader`: the library compiled, every function in the
table declared (so a call with too few arguments raises instead of reading garbage), kept once
per process, or None when its environment switch asks for the numpy path or nothing compiles."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.user_cache import user_cache_dir

FLAGS = ("-O2", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC")

# A C function's (result type, argument types) as ctypes names them (None: void).
Signature = tuple[Any, Sequence[Any]]

# The switch's values that ask for the numpy (or Python) path instead of the compiled one.
OFF = ("numpy",)

# A growable buffer, for the kernels that build tables in C (words_kernel, graph_chunks): put
# before their source. *p holds *cap items of `size` bytes; made to hold `need`, doubling from
# 4096; -1 when realloc fails, *p and *cap left as they were (the caller's data intact).
GROW = r"""
#include <stdint.h>
#include <stdlib.h>

static int grow(void **p, int64_t *cap, int64_t need, int64_t size) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)(c * size));
    if (!q) return -1;
    *p = q; *cap = c;
    return 0;
}
"""


def kernels_dir() -> Path:
    return user_cache_dir("kernels")


def turned_off(variable: str, off: Sequence[str] = OFF) -> bool:
    """True when $variable asks for the numpy path (one of `off`, any case)."""
    return os.environ.get(variable, "").strip().lower() in off


def load_once(loaded: list, lock: threading.Lock, variable: str, build, off: Sequence[str] = OFF):
    """`build()`'s library, built at most once per process and kept in `loaded` (its one entry:
    the library or None), or None when $variable asks for the numpy path. Under `lock`: threads
    of one process (16 questions at once) would otherwise each compile and load it."""
    if turned_off(variable, off):
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


def declare(lib: ctypes.CDLL, signatures: Mapping[str, Signature]) -> None:
    """Each function of `signatures` typed on `lib`: ctypes then converts and counts the
    arguments of every call."""
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = list(argtypes)


class Kernel:
    """A kernel module's `load()` (made by `loader`): its library compiled and declared at most
    once per process (thread-safe), or None (no compiler, a failed compile, $variable one of
    `off`).

    `signatures`: the functions' types (`declare`). `build`: what builds the library when more
    than compiling and declaring is needed (checks before, tables loaded after); it calls
    `library()`. `loaded` holds the kept answer (a test puts a fresh list there to build again)."""

    def __init__(
        self,
        name: str,
        source: str,
        variable: str,
        signatures: Mapping[str, Signature],
        *,
        build: Callable[[], ctypes.CDLL | None] | None = None,
        off: Sequence[str] = OFF,
    ) -> None:
        self.name, self.source, self.variable, self.off = name, source, variable, tuple(off)
        self.signatures = signatures
        self.build = build if build is not None else self.library
        self.loaded: list = []
        self.lock = threading.Lock()

    def __call__(self) -> ctypes.CDLL | None:
        return load_once(self.loaded, self.lock, self.variable, self.build, self.off)

    def library(self) -> ctypes.CDLL | None:
        """The library compiled from the source and declared, not kept (`compiled`'s None as is)."""
        lib = compiled(self.name, self.source)
        if lib is not None:
            declare(lib, self.signatures)
        return lib


class Owned:
    """An object in C memory that a Python object owns and frees with itself (a kernel's table):
    `new()` makes it (NULL: no memory, `no_memory` raised), `free(handle)` frees it, `size(handle)`
    is its length."""

    handle: ctypes.c_void_p | None = None

    def __init__(self, new, free, size, no_memory: str) -> None:
        self._free, self._size = free, size
        self.handle = ctypes.c_void_p(new())
        if not self.handle.value:
            raise MemoryError(no_memory)

    def __del__(self) -> None:
        if self.handle is not None and self.handle.value:
            self._free(self.handle)
            self.handle = None

    def __len__(self) -> int:
        return int(self._size(self.handle))


loader = Kernel  # a kernel's `load = ckernel.loader(name, SOURCE, variable, SIGNATURES)`


def digest(source: str) -> str:
    """A cached library's key: the source, the flags and the compiler command ($CC as written,
    empty for the default cc or gcc; not resolved on the PATH, which costs a search), so a change
    of any of them builds a new library instead of loading one built otherwise."""
    key = "\0".join([source, *FLAGS, os.environ.get("CC", "")])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def compiled(name: str, source: str) -> ctypes.CDLL | None:
    """The library built from `source` (C), or None when it cannot be built or loaded; cached
    under `digest(source)`. A cached library that is not the one built (`_intact`) or does not
    load (a foreign file) is built again once."""
    target = kernels_dir() / f"{name}-{digest(source)}.so"
    for _ in range(2):
        if not _intact(target) and not _build(name, source, target):
            return None
        try:
            return ctypes.CDLL(str(target))
        except OSError:
            try:
                target.unlink()
            except OSError:
                return None
    return None


def _sum_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _intact(target: Path) -> bool:
    """The cached library is the one built: its bytes' sha256 is the one recorded beside it. A
    library cut after its headers (a damaged disk, a copy stopped half way) loads, and the process
    dies of SIGBUS at the first page past the cut, so it is checked before it is loaded (~0.1 ms)."""
    try:
        return _sum_path(target).read_text(encoding="ascii").strip() == hashlib.sha256(target.read_bytes()).hexdigest()
    except (OSError, UnicodeDecodeError):
        return False


BUILDING = ".building-"  # a build's temporary folder in the cache, renamed from when done
STALE_AFTER = 600.0  # seconds: a compile times out after 120, so an older folder's builder is dead


def _sweep(folder: Path) -> None:
    """The temporary folders of builds killed before they cleaned up (kill -9, a power cut), gone."""
    now = time.time()
    for old in folder.glob(BUILDING + "*"):
        try:
            if now - old.stat().st_mtime > STALE_AFTER:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass  # another builder swept it first


def _build(name: str, source: str, target: Path) -> bool:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _sweep(target.parent)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=BUILDING) as tmp:
            src, out = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
            src.write_text(source, encoding="utf-8")
            done = subprocess.run([compiler, *FLAGS, str(src), "-o", str(out)], capture_output=True, timeout=120)
            if done.returncode != 0:
                return False
            with open(out, "rb") as f:  # on disk before the rename: a crash leaves no torn library
                os.fsync(f.fileno())
                recorded = Path(tmp) / f"{name}.sha256"
                recorded.write_text(hashlib.sha256(f.read()).hexdigest(), encoding="ascii")
            with open(recorded, "rb") as f:
                os.fsync(f.fileno())
            os.replace(out, target)  # atomic: another process sees the whole library or none
            os.replace(recorded, _sum_path(target))  # after it: a library without its sum is built again
    except (OSError, subprocess.SubprocessError):
        return False
    return True
