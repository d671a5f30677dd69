"""What the commands write: files replaced atomically and recorded as sag2wb's, and JSON of numpy values."""

from __future__ import annotations

import json
import json.encoder
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


_STR = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) quotes strings with (C when built)
_INFINITIES = (float("inf"), float("-inf"))
_CONTAINERS = (list, tuple, dict)
_FLAT: dict[str, json.JSONEncoder] = {}  # by line start: an encoder whose item separator is "," + that


class _Unusual(Exception):
    """A value the fast writer leaves to json.dumps (a subclass, a non-string key, NaN...)."""


def indented_json(data) -> str:
    """`json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)`, the same text. With an
    indent, json.dumps encodes in Python, value by value (~0.2 s for 100 questions' results, after
    the last question, issue 33). Here a list or dict that holds no list, tuple or dict (a ranking,
    a pool, a round's scores: most of a result file) is encoded by json's C encoder with the line
    break and indent as its item separator, which is the indented text of its items; the rest is
    walked here. Containers other than plain dicts (string keys), lists and tuples, and scalars
    other than plain strings, ints, finite floats, booleans and None in them, make the whole go to
    json.dumps, which also raises its own errors (NaN, circular references).

    >>> data = {"a": [1, 2.5, "x"], "b": {}, "c": [], "d": {"k": None, "é": True}, "e": [["p"], ("q",)]}
    >>> indented_json(data) == json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)
    True
    >>> print(indented_json({"scores": {"A": 0.5}, "n": [3]}))
    {
     "scores": {
      "A": 0.5
     },
     "n": [
      3
     ]
    }
    """
    out: list[str] = []
    try:
        _emit(data, "\n", out)
    except (_Unusual, RecursionError, ValueError, TypeError):  # json.dumps raises its own error, if any
        return json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)
    return "".join(out)


def _flat(v, inner: str) -> str:
    """The items of `v` (a non-empty list, tuple or dict holding no container), each after `inner`."""
    enc = _FLAT.get(inner)
    if enc is None:
        enc = _FLAT[inner] = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=("," + inner, ": "))
    return inner + enc.encode(v)[1:-1]  # without the brackets: "[" / "{" and the close are added around


def _emit(v, nl: str, out: list[str]) -> None:
    """Append `v`'s text; `nl`: a newline and the indent of the line `v` starts on."""
    t = type(v)
    if t is str:
        out.append(_STR(v))
    elif t is dict or t is list or t is tuple:
        if not v:
            out.append("{}" if t is dict else "[]")
            return
        inner = nl + " "
        items = v.values() if t is dict else v
        if not any(isinstance(x, _CONTAINERS) for x in items):
            out.append(("{" if t is dict else "[") + _flat(v, inner) + nl + ("}" if t is dict else "]"))
            return
        sep = "{" if t is dict else "["
        for k, x in v.items() if t is dict else zip(v, v):
            if t is dict:
                if type(k) is not str:
                    raise _Unusual
                out.append(sep + inner + _STR(k) + ": ")
            else:
                out.append(sep + inner)
            _emit(x, inner, out)
            sep = ","
        out.append(nl + ("}" if t is dict else "]"))
    elif t is float:
        if v != v or v in _INFINITIES:
            raise _Unusual
        out.append(float.__repr__(v))
    elif t is int:
        out.append(int.__repr__(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    else:
        raise _Unusual
