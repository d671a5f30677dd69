"""The corpus graph's phrase table by hand (workbench/feedback/graph_table.py): the contributions
`stored_order_table` makes from one read of the postings are BM25's, checked on three passages.
tests/test_graph_stream.py compares the table with one look-up per phrase on whole corpora."""

from __future__ import annotations

import math

import numpy as np

from tests.conftest import build_index
from workbench.feedback import graph_scoring, graph_table
from workbench.index.postings import K1


def assert_equal_tables(a, b) -> None:
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.rows.dtype == b.rows.dtype and a.rows.tolist() == b.rows.tolist()
    assert a.impacts.view(np.int64).tolist() == b.impacts.view(np.int64).tolist()  # the floats' bits
    assert a.missing.tolist() == b.missing.tolist()


def test_a_hand_checked_table(tmp_path):
    """Three passages; 'vellor' twice in passage 1's body, once in passage 2's title."""
    index = build_index(tmp_path, [("Harbour", "glass boats"), ("Quay", "vellor and vellor"), ("Vellor", "boats")])
    postings = index.postings
    assert postings is not None
    questions = graph_scoring.Questions(
        ids=np.array([0]),
        offsets=np.array([0, 2]),
        phrases=np.array([0, 1], dtype=np.int32),
        vocabulary=["vellor", "boats"],
    )
    table = graph_table.stored_order_table(postings, questions, (2.0, 2.0, 1.0))
    assert questions.vocabulary == ["boats", "vellor"] and questions.phrases.tolist() == [1, 0]  # the stored order
    assert table.offsets.tolist() == [0, 2, 4]
    rows = {index.unit(int(r)).title: i for i, r in enumerate(table.rows[2:].tolist(), 2)}
    assert set(rows) == {"Quay", "Vellor"}
    idf = math.log((3 - 2 + 0.5) / (2 + 0.5))  # negative: the floor 1e-6, as bm25()
    assert idf < 0
    for title, f in (("Quay", 2.0), ("Vellor", 2.0)):  # two body instances at weight 1; one title at weight 2
        i = rows[title]
        norm = postings.row_norm[int(table.rows[i])]
        assert table.impacts[i] == 1e-6 * ((f * (K1 + 1.0)) / (f + norm))
