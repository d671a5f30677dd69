"""The build's pipeline: the pool starts before the first chunk is written, and the aliases come
from the candidate titles (those an accent fold changes) equal to grouping every unit."""

import sqlite3

from workbench.index import build
from workbench.index.units import Unit


def _units(titles):
    return [
        Unit(title=t, heading="", body=f"text of {t}", document=t, source="s", location=str(i))
        for i, t in enumerate(titles)
    ]


def test_the_pool_is_fed_before_the_first_chunk_is_written(monkeypatch):
    monkeypatch.setattr(build, "CHUNK_UNITS", 2)
    chunks = build._Chunks(_units(["a", "b", "c", "d", "e", "f"]), workers=2)
    stream = iter(chunks)  # held: closing the generator shuts the pool
    try:
        first, units, _ = next(stream)
        # the first chunk is tokenized here, but handed out only once the second is with the pool
        assert first == 1 and [u.title for u in units] == ["a", "b"] and chunks.pool is not None
    finally:
        stream.close()


def test_aliases_from_candidates_equal_grouping_every_unit(tmp_path, monkeypatch):
    # 'josé' and 'jose' fold to the same key, which is also a title itself: no alias; 'élodie'
    # alone gives 'elodie' -> 'élodie'; 'zoë' and 'zoé' both fold to 'zoe': no alias
    titles = ["José", "Jose", "Élodie", "Élodie", "Zoë", "Zoé", "Plain", "Ångström"]
    monkeypatch.setattr(build, "CHUNK_UNITS", 3)
    build.write_index(_units(titles), tmp_path / "candidates.sqlite", "t", workers=1)
    monkeypatch.setattr(build, "ALIAS_CANDIDATES", 0)  # past the bound at once: every unit grouped
    build.write_index(_units(titles), tmp_path / "grouped.sqlite", "t", workers=1)
    rows = []
    for name in ("candidates", "grouped"):
        db = sqlite3.connect(tmp_path / f"{name}.sqlite")
        rows.append(db.execute("SELECT * FROM aliases ORDER BY fold").fetchall())
        db.close()
    assert rows[0] == rows[1] == [("angstrom", "ångström", "angstrom"), ("elodie", "élodie", "elodie")]


def test_a_worker_makes_the_units_digests():
    units = _units(["Élodie", "x"])
    rows = [(u.title, u.heading, u.body, u.document, u.source, u.location) for u in units]
    done = build.tokenize_chunk(5, rows)
    assert done["digests"] == [build.unit_digest(u) for u in units]
    # hand-checked: the fields joined by \x1f, UTF-8, sha256
    import hashlib

    assert done["digests"][1] == hashlib.sha256(b"x\x1f\x1ftext of x\x1fx\x1fs\x1f1").digest()


def _freeze_count(_):
    import gc

    return gc.get_freeze_count(), gc.get_threshold()[0]


def test_the_collector_runs_less_often_during_a_build_and_workers_skip_what_they_inherit(tmp_path, monkeypatch):
    import gc

    seen = []
    write_chunk = build.write_chunk

    def spy(db, chunk_no, *args):
        seen.append(gc.get_threshold()[0])
        if chunk_no == 1:  # the pool runs by now: a worker froze what it inherited
            seen.append(chunks_pool[0].pool.submit(_freeze_count, 0).result())
        return write_chunk(db, chunk_no, *args)

    chunks_pool = []
    make = build._Chunks.__init__

    def keep(self, *a, **k):
        make(self, *a, **k)
        chunks_pool.append(self)

    monkeypatch.setattr(build._Chunks, "__init__", keep)
    monkeypatch.setattr(build, "write_chunk", spy)
    monkeypatch.setattr(build, "CHUNK_UNITS", 2)
    before = gc.get_threshold()
    build.write_index(_units(["a", "b", "c", "d", "e"]), tmp_path / "x.sqlite", "t", workers=2)
    assert gc.get_threshold() == before  # put back
    assert seen[0] == max(before[0], build.GC_YOUNG)
    frozen, young = seen[2]
    assert frozen > 0 and young == max(before[0], build.GC_YOUNG)
