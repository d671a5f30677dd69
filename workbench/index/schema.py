"""The index's own text rules and identity, below the store and its builders: FTS5 phrase
quoting (SPEC §1), accent aliases and title normal form (SPEC §2), diversity tokens (SPEC
Appendix C), the schema version and the tokenizer signature an index records.

>>> query_expression(['role_id', 'permission keys'])
'"role_id" OR "permission keys"'
>>> fold_accents("Élodie Marchetti"), normalize_title("Straße")
('Elodie Marchetti', 'strasse')
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import unicodedata
from pathlib import Path

from workbench import text as textlib
from workbench.index.units import UNIT_MAX_CHARS
from workbench.safeio import InputError

# 2: postings, row lengths, body vocabulary, title phrases and aliases stored at build time
SCHEMA_VERSION = "sag2wb-index-2"
DEFAULT_FIELD_WEIGHTS = (2.0, 2.0, 1.0)
# SPEC Appendix C: diversity vectors use plain word tokens, not jieba tokens. The standard
# library's `re` on purpose: its \w excludes combining marks (Devanagari vowel signs split a
# word), which is what the reference implementation's vectors show; `regex` would differ.
DIVERSITY_TOKEN = re.compile(r"[^\W_]+")


class IndexProblem(InputError, RuntimeError):
    """An index that cannot be opened or built, with the reason and the fix (an InputError:
    the CLI prints it in one line and exits 2)."""


def damaged_index(path: Path, exc: sqlite3.DatabaseError) -> IndexProblem:
    return IndexProblem(f"{path}: the index file is damaged ({exc}); rebuild it with `sag2wb index CORPUS --db {path}`")


def quote(term: str) -> str:
    """An FTS5 phrase for a term: its text in double quotes, inner quotes doubled (SPEC §1)."""
    return '"' + term.replace('"', '""') + '"'


def query_expression(terms) -> str:
    """OR of quoted phrases: nothing a user typed reaches FTS5 unquoted."""
    return " OR ".join(quote(t) for t in terms)


def tokenizer_signature() -> dict:
    """Everything about text processing that changes tokens; an index records it."""
    return {
        "tokenizer_version": textlib.TOKENIZER_VERSION,
        "jieba_version": textlib.jieba_version(),
        "connected_latin": textlib.CONNECTED_LATIN,
        "stopwords": hashlib.sha256(" ".join(sorted(textlib.STOPWORDS)).encode()).hexdigest()[:16],
        "unit_max_chars": str(UNIT_MAX_CHARS),
        "diversity_token": "re:" + DIVERSITY_TOKEN.pattern,
    }


def fold_accents(text: str) -> str:
    """SPEC §2 accent alias form: NFKD, drop combining marks after a Latin base letter, NFKC."""
    out: list[str] = []
    after_latin = False
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch):
            if after_latin:
                continue
        else:
            after_latin = ch.isalpha() and "LATIN" in unicodedata.name(ch, "")
        out.append(ch)
    return unicodedata.normalize("NFKC", "".join(out))


def normalize_title(title: str) -> str:
    return unicodedata.normalize("NFKC", title).casefold()
