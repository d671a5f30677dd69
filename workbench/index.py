"""The SAG2 index (SPEC §2): one SQLite file with FTS5 over title/heading/body, the original
units, and the locally derived statistics (df, title phrases, accent aliases, diversity df).

>>> index = Index.build(load_corpus("sample_corpora/internal_docs"), "docs.sqlite")  # doctest: +SKIP
>>> index.search(query_expression(["role_id"]), limit=3)                            # doctest: +SKIP
[(4, -3.1), ...]
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import regex

from . import text as textlib
from .corpora import UNIT_MAX_CHARS, Unit
from .postings import DEFAULT_MAX_INSTANCES, Postings, phrases_of

SCHEMA_VERSION = "sag2wb-index-1"
DEFAULT_FIELD_WEIGHTS = (2.0, 2.0, 1.0)
UNIT_CACHE_LIMIT = 50_000  # units held in memory; a corpus up to this size is read whole
# SPEC Appendix C: diversity vectors use plain word tokens, not jieba tokens. The standard
# library's `re` on purpose: its \w excludes combining marks (Devanagari vowel signs split a
# word), which is what the reference implementation's vectors show; `regex` would differ.
DIVERSITY_TOKEN = re.compile(r"[^\W_]+")
_PLAIN_TOKEN = re.compile(r"[a-z0-9]+")


class Memo(dict):
    """A dict that computes a missing value once, with `compute(key)`."""

    def __init__(self, compute):
        super().__init__()
        self.compute = compute

    def __missing__(self, key):
        value = self[key] = self.compute(key)
        return value


class IndexProblem(RuntimeError):
    """An index that cannot be opened or built, with the reason and the fix."""


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


@dataclass(frozen=True)
class UnitRecord(Unit):
    """A stored unit: the loaded Unit plus its id in the index (the FTS5 rowid)."""

    id: int = 0


class Index:
    """An opened SAG2 index. Read-only; caches per-phrase look-ups for the process."""

    def __init__(self, path: str | Path, *, max_postings: int = DEFAULT_MAX_INSTANCES):
        """`max_postings`: largest number of term positions read into memory for BM25
        (0: always let FTS5 compute bm25())."""
        self.path = Path(path)
        if not self.path.exists():
            raise IndexProblem(f"{self.path}: no index here; build one with `sag2wb index CORPUS --db {self.path}`")
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            meta = dict(self.db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as exc:
            raise IndexProblem(f"{self.path}: not a SAG2 workbench index ({exc})") from None
        if meta.get("schema") != SCHEMA_VERSION or meta.get("complete") != "1":
            raise IndexProblem(f"{self.path}: incomplete or foreign index (schema {meta.get('schema')!r}); rebuild it")
        expected = tokenizer_signature()
        diffs = [f"{k}: index has {meta.get(k)!r}, this workbench uses {v!r}" for k, v in expected.items() if meta.get(k) != v]
        if diffs:
            raise IndexProblem(
                f"{self.path} was built with other text-processing settings ({'; '.join(diffs)}). "
                f"Rebuild it with `sag2wb index CORPUS --db {self.path}`."
            )
        self.meta = meta
        self.N = int(meta["units"])
        self.D = int(meta["documents"])
        self._matches: dict[str, frozenset[int]] = {}
        # df and idf run once per term per seed in term weighting: bound dict look-ups keep
        # known terms out of Python-level calls
        self._df = Memo(self._count_df)
        self._idf = Memo(self._compute_idf)
        self.df = self._df.__getitem__
        self.idf = self._idf.__getitem__
        self.cached_df = self._df.get  # df if already known, else None (never counts)
        self.cached_idf = self._idf.get
        self._bm25_cache: dict[tuple, dict[int, float]] = {}
        self._units: dict[int, UnitRecord] = {}
        self._diversity_df: dict[str, int] = {}
        self._diversity_vectors: dict[int, dict[str, float]] = {}
        self.max_postings = max_postings
        self._postings_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, units={self.N}, documents={self.D})"

    def close(self) -> None:
        self.db.close()

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
        """The in-memory postings that compute bm25() (loaded on first use; None when the
        index is larger than `max_postings` positions)."""
        if self.max_postings <= 0:
            return None
        with self._postings_lock:
            return Postings.load(self.db, self.max_postings)

    def _bm25_rows(self, expression: str, weights):
        """(rows, scores) from the in-memory postings, or None to ask FTS5."""
        phrases = phrases_of(expression)
        postings = self.postings if phrases else None
        return postings.bm25(phrases, weights) if postings is not None else None

    def search(self, expression: str, limit: int, weights=DEFAULT_FIELD_WEIGHTS) -> list[tuple[int, float]]:
        """First `limit` units by BM25 of `expression` (ties: lower id first)."""
        if not expression:
            return []
        scored = self._bm25_rows(expression, weights)
        if scored is not None:
            rows, scores = scored
            order = np.lexsort((rows, scores))[: max(limit, 0)]
            return list(zip(rows[order].tolist(), scores[order].tolist()))
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

    def _bm25_sql(self, expression: str, weights, restrict) -> dict[int, float]:
        w1, w2, w3 = weights
        if restrict is None:
            sql, args = "SELECT rowid, bm25(fts, ?, ?, ?) FROM fts WHERE fts MATCH ?", (w1, w2, w3, expression)
        else:
            # '+rowid' keeps SQLite from turning the filter into one FTS5 look-up per id
            sql = ("SELECT rowid, bm25(fts, ?, ?, ?) FROM fts WHERE fts MATCH ? "
                   "AND +rowid IN (SELECT value FROM json_each(?))")
            args = (w1, w2, w3, expression, json.dumps(restrict))
        return dict(self._fts(sql, args))

    def units(self, unit_ids) -> list[UnitRecord]:
        """Several units at once (one query for those not yet read; a corpus within the
        unit cache is read whole on first use, ~30 ms for 2Wiki)."""
        unit_ids = list(unit_ids)
        known = self._units
        missing = [u for u in dict.fromkeys(unit_ids) if u not in known]
        if missing and self.N <= UNIT_CACHE_LIMIT:
            for row in self.db.execute("SELECT title, heading, body, document, source, location, id FROM units"):
                known[row[-1]] = UnitRecord(*row)
            missing = []
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            rows = self.db.execute(
                "SELECT title, heading, body, document, source, location, id FROM units "
                f"WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            for row in rows:
                self._remember(UnitRecord(*row))
        get = known.get
        return [get(u) or self.unit(u) for u in unit_ids]

    def matches(self, term: str) -> frozenset[int]:
        """Units whose title, heading or body contains the phrase `term`."""
        found = self._matches.get(term)
        if found is None:
            postings = self.postings
            found = postings.rows(term) if postings is not None else None
            if found is None:
                found = frozenset(r for (r,) in self._fts("SELECT rowid FROM fts WHERE fts MATCH ?", (quote(term),)))
            if len(self._matches) >= 100_000:
                self._matches.clear()
            self._matches[term] = found
        return found

    def has_unseen_match(self, term: str, seen) -> bool:
        return any(u not in seen for u in self.matches(term))

    def _count_df(self, term: str) -> int:
        """SPEC §2 df(t): units whose *body* matches the token or phrase (`index.df(t)`)."""
        n = self._vocabulary_df(term)
        if n is None:  # a phrase: FTS5's count (24 us on 2Wiki, faster than intersecting positions)
            (n,) = self._fts("SELECT count(*) FROM fts WHERE fts MATCH ?", ("body : " + quote(term),))[0]
        return n

    def _vocabulary_df(self, term: str) -> int | None:
        """df of a term FTS5 reads as one token, from the body vocabulary; None for a phrase
        (or a term not yet split the way FTS5 splits it)."""
        if _PLAIN_TOKEN.fullmatch(term):
            return self._body_vocabulary.get(term, 0)
        postings = self.postings
        toks = postings.known_tokens(term) if postings is not None else None
        if toks is not None and len(toks) == 1:  # e.g. '北京大学'
            return self._body_vocabulary.get(toks[0], 0)
        return None

    def cheap_df(self, term: str) -> int | None:
        """df(t) if it needs no FTS5 query (already known, or a vocabulary read), else None."""
        n = self._df.get(term)
        if n is None:
            n = self._vocabulary_df(term)
            if n is not None:
                self._df[term] = n
        return n

    @cached_property
    def _body_vocabulary(self) -> dict[str, int]:
        # unicode61 leaves a lower-case ASCII letter/digit run as one token, unchanged, so for
        # such a term the body phrase-match count is its fts5vocab document count: one
        # read of the vocabulary replaces thousands of MATCH queries (tested equal).
        self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.body_vocab USING fts5vocab(main, fts, 'col')")
        return dict(self.db.execute("SELECT term, doc FROM temp.body_vocab WHERE col = 'body'"))

    def _compute_idf(self, term: str) -> float:
        """SPEC §2 (`index.idf(t)`): ln(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self.df(term)
        return math.log(1 + (self.N - df + 0.5) / (df + 0.5))

    # ---- derived structures --------------------------------------------------------------
    @cached_property
    def title_phrases(self) -> frozenset[tuple[str, ...]]:
        """Token tuples of titles with >= 2 tokens (SPEC §2)."""
        out = set()
        for title in self.titles:
            toks = tuple(textlib.tokenize(title))
            if len(toks) >= 2:
                out.add(toks)
        return frozenset(out)

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Accent-folded key -> the one NFKC case-folded title that folds to it (SPEC §2)."""
        folded: dict[str, set[str]] = {}
        for title in set(normalize_title(t) for t in self.titles):
            folded.setdefault(fold_accents(title), set()).add(title)
        return {key: next(iter(ts)) for key, ts in folded.items() if len(ts) == 1 and key not in ts}

    @cached_property
    def alias_pattern(self) -> regex.Pattern | None:
        if not self.aliases:
            return None
        keys = sorted(self.aliases, key=lambda k: (-len(k), k))  # longest key wins at a position
        return regex.compile(
            r"(?<![\p{L}\p{N}])(?:" + "|".join(regex.escape(k) for k in keys) + r")(?![\p{L}\p{N}])",
            regex.IGNORECASE,
        )

    def diversity_df(self, tokens) -> dict[str, int]:
        """Original documents containing each diversity token (SPEC Appendix C); 0 for a
        token no document has. Remembered per token: top-10 passages share most words."""
        known = self._diversity_df
        tokens = set(tokens)
        missing = [t for t in tokens if t not in known]
        if len(known) + len(missing) > 1_000_000:
            known.clear()
            missing = list(tokens)
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            found = dict.fromkeys(chunk, 0)
            found.update(self.db.execute(
                f"SELECT term, df FROM diversity_df WHERE term IN ({','.join('?' * len(chunk))})", chunk).fetchall())
            known.update(found)  # in one step: a question on another thread never reads a placeholder 0
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
    def build(cls, units: list[Unit], path: str | Path, *, source: str = "") -> "Index":
        """Build an index into `path` atomically (a failed build leaves no index behind)."""
        path = Path(path)
        if not units:
            raise IndexProblem(f"{source or path}: nothing to index (no units)")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.building-{os.getpid()}")
        if tmp.exists():
            tmp.unlink()
        try:
            _write_index(units, tmp, source)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return cls(path)


def corpus_fingerprint(units: list[Unit]) -> str:
    h = hashlib.sha256()
    for u in units:
        for part in (u.title, u.heading, u.body, u.document, u.source, u.location):
            h.update(part.encode("utf-8"))
            h.update(b"\x1f")
    return h.hexdigest()


def _write_index(units: list[Unit], path: Path, source: str) -> None:
    tok = textlib.tokenize
    db = sqlite3.connect(path)
    try:
        db.executescript(
            """
            PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA page_size = 4096;
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE units (id INTEGER PRIMARY KEY, title TEXT NOT NULL, heading TEXT NOT NULL,
                body TEXT NOT NULL, document TEXT NOT NULL, source TEXT NOT NULL, location TEXT NOT NULL);
            -- contentless: the original text lives in `units`; FTS5 keeps only the token index.
            CREATE VIRTUAL TABLE fts USING fts5(title, heading, body, content='');
            CREATE TABLE diversity_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
            """
        )
        rows = [(i, u.title, u.heading, u.body, u.document, u.source, u.location) for i, u in enumerate(units, start=1)]
        db.executemany("INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        db.executemany(
            "INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)",
            ((i, " ".join(tok(u.title)), " ".join(tok(u.heading)), " ".join(tok(u.body))) for i, u in enumerate(units, start=1)),
        )
        db.execute("INSERT INTO fts (fts) VALUES ('optimize')")
        doc_tokens: dict[str, set[str]] = {}
        for u in units:
            doc_tokens.setdefault(u.document, set()).update(DIVERSITY_TOKEN.findall(u.body.casefold()))
        df = Counter()
        for toks in doc_tokens.values():
            df.update(toks)
        db.executemany("INSERT INTO diversity_df VALUES (?, ?)", sorted(df.items()))
        meta = {
            "schema": SCHEMA_VERSION,
            **tokenizer_signature(),
            "units": str(len(units)),
            "documents": str(len(doc_tokens)),
            "source": source,
            "fingerprint": corpus_fingerprint(units),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "complete": "1",  # written last: an index without it never opens
        }
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        db.commit()
        db.execute("VACUUM")
    finally:
        db.close()


def open_or_build(units_or_corpus, path: str | Path, *, source: str = "") -> tuple[Index, bool]:
    """Open `path` if it holds an index of exactly these units; otherwise (re)build it.
    Returns (index, built)."""
    from .corpora import load_corpus

    units = load_corpus(units_or_corpus) if isinstance(units_or_corpus, (str, Path)) else units_or_corpus
    path = Path(path)
    if path.exists():
        try:
            index = Index(path)
            if index.meta.get("fingerprint") == corpus_fingerprint(units):
                return index, False
            index.close()
        except IndexProblem:
            pass
    return Index.build(units, path, source=source or str(units_or_corpus if isinstance(units_or_corpus, (str, Path)) else "")), True
