"""Postings stored as delta + varint blobs per (block, term) (schema 3): decoded keys equal
the positions FTS5 holds, an index of many blocks answers as one of a single block and as
FTS5, an update across blocks equals a rebuild, and an index of the older format is named."""

import sqlite3

import numpy as np
import pytest

from workbench.index import build
from workbench.index.postings import _decode_small, decode_keys, encode_groups, read_instances
from workbench.index.schema import SCHEMA_VERSION, IndexProblem
from workbench.index.store import Index, query_expression
from workbench.index.update import update_passages

from .conftest import build_index, sag2wb, units_from
from .test_postings import MIXED

PASSAGES = MIXED + [(f"Extra {i}", f"apple words {i} same {'new ' * (i % 4)}tail") for i in range(13)]
QUERIES = (["apple"], ["same", "words"], ["josé martí", "new new"], ["extra", "3"], ["北京大学"], ["words 7 same"])


def _keys(rng, n_groups: int, big: bool) -> list[np.ndarray]:
    groups = []
    for _ in range(n_groups):
        n = int(rng.integers(1, 400 if big else 12))
        rows = rng.integers(0, 1 << int(rng.integers(1, 31)), n)
        offsets = rng.integers(0, 1 << int(rng.integers(0, 25)), n)
        groups.append(np.unique((rows << 32) | (rng.integers(0, 3, n) << 24) | offsets))
    return groups


@pytest.mark.parametrize("big", [False, True], ids=["python-decoder", "numpy-decoder"])
def test_encoded_keys_decode_to_themselves(big):
    rng = np.random.default_rng(7)
    for _ in range(40):
        groups = _keys(rng, int(rng.integers(1, 8)), big)
        blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
        for group, blob in zip(groups, blobs):
            assert np.array_equal(decode_keys([blob]), group)
        # blocks of increasing rows, read as one term: one sorted array
        shifted, base = [], 0
        for g in groups:
            shifted.append(g + (base << 32))
            base += int(g[-1] >> 32) + 1
        blobs = encode_groups(np.concatenate(shifted), [len(g) for g in shifted])
        assert np.array_equal(decode_keys(blobs), np.concatenate(shifted))


def _stored(path) -> dict[str, np.ndarray]:
    """term -> its decoded keys over every block, in block order."""
    db = sqlite3.connect(path)
    out: dict[str, list[bytes]] = {}
    for term, blob in db.execute("SELECT term, keys FROM postings ORDER BY block, term"):
        out.setdefault(term, []).append(blob)
    db.close()
    return {t: decode_keys(b) for t, b in out.items()}


def _fts5_positions(path) -> dict[str, np.ndarray]:
    db = sqlite3.connect(path)
    terms, counts, keys = read_instances(db)
    db.close()
    bounds = np.cumsum([0, *counts])
    return {t: keys[bounds[k] : bounds[k + 1]] for k, t in enumerate(terms)}


@pytest.fixture(scope="module")
def blocks(tmp_path_factory) -> tuple[Index, Index]:
    """(one block, four blocks of two 3-unit chunks, two workers) of the same passages."""
    folder = tmp_path_factory.mktemp("blocks")
    whole = build_index(folder, PASSAGES, "whole.sqlite")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "CHUNK_UNITS", 3)
        patch.setattr(build, "BLOCK_CHUNKS", 2)
        many = Index.build(units_from(PASSAGES), folder / "blocks.sqlite", workers=2)
    return whole, many


def test_many_blocks_answer_as_one_block_and_as_fts5(blocks):
    whole, many = blocks
    assert many.meta["block_chunks"] == "2" and many.meta["chunks"] == "7" and whole.meta["chunks"] == "1"
    (n_blocks,) = sqlite3.connect(many.path).execute("SELECT count(DISTINCT block) FROM postings").fetchone()
    assert n_blocks == 4
    stored, fts5_positions = _stored(many.path), _fts5_positions(many.path)
    assert stored.keys() == fts5_positions.keys() == _stored(whole.path).keys()
    for term, keys in stored.items():
        assert np.array_equal(keys, fts5_positions[term]), term
    fts5 = Index(many.path, max_postings=0)
    for terms in QUERIES:
        expression = query_expression(terms)
        assert many.bm25_all(expression) == fts5.bm25_all(expression) == whole.bm25_all(expression), terms
        assert many.search(expression, 30) == whole.search(expression, 30)
        for t in terms:
            assert many.matches(t) == fts5.matches(t) == whole.matches(t), t
            assert many.postings.body_rows(t) == fts5.df(t) == whole.df(t), t


