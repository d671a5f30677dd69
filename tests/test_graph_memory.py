"""The corpus graph's memory-saving pieces: the rows' phrase signatures the compiled kernel
reads instead of a by-row copy of the table (workbench/feedback/graph_kernel.py), and the join
of the phrase table's parts without a second copy (graph_scoring._joined)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.feedback import graph_kernel, graph_scoring
from workbench.feedback.graph_scoring import PhraseTable


def _bit(p: int) -> tuple[int, int]:
    h = ((p * 2654435761) & 0xFFFFFFFF) >> 23  # the kernel's hash: 9 bits of Knuth's multiplier
    return h >> 6, 1 << (h & 63)


def test_row_signatures_set_one_bit_per_phrase_a_row_has():
    lib = graph_kernel.load()
    if lib is None:
        pytest.skip("no compiled kernel (SAG2WB_GRAPH_KERNEL=numpy or no C compiler)")
    # phrase 0: rows 1, 4; phrase 1: none; phrase 2: rows 0, 1; phrase 700: row 4
    offsets = np.zeros(702, dtype=np.int64)
    offsets[1:] = 2
    offsets[3:] = 4
    offsets[701] = 5
    rows = np.array([1, 4, 0, 1, 4], dtype=np.int32)
    table = PhraseTable(offsets, rows, np.ones(5), np.zeros(701, dtype=bool))
    sig = graph_kernel.row_signatures(lib, table, 6)
    expected = np.zeros((6, 8), dtype=np.uint64)
    for row, phrases in {0: [2], 1: [0, 2], 4: [0, 700]}.items():
        for p in phrases:
            word, bit = _bit(p)
            expected[row, word] |= np.uint64(bit)
    assert np.array_equal(sig, expected)
    assert not sig[[2, 3, 5]].any()  # rows in no list: no bit
    assert _bit(0) == (0, 1) and _bit(2) == (1, 1 << 56)  # hand-checked: (2 * 2654435761 mod 2^32) >> 23 = 120


def test_joined_equals_concatenate_and_lets_the_parts_go(monkeypatch):
    releases = []
    release = graph_scoring.release_memory
    monkeypatch.setattr(graph_scoring, "RELEASE_EVERY", 64)  # bytes: a release after 8 floats
    monkeypatch.setattr(graph_scoring, "release_memory", lambda: releases.append(1) or release())
    parts = [np.arange(n) * 0.1 for n in (0, 5, 9, 1, 4)]
    expected = np.concatenate(parts)
    joined = graph_scoring._joined(parts, np.float64)
    assert parts == [] and len(releases) == 2  # after the 14th float, and at the end
    assert joined.dtype == np.float64 and joined.tobytes() == expected.tobytes()
    assert graph_scoring._joined([], np.int32).tolist() == []
