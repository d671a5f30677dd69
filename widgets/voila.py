"""Serve a notebook with Voilà plus the dashboard's fixes (kernels end when the page
closes, no CDN request): `python -m widgets.voila notebooks/dashboard.ipynb [voila options]`.

It is `voila` with `--Voila.config_file_paths` pointing at widgets/voila_config (and the
usual places: the current directory, then Jupyter's config path), and with tracebacks shown
in the page (Voilà listens on localhost only by default; `--show_tracebacks=False` hides them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent / "voila_config"


def voila_argv(argv: list[str]) -> list[str]:
    """Voilà's command line with the dashboard's config directory searched first.

    >>> voila_argv(["nb.ipynb"])[1].startswith("--Voila.config_file_paths=")
    True
    """
    from jupyter_core.paths import jupyter_config_path

    paths = [str(CONFIG_DIR), os.getcwd(), *jupyter_config_path()]
    # a cell that fails shows its error in the page, not only "error when executing cell [1]"
    # (the dashboard notebook names bad input itself; this is for everything else)
    tracebacks = [] if any("show_tracebacks" in a for a in argv) else ["--VoilaConfiguration.show_tracebacks=True"]
    return [*argv[:1], *(f"--Voila.config_file_paths={p}" for p in paths), *tracebacks, *argv[1:]]


def main(argv: list[str] | None = None):
    from voila.app import main as voila_main

    sys.argv = [sys.argv[0], *voila_argv(list(sys.argv[1:] if argv is None else argv))]
    return voila_main()


if __name__ == "__main__":
    sys.exit(main())
