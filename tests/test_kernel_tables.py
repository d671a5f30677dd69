"""Every compiled kernel's signature table (`SIGNATURES`, declared by `ckernel.loader`) against
the C prototypes of its source: each exported function declared, with the ctypes of its result
and arguments; and each kernel's environment switch still gives None."""

from __future__ import annotations

import ctypes
import re

import pytest

from workbench import ckernel
from workbench.feedback import graph_chunks, graph_kernel
from workbench.index import encode_kernel, names_kernel, postings_kernel, words_kernel
from workbench.judges.jev import o200k_kernel

MODULES = [names_kernel, postings_kernel, encode_kernel, words_kernel, graph_chunks, graph_kernel, o200k_kernel]
POINTERS = {ctypes.c_void_p, ctypes.c_char_p}  # what a C pointer may be declared as
SCALARS = {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32, "int": ctypes.c_int, "double": ctypes.c_double}
# a definition at the start of a line, not static: its result type, name and parameters
DEFINITION = re.compile(r"^(?!static\b)(?!typedef\b)([A-Za-z_][\w ]*?[\s*]+)(\w+)\(([^)]*)\)\s*\{", re.M)


def _kind(declaration: str):
    """'pointer', a ctypes scalar, or None (void) for a C type (a parameter's name left off)."""
    if "*" in declaration:
        return "pointer"
    words = [w for w in declaration.split() if w != "const"]
    return None if words == ["void"] else SCALARS[words[0]]


def prototypes(source: str) -> dict:
    found = {}
    for result, name, params in DEFINITION.findall(source):
        params = [] if params.strip() in ("", "void") else params.split(",")
        found[name] = (_kind(result), [_kind(re.sub(r"\w+\s*$", "", p)) for p in params])
    return found


def _same(declared, wanted) -> bool:
    return declared in POINTERS if wanted == "pointer" else declared is wanted


def test_the_parser_reads_a_hand_written_source():
    source = (
        "static int helper(int x) { return x; }\n"
        "void *wk_new(void) { return 0; }\n"
        "int64_t f(const int64_t *const *rows, int32_t n,\n    double d, Words *w)\n{\n    return 0;\n}\n"
    )
    assert prototypes(source) == {
        "wk_new": ("pointer", []),
        "f": (ctypes.c_int64, ["pointer", ctypes.c_int32, ctypes.c_double, "pointer"]),
    }


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_table_states_its_source_s_prototypes(module):
    wanted = prototypes(module.SOURCE)
    assert sorted(module.SIGNATURES) == sorted(wanted)  # every exported function, no other
    for name, (restype, argtypes) in module.SIGNATURES.items():
        result, params = wanted[name]
        assert _same(restype, result), name
        assert len(argtypes) == len(params) and all(map(_same, argtypes, params)), name


@pytest.mark.parametrize(
    ("module", "variable", "value"),
    [
        (names_kernel, "SAG2WB_POSTINGS_KERNEL", "numpy"),
        (postings_kernel, "SAG2WB_POSTINGS_KERNEL", "NumPy"),
        (encode_kernel, "SAG2WB_POSTINGS_KERNEL", "numpy"),
        (words_kernel, "SAG2WB_WORDS_KERNEL", "numpy"),
        (graph_chunks, "SAG2WB_GRAPH_KERNEL", "numpy"),
        (graph_kernel, "SAG2WB_GRAPH_KERNEL", " numpy "),
        (o200k_kernel, "SAG2WB_O200K_KERNEL", "quicktok"),
        (o200k_kernel, "SAG2WB_O200K_KERNEL", "numpy"),
    ],
)
def test_each_switch_still_gives_none(module, variable, value, monkeypatch):
    monkeypatch.setenv(variable, value)
    assert module.load() is None


def test_a_declared_kernel_refuses_a_call_with_an_argument_left_out():
    lib = names_kernel.load()
    if lib is None:
        pytest.skip("no C compiler")
    with pytest.raises(TypeError, match="takes at least 6 arguments"):
        lib.nk_merge(b"a", 1, 1)  # nk_merge would write through three unset pointers


def test_the_growable_buffer_is_written_once():
    for module in (words_kernel, graph_chunks):
        assert module.SOURCE.count("static int grow(") == 1 and module.SOURCE.startswith(ckernel.GROW)
