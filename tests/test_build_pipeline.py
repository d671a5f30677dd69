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
