"""The SAG2 index (SPEC §2): one SQLite file with FTS5 over title/heading/body, the original
units, and everything derived from the corpus, computed at build time and read lazily
(term positions for BM25, body df, title phrases, accent aliases, diversity df): opening
costs the same at 6k and 600k passages. Building: `workbench/index/build.py`; updating in
place: `workbench/index/update.py`; text rules: `workbench/index/schema.py`.

>>> index = Index.build("sample_corpora/internal_docs", "docs.sqlite")
>>> [(unit_id, round(bm25, 2)) for unit_id, bm25 in index.search(query_expression(["role_id"]), limit=3)]
[(7, -2.48), (23, -2.4), (6, -2.2)]
>>> [index.unit(unit_id).document for unit_id in (7, 23, 6)]
['auth/login.md', 'zh/login.md', 'auth/login.md']
>>> index.df("role_id"), round(index.idf("role_id"), 3)
(5, 1.514)
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import regex

from workbench import text as textlib
from workbench.index.build import Fingerprint, write_index
from workbench.index.corpora import iter_corpus, skipped_files
from workbench.index.files import check_replaceable, remove_stale_builds
from workbench.index.postings import Postings, bm25_order, phrases_of, stored_counts  # noqa: F401  (bm25_order: re-exported)
from workbench.index.readers import corpus_loader
from workbench.index.schema import (  # noqa: F401  (quote and query_expression: the store's public face)
    DEFAULT_FIELD_WEIGHTS,
    DIVERSITY_TOKEN,
    SCHEMA_VERSION,
    IndexProblem,
    damaged_index,
    fold_accents,
    normalize_title,
    query_expression,
    quote,
    tokenizer_signature,
    write_failure,
)
from workbench.index.sqlite import Aliases, Memo, ReadConnection, StoredSet
from workbench.index.units import Unit
from workbench.index.update import write_manifest

_LETTER_OR_NUMBER = regex.compile(r"[\p{L}\p{N}]")
UNIT_CACHE_LIMIT = 50_000  # units held in memory; a corpus up to this size is read whole
_INHERITED_CONNECTIONS: list = []  # a forked child's copies of the parent's connections: kept, never used
_PLAIN_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class UnitRecord(Unit):
    """A stored unit: the loaded Unit plus its id in the index (the FTS5 rowid)."""

    id: int = 0


class Index:
    """An opened SAG2 index. Read-only; caches per-phrase look-ups for the process."""

    def __init__(self, path: str | Path, *, max_postings: int = 1, allow_empty: bool = False):
        """`max_postings=0`: let FTS5 compute bm25() and phrase matches instead of the
        postings stored at build time (same results, slower; kept to compare the two).
        An index with no passages (every one removed with `--allow-empty`) opens only with
        `allow_empty=True` (to add passages again): there is nothing to search or score."""
        self.path = Path(path)
        if not self.path.exists():
            raise IndexProblem(f"{self.path}: no index here; build one with `sag2wb index CORPUS --db {self.path}`")
        if self.path.is_dir():
            raise IndexProblem(f"{self.path}: is a folder, not an index file; pass the index file to --db")
        if Path(f"{self.path}-journal").exists() and os.access(self.path.parent, os.W_OK):
            # an update was killed mid-way: a read-write open rolls its journal back first
            with sqlite3.connect(self.path) as fix:
                fix.execute("SELECT count(*) FROM sqlite_master").fetchall()
            fix.close()
        try:
            # autocommit: the scratch table that splits phrases is written in temp; a
            # transaction left open by it would hold a read lock and block updates
            raw = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
            # postings blobs are read through the page cache's memory map, not copied by read()
            raw.execute("PRAGMA mmap_size = 2147418112")
            meta = dict(raw.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc):  # a database whose pages are damaged, perhaps ours
                raise IndexProblem(
                    f"{self.path}: the index is damaged ({exc}); rebuild it with "
                    f"`sag2wb index CORPUS --db {self.path} --force`"
                ) from None
            raise IndexProblem(
                f"{self.path}: not a SAG2 workbench index ({exc}); build one with "
                f"`sag2wb index CORPUS --db {self.path}`"
            ) from None
        self.db = ReadConnection(self.path, raw)
        schema = str(meta.get("schema", ""))
        if meta.get("complete") == "1" and schema.startswith("sag2wb-index-") and schema != SCHEMA_VERSION:
            raise IndexProblem(  # an index of another workbench version: its tables differ
                f"{self.path}: built by another version of the workbench (index format {schema!r}; "
                f"this one reads {SCHEMA_VERSION!r}); rebuild it with `sag2wb index CORPUS --db {self.path}`"
            )
        if meta.get("schema") != SCHEMA_VERSION or meta.get("complete") != "1":
            raise IndexProblem(f"{self.path}: incomplete or foreign index (schema {meta.get('schema')!r}); rebuild it")
        expected = tokenizer_signature()
        diffs = [
            f"{k}: index has {meta.get(k)!r}, this workbench uses {v!r}"
            for k, v in expected.items()
            if meta.get(k) != v
        ]
        if diffs:
            raise IndexProblem(
                f"{self.path} was built with other text-processing settings ({'; '.join(diffs)}). "
                f"Rebuild it with `sag2wb index CORPUS --db {self.path}`."
            )
        self.meta = meta
        self.skipped: list[str] = []  # set by `build` of a folder: files of kinds it does not read
        self.N = int(meta["units"])
        self.D = int(meta["documents"])
        if self.N == 0 and not allow_empty:
            raw.close()
            raise IndexProblem(
                f"{self.path}: the index has no passages (every one was removed); add some with "
                f"`sag2wb index CORPUS --db {self.path} --add FILE.json`, or rebuild it with "
                f"`sag2wb index CORPUS --db {self.path}`"
            )
        self._matches: dict[str, frozenset[int]] = {}
        self._match_rows: dict[str, np.ndarray] = {}
        # df and idf run once per term per seed in term weighting: bound dict look-ups keep
        # known terms out of Python-level calls
        self._df, self._idf = Memo(self._count_df), Memo(self._compute_idf)
        self.df, self.idf = self._df.__getitem__, self._idf.__getitem__
        self.cached_df, self.cached_idf = self._df.get, self._idf.get  # the value if known, else None (never counts)
        self._bm25_cache: dict[tuple, dict[int, float]] = {}
        self._units: dict[int, UnitRecord] = {}
        self._diversity_df: dict[str, int] = {}
        self._diversity_vectors: dict[int, dict[str, float]] = {}
        self.max_postings = max_postings
        self._postings_lock = threading.Lock()
        self._alias_keys: dict[str, str | None] = {}
        self.aliases = Aliases(self.db)
        """Accent-folded key -> the one NFKC case-folded title that folds to it (SPEC §2)."""
        self.title_phrases = StoredSet(self.db, "title_phrases", "phrase", lambda p: tuple(p.split(" ")), " ".join)
        """Token tuples of titles with >= 2 tokens (SPEC §2): `toks in index.title_phrases`."""

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, units={self.N}, documents={self.D})"

    def close(self) -> None:
        self.db.close()

    def reopen_after_fork(self) -> Index:
        """This index as a forked child process inherited it (caches and all, copy-on-write),
        on a connection of its own: an SQLite connection must not be used across a fork. The
        inherited connection is kept, never used nor closed here (it is the parent's). The
        alias map and the title-phrase set keep what they looked up (the parent's, warm) and
        read on the new connection; the locks are new (one held by a parent's thread at the
        fork stays held); postings, if they were read, lose their scratch table (temp tables
        are per connection).

        >>> docs = Index.build("sample_corpora/internal_docs", "docs.sqlite").warm()
        >>> docs.reopen_after_fork() is docs   # what a forked worker calls first: same caches, own connection
        True
        >>> docs.search(query_expression(["role_id"]), limit=1)
        [(7, -2.48...)]
        """
        fresh = Index(self.path)
        _INHERITED_CONNECTIONS.append(self.db)
        self.db = self.aliases.db = self.title_phrases.db = fresh.db
        self._postings_lock = threading.Lock()
        postings = self.__dict__.get("postings")  # a cached_property: set only if it was read
        if postings is not None:
            postings.db, postings._lock, postings._scratch = fresh.db, threading.Lock(), False
        return self

    def warm(self) -> Index:
        """Load now what questions otherwise load on first use (a small corpus's units, vocabulary and aliases,
        the postings' row sizes, jieba's dictionary if the corpus has CJK words for it to segment): a process
        pool forked after this inherits them instead of each worker reading them again (executors.Processes).

        >>> index.warm() is index
        True
        """
        if self.N <= UNIT_CACHE_LIMIT and len(self._units) < self.N:  # not again on a warm index
            self._read_all_units()
            self._small_vocabulary, self._small_aliases  # noqa: B018 (cached properties)
        self._alias_lengths, self.postings  # noqa: B018
        if self.db.execute("SELECT 1 FROM terms WHERE term >= ? AND term < ? LIMIT 1", textlib.HAN_STARTS).fetchone():
            textlib.load_jieba()  # ~0.5 s; text without Han words is tokenized without jieba
        return self

    # ---- units -------------------------------------------------------------------------
    def unit(self, unit_id: int) -> UnitRecord:
        rec = self._units.get(unit_id)
        if rec is None:
            row = self.db.execute(
                "SELECT title, heading, body, document, source, location, id FROM units WHERE id = ?", (unit_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"unit {unit_id} is not in {self.path}")
            rec = self._remember(UnitRecord(*row))
        return rec

    def _remember(self, rec: UnitRecord) -> UnitRecord:
        if len(self._units) >= UNIT_CACHE_LIMIT:  # bounded: a large corpus is not held in memory
            self._units.clear()
        self._units[rec.id] = rec
        return rec

    @cached_property
    def _alias_lengths(self) -> tuple[int, ...]:
        return tuple(n for (n,) in self.db.execute("SELECT DISTINCT length(fold) AS n FROM aliases ORDER BY n DESC"))

    def alias_spans(self, text: str):
        """(start, end) of each accent-alias key in `text`, as a regular expression of all
        keys, longest first, case-insensitive, between non-letters, would find them (SPEC
        §2): one indexed look-up per possible span instead of an expression that grows
        with every title.

        >>> list(enc_index.alias_spans("Where was Jose Arriaga born?"))
        [(10, 22)]
        >>> enc_index.aliases["jose arriaga"]
        'josé arriaga'
        """
        lengths = self._alias_lengths
        if not lengths:
            return
        n, pos = len(text), 0
        # after[i]: no letter or number at i (the expression's look-ahead at an end, and its
        # look-behind, at i - 1, for a start)
        after = [i == n or not _LETTER_OR_NUMBER.match(text[i]) for i in range(n + 1)]
        for start in range(pos, n):
            if start < pos or (start > 0 and not after[start - 1]):
                continue
            for length in lengths:  # longest first: the longest key wins at a position
                end = start + length
                if end <= n and after[end] and self._alias_key(text[start:end]) is not None:
                    yield start, end
                    pos = end  # the expression resumes after a match
                    break

    @cached_property
    def _small_aliases(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for fold, lookup in self.db.execute("SELECT fold, lookup FROM aliases ORDER BY fold"):
            out.setdefault(lookup, []).append(fold)
        return out

    def _alias_key(self, span: str) -> str | None:
        """The first key (in sorted order) that `span` equals case-insensitively, if any."""
        known = self._alias_keys
        if span not in known:
            if self.N <= UNIT_CACHE_LIMIT:  # a small index: every key in memory, one read
                keys = self._small_aliases.get(span.casefold(), ())
            else:
                keys = [
                    k
                    for (k,) in self.db.execute(
                        "SELECT fold FROM aliases WHERE lookup = ? ORDER BY fold", (span.casefold(),)
                    )
                ]
            if len(known) > 100_000:
                known.clear()
            known[span] = next((k for k in keys if regex.fullmatch(regex.escape(k), span, regex.IGNORECASE)), None)
        return known[span]

    @cached_property
    def titles(self) -> list[str]:
        return [t for (t,) in self.db.execute("SELECT title FROM units ORDER BY id")]

    @cached_property
    def documents(self) -> dict[int, str]:
        return dict(self.db.execute("SELECT id, document FROM units"))

    # ---- FTS5 look-ups -----------------------------------------------------------------
    def _fts(self, sql: str, args: tuple):
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:  # only reachable through a bug: terms are quoted
            raise IndexProblem(f"FTS5 rejected the expression {args[0]!r}: {exc}") from None

    @cached_property
    def postings(self) -> Postings | None:
        """The postings stored at build time that compute bm25() and phrase matches (row
        sizes read on first use; None with `max_postings=0`)."""
        if self.max_postings <= 0:
            return None
        with self._postings_lock:
            return Postings.open(self.db)

    def _bm25_rows(self, expression: str, weights):
        """(rows, scores) from the in-memory postings, or None to ask FTS5."""
        phrases = phrases_of(expression)
        postings = self.postings if phrases else None
        return postings.bm25(phrases, weights) if postings is not None and phrases else None

    def search(self, expression: str, limit: int, weights=DEFAULT_FIELD_WEIGHTS) -> list[tuple[int, float]]:
        """First `limit` units by BM25 of `expression` (ties: lower id first)."""
        if not expression:
            return []
        phrases = phrases_of(expression)
        postings = self.postings if phrases else None
        top = postings.top(phrases, weights, limit) if postings is not None and phrases else None
        if top is not None:  # `bm25_order` of `_bm25_rows`'s rows and scores
            return list(zip(top[0].tolist(), top[1].tolist()))
        w1, w2, w3 = weights
        return self._fts(
            "SELECT rowid, bm25(fts, ?, ?, ?) AS s FROM fts WHERE fts MATCH ? ORDER BY s, rowid LIMIT ?",
            (w1, w2, w3, expression, limit),
        )

    def bm25_all(self, expression: str, weights=DEFAULT_FIELD_WEIGHTS, among=None) -> dict[int, float]:
        """BM25 of `expression` for every unit that matches it, or only for the units in
        `among`. A unit's score does not depend on which other rows are returned (idf and
        average length come from the whole index), so restricting the rows is exact.
        Recent results are cached: re-runs repeat these queries."""
        if not expression:
            return {}
        restrict = None if among is None else sorted(among)
        key = (expression, tuple(weights), None if restrict is None else tuple(restrict))
        rows = self._bm25_cache.pop(key, None)
        if rows is None:
            scored = self._bm25_rows(expression, weights)
            if scored is not None:
                matched, scores = scored
                if restrict is not None:
                    keep = np.isin(matched, np.array(restrict, dtype=np.int64))
                    matched, scores = matched[keep], scores[keep]
                rows = dict(zip(matched.tolist(), scores.tolist()))
            else:
                rows = self._bm25_sql(expression, weights, restrict)
            if len(self._bm25_cache) >= 64:
                self._bm25_cache.pop(next(iter(self._bm25_cache)))
        self._bm25_cache[key] = rows  # most recent last
        return rows

    def bm25_among(self, expression: str, among: np.ndarray, weights=DEFAULT_FIELD_WEIGHTS) -> np.ndarray:
        """BM25 of `expression` for the units `among` (ascending unit ids, each matching the
        expression), in that order: `bm25_all(expression, weights, among)` as an array, without
        a dict of every unit (an expansion's terms can match a large share of the corpus)."""
        phrases = phrases_of(expression)
        postings = self.postings if phrases else None
        scores = postings.bm25_among(phrases, weights, among) if postings is not None and phrases else None
        if scores is None:
            rows = self.bm25_all(expression, weights, among=set(among.tolist()))
            scores = np.array([rows[u] for u in among.tolist()], dtype=np.float64)
        return scores

    def _bm25_sql(self, expression: str, weights, restrict) -> dict[int, float]:
        w1, w2, w3 = weights
        args: tuple
        if restrict is None:
            sql, args = "SELECT rowid, bm25(fts, ?, ?, ?) FROM fts WHERE fts MATCH ?", (w1, w2, w3, expression)
        else:
            # '+rowid' keeps SQLite from turning the filter into one FTS5 look-up per id
            sql = (
                "SELECT rowid, bm25(fts, ?, ?, ?) FROM fts WHERE fts MATCH ? "
                "AND +rowid IN (SELECT value FROM json_each(?))"
            )
            args = (w1, w2, w3, expression, json.dumps(restrict))
        return dict(self._fts(sql, args))

    def units(self, unit_ids) -> list[UnitRecord]:
        """Several units at once (one query for those not yet read; a corpus within the
        unit cache is read whole on first use, ~30 ms for 2Wiki)."""
        unit_ids = list(unit_ids)
        known = self._units
        missing = [u for u in dict.fromkeys(unit_ids) if u not in known]
        if missing and self.N <= UNIT_CACHE_LIMIT:
            self._read_all_units()
            missing = []
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            rows = self.db.execute(
                "SELECT title, heading, body, document, source, location, id FROM units "
                f"WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for row in rows:
                self._remember(UnitRecord(*row))
        get = known.get
        return [get(u) or self.unit(u) for u in unit_ids]

    def _read_all_units(self) -> None:
        for row in self.db.execute("SELECT title, heading, body, document, source, location, id FROM units"):
            self._units[row[-1]] = UnitRecord(*row)

    def match_rows(self, term: str) -> np.ndarray:
        """Units whose title, heading or body contains the phrase `term`, ascending."""
        found = self._match_rows.get(term)
        if found is None:
            postings = self.postings
            instances = postings.phrase(term) if postings is not None else None
            if instances is not None:
                found = instances[0]
            else:
                fts = self._fts("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid", (quote(term),))
                found = np.array([r for (r,) in fts], dtype=np.int64)
            if len(self._match_rows) >= 100_000:
                self._match_rows.clear()
            self._match_rows[term] = found
        return found

    def matches(self, term: str) -> frozenset[int]:
        """Units whose title, heading or body contains the phrase `term`."""
        found = self._matches.get(term)
        if found is None:
            found = frozenset(self.match_rows(term).tolist())
            if len(self._matches) >= 10_000:
                self._matches.clear()
            self._matches[term] = found
        return found

    def has_unseen_match(self, term: str, seen) -> bool:
        rows = self.match_rows(term)
        # more matches than seen units: one of them is unseen
        return len(rows) > len(seen) or any(u not in seen for u in rows.tolist())

    def _count_df(self, term: str) -> int:
        """SPEC §2 df(t): units whose *body* matches the token or phrase (`index.df(t)`)."""
        n = self._vocabulary_df(term)
        if n is None and self.N > UNIT_CACHE_LIMIT:  # a phrase: rows with it in the body, from its positions
            # (on a small index FTS5's count is faster: ~25 us on 2Wiki; both are tested equal)
            postings = self.postings
            n = postings.body_rows(term) if postings is not None else None
        if n is None:  # no postings, or a phrase without tokens: FTS5's count
            (n,) = self._fts("SELECT count(*) FROM fts WHERE fts MATCH ?", ("body : " + quote(term),))[0]
        return n

    def _vocabulary_df(self, term: str) -> int | None:
        """df of a term FTS5 reads as one token, from the body vocabulary; None for a phrase
        (or a term not yet split the way FTS5 splits it)."""
        if _PLAIN_TOKEN.fullmatch(term):
            return self._body_docs(term)
        postings = self.postings
        toks = postings.known_tokens(term) if postings is not None else None
        if toks is not None and len(toks) == 1:  # e.g. '北京大学'
            return self._body_docs(toks[0])
        return None

    def prefetch_df(self, terms, phrases: bool = True) -> None:
        """Count df of many terms now, equal to `df` one by one (a large index): tokens in one read,
        phrases (not with `phrases=False`) from their tokens' positions, read together."""
        todo = [t for t in dict.fromkeys(terms) if t not in self._df]
        postings = self.postings if todo and self.N > UNIT_CACHE_LIMIT else None
        if postings is not None:
            plain = [t for t in todo if _PLAIN_TOKEN.fullmatch(t)]
            self._df.update(stored_counts(self.db, "terms", "body_docs", plain))
            rest = [t for t in todo if t not in self._df] if phrases else []
            postings.load_tokens(tok for toks in postings.split(rest) for tok in toks or ())
            for t in rest:
                self.df(t)

    def cheap_df(self, term: str) -> int | None:
        """df(t) if it needs no FTS5 query (already known, or a vocabulary read), else None."""
        n = self._df.get(term)
        if n is None:
            n = self._vocabulary_df(term)
            if n is not None:
                self._df[term] = n
        return n

    def _body_docs(self, token: str) -> int:
        # unicode61 leaves a lower-case ASCII letter/digit run as one token, unchanged, so for
        # such a term the body phrase-match count is its body document count, which the
        # build stored (fts5vocab's 'col' count; tested equal to the MATCH count)
        if self.N <= UNIT_CACHE_LIMIT:  # a small index: its whole vocabulary in one read
            return self._small_vocabulary.get(token, 0)
        return stored_counts(self.db, "terms", "body_docs", [token])[token]

    @cached_property
    def _small_vocabulary(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT term, body_docs FROM terms"))

    def _compute_idf(self, term: str) -> float:
        """SPEC §2 (`index.idf(t)`): ln(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self.df(term)
        return math.log(1 + (self.N - df + 0.5) / (df + 0.5))

    # ---- derived structures --------------------------------------------------------------
    def diversity_df(self, tokens) -> dict[str, int]:
        """Original documents containing each diversity token (SPEC Appendix C); 0 for a
        token no document has. Remembered per token: top-10 passages share most words."""
        known = self._diversity_df
        tokens = set(tokens)
        missing = [t for t in tokens if t not in known]
        if len(known) + len(missing) > 1_000_000:
            known.clear()
            missing = list(tokens)
        # in one step: a question on another thread never reads a placeholder 0
        known.update(stored_counts(self.db, "diversity_df", "df", missing))
        return {t: known[t] for t in tokens}

    def diversity_vectors(self, unit_ids) -> list[dict[str, float]]:
        """Each unit's body as a unit-length TF-IDF vector over diversity tokens (SPEC
        Appendix C): (1 + ln tf) * (ln((1 + D) / (1 + df)) + 1), divided by the norm.
        Remembered per unit (the top 10 of related questions overlap)."""
        known = self._diversity_vectors
        if len(known) >= UNIT_CACHE_LIMIT:
            known.clear()
        todo = [u for u in dict.fromkeys(unit_ids) if u not in known]
        counts = [Counter(DIVERSITY_TOKEN.findall(rec.body.casefold())) for rec in self.units(todo)]
        df = self.diversity_df(t for c in counts for t in c)
        for u, c in zip(todo, counts):
            v = {t: (1 + math.log(k)) * (math.log((1 + self.D) / (1 + df[t])) + 1) for t, k in c.items()}
            norm = math.sqrt(sum(x * x for x in v.values()))
            known[u] = {t: x / norm for t, x in v.items()} if norm > 0 else {}
        return [known[u] for u in unit_ids]

    # ---- building ------------------------------------------------------------------------
    @classmethod
    def build(
        cls, units, path: str | Path, *, source: str = "", workers: int | None = None, progress: bool | None = False
    ) -> Index:
        """Build an index of `units` (a list, any iterable read once, or a corpus path,
        streamed) into `path` atomically: a failed or interrupted build leaves the old file
        as it was. `path` may be a workbench index (replaced) or new; anything else is
        refused. `workers`: tokenizing processes (default: up to 2 cores); results are
        the same for any number. `progress`: a tqdm bar (None: on a terminal only).

        >>> Index.build("sample_corpora/internal_docs", "docs.sqlite")
        Index('docs.sqlite', units=24, documents=19)
        """

        path = Path(path)
        folder = None
        if isinstance(units, (str, Path)):
            source = source or str(units)
            # a folder of .md/.txt files keeps a manifest for in-place updates; a BEIR folder does not
            folder = Path(units) if Path(units).is_dir() and corpus_loader(units) is None else None
            units = iter_corpus(units)
        check_replaceable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_builds(path)
        tmp = path.with_name(f".{path.name}.building-{os.getpid()}")
        if tmp.exists():
            tmp.unlink()
        existed = path.exists()
        started_ns = time.time_ns()  # files changed after this are checked again (update.write_manifest)
        try:
            meta = write_index(
                units,
                tmp,
                source,
                workers=workers,
                progress=progress,
                total=len(units) if hasattr(units, "__len__") else None,
            )
            if not meta:
                raise IndexProblem(f"{source or path}: nothing to index (no units)")
            if folder is not None:  # what `sag2wb index FOLDER` compares to update in place
                with sqlite3.connect(tmp) as db:
                    write_manifest(db, folder, started_ns)
                db.close()
            os.replace(tmp, path)
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            kept = f"the old index {path} is intact" if existed else "no index was written"
            problem = write_failure(path, exc, kept)
            if problem is not None:
                raise problem from None
            raise
        index = cls(path)
        index.skipped = skipped_files(folder) if folder is not None else []
        return index


def corpus_fingerprint(units) -> str:
    fingerprint = Fingerprint()
    for u in units:
        fingerprint.add(u)
    return fingerprint.hexdigest()


def open_or_build(
    units_or_corpus, path: str | Path, *, source: str = "", progress: bool | None = False
) -> tuple[Index, bool]:
    """Open `path` if it holds an index of exactly these units; otherwise (re)build it.
    Returns (index, built)."""
    is_path = isinstance(units_or_corpus, (str, Path))
    units = iter_corpus(units_or_corpus) if is_path else units_or_corpus
    path = Path(path)
    if path.exists():
        try:
            index = Index(path)
            if index.meta.get("fingerprint") == corpus_fingerprint(units):
                return index, False
            index.close()
        except IndexProblem:
            pass
        units = iter_corpus(units_or_corpus) if is_path else units_or_corpus  # a stream is read once
    return Index.build(units, path, source=source or (str(units_or_corpus) if is_path else ""), progress=progress), True
