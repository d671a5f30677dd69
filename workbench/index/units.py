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
            raise error(f"{path}, line {n}: not valid JSON at column {exc.colno}: {json_problem(exc)}") from None
        if not isinstance(item, dict):
            raise error(f"{path}, line {n}: expected a JSON object, got {type(item).__name__}")
        yield n, item


def json_problem(exc: json.JSONDecodeError) -> str:
    """What is wrong at a JSON error, in our words, and what to fix (the parser's own words in brackets).

    >>> try:
    ...     json.loads('{"_id": "q1", "question": "Who?",}')
    ... except json.JSONDecodeError as exc:
    ...     print(json_problem(exc))
    a trailing comma before '}': remove the ',' after the last value (JSON: Expecting property name ...)
    """
    doc, pos = exc.doc, exc.pos
    before = doc[:pos].rstrip()
    here = doc[pos:].lstrip()
    last = before[-1:] if before else ""
    nxt = here[:1]
    if last == "," and nxt in ("}", "]"):
        hint = f"a trailing comma before '{nxt}': remove the ',' after the last value"
    elif nxt == "'":
        hint = 'a single-quoted string or name: JSON needs double quotes ("...")'
    elif exc.msg.startswith("Expecting property name") and nxt and nxt not in '"':
        hint = 'a name without double quotes: write every name in double quotes ("_id": ...)'
    elif any(here.startswith(w) for w in ("True", "False", "None")):
        hint = "Python's True/False/None: JSON writes true, false, null"
    elif exc.msg.startswith("Extra data"):
        hint = "more than one JSON value here: a JSON Lines file holds exactly one object per line"
    elif exc.msg.startswith("Unterminated string"):
        hint = "a string that is not closed: add the closing '\"' (a string cannot span lines)"
    elif exc.msg.startswith("Invalid control character"):
        hint = "a raw tab or line break inside a string: write it as \\t or \\n"
    elif exc.msg.startswith("Expecting value") and before.lstrip() in ("[", ""):
        hint = (
            "a JSON list spread over lines: this file must be JSON Lines, one {...} object per line"
            if before.strip() == "["
            else "no JSON value here (an empty value, or a stray character)"
        )
    elif exc.msg.startswith("Expecting ':' delimiter"):
        hint = "a missing ':' between a name and its value"
    elif exc.msg.startswith("Expecting ',' delimiter"):
        hint = "a missing ',' between two values (or a '\"' inside a string that should be written \\\")"
    else:
        hint = "check the JSON syntax here"
    return f"{hint} (JSON: {exc.msg})"
