"""Old import paths kept working, with a DeprecationWarning naming where the name lives now:
the one helper every module that keeps old names uses (docs/deprecations.md).

A module calls `keep_old_names(__name__, {"name": "module.where.it.lives", ...})` once. Reading
one of those names from the module (`from old.module import name`, `old.module.name`) then
warns and gives the object from where it lives; the module's own code, which reads its globals
directly, never warns (a name may stay imported there for its own use).

>>> import sys, types, warnings
>>> old = sys.modules["old_face"] = types.ModuleType("old_face")
>>> keep_old_names("old_face", {"dumps": "json"})
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     from old_face import dumps
>>> import json; dumps is json.dumps
True
>>> str(caught[0].message)
'old_face.dumps is deprecated: import it from json (from json import dumps)'
>>> del sys.modules["old_face"]
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Mapping


def deprecated(message: str, stacklevel: int = 3) -> None:
    """Warn `message` as a DeprecationWarning at the caller's caller (who used the old form)."""
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)


def keep_old_names(module_name: str, moved: Mapping[str, str]) -> None:
    """Make `module_name`'s old names (`moved`: name -> the module it lives in, or
    `module:new_name` for a renamed one) readable from it only with a DeprecationWarning.
    Done by giving the module a subclass of ModuleType (the data model's documented way to
    customise module attribute access): PEP 562's module `__getattr__` alone cannot warn for a
    name the module still holds for its own use."""
    module = sys.modules[module_name]
    old = dict(moved)

    class OldNames(types.ModuleType):
        old_names = old  # name -> where it lives, as given

        def __getattribute__(self, name: str):
            where = old.get(name)
            if where is None:
                return super().__getattribute__(name)
            home, _, new = where.partition(":")
            deprecated(f"{module_name}.{name} is deprecated: import it from {home} (from {home} import {new or name})")
            return getattr(importlib.import_module(home), new or name)

        def __dir__(self):
            return sorted(set(super().__dir__()) | set(old))

    module.__class__ = OldNames
