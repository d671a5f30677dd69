"""The postings' bounded caches and the JEV client's long-text counts let go of what was used longest ago
(workbench/recent.py)."""

import numpy as np

from workbench.recent import Recent

from .conftest import build_index


def test_eviction_order_hand_checked():
    cache = Recent(10, len)
    cache.put("a", "xxxx")  # 4
    cache.put("b", "xxx")  # 7
    cache.put("c", "xx")  # 9
    assert cache.get("a") == "xxxx"  # a used again: b is now the oldest
    cache.put("d", "xxx")  # 12 > 10: b goes (9), not everything
    assert list(cache) == ["c", "a", "d"] and cache.total == 9
    cache.put("e", "xxxxxx")  # 15: c (13), then a (9)
    assert list(cache) == ["d", "e"] and cache.total == 9
    cache.put("d", "x")  # replacing a value counts the new size only
    assert list(cache) == ["e", "d"] and cache.total == 7
    assert cache.get("gone") is None and cache.get("gone", 5) == 5
    assert cache.pop("e") == "xxxxxx" and cache.total == 1 and cache.pop("e", None) is None
    cache.put("big", "x" * 20)  # larger than the limit alone: kept, the rest let go (as a full clear did)
    assert list(cache) == ["big"] and cache.total == 20
    cache.clear()
    assert not cache and cache.total == 0


def test_counted_by_entries():
    cache = Recent(2)
    for key in "abc":
        cache.put(key, key.upper())
    assert dict(cache) == {"b": "B", "c": "C"}


def test_postings_keep_their_recent_tokens(tmp_path, monkeypatch):
    from workbench.index import postings as postings_module

    index = build_index(tmp_path, [("Apple pie", "apple apple banana"), ("Banana", "banana split dessert")])
    postings = index.postings
    full = {t: postings._term_keys(t).copy() for t in ("apple", "banana", "split")}
    monkeypatch.setattr(postings_module, "TOKEN_CACHE_POSITIONS", 5)
    postings.forget_cached()
    postings._token_keys = Recent(5, len)  # apple 3 keys (title and body), banana 3, split 1
    postings._term_keys("apple")
    postings._term_keys("banana")  # 6 > 5: apple let go
    assert list(postings._token_keys) == ["banana"]
    postings._term_keys("split")
    postings._term_keys("banana")
    assert list(postings._token_keys) == ["split", "banana"]
    assert all(np.array_equal(postings._term_keys(t), keys) for t, keys in full.items())  # same keys read again


def test_phrase_tokens_kept_least_recently_used_first(tmp_path):
    index = build_index(tmp_path, [("Apple pie", "apple apple banana"), ("Banana", "banana split dessert")])
    postings = index.postings
    splits = []
    fts5_split = postings._fts5_split
    postings._fts5_split = lambda phrases: splits.append(list(phrases)) or fts5_split(phrases)
    postings._tokens = Recent(2)
    assert postings.tokens("--") is None  # punctuation only: no token
    assert postings.tokens("--") is None and splits == [["--"]]  # remembered: not split again
    assert postings.tokens("apple-pie") == ("apple", "pie")
    assert postings.tokens("--") is None  # "--" used again: "apple-pie" is now the oldest
    assert postings.tokens("banana,split") == ("banana", "split")  # 3 > 2: "apple-pie" let go, not all
    assert list(postings._tokens) == ["--", "banana,split"]
    assert postings.known_tokens("--") is None and postings.known_tokens("apple-pie") is None
    assert postings.tokens("apple-pie") == ("apple", "pie") and splits[-1] == ["apple-pie"]  # read again
    assert len(splits) == 4


def test_long_text_counts_kept_least_recently_used_first(monkeypatch):
    from workbench.judges.jev import tokens

    monkeypatch.setattr(tokens, "_long", Recent(2))
    a, b, c = ("alpha " * 800, "beta " * 900, "gamma " * 800)  # each longer than SHORT_TEXT
    assert min(map(len, (a, b, c))) > tokens.SHORT_TEXT
    tokens.remember_count(a, 11)  # recorded counts (not the real ones): a look-up must read them back
    tokens.remember_count(b, 22)
    assert tokens.count_tokens(a) == 11  # a used again: b is now the oldest
    tokens.remember_count(c, 33)  # 3 > 2: b let go, not all
    assert list(tokens._long) == [a, c]
    assert tokens.count_tokens(b) == tokens._count(b) != 22  # counted again, and remembered
    assert list(tokens._long) == [c, b]
    tokens.remember_count("short", 5)  # short texts are the lru_cache's, not kept here
    assert "short" not in tokens._long
