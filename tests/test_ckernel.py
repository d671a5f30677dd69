"""workbench.ckernel: a C source built once into the user's cache, by name and digest; None
(the caller's numpy path) without a compiler or with a source that does not compile; a cached
library that is damaged or lacks its recorded sha256 is built again, not loaded; processes racing
to build see one whole library."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

import pytest

from workbench import ckernel

SOURCE = "long long twice(long long x) { return 2 * x; }\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _twice(lib) -> int:
    lib.twice.restype = ctypes.c_longlong
    lib.twice.argtypes = [ctypes.c_longlong]
    return lib.twice(21)


def test_a_source_is_built_once_under_its_digest(cache):
    if ckernel.compiled("t", SOURCE) is None:
        pytest.skip("no C compiler here")
    files = sorted(ckernel.kernels_dir().glob("t-*.so"))
    assert len(files) == 1 and _twice(ckernel.compiled("t", SOURCE)) == 42
    mtime = files[0].stat().st_mtime_ns
    ckernel.compiled("t", SOURCE)
    assert files[0].stat().st_mtime_ns == mtime  # not built again
    ckernel.compiled("t", SOURCE + "/* changed */\n")
    assert len(list(ckernel.kernels_dir().glob("t-*.so"))) == 2  # a changed source is a new file
    assert not [p for p in ckernel.kernels_dir().iterdir() if p.is_dir()]  # no temporary folder left


def test_no_compiler_or_a_broken_source_gives_none(cache, tmp_path, monkeypatch):
    assert ckernel.compiled("bad", "this is not C") is None
    assert not list(ckernel.kernels_dir().glob("bad-*"))
    monkeypatch.setenv("CC", str(tmp_path / "no-cc"))
    assert ckernel.compiled("t", SOURCE) is None


def _in_a_process(cache, name: str) -> subprocess.Popen:
    # a new process: dlopen in this one would hand back the library it already holds by that name
    code = (
        "import ctypes, sys; from workbench import ckernel; lib = ckernel.compiled(sys.argv[1], sys.argv[2]); "
        "lib.twice.restype = ctypes.c_longlong; print(lib.twice(21))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.Popen([sys.executable, "-c", code, name, SOURCE], stdout=subprocess.PIPE, env=env, text=True)


@pytest.mark.parametrize("kept", [100, 0.5, -1])
def test_a_damaged_cached_library_is_built_again(cache, kept):
    """Cut in its ELF headers (dlopen refuses it), cut after them (dlopen maps it, and the first
    page past the cut killed the process with SIGBUS), or one byte changed: built again, never
    loaded, the process lives."""
    if ckernel.compiled("t", SOURCE) is None:
        pytest.skip("no C compiler here")
    (target,) = ckernel.kernels_dir().glob("t-*.so")
    whole = target.read_bytes()
    damaged = bytearray(whole[: int(len(whole) * kept)] if isinstance(kept, float) else whole[:kept])
    if kept == -1:
        damaged = bytearray(whole)
        damaged[len(whole) // 2] ^= 0xFF
    torn = target.with_suffix(".torn")
    torn.write_bytes(bytes(damaged))  # renamed over: this process maps the old file
    os.replace(torn, target)
    process = _in_a_process(cache, "t")
    assert process.communicate(timeout=120)[0].strip() == "42" and process.returncode == 0
    assert target.read_bytes() == whole  # the build is deterministic: the same library again


def test_a_library_without_its_recorded_sum_is_built_again(cache):
    if ckernel.compiled("t", SOURCE) is None:
        pytest.skip("no C compiler here")
    (target,) = ckernel.kernels_dir().glob("t-*.so")
    recorded = target.with_name(target.name + ".sha256")
    assert len(recorded.read_text().strip()) == 64
    recorded.unlink()  # e.g. a crash between the two renames
    mtime = target.stat().st_mtime_ns
    time.sleep(0.01)
    assert _twice(ckernel.compiled("t", SOURCE)) == 42
    assert recorded.exists() and target.stat().st_mtime_ns != mtime


def test_a_killed_builds_folder_is_swept_by_the_next_build_and_a_live_ones_is_not(cache):
    folder = ckernel.kernels_dir()
    folder.mkdir(parents=True)
    dead, live = folder / (ckernel.BUILDING + "dead"), folder / (ckernel.BUILDING + "live")
    for d in (dead, live):
        d.mkdir()
        (d / "t.c").write_text(SOURCE)
    long_ago = time.time() - ckernel.STALE_AFTER - 60
    os.utime(dead, (long_ago, long_ago))
    if ckernel.compiled("t", SOURCE) is None:
        pytest.skip("no C compiler here")
    assert not dead.exists() and (live / "t.c").exists()


def test_turned_off(monkeypatch):
    monkeypatch.setenv("SAG2WB_X_KERNEL", " NumPy ")
    assert ckernel.turned_off("SAG2WB_X_KERNEL")
    monkeypatch.setenv("SAG2WB_X_KERNEL", "c")
    assert not ckernel.turned_off("SAG2WB_X_KERNEL")


def test_processes_racing_to_build_each_load_the_whole_library(cache):
    procs = [_in_a_process(cache, "race") for _ in range(6)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    if any(p.returncode for p in procs) and not list(ckernel.kernels_dir().glob("race-*.so")):
        pytest.skip("no C compiler here")
    assert outs == ["42"] * 6 and len(list(ckernel.kernels_dir().glob("race-*.so"))) == 1
    (target,) = ckernel.kernels_dir().glob("race-*.so")
    assert ckernel._intact(target)  # the sum recorded is the library's, whoever renamed last


def test_load_once_builds_once_under_threads_and_honours_the_numpy_switch(monkeypatch):
    builds = []

    def build():
        builds.append(1)
        time.sleep(0.05)  # long enough for the other threads to arrive while it builds
        return "lib"

    loaded: list = []
    lock = threading.Lock()
    monkeypatch.delenv("SAG2WB_TEST_KERNEL", raising=False)
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(ckernel.load_once(loaded, lock, "SAG2WB_TEST_KERNEL", build)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["lib"] * 8 and builds == [1] and loaded == ["lib"]
    monkeypatch.setenv("SAG2WB_TEST_KERNEL", "NumPy")
    assert ckernel.load_once(loaded, lock, "SAG2WB_TEST_KERNEL", build) is None
    assert builds == [1]


def test_a_loader_builds_declares_once_and_honours_its_switch(cache, monkeypatch):
    declared = []
    declare = ckernel.declare
    monkeypatch.setattr(ckernel, "declare", lambda lib, table: declared.append(lib) or declare(lib, table))
    load = ckernel.loader("t", SOURCE, "SAG2WB_TEST_KERNEL", TABLE)
    monkeypatch.setenv("SAG2WB_TEST_KERNEL", "numpy")
    assert load() is None and declared == []
    monkeypatch.delenv("SAG2WB_TEST_KERNEL")
    lib = load()
    if lib is None:
        pytest.skip("no C compiler here")
    assert load() is lib and declared == [lib] and _twice(lib) == 42


def test_pointer_refuses_an_array_the_c_side_would_misread():
    import numpy as np

    good = np.arange(4, dtype=np.int32)
    assert ckernel.pointer(good, np.int32).value == good.ctypes.data == ckernel.pointer(good).value
    assert ckernel.pointer(None).value is None  # NULL: an optional argument left out
    with pytest.raises(TypeError, match=r"^graph blocks: an array of int64 where int32 \(contiguous\) is read$"):
        ckernel.pointer(good.astype(np.int64), np.int32, who="graph blocks")
    with pytest.raises(TypeError, match="int32 where int32 \\(contiguous\\)"):
        ckernel.pointer(good[::2], np.int32)  # strided: not what a C loop reads


SCALED = "long long twice(long long x) { return FACTOR * x; }\n"  # FACTOR: given by a flag


def test_a_change_of_flags_or_compiler_builds_a_new_library(cache, monkeypatch):
    """The key covers the flags and the compiler command: a library built with other flags is
    not loaded (it would double where the new flags make it triple)."""
    monkeypatch.setattr(ckernel, "FLAGS", (*ckernel.FLAGS, "-DFACTOR=2"))
    monkeypatch.delenv("CC", raising=False)
    if ckernel.compiled("s", SCALED) is None:
        pytest.skip("no C compiler here")
    assert _twice(ckernel.compiled("s", SCALED)) == 42
    monkeypatch.setattr(ckernel, "FLAGS", (*ckernel.FLAGS[:-1], "-DFACTOR=3"))
    assert _twice(ckernel.compiled("s", SCALED)) == 63  # built again: the old file held 2 * x
    assert len(list(ckernel.kernels_dir().glob("s-*.so"))) == 2
    keys = {ckernel.digest(SCALED)}
    for command in ("cc", "gcc", "clang -m64"):  # $CC as written, not resolved on the PATH
        monkeypatch.setenv("CC", command)
        keys.add(ckernel.digest(SCALED))
    assert len(keys) == 4


TABLE = {"twice": (ctypes.c_longlong, [ctypes.c_longlong])}


def test_a_table_declares_the_functions_so_a_wrong_call_raises(cache, monkeypatch):
    load = ckernel.loader("t", SOURCE, "SAG2WB_TEST_KERNEL", TABLE)
    monkeypatch.delenv("SAG2WB_TEST_KERNEL", raising=False)
    lib = load()
    if lib is None:
        pytest.skip("no C compiler here")
    assert load() is lib and lib.twice(21) == 42  # the result type declared: a long long
    with pytest.raises(TypeError, match="takes at least 1 argument"):
        lib.twice()  # undeclared, C would read whatever the register held
    with pytest.raises(ctypes.ArgumentError):
        lib.twice("21")
    monkeypatch.setenv("SAG2WB_TEST_KERNEL", " numpy")
    assert load() is None


def test_a_loader_with_its_own_build_and_switch_values(monkeypatch):
    """A kernel that checks before it compiles (o200k's data files) gives `build`; `off` names
    the switch's values that turn it off (o200k: quicktok too)."""
    built = []
    load = ckernel.loader("t", SOURCE, "SAG2WB_TEST_KERNEL", TABLE, build=lambda: built.append(1) or "lib", off=("x",))
    monkeypatch.setenv("SAG2WB_TEST_KERNEL", "X")
    assert load() is None and built == []
    monkeypatch.setenv("SAG2WB_TEST_KERNEL", "numpy")  # not one of its values
    assert load() == "lib" and load() == "lib" and built == [1]


GROWN = (
    ckernel.GROW
    + r"""
/* a buffer grown to hold 10 items of 8 bytes, then to `need` bytes: grow's answer, the capacity
   after, and whether the buffer and its capacity are as they were before the second call */
int grown(int64_t need, int64_t *cap_out, int *kept) {
    void *p = NULL; int64_t cap = 0;
    if (grow(&p, &cap, 10, 8)) return -9;
    ((char *)p)[0] = 7;
    void *was = p; int64_t cap_was = cap;
    int rc = grow(&p, &cap, need, 1);
    *kept = p == was && cap == cap_was && ((char *)p)[0] == 7;
    *cap_out = cap;
    free(p);
    return rc;
}
"""
)


def test_the_growable_buffer_keeps_its_data_when_memory_runs_out(cache):
    lib = ckernel.compiled("grown", GROWN)
    if lib is None:
        pytest.skip("no C compiler here")
    ckernel.declare(lib, {"grown": (ctypes.c_int, [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p])})
    cap, kept = ctypes.c_int64(0), ctypes.c_int(0)
    assert lib.grown(100, ctypes.byref(cap), ctypes.byref(kept)) == 0 and (cap.value, kept.value) == (4096, 1)
    assert lib.grown(5000, ctypes.byref(cap), ctypes.byref(kept)) == 0 and cap.value == 8192  # doubled
    # 2**50 bytes: more than a process's address space, realloc fails; *p and *cap untouched
    assert lib.grown(1 << 50, ctypes.byref(cap), ctypes.byref(kept)) == -1 and (cap.value, kept.value) == (4096, 1)


def test_an_owned_c_object_is_freed_once_with_its_owner():
    freed = []
    table = ckernel.Owned(lambda: 5, lambda h: freed.append(h.value), lambda h: 3, "no memory for t")
    assert len(table) == 3
    del table
    assert freed == [5]
    with pytest.raises(MemoryError, match=r"^no memory for t$"):
        ckernel.Owned(lambda: None, freed.append, len, "no memory for t")  # NULL: nothing to free
    assert freed == [5]
