"""The index's own text rules and identity, below the store and its builders: FTS5 phrase
quoting (SPEC §1), accent aliases and title normal form (SPEC §2), diversity tokens (SPEC
Appendix C), the schema version and the tokenizer signature an index records.

>>> query_expression(['role_id', 'permission keys'])
'"role_id" OR "permission keys"'
>>> fold_accents("Élodie Marchetti"), normalize_title("Straße")
('Elodie Marchetti', 'strasse')
"""

from __future__ import annotations

import errno
import hashlib
import re
import sqlite3
import unicodedata
from pathlib import Path

from workbench import text as textlib
from workbench.index.units import UNIT_MAX_CHARS
from workbench.safeio import InputError

# 2: postings, row lengths, body vocabulary, title phrases and aliases stored at build time
# 3: postings as delta + varint blobs per (block, term), a WITHOUT ROWID table (no term index)
SCHEMA_VERSION = "sag2wb-index-3"
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


_WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
# SQLite's codes for a write that did not happen: SQLITE_FULL (ENOSPC), and the I/O errors of
# a write, fsync or truncate (EFBIG from a file-size limit arrives as SQLITE_IOERR_WRITE, or as
# plain SQLITE_IOERR on a connection without extended codes); only while writing the index
_WRITE_CODES = {13, 10, 10 | (3 << 8), 10 | (4 << 8), 10 | (6 << 8), 10 | (13 << 8)}


def write_failure(path: Path, exc: BaseException, kept: str) -> IndexProblem | None:
    """The error for a write of the index at `path` that failed for lack of room (a full
    disk, a quota, a file-size limit), naming the user's file, never the temporary one, and
    saying what was kept (`kept`); None for any other error.

    >>> write_failure(Path("x.db"), OSError(errno.ENOSPC, "No space left on device"), "x.db is as it was")
    IndexProblem('x.db: could not write the index: the disk is full ([Errno 28] No space left on device); ...')
    """
    if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
        cause = "the disk is full" if exc.errno == errno.ENOSPC else "no room to write (a quota or file-size limit)"
    elif isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) in _WRITE_CODES:
        cause = "the disk is full" if exc.sqlite_errorcode == 13 else _io_cause(path)
    else:
        return None
    return IndexProblem(
        f"{path}: could not write the index: {cause} ({exc}); {kept}. Free some space in "
        f"{path.parent.resolve()} (or choose another --db) and run again"
    )


def _io_cause(path: Path) -> str:
    """Why a write failed when SQLite says only "disk I/O error": a file-size limit, a full disk, or the device."""
    import resource
    import shutil

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        return f"disk full for this process: its file-size limit (ulimit -f, {limit} bytes) was reached"
    try:
        free = shutil.disk_usage(path.parent if str(path.parent) else ".").free
    except OSError:
        free = -1
    if 0 <= free < 64 * 2**20:
        return f"the disk is full ({free // 2**20} MiB free)"
    return "the write failed (the disk is full, or the device failed)"


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
