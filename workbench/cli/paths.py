"""The bundled sample corpora that `sag2wb demo` reads."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# The bundled sample corpora are package data: the checkout's sample_corpora/ installs as the
# package workbench.sample_corpora (pyproject.toml), so `sag2wb demo` runs from any folder
# after a plain `pip install` (a regular package on disk: its files are a real folder).
SAMPLE_CORPORA = Path(str(resources.files("workbench.sample_corpora")))
SAMPLE_DOCS = SAMPLE_CORPORA / "internal_docs"
SAMPLE_DOCS_QUESTIONS = SAMPLE_CORPORA / "internal_docs.questions.jsonl"
