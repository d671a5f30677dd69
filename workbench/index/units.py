"""What a corpus and a questions file are made of: units, questions and the error that names
a bad input; below every reader, so the readers of each format build on them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

UNIT_MAX_CHARS = 2200  # SPEC §2: group adjacent paragraphs up to this many characters
DOCUMENT_SUFFIXES = (".md", ".txt")


class CorpusError(ValueError):
    """A corpus or question file that cannot be used, with the file and item named."""


@dataclass(frozen=True)
class Unit:
    """One indexed text unit; `document` is its original passage (evaluation identity)."""

    title: str
    heading: str
    body: str
    document: str
    source: str
    location: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: tuple[str, ...] = ()
    type: str | None = None
    hops: int | None = None
    answer: str | None = None
    line: int = field(default=0, compare=False)  # where it stands in its file, for errors


def json_objects(path, lines, error=CorpusError):
    """(line number, object) for every non-blank line of a JSON Lines text; a line that is
    not a JSON object is an `error` naming the file and line (questions, BEIR, JSONL corpora)."""
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}, line {n}: not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise error(f"{path}, line {n}: expected a JSON object, got {type(item).__name__}")
        yield n, item