def test_an_update_across_blocks_equals_a_rebuild(blocks, tmp_path):
    import json
    import shutil

    many = Index(shutil.copy(blocks[1].path, tmp_path / "many.sqlite"))
    many.close()
    replaced = ("Extra 4", "a replaced passage about apple words and josé martí")
    added = [("Added one", "new words same apple"), replaced]
    (tmp_path / "add.json").write_text(json.dumps([{"title": t, "text": x} for t, x in added]))
    update_passages(many.path, tmp_path / "add.json", remove=["Cherry", "Extra 9"])
    kept = [p for p in PASSAGES if p[0] not in ("Cherry", "Extra 9")]
    rebuilt = build_index(tmp_path, [replaced if p[0] == "Extra 4" else p for p in kept] + added[:1], "re.sqlite")
    updated = Index(many.path)
    fts5 = Index(many.path, max_postings=0)
    assert _stored(updated.path).keys() == _fts5_positions(updated.path).keys()
    for term, keys in _stored(updated.path).items():
        assert np.array_equal(keys, _fts5_positions(updated.path)[term]), term
    titles = {i: updated.unit(i).title for i in range(1, 40) if _has(updated, i)}
    rebuilt_titles = {i: rebuilt.unit(i).title for i in range(1, 40) if _has(rebuilt, i)}
    for terms in (*QUERIES, ["replaced passage"], ["cherry"]):
        expression = query_expression(terms)
        got = {titles[u]: s for u, s in updated.bm25_all(expression).items()}
        assert got == {rebuilt_titles[u]: s for u, s in rebuilt.bm25_all(expression).items()}, terms
        assert got == {titles[u]: s for u, s in fts5.bm25_all(expression).items()}, terms


def _has(index: Index, unit_id: int) -> bool:
    try:
        index.unit(unit_id)
    except KeyError:
        return False
    return True


@pytest.mark.parametrize("schema", ["sag2wb-index-2", "sag2wb-index-1"])
def test_an_index_of_an_older_format_is_named_with_the_rebuild(tmp_path, schema):
    index = build_index(tmp_path, MIXED)
    index.close()
    db = sqlite3.connect(index.path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (schema,))
    db.commit()
    db.close()
    with pytest.raises(IndexProblem, match=rf"another version of the workbench \(index format '{schema}'; "):
        Index(index.path)
    assert SCHEMA_VERSION == "sag2wb-index-3"


@pytest.mark.slow
def test_the_cli_names_an_older_index_and_exits_2(tmp_path):
    index = build_index(tmp_path, MIXED)
    index.close()
    db = sqlite3.connect(index.path)
    db.execute("UPDATE meta SET value = 'sag2wb-index-2' WHERE key = 'schema'")
    db.commit()
    db.close()
    done = sag2wb("search", "apple pie", "--db", "ix.sqlite", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "another version of the workbench" in done.stderr and "rebuild it with `sag2wb index" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("long_values", [3, 200], ids=["few-long-in-python", "many-long-in-numpy"])
def test_decoder_equals_the_python_decoder_across_blocks(long_values):
    # several blobs (a term's blocks) of different offset widths, decoded in one numpy pass
    rng = np.random.default_rng(11)
    for n_blobs in (1, 2, 5, 20):
        groups, base = [], 0
        for b in range(n_blobs):
            n = 300
            gaps = rng.integers(1, 3, n)  # one-byte gaps ...
            gaps[rng.choice(n, size=min(long_values // n_blobs + 1, n), replace=False)] += 1 << 20  # ... and long ones
            rows = base + np.cumsum(gaps)
            offsets = rng.integers(0, 1 << (b % 3) * 5, n)  # `ob` differs between blobs
            groups.append((rows << 32) | (rng.integers(0, 3, n) << 24) | offsets)
            base = int(rows[-1]) + 1
        blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
        got = decode_keys(blobs)
        assert got.tolist() == _decode_small(blobs) == np.concatenate(groups).tolist()


def test_decoder_hand_checked():
    # keys (row 1, body, offset 3) and (row 300, title, offset 0): ob = 2 bits;
    # v = row << 4 | column << 2 | offset = 27 and 4800; gaps 27 and 4773 = 0b100101_0100101
    blob = bytes([2, 27, 0x80 | 0x25, 0x25])
    assert _decode_small([blob]) == [(1 << 32) | (2 << 24) | 3, 300 << 32]
    # the same blob padded with 200 zero gaps (repeats of the last key): past the Python decoder
    assert decode_keys([blob + bytes(200)])[:2].tolist() == [(1 << 32) | (2 << 24) | 3, 300 << 32]
