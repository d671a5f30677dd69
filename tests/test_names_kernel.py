"""A block's names merged in C (`index/names_kernel.py`): the distinct names sorted as Python's
`sorted` sorts them, each listed name's rank among them, and a build equal to one without it."""

import numpy as np
import pytest

from workbench.index import build, names_kernel

from .test_build_diversity import encyclopedia_built_with_and_without


@pytest.fixture
def loaded():
    if names_kernel.load() is None:
        pytest.skip("no C compiler")


def test_hand_checked_merge(loaded):
    # chunk 1: b, a; chunk 2: none; chunk 3: é, a, ab: sorted a < ab < b < é (é is U+00E9,
    # its UTF-8 bytes C3 A9 sort after every ASCII byte, as its code point does)
    packed, ranks, found = names_kernel.merge(["b\na", "", "é\na\nab"], [2, 0, 3])
    assert (packed, ranks.tolist(), found) == ("a\nab\nb\né", [2, 0, 3, 0, 1], 4)
    assert names_kernel.merge(["", ""], [0, 0])[0::2] == ("", 0)


def test_counts_that_do_not_match_are_refused(loaded):
    for packed, counts in ((["a\nb"], [1]), (["a"], [2]), ([""], [1])):
        with pytest.raises(ValueError):
            names_kernel.merge(packed, counts)


def test_random_names_sort_as_python_does(loaded):
    rng = np.random.default_rng(11)
    alphabet = [*"abz09_-", "é", "ß", "中", "\U0001f600", "ǅ", "\x7f"]
    chunks = [
        list(dict.fromkeys("".join(rng.choice(alphabet, int(rng.integers(1, 6)))) for _ in range(int(n))))
        for n in rng.integers(0, 300, 12)
    ]
    packed, ranks, found = names_kernel.merge([build.pack(c) for c in chunks], [len(c) for c in chunks])
    want = sorted(set().union(*chunks))
    assert build.unpack(packed) == want and found == len(want)
    assert ranks.tolist() == [want.index(n) for c in chunks for n in c]


def test_a_build_with_the_merge_equals_one_without(tmp_path, monkeypatch):
    with_c, without = encyclopedia_built_with_and_without(names_kernel, tmp_path, monkeypatch, block_chunks=3)
    assert with_c == without
