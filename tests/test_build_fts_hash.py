"""FTS5's pending-terms hash during a build (build.FTS_HASH_BYTES): the index keeps the setting,
and what FTS5 answers does not depend on it (a hash of 1 byte flushes a segment per unit, which
'optimize' merges at the end)."""

import sqlite3

from workbench.index import build
from workbench.index.units import Unit

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


def _units(n):
    # unit i's body: words chosen by i's digits, so terms have varied dfs and frequencies
    return [
        Unit(
            title=f"Title {WORDS[i % 12]}",
            heading=WORDS[(i // 3) % 12],
            body=" ".join(WORDS[(i * k) % 12] for k in range(1, 2 + i % 7)),
            document=f"d{i}",
            source="s",
            location=str(i),
        )
        for i in range(n)
    ]


def _answers(path):
    db = sqlite3.connect(path)
    try:
        hashsize = db.execute("SELECT v FROM fts_config WHERE k = 'hashsize'").fetchone()
        found = {
            w: db.execute(
                "SELECT rowid, round(bm25(fts, 2.0, 2.0, 1.0), 9) FROM fts WHERE fts MATCH ? ORDER BY rowid", (w,)
            ).fetchall()
            for w in [*WORDS, '"alpha beta"', "title AND kappa"]
        }
        return hashsize, found
    finally:
        db.close()


def test_the_index_keeps_the_build_hash_size(tmp_path):
    build.write_index(_units(40), tmp_path / "i.sqlite", "t", workers=1)
    hashsize, found = _answers(tmp_path / "i.sqlite")
    assert hashsize == (32 << 20,) == (build.FTS_HASH_BYTES,)
    units = _units(40)
    has_alpha = [i + 1 for i, u in enumerate(units) if "alpha" in f"{u.title} {u.heading} {u.body}".lower().split()]
    assert [row for row, _ in found["alpha"]] == has_alpha and len(has_alpha) == 21


def test_fts5_answers_the_same_whatever_the_hash_size(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CHUNK_UNITS", 16)
    build.write_index(_units(300), tmp_path / "big.sqlite", "t", workers=1)
    monkeypatch.setattr(build, "FTS_HASH_BYTES", 1)  # a segment per unit
    build.write_index(_units(300), tmp_path / "tiny.sqlite", "t", workers=1)
    (big_size, big), (tiny_size, tiny) = _answers(tmp_path / "big.sqlite"), _answers(tmp_path / "tiny.sqlite")
    assert (big_size, tiny_size) == ((32 << 20,), (1,))
    assert big == tiny and all(big[w] for w in WORDS)
