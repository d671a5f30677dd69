"""The build's C encoding loop (`index/encode_kernel.py`) writes the numpy path's blobs byte for byte."""

import numpy as np
import pytest

from workbench.index import encode_kernel, postings


def _groups(rng, ngroups):
    keys, counts = [], []
    for _ in range(ngroups):
        n = int(rng.integers(1, 40))
        rows = rng.integers(0, 1 << 31, n) if rng.random() < 0.2 else rng.integers(0, 5000, n)
        group = np.unique(
            (rows << 32) | (rng.integers(0, 3, n) << 24) | rng.integers(0, 1 << int(rng.integers(0, 24)), n)
        )
        keys.append(group)
        counts.append(len(group))
    return np.concatenate(keys), counts


def test_hand_checked_blob():
    if encode_kernel.load() is None:
        pytest.skip("no C compiler")
    # row 1, body (column 2), offsets 0 and 5: ob = 3 (5 is 101b); v = 1 << 5 | 2 << 3 | 0 = 48,
    # then 1 << 5 | 2 << 3 | 5 = 53: gaps 48 and 5; row 300 alone (ob = 0): v = 300 << 2 = 1200,
    # two varint bytes: 1200 & 0x7F = 0x30 with the continuation bit (0xB0), then 1200 >> 7 = 9
    keys = np.array([(1 << 32) | (2 << 24), (1 << 32) | (2 << 24) | 5, 300 << 32], dtype=np.int64)
    assert encode_kernel.encode_groups(keys, [2, 1]) == [bytes([3, 48, 5]), bytes([0, 0xB0, 0x09])]
    assert encode_kernel.encode_groups(keys, [2, 1]) == postings.encode_groups(keys, [2, 1])


def test_random_groups_equal_numpy(monkeypatch):
    if encode_kernel.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(33)
    for ngroups in (1, 7, 300):
        keys, counts = _groups(rng, ngroups)
        assert encode_kernel.encode_groups(keys, counts) == postings.encode_groups(keys, counts)
    with pytest.raises(ValueError):
        encode_kernel.encode_groups(keys, [len(keys) + 1])
    monkeypatch.setattr(encode_kernel, "load", lambda: None)  # no compiler: numpy's path, the same blobs
    assert encode_kernel.encode_groups(keys, counts) == postings.encode_groups(keys, counts)


def test_a_build_with_the_loop_equals_one_with_numpy(tmp_path, monkeypatch):
    from .test_build_diversity import encyclopedia_built_with_and_without

    loop, numpy_ = encyclopedia_built_with_and_without(encode_kernel, tmp_path, monkeypatch, block_chunks=2)
    assert loop["postings"] == numpy_["postings"] and len(loop["postings"]) > 100
