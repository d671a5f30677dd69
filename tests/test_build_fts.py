"""The build's FTS5 writer process and its diversity sums: an index built with them has every
table's rows equal to one built in place in one process (FTS5's own shadow tables included),
the side file is gone afterwards, diversity df equals a direct count whether or not it spilled
to disk, and a full disk in a build with workers is named with nothing left behind."""

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from workbench.index import build
from workbench.index.corpora import iter_corpus
from workbench.index.schema import DIVERSITY_TOKEN

from .reliability_world import sag2wb

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


@pytest.fixture(scope="module")
def in_place_and_side(tmp_path_factory) -> tuple[Path, Path]:
    """The encyclopedia in 9 chunks, one process (FTS5 written in place) and two workers
    (FTS5 written by the writer process into a side file)."""
    folder = tmp_path_factory.mktemp("fts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "CHUNK_UNITS", 20)
        one = build.write_index(iter_corpus(ENCYCLOPEDIA), folder / "one.sqlite", "enc", workers=1)
        two = build.write_index(iter_corpus(ENCYCLOPEDIA), folder / "two.sqlite", "enc", workers=2)
    assert one["chunks"] == two["chunks"] == "9"
    return folder / "one.sqlite", folder / "two.sqlite"


def test_an_index_built_with_the_writer_process_has_the_same_rows_as_in_place(in_place_and_side):
    one, two = in_place_and_side
    a, b = table_rows(one), table_rows(two)
    assert a.keys() == b.keys() and {"fts_data", "fts_idx", "fts_docsize", "fts_config", "terms"} <= a.keys()
    for table in a:
        assert a[table] == b[table], table
    assert len(a["fts_docsize"]) == 169 and len(a["terms"]) == 995
    assert sorted(p.name for p in one.parent.iterdir()) == ["one.sqlite", "two.sqlite"]  # no side file left


def test_the_writer_process_runs_and_its_side_file_goes(tmp_path):
    """FtsRows itself: two chunks start the writer (its side file exists while it runs), the
    copied shadow tables and `terms` equal those written in place."""
    rows = [(i, f"title {i}", "", f"body words {i} josé 北京 role_id {'x' * (i % 3)}") for i in range(1, 60)]
    tables = {}
    for parallel in (False, True):
        path = tmp_path / f"{parallel}.sqlite"
        db = sqlite3.connect(path)
        db.executescript(build.BUILD_PRAGMAS + build.SCHEMA)
        fts = build.FtsRows(db, path, parallel=parallel)
        try:
            fts.add(rows[:20])
            assert fts.process is None  # one chunk: nothing started yet
            fts.add(rows[20:])
            assert (fts.process is not None) == parallel
            fts.finish()
            if parallel:  # the writer wrote it; `close` deletes it
                assert fts.side is not None and fts.side.stat().st_size > 0
        finally:
            db.close()
            fts.close()
        tables[parallel] = {t: v for t, v in table_rows_plain(path).items()}
    assert tables[True] == tables[False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["False.sqlite", "True.sqlite"]


def table_rows_plain(path: Path) -> dict[str, list]:
    db = sqlite3.connect(path)
    try:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in (*build.FTS_TABLES, "terms")}
    finally:
        db.close()


def direct_diversity_df() -> list[tuple[str, int]]:
    """SPEC Appendix C's document frequency, counted straight: each document's set of tokens."""
    bodies: dict[str, set] = {}
    for u in iter_corpus(ENCYCLOPEDIA):
        bodies.setdefault(u.document, set()).update(DIVERSITY_TOKEN.findall(u.body.casefold()))
    return sorted(Counter(t for tokens in bodies.values() for t in tokens).items())


def test_diversity_df_is_the_direct_count_in_memory_and_spilled(in_place_and_side, tmp_path, monkeypatch):
    one, two = in_place_and_side
    expected = direct_diversity_df()
    assert len(expected) > 900
    monkeypatch.setattr(build, "CHUNK_UNITS", 20)
    monkeypatch.setattr(build, "DIVERSITY_SPILL", 50)  # spilled to the temp table after every chunk
    build.write_index(iter_corpus(ENCYCLOPEDIA), tmp_path / "spilled.sqlite", "enc", workers=1)
    for path in (one, two, tmp_path / "spilled.sqlite"):
        db = sqlite3.connect(path)
        assert db.execute("SELECT term, df FROM diversity_df").fetchall() == expected, path
        db.close()


@pytest.mark.slow
def test_a_full_disk_in_a_build_with_workers_is_named_and_leaves_nothing(tmp_path):
    prelude = (
        "import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (262144, 262144))\n"
        "from workbench.index import build\nbuild.CHUNK_UNITS = 20\n"
    )
    db = tmp_path / "new.db"
    full = sag2wb("index", ENCYCLOPEDIA, "--db", db, "--workers", "2", python_prelude=prelude)
    assert full.returncode != 0
    lines = [ln for ln in full.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "disk full" in lines[0] and "no index was written" in lines[0], full.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sag2wb-outputs.jsonl"] or not list(tmp_path.iterdir())


def test_an_error_in_the_writer_process_is_raised_by_the_build_and_its_file_goes(tmp_path):
    """A row SQLite refuses (a rowid that is not an integer) fails in the writer process: the
    parent raises that error, and closing stops the writer and deletes its side file."""
    path = tmp_path / "x.sqlite"
    db = sqlite3.connect(path)
    db.executescript(build.BUILD_PRAGMAS + build.SCHEMA)
    fts = build.FtsRows(db, path, parallel=True)
    try:
        fts.add([(1, "a", "", "alpha")])
        fts.add([("two", "b", "", "beta")])
        with pytest.raises(sqlite3.IntegrityError, match="datatype mismatch"):
            fts.finish()
    finally:
        db.close()
        fts.close()
    assert fts.process is None and sorted(p.name for p in tmp_path.iterdir()) == ["x.sqlite"]
