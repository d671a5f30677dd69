"""SPEC §2 index: FTS5 weights, quoting, df/idf, title phrases, accent aliases, safety."""

import math
import sqlite3

import pytest

from workbench.index import store as index_mod
from workbench.index.store import Index, IndexProblem, fold_accents, query_expression, quote

from .conftest import build_index, units_from


def test_quote_doubles_inner_quotes_and_expression_is_or_of_phrases():
    assert quote('say "hi"') == '"say ""hi"""'
    assert query_expression(["a", "role_id"]) == '"a" OR "role_id"'


def test_fts5_operator_text_is_searched_as_text(tmp_path):
    ix = build_index(tmp_path, [("NEAR (AND)", 'OR NOT * ^ : "x" plain words'), ("Other", "plain")])
    for term in ["near", "and", "or", "not", '"x"', "*", "^", ":", "NEAR(a b)", "a AND b"]:
        ix.matches(term)  # never raises: every term is one quoted phrase
    assert ix.matches("near") == {1}  # the title's NEAR is an ordinary word
    assert ix.search(query_expression(["plain"]), 10)


def test_connected_token_is_one_phrase_in_fts5(tmp_path):
    # 'role_id' is queried as "role_id", which unicode61 reads as the phrase "role id"
    ix = build_index(tmp_path, [("A", "the role_id field"), ("B", "role then id apart"), ("C", "a role id here")])
    assert ix.matches("role_id") == {1, 3}
    assert ix.df("role_id") == 2


def test_df_counts_body_matches_only_and_idf_formula(tmp_path):
    ix = build_index(tmp_path, [("Kestrel", "kestrel hall"), ("Hall", "a hall"), ("Other", "nothing here")])
    assert ix.df("kestrel") == 1  # the title match of unit 1 does not count; its body does
    assert ix.df("hall") == 2
    assert ix.df("nothing here") == 1 and ix.df("here nothing") == 0  # phrases keep order
    assert ix.idf("hall") == pytest.approx(math.log(1 + (3 - 2 + 0.5) / (2 + 0.5)))
    assert ix.idf("zzz") == math.log(1 + 3.5 / 0.5)


def test_df_from_vocabulary_equals_match_count(tmp_path):
    ix = build_index(tmp_path, [("T", "alpha beta alpha"), ("U", "beta gamma 42"), ("V", "ALPHA x")])
    for term in ["alpha", "beta", "gamma", "42", "x", "absent"]:
        (n,) = ix.db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", ("body : " + quote(term),)).fetchone()
        assert ix.df(term) == n


def test_bm25_field_weights_and_id_tie_break(tmp_path):
    ix = build_index(tmp_path, [("apple", "pie"), ("pie", "apple"), ("pie", "apple")])
    # title weight 2 beats body weight 1 for 'apple'
    assert next(u for u, _ in ix.search('"apple"', 10, (2.0, 2.0, 1.0))) == 1
    assert [u for u, _ in ix.search('"apple"', 10, (0.5, 2.0, 1.0))][:2] == [2, 3]  # equal scores: lower id first
    scores = ix.search('"apple"', 10)
    assert scores[1][1] == scores[2][1]


def test_title_phrases_are_titles_with_two_or_more_tokens(tmp_path):
    ix = build_index(tmp_path, [("Glass Harbour", "x"), ("Ostrow", "y"), ("The Band", "z")])
    assert ix.title_phrases == {("glass", "harbour")}  # 'the band' -> ('band',) has one token


def test_fold_accents_drops_marks_after_latin_letters_only():
    assert fold_accents("josé arriaga") == "jose arriaga"
    assert fold_accents("zürich") == "zurich"
    assert fold_accents("ﬁ") == "fi"  # NFKC again at the end
    assert fold_accents("й") == "й"  # Cyrillic base letter keeps its mark


def test_accent_aliases_unique_and_different(tmp_path):
    ix = build_index(
        tmp_path, [("José Arriaga", "a"), ("Jose Arriaga", "b"), ("Élodie Marchetti", "c"), ("Plain", "d")]
    )
    # 'jose arriaga' folds from two titles (one is itself): no alias; 'plain' equals its fold
    assert ix.aliases == {"elodie marchetti": "élodie marchetti"}


def test_alias_spans_find_what_one_expression_of_all_keys_finds(tmp_path):
    import regex

    titles = [
        "José Arriaga",
        "José",
        "Élodie Marchetti",
        "Élodie",
        "Zürich (city)",
        "Ærø",
        "São Paulo",
        "Ça va",
        "Mötley Crüe",
        "Mötley",
    ]
    ix = build_index(tmp_path, [(t, "x") for t in titles])
    keys = sorted(ix.aliases, key=lambda k: (-len(k), k))  # the expression the engine used before
    pattern = regex.compile(
        r"(?<![\p{L}\p{N}])(?:" + "|".join(regex.escape(k) for k in keys) + r")(?![\p{L}\p{N}])", regex.IGNORECASE
    )
    texts = [
        "Where was Jose Arriaga born?",
        "JOSE ARRIAGA and jose",
        "xjose jose2 jose_ (jose)",
        "Elodie Marchetti's",
        "elodie marchettix elodie",
        "Zurich (city) and Zurich (city)x",
        "Sao Paulo, Sao Paulo",
        "ca va? Ca Va!",
        "Motley Crue Motley",
        "jose arriagajose arriaga",
        "",
        "Jose",
        "aero aerø",
    ]
    for text in texts:
        assert list(ix.alias_spans(text)) == [m.span() for m in pattern.finditer(text)], text
    assert list(ix.alias_spans("x Jose Arriaga")) == [(2, 14)]  # the longest key wins


