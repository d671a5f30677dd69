"""The compiled postings decoder (`workbench/index/postings_kernel.py`) gives the keys of the numpy
decoder and of the Python one, blob by blob and grouped, and refuses blobs the build never writes."""

import os
import subprocess
import sys

import numpy as np
import pytest

from workbench.index import postings_kernel
from workbench.index.postings import (
    _decode_small,
    decode_grouped,
    decode_keys_numpy,
    encode_groups,
    find_sorted,
    sorted_unique,
)

from .test_index_blocks import _keys

KERNEL = postings_kernel.load()
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="no C compiler here")


@needs_kernel
def test_hand_checked_blob():
    # ob = 2 (offsets up to 3); v = 1 << 4 | 2 << 2 | 3 = 27, then a gap of 300 << 4 - 27 = 4773
    # (LEB128 0xA5 0x25) to row 300, column 0, offset 0
    blob = bytes([2, 27, 0xA5, 0x25])
    keys, counts = postings_kernel.decode_blobs(KERNEL, [blob, blob])
    one = [(1 << 32) | (2 << 24) | 3, 300 << 32]
    assert keys.tolist() == one + one  # each blob's gaps count from 0
    assert counts.tolist() == [2, 2]


@needs_kernel
@pytest.mark.parametrize("big", [False, True], ids=["short-blobs", "long-blobs"])
def test_kernel_equals_the_numpy_and_python_decoders(big):
    rng = np.random.default_rng(7 if big else 8)
    for _ in range(30):
        groups = _keys(rng, int(rng.integers(1, 40)), big)
        blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
        keys, counts = postings_kernel.decode_blobs(KERNEL, blobs)
        assert keys.dtype == np.int64
        assert keys.tolist() == decode_keys_numpy(blobs).tolist() == _decode_small(blobs)
        assert keys.tolist() == np.concatenate(groups).tolist()
        assert counts.tolist() == [len(g) for g in groups]


@needs_kernel
def test_grouped_counts_equal_the_numpy_path(monkeypatch):
    rng = np.random.default_rng(9)
    groups = _keys(rng, 25, True)
    blobs = encode_groups(np.concatenate(groups), [len(g) for g in groups])
    # terms of 0, 1 and several blobs (a term with no stored blob is an empty group)
    grouped = [blobs[:3], [], blobs[3:4], blobs[4:11], [], blobs[11:]]
    keys, counts = decode_grouped(grouped)
    monkeypatch.setattr(postings_kernel, "_LOADED", [None])  # the numpy path
    keys_np, counts_np = decode_grouped(grouped)
    assert keys.tolist() == keys_np.tolist()
    assert (
        counts.tolist()
        == counts_np.tolist()
        == [sum(len(g) for g in groups[a:b]) for a, b in [(0, 3), (3, 3), (3, 4), (4, 11), (11, 11), (11, 25)]]
    )


@needs_kernel
@pytest.mark.parametrize("bad", [bytes([2, 27, 0xA5]), bytes([2, 0x80, 0x80])], ids=["cut-varint", "no-end"])
def test_a_blob_cut_inside_a_varint_is_refused(bad):
    with pytest.raises(ValueError, match="did not write"):
        postings_kernel.decode_blobs(KERNEL, [bytes([2, 27]), bad])


def test_the_environment_switch_turns_the_kernel_off():
    code = "from workbench.index import postings_kernel; print(postings_kernel.load() is None)"
    env = {**os.environ, "SAG2WB_POSTINGS_KERNEL": "numpy"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


@needs_kernel
def test_keep_followed_equals_the_binary_search():
    rng = np.random.default_rng(11)
    for n, m in [(0, 10), (10, 0), (5, 100_000), (20_000, 30_000), (50_000, 800), (1, 1)]:
        for spread in (1 << 8, 1 << 20, 1 << 40):
            starts = np.unique(rng.integers(0, spread, n)).astype(np.int64)
            other = np.unique(rng.integers(0, spread, m)).astype(np.int64)
            if len(starts) and len(other):  # make sure some follow
                other = np.unique(np.concatenate([other, starts[::3] + 2]))
            for k in (0, 1, 2, 5):
                want = starts[find_sorted(other, starts + k)[1]]
                assert postings_kernel.keep_followed(KERNEL, starts, other, k).tolist() == want.tolist()


@needs_kernel
def test_keep_followed_hand_checked():
    starts = np.array([3, 10, 20, 30], dtype=np.int64)
    other = np.array([1, 4, 11, 12, 31, 40], dtype=np.int64)
    assert postings_kernel.keep_followed(KERNEL, starts, other, 1).tolist() == [3, 10, 30]
    assert postings_kernel.keep_followed(KERNEL, starts, other, 2).tolist() == [10]
    assert postings_kernel.keep_followed(KERNEL, starts, other, 10).tolist() == [30]


def test_sorted_unique_equals_np_unique():
    rng = np.random.default_rng(12)
    for n in (0, 1, 2, 1000, 40_000):
        ids = rng.integers(0, 50_000, n)
        assert sorted_unique(ids).tolist() == np.unique(ids).tolist()
