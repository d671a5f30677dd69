"""The phrase table from one read of the postings (workbench/feedback/graph_table.py) equals the
table of one look-up per phrase (`graph_scoring.phrase_table` without blobs), bit for bit: the
same rows, the same contribution floats, the same phrases FTS5 cannot split; whatever the batch
size, and on a hand-checked corpus."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import build_index
from tests.test_graph_scale import corpora  # noqa: F401 (the fixture)
from workbench.feedback import graph_scoring, graph_table
from workbench.index import Index
from workbench.index.postings import K1


def tables(index: Index, weights=(2.0, 2.0, 1.0)):
    ids = np.array(sorted(index.documents), dtype=np.int64)
    vocabulary = graph_scoring.questions_of(index, ids, 80, 1).vocabulary
    vocabulary = [*vocabulary, "role id", "no such term", "zzqx"]  # a phrase of two tokens, absent ones
    postings = index.postings
    assert postings is not None
    blobs = graph_table.read_term_blobs(postings, {p for p in vocabulary if graph_table.single_token(postings, p)})
    bulk = graph_scoring.phrase_table(postings, vocabulary, weights, blobs)
    one_by_one = graph_scoring.phrase_table(postings, vocabulary, weights)
    return vocabulary, bulk, one_by_one


def assert_equal_tables(a, b) -> None:
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.rows.dtype == b.rows.dtype and a.rows.tolist() == b.rows.tolist()
    assert a.impacts.view(np.int64).tolist() == b.impacts.view(np.int64).tolist()  # the floats' bits
    assert a.missing.tolist() == b.missing.tolist()


@pytest.mark.parametrize("batch_bytes", [pytest.param(1, marks=pytest.mark.slow), 300, 4 << 20])
@pytest.mark.parametrize("corpus", ["encyclopedia", "internal_docs"])
def test_the_bulk_table_equals_one_look_up_per_phrase(corpora, corpus, batch_bytes, monkeypatch):  # noqa: F811
    monkeypatch.setattr(graph_table, "BATCH_BYTES", batch_bytes)
    index = corpora[corpus]
    vocabulary, bulk, one_by_one = tables(index)
    assert_equal_tables(bulk, one_by_one)
    assert len(vocabulary) > 100 and len(bulk.rows) > 1000  # a real table, not an empty one
    for weights in ((1.0, 0.5, 3.0), (0.0, 0.0, 1.0)):
        assert_equal_tables(*tables(index, weights)[1:])


def test_a_hand_checked_table(tmp_path):
    """Three passages; 'vellor' twice in passage 1's body, once in passage 2's title."""
    index = build_index(tmp_path, [("Harbour", "glass boats"), ("Quay", "vellor and vellor"), ("Vellor", "boats")])
    postings = index.postings
    assert postings is not None
    blobs = graph_table.read_term_blobs(postings, {"vellor", "boats"})
    table = graph_scoring.phrase_table(postings, ["vellor", "boats"], (2.0, 2.0, 1.0), blobs)
    rows = {index.unit(int(r)).title: i for i, r in enumerate(table.rows[:2].tolist())}
    assert set(rows) == {"Quay", "Vellor"} and table.offsets.tolist() == [0, 2, 4]
    idf = math.log((3 - 2 + 0.5) / (2 + 0.5))  # negative: the floor 1e-6, as bm25()
    assert idf < 0
    for title, f in (("Quay", 2.0), ("Vellor", 2.0)):  # two body instances at weight 1; one title at weight 2
        i = rows[title]
        norm = postings.row_norm[int(table.rows[i])]
        assert table.impacts[i] == 1e-6 * ((f * (K1 + 1.0)) / (f + norm))
