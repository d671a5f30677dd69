"""The expansion's row sets (workbench/index/row_sets.py) equal the binary searches they replace."""

import numpy as np
import pytest

from workbench.index import row_sets
from workbench.index.postings import find_sorted
from workbench.index.row_sets import places, union, unseen


def straight_unseen(rows, seen_ids):
    # the code before: each row searched in the seen ids
    return rows if not len(seen_ids) or not len(rows) else rows[~find_sorted(seen_ids, rows)[1]]


def test_unseen_hand_checked():
    rows = np.array([2, 5, 9, 14, 20], dtype=np.int64)
    assert unseen(rows, np.array([1, 5, 14, 30], dtype=np.int64)).tolist() == [2, 9, 20]
    assert unseen(rows, np.array([2, 20], dtype=np.int64)).tolist() == [5, 9, 14]  # both ends
    assert unseen(rows, np.array([3, 21], dtype=np.int64)).tolist() == [2, 5, 9, 14, 20]  # none seen
    assert unseen(rows, np.array([2, 5, 9, 14, 20], dtype=np.int64)).tolist() == []
    assert unseen(rows, np.zeros(0, dtype=np.int64)).tolist() == rows.tolist()
    assert unseen(np.zeros(0, dtype=np.int64), np.array([4], dtype=np.int64)).tolist() == []


def test_places_hand_checked(monkeypatch):
    among = np.array([3, 4, 10, 11, 40], dtype=np.int64)
    rows = [np.array([4, 40], dtype=np.int64), np.array([3, 10, 11], dtype=np.int64), np.zeros(0, dtype=np.int64)]
    want = [[1, 4], [0, 2, 3], []]
    assert [p.tolist() for p in places(among, rows)] == want  # binary search: a short union
    monkeypatch.setattr(row_sets, "_DENSE_PLACES", 1)
    assert [p.tolist() for p in places(among, rows)] == want  # the array indexed by row


@pytest.mark.parametrize("seed", range(6))
def test_random_sets_equal_the_binary_searches(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([50, 5_000, 60_000]))
    lists = [np.flatnonzero(rng.random(n) < share) for share in rng.choice([0.001, 0.05, 0.4], size=5)]
    seen = np.flatnonzero(rng.random(n) < 0.01)
    matched = [unseen(r, seen) for r in lists]
    assert all(np.array_equal(a, straight_unseen(r, seen)) for a, r in zip(matched, lists))
    among = union(matched)
    want = [np.searchsorted(among, r) for r in matched]
    for dense in (1, 1 << 40):
        monkeypatch.setattr(row_sets, "_DENSE_PLACES", dense)
        assert all(np.array_equal(a, w) for a, w in zip(places(among, matched), want))


def test_expansion_reads_its_terms_tokens_in_one_statement(tmp_path, monkeypatch):
    """retrieve_expansion reads the selected terms' unread tokens together (Postings.load_tokens), not
    one statement each while resolving them; the candidates are those of the one-by-one reads."""
    from workbench.engine import retrieve_expansion
    from workbench.index.postings import Postings
    from workbench.params import Params
    from workbench.trace import Term

    from .conftest import build_index

    passages = [("A", "alpha"), ("B", "alpha beta"), ("C", "beta delta"), ("D", "alpha alpha"), ("E", "gamma")]
    terms = [
        Term("alpha", "token", "alpha", 1, 1, 3, 1.0, 0, 1, 1, 2.0, True, 1),
        Term("beta delta", "name", "Beta Delta", 1, 1, 1, 1.0, 0, 1, 1, 1.0, True, 2),
    ]
    one_by_one = build_index(tmp_path / "a", passages)
    monkeypatch.setattr(one_by_one.postings, "load_tokens", lambda tokens: None)
    want = retrieve_expansion(one_by_one, terms, '"gamma"', seen={1}, params=Params())
    together = build_index(tmp_path / "b", passages)
    single_reads: list[str] = []
    term_keys = Postings._term_keys

    def counted(self, token):
        if token not in self._token_keys:
            single_reads.append(token)
        return term_keys(self, token)

    monkeypatch.setattr(Postings, "_term_keys", counted)
    got = retrieve_expansion(together, terms, '"gamma"', seen={1}, params=Params())
    assert got == want and [c.unit_id for c in got[1]] == [4, 3, 2]  # D (alpha twice), C, B
    assert single_reads == []  # alpha, beta and delta came in load_tokens' one read


def test_phrases_split_together_as_one_by_one(tmp_path):
    """Postings.split: the phrases FTS5 must tokenize go to the scratch table together, one row each;
    each splits as `tokens` splits it alone."""
    from .conftest import build_index

    tricky = ["josé martí", "北京大学 是", "c++ code", "3.5% a.b-c", "role_id", "", "!!!", "ǅemal straße", "ﬁne", "Ⅻ"]
    one = build_index(tmp_path / "a", [("José Martí", "北京大学 role_id")]).postings
    alone = [one.tokens(p) for p in tricky]
    assert alone[0] == ("jose", "marti") or alone[0] == ("josé", "martí")  # unicode61 as the index was built
    assert alone[5] is None and alone[6] is None  # no token: None, as FTS5 gives no instance
    together = build_index(tmp_path / "b", [("José Martí", "北京大学 role_id")]).postings
    statements: list[str] = []
    execute = together.db.execute
    together.db = type("Counted", (), {"execute": lambda self, sql, *a: statements.append(sql) or execute(sql, *a)})()
    assert together.split([*tricky, "plain words", "josé martí"]) == [*alone, ("plain", "words"), alone[0]]
    assert sum(sql.startswith("INSERT") for sql in statements) == 1  # one round trip for all of them
    # the scratch table made (2), then INSERT, SELECT, DELETE once; split again: remembered, no statement more
    assert together.split(tricky) == alone and len(statements) == 5
