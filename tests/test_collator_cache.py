"""The pyuca collator (the SPEC's tie-break between equal term priorities) is kept as a
pickle in the user's cache: it must sort exactly as a freshly parsed one, and a damaged or
unwritable cache must cost only the parse."""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys

import pytest
from pyuca import Collator

from workbench import collation

# each test parses pyuca's table at least once (0.2-0.5 s): the long set
pytestmark = pytest.mark.slow

WORDS = [
    "apple",
    "Apple",
    "apple-pie",
    "applé",
    "Ångström",
    "angstrom",
    "zeta",
    "Éclair",
    "eclair",
    "co-op",
    "coop",
    "résumé",
    "resume",
    "naïve",
    "naive",
    "北京",
    "東京",
    "ß",
    "ss",
    "1990",
    "199",
    "a1",
    "a-1",
    "",
]


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@functools.cache
def _fresh():
    c = Collator()
    return [c.sort_key(w) for w in WORDS]


def fresh_keys():
    return _fresh()


def test_first_load_writes_the_pickle_and_the_second_reads_it(cache_home):
    path = collation._collator_cache()
    assert path.is_relative_to(cache_home / "sag2wb" / "collation") and not path.exists()
    first = collation._load_collator()
    assert path.exists()
    again = collation._load_collator()
    assert again is not first  # read back from the file, not the same object
    assert [again.sort_key(w) for w in WORDS] == [first.sort_key(w) for w in WORDS] == fresh_keys()


@pytest.mark.parametrize(
    "damage",
    [b"", b"not a pickle", pickle.dumps({"a": 1}), pickle.dumps(Collator())[:1000]],
    ids=["empty", "garbage", "another object", "truncated"],
)
def test_a_damaged_pickle_is_replaced_by_a_fresh_collator(cache_home, damage):
    path = collation._collator_cache()
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    c = collation._load_collator()
    assert [c.sort_key(w) for w in WORDS] == fresh_keys()
    assert isinstance(pickle.loads(path.read_bytes()), Collator)  # rewritten whole


def test_a_cache_path_that_is_a_file_still_gives_the_collator(cache_home):
    (cache_home / "sag2wb").write_text("a file where the folder would be")
    c = collation._load_collator()
    assert [c.sort_key(w) for w in WORDS] == fresh_keys()
    assert (cache_home / "sag2wb").read_text() == "a file where the folder would be"


def test_the_tie_break_in_a_new_process_uses_the_cached_collator(cache_home):
    collation._load_collator()
    code = f"from workbench import terms as terms_module; print(sorted({WORDS!r}, key=terms_module.collation_key))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "XDG_CACHE_HOME": str(cache_home)},
    ).stdout
    c = Collator()
    assert out.strip() == str(sorted(WORDS, key=lambda w: tuple(c.sort_key(w))))
