"""pyuca's collator (the SPEC's tie-break between equal term priorities), made once per
process and kept as a pickle in the user's cache: parsing pyuca's allkeys table (~0.22 s)
was most of a first question's set-up; the pickle loads in ~0.08 s. A tie-break
needs only the entries of its terms' characters: `sort_key` loads those by blocks of 256 code
points, from a second pickle of the table cut in such blocks."""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import unicodedata
from pathlib import Path

from workbench.safeio import atomic_write_bytes
from workbench.user_cache import user_cache_dir

_COLLATOR: list = []  # pyuca's, made once under a lock: questions on threads each built one
_COLLATOR_LOCK = threading.Lock()
_SHARDED: list = []  # (pyuca's collator with a table filled on demand, its shards, the shards loaded)
_SHARDED_LOCK = threading.Lock()  # its own: making the shards loads the full collator under _COLLATOR_LOCK


def sort_key(term: str) -> tuple:
    """pyuca's sort key of `term`, equal to the full collator's, from the table entries that begin
    with one of the term's code points (after NFD), loaded by blocks of 256 code points on first
    use: a key looks at no other entry (the table's trie is walked from each code point of the
    term, and a non-starter is only tried after an entry it follows), and the few blocks of a
    question's terms load in ~1 ms where the whole table takes ~0.08 s."""
    with _SHARDED_LOCK:
        if not _SHARDED:
            _SHARDED.append(_load_sharded())
        collator, shards, loaded = _SHARDED[0]
        for block in {ord(c) >> 8 for c in unicodedata.normalize("NFD", term)} - loaded:
            loaded.add(block)
            if block in shards:
                collator.table.root.children.update(pickle.loads(shards[block]))
        return tuple(collator.sort_key(term))


def sharded(full) -> tuple:
    """(a copy of pyuca's collator `full` with an empty table, {block: pickled entries whose first
    code point is in that block of 256})."""
    from pyuca.trie import Trie

    shell = copy.copy(full)
    shell.table = Trie()
    shell.table.root.children = {}
    blocks: dict[int, dict] = {}
    for code, node in (full.table.root.children or {}).items():
        blocks.setdefault(code >> 8, {})[code] = node
    return shell, {b: pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL) for b, entries in blocks.items()}


def _load_sharded() -> tuple:
    """The sharded collator from its pickle beside the full one's, else made from the full one
    (and written there); anything else in that file is replaced."""
    from pyuca import Collator

    path = _collator_cache().with_suffix(".shards.pickle")
    try:
        with open(path, "rb") as f:
            shell, shards = pickle.load(f)
        if isinstance(shell, Collator) and isinstance(shards, dict):
            return shell, shards, set()
    except Exception:  # missing, truncated or not ours: whatever it raises, it is made again
        pass
    shell, shards = sharded(_collator())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps((shell, shards), protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass
    return shell, shards, set()


def _collator():
    with _COLLATOR_LOCK:
        if not _COLLATOR:
            _COLLATOR.append(_load_collator())
    return _COLLATOR[0]


def _collator_cache() -> Path:
    from importlib.metadata import version

    from pyuca import Collator

    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return user_cache_dir("collation") / f"pyuca-{version('pyuca')}-uca{Collator.UCA_VERSION}-py{py}.pickle"


def _load_collator():
    """pyuca's collator, from the pickle in the user's cache when one is there. A file that
    does not load as a Collator is replaced by a fresh one; a cache that cannot be written
    only costs the parse."""
    from pyuca import Collator

    path = _collator_cache()
    try:
        with open(path, "rb") as f:
            collator = pickle.load(f)
        if isinstance(collator, Collator):
            return collator
    except Exception:  # missing, truncated or not ours: whatever it raises, it is rebuilt
        pass
    collator = Collator()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(collator, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass
    return collator
