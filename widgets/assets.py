"""The widgets' front-end code: .js and .css files next to the Python modules that send them
to the browser, read once at import time from the installed package (package data, see
pyproject.toml), exactly as stored.

>>> read("slot.js").lstrip().startswith("function plotlySlot()")
True
"""

from __future__ import annotations

from importlib import resources


def read(name: str) -> str:
    """The text of widgets/<name> (utf-8)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
