"""`sag2wb`, the command line: one module per command over the same public API as the notebooks."""

from workbench.cli.main import main

__all__ = ["main"]
