"""The build's diversity sums (`build.DiversityCounts`): diversity df equals a direct count
of each document's token set, held in memory or spilled to a temp table, with one process or
two workers."""

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from workbench.index import build
from workbench.index.corpora import iter_corpus
from workbench.index.schema import DIVERSITY_TOKEN

ENCYCLOPEDIA = Path(__file__).resolve().parent.parent / "sample_corpora" / "encyclopedia" / "corpus.json"


def table_rows(path: Path) -> dict[str, list]:
    """Every table's rows (virtual tables are read through their shadow tables), meta's
    build time left out."""
    db = sqlite3.connect(path)
    try:
        names = [
            n
            for n, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
            if not sql.startswith("CREATE VIRTUAL")
        ]
        rows = {n: db.execute(f"SELECT * FROM {n} ORDER BY 1, 2").fetchall() for n in names}
        rows["meta"] = [r for r in rows["meta"] if r[0] != "built_at"]
        rows["sqlite_master"] = sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        return rows
    finally:
        db.close()


def encyclopedia_built_with_and_without(kernel, tmp_path, monkeypatch, block_chunks: int) -> tuple[dict, dict]:
    """`table_rows` of the encyclopedia sample built in small chunks, with `kernel`'s C loop and
    with its Python path (`kernel.load` patched to None)."""
    from workbench.index import build
    from workbench.index.corpora import iter_corpus

    corpus = Path(__file__).resolve().parent.parent / "sample_corpora" / "encyclopedia" / "corpus.json"
    monkeypatch.setattr(build, "CHUNK_UNITS", 20)
    monkeypatch.setattr(build, "BLOCK_CHUNKS", block_chunks)
    build.write_index(iter_corpus(corpus), tmp_path / "c.sqlite", "enc", workers=1)
    monkeypatch.setattr(kernel, "load", lambda: None)
    build.write_index(iter_corpus(corpus), tmp_path / "python.sqlite", "enc", workers=1)
    return table_rows(tmp_path / "c.sqlite"), table_rows(tmp_path / "python.sqlite")


def direct_diversity_df() -> list[tuple[str, int]]:
    """SPEC Appendix C's document frequency, counted straight: each document's set of tokens."""
    bodies: dict[str, set] = {}
    for u in iter_corpus(ENCYCLOPEDIA):
        bodies.setdefault(u.document, set()).update(DIVERSITY_TOKEN.findall(u.body.casefold()))
    return sorted(Counter(t for tokens in bodies.values() for t in tokens).items())


def test_diversity_df_is_the_direct_count_in_memory_and_spilled(tmp_path, monkeypatch):
    expected = direct_diversity_df()
    assert len(expected) > 900
    monkeypatch.setattr(build, "CHUNK_UNITS", 20)  # 9 chunks
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "memory.sqlite", "enc", workers=1)
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "two.sqlite", "enc", workers=2)
    monkeypatch.setattr(build, "DIVERSITY_SPILL", 50)  # spilled to the temp table after every chunk
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "spilled.sqlite", "enc", workers=1)
    for name in ("memory", "two", "spilled"):
        path = tmp_path / f"{name}.sqlite"
        db = sqlite3.connect(path)
        assert db.execute("SELECT term, df FROM diversity_df").fetchall() == expected, path
        db.close()
    # and nothing else differs: every table, FTS5's shadow tables included
    assert table_rows(tmp_path / "memory.sqlite") == table_rows(tmp_path / "spilled.sqlite")
    assert table_rows(tmp_path / "memory.sqlite") == table_rows(tmp_path / "two.sqlite")


def test_a_block_sums_its_chunks_diversity_counts():
    # hand-checked: two chunks packed as the workers send them; 'b' is in both (2 + 1), '' none
    first = (build.pack(["a", "b"]), np.array([1, 2]))
    second = (build.pack(["b", "c"]), np.array([1, 4]))
    empty = (build.pack([]), np.zeros(0, dtype=np.int64))
    assert build.unpack(first[0]) == ["a", "b"] and build.unpack(empty[0]) == []
    chunks = [(build.unpack(t), df) for t, df in (first, empty, second)]
    assert sorted(build.sum_diversity(chunks)) == [("a", 1), ("b", 3), ("c", 4)]
