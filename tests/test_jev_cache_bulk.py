"""The JEV judgment store's bulk reads and writes (`JudgmentStore.get_many`, `set_many`) against
diskcache's own per-key `get` and `set` on real caches: the same rows, the same values, the
same counts; a write is all or none; entries written by per-key sets are read alike."""

from __future__ import annotations

import sqlite3

import diskcache
import pytest

from workbench.judges.cached import CachedJudge
from workbench.judges.jev.cache import JudgmentStore, open_cache, open_store

KEYS = [f"jev-judgment-v2:{i:064x}" for i in range(1234)]  # over two of the 500-key statements


def _rows(path) -> tuple[list, list]:
    """Every Cache row (times aside) and diskcache's kept count and size."""
    con = sqlite3.connect(path / "cache.db")
    try:
        rows = con.execute(
            "SELECT key, raw, expire_time, access_count, tag, size, mode, filename, value FROM Cache ORDER BY key"
        ).fetchall()
        settings = con.execute("SELECT key, value FROM Settings WHERE key IN ('count', 'size') ORDER BY key").fetchall()
    finally:
        con.close()
    return rows, settings


def test_set_many_writes_what_per_key_sets_write(tmp_path):
    pairs = [(k, {"p": i / len(KEYS), "model": "m" if i % 3 else None}) for i, k in enumerate(KEYS)]
    bulk, single = open_store(tmp_path / "bulk"), open_store(tmp_path / "single")
    try:
        bulk.set_many(pairs[:600])
        bulk.set_many(pairs[600:])
        with single.transact():
            for k, v in pairs:
                single.set(k, v)
        assert bulk.count() == single.count() == len(KEYS)
    finally:
        bulk.close()
        single.close()
    assert _rows(tmp_path / "bulk") == _rows(tmp_path / "single")
    plain = diskcache.Cache(str(tmp_path / "bulk"))  # read back by diskcache itself
    try:
        assert [plain.get(k) for k, _ in pairs] == [v for _, v in pairs]
    finally:
        plain.close()


def test_set_many_updates_present_keys_and_keeps_the_last_of_repeats(tmp_path):
    store = open_store(tmp_path)
    try:
        store.set(KEYS[0], {"p": 0.1, "model": "old"})  # written before, the per-key way
        store.set_many([(KEYS[0], {"p": 0.9, "model": "new"}), (KEYS[1], {"p": 0.2, "model": None}),
                        (KEYS[1], {"p": 0.3, "model": None})])  # fmt: skip
        assert store.get(KEYS[0]) == {"p": 0.9, "model": "new"}
        assert store.get(KEYS[1]) == {"p": 0.3, "model": None}
        assert store.count() == 2
    finally:
        store.close()


def test_set_many_is_all_or_none(tmp_path):
    store = open_store(tmp_path)
    try:
        with pytest.raises(Exception):  # noqa: B017 (pickling a lambda fails: whatever diskcache raises)
            store.set_many([(KEYS[0], {"p": 0.5, "model": None}), (KEYS[1], {"p": lambda: 0})])
        assert store.count() == 0 and store.get(KEYS[0]) is None
        store.set_many([(KEYS[0], {"p": 0.5, "model": None})])  # the store still works
        assert store.get(KEYS[0]) == {"p": 0.5, "model": None}
    finally:
        store.close()


def test_get_many_reads_what_get_reads(tmp_path):
    store = open_store(tmp_path)
    try:
        with store.transact():
            for i, k in enumerate(KEYS[:700]):  # per-key sets: entries as the code before wrote them
                store.set(k, {"p": i / 700, "model": "m"})
        store.cache.set(KEYS[700], {"p": 0.5, "model": "m"}, expire=-1)  # expired: absent for get too
        store.cache.set(b"bytes-key", {"p": 0.5, "model": "m"})  # another raw key type
        asked = [*KEYS[::-1], KEYS[5], "jev-judgment-v2:missing"]
        got = store.get_many(asked)
        assert got == {k: store.get(k) for k in asked if store.get(k) is not None}
        assert len(got) == 700 and KEYS[700] not in got
        assert store.get_many([b"bytes-key", KEYS[3]]) == {
            b"bytes-key": store.get(b"bytes-key"),
            KEYS[3]: store.get(KEYS[3]),
        }
        assert store.get_many([]) == {}
    finally:
        store.close()


def test_other_cache_settings_use_the_per_key_path(tmp_path):
    """A cache with statistics on counts each hit: the bulk path would not; so per-key methods run."""
    cache = open_cache(tmp_path)
    cache.stats(enable=True)
    store = JudgmentStore(cache, tmp_path)
    try:
        assert not store._bulk()
        store.set_many([(KEYS[0], {"p": 0.5, "model": None})])
        assert store.get_many([KEYS[0], KEYS[1]]) == {KEYS[0]: {"p": 0.5, "model": None}}
        assert cache.stats() == (1, 1)  # the hit and the miss of get_many, as two gets count them
    finally:
        store.close()


def test_another_diskcache_major_version_uses_the_per_key_path(tmp_path, monkeypatch):
    """The bulk statements are written for diskcache 5's table: under any other major version
    the store reads and writes key by key, and still stores what per-key sets store."""
    store = JudgmentStore(open_cache(tmp_path), tmp_path)
    try:
        assert store._bulk()
        monkeypatch.setattr(diskcache, "__version__", "6.0.0")
        assert not store._bulk()
        store.set_many([(KEYS[0], {"p": 0.25, "model": "m"})])
        assert store.get_many([KEYS[0], KEYS[1]]) == {KEYS[0]: {"p": 0.25, "model": "m"}}
    finally:
        store.close()


class _Counting:
    name, key = "count", "count-v1"

    def __init__(self):
        self.asked = 0

    def judge(self, question, candidates, context):
        self.asked += len(candidates)
        return [len(c["text"]) / 100 for c in candidates]


def test_a_cached_judge_over_the_bulk_store(tmp_path):
    """A CachedJudge reads a call's keys with get_many and stores with set_many: the same
    answers and reuse as per-key reads and writes, in a store the per-key path reads back."""
    items = [{"unit_id": i, "title": f"T{i}", "text": "x" * i} for i in range(40)]
    inner = _Counting()
    judge = CachedJudge(inner, open_store(tmp_path), cache_dir=tmp_path)
    try:
        first = judge.judge("Q?", items[:30], [])
        again = judge.judge("Q?", items, [])
        assert first == [i / 100 for i in range(30)] and again == [i / 100 for i in range(40)]
        assert inner.asked == 40 and judge.usage() == {"cache_hits": 30, "cache_misses": 40}
    finally:
        judge.close()
    plain = diskcache.Cache(str(tmp_path))
    try:
        assert len(plain) == 41  # 40 judgments and the format marker
    finally:
        plain.close()