def test_opening_does_not_rebuild_and_records_tokenizer(tmp_path):
    ix = build_index(tmp_path, [("A", "alpha")])
    mtime = ix.path.stat().st_mtime_ns
    again = Index(ix.path)
    assert again.N == 1 and ix.path.stat().st_mtime_ns == mtime
    assert again.meta["tokenizer_version"] == index_mod.textlib.TOKENIZER_VERSION
    assert again.meta["connected_latin"] == index_mod.textlib.CONNECTED_LATIN


def test_mismatched_tokenizer_is_refused_with_a_clear_message(tmp_path, monkeypatch):
    ix = build_index(tmp_path, [("A", "alpha")])
    ix.close()
    monkeypatch.setattr(index_mod.textlib, "TOKENIZER_VERSION", "sag2-text-999")
    with pytest.raises(
        IndexProblem, match=r"tokenizer_version: index has 'sag2-text-1', this workbench uses 'sag2-text-999'.*Rebuild"
    ):
        Index(ix.path)


def test_failed_build_leaves_no_index(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(index_mod.Counter, "update", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        Index.build(units_from([("A", "alpha")]), tmp_path / "ix.sqlite")
    assert list(tmp_path.iterdir()) == []


def test_half_built_file_is_not_an_index(tmp_path):
    db = sqlite3.connect(tmp_path / "half.sqlite")
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('schema','sag2wb-index-1');"
    )
    db.commit()
    db.close()
    with pytest.raises(IndexProblem, match="incomplete"):
        Index(tmp_path / "half.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(IndexProblem, match="not a SAG2 workbench index"):
        Index(tmp_path / "junk.sqlite")
    with pytest.raises(IndexProblem, match="no index here"):
        Index(tmp_path / "missing.sqlite")


def test_diversity_df_counts_original_documents(tmp_path):
    from workbench.index.units import Unit

    units = [
        Unit("A", "", "Alpha beta", "doc1", "s", "l1"),
        Unit("A", "", "alpha_gamma", "doc1", "s", "l2"),
        Unit("B", "", "alpha", "doc2", "s", "l1"),
    ]
    ix = Index.build(units, tmp_path / "ix.sqlite")
    assert ix.D == 2 and ix.N == 3
    # [^\W_]+ splits at '_'; counts are per original document
    assert ix.diversity_df(["alpha", "beta", "gamma", "zeta"]) == {"alpha": 2, "beta": 1, "gamma": 1, "zeta": 0}
    assert ix.diversity_df(["zeta", "alpha"]) == {"alpha": 2, "zeta": 0}  # remembered, same answers


def test_bm25_restricted_to_some_rows_gives_the_same_scores(tmp_path):
    ix = build_index(tmp_path, [(f"T{i}", f"alpha {'beta ' * (i % 3)}gamma{i % 4}") for i in range(30)])
    expr = '"alpha" OR "beta" OR "gamma1"'
    full = ix.bm25_all(expr)
    some = {3, 4, 17, 29}
    assert ix.bm25_all(expr, among=some) == {u: full[u] for u in some}
    assert ix.bm25_all(expr, among=set()) == {}


def test_units_reads_many_at_once_in_the_order_asked(tmp_path):
    ix = build_index(tmp_path, [("A", "a"), ("B", "b"), ("C", "c")])
    assert [r.title for r in ix.units([3, 1, 3])] == ["C", "A", "C"]


def test_ascii_dictionary_words_read_from_the_file_equal_jiebas():
    import jieba

    from workbench import text as textlib

    textlib._jieba()
    loaded = {w for w, f in jieba.dt.FREQ.items() if f > 0 and w.isascii()}
    assert set(textlib._ascii_dictionary_words()) == loaded
    # what the workbench reads without importing jieba is what jieba itself says
    assert textlib.jieba_version() == jieba.__version__
    with jieba.dt.get_dict_file() as f:
        assert str(textlib._jieba_dictionary()) == f.name


# plain ASCII, accents and punctuation (no jieba), then 'c++' (a dictionary sub-word) and Chinese (jieba)
LAZY = "José Martí's role_id: 3.5% (1998), a.b-c. AT&T a+b x#y && +1 R&B.\n| c++ and C# | 北京大学是一所大学"
LAZY_SCRIPT = f"""
import json, sys
from workbench import text
from workbench.index.schema import tokenizer_signature
tokenizer_signature()  # what opening an index checks
head, tail = {LAZY!r}.split("|", 1)
first = text.tokenize(head)
loaded_after_ascii = "jieba" in sys.modules  # not even imported (the import alone is ~0.3 s)
rest = text.tokenize(tail)
print(json.dumps([first, rest, loaded_after_ascii, text.tokenize_plain(head), text.tokenize_plain(tail)]))
"""


@pytest.mark.slow
def test_ascii_text_is_tokenized_without_loading_jieba():
    """Opening an index and asking an English question does not pay jieba's dictionary load
    (~1 s); text that needs the dictionary loads it, and the tokens equal the plain rule's."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LAZY_SCRIPT], capture_output=True, text=True, check=True)
    first, rest, loaded_after_ascii, plain_first, plain_rest = json.loads(done.stdout)
    assert not loaded_after_ascii
    assert first == plain_first and "role_id" in first and "3.5%" in first and "r" in first
    assert rest == plain_rest and "c++" in rest and "北京大学" in rest
