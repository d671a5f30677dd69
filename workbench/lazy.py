"""Modules imported on first use. Every `sag2wb` command imports the view-data module through
the report pages' parser options; pandas is ~0.4 s of a command's start and only the pages and
widgets need it."""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for a module; its first attribute read imports it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


pandas = LazyModule("pandas")
