"""SPEC §1 text processing: one test per rule, hand-checked examples."""

import json
import random

import pytest

from workbench import text
from workbench.text import find_names, phrase, sentences, tokenize, tokenize_plain

from .conftest import shared_data


def test_nfkc_and_lower_case():
    # full-width letters and digits fold to ASCII, then lower-case
    assert tokenize("ＡＢＣ１２３") == ["abc123"]


def test_ascii_text_is_its_own_nfkc_form():
    # normalize skips NFKC for ASCII text: every ASCII character and pair is NFKC-stable
    import unicodedata

    ascii_ = "".join(map(chr, range(128)))
    assert unicodedata.normalize("NFKC", ascii_) == ascii_
    assert all(unicodedata.normalize("NFKC", a + b) == a + b for a in ascii_ for b in ascii_)
    assert text.normalize("Role_ID\tÅ") == "role_id\tå" and text.normalize("ＡＢＣ") == "abc"


def test_connected_latin_tokens_stay_whole_with_their_parts_first():
    # separator parts of length >= 2 with a Latin letter come first, then the word
    assert tokenize("role_id") == ["role", "id", "role_id"]
    assert tokenize("a.b-c") == ["a.b-c"]  # parts 'a', 'b', 'c' are too short
    assert tokenize("3.5%") == ["3.5%"]  # no part has a Latin letter
    assert tokenize("x_y z-1 ab.c") == ["x_y", "z-1", "ab", "ab.c"]


def test_dictionary_subwords_of_length_2_then_3_then_the_word():
    assert tokenize("中华人民共和国") == ["中华", "华人", "人民", "共和", "共和国", "中华人民共和国"]


def test_chinese_and_mixed_text():
    assert tokenize("登录后系统如何决定用户的权限") == [
        "登录",
        "后",
        "系统",
        "决定",
        "用户",
        "权限",
    ]  # 如何, 的 are stopwords
    assert tokenize("登录后role_id决定权限") == ["登录", "后", "role", "id", "role_id", "决定", "权限"]


def test_accented_latin_follows_jieba_word_characters():
    # jieba's word blocks are [a-zA-Z0-9...]: an accented letter is a word of its own
    assert tokenize("Élodie Zürich") == ["é", "lodie", "z", "ü", "rich"]


def test_stopwords_and_punctuation_are_dropped():
    assert tokenize('What is the NEAR AND (x) ^ * : "quoted"') == ["near", "x", "quoted"]
    assert tokenize("?!... — ,") == []
    assert "the" in text.STOPWORDS and "的" in text.STOPWORDS and "near" not in text.STOPWORDS


def test_phrase_is_space_joined_tokens():
    assert phrase("Jean-Luc Ferrand") == "jean luc jean-luc ferrand"


def test_names_capitalised_runs():
    s = "Jean-Luc Ferrand met O'Neil Brown and J. R. Pellham in New York. NASA Space Center"
    assert [n for _, _, n in find_names(s)] == [
        "Jean-Luc Ferrand",
        "O'Neil Brown",
        "J. R. Pellham",
        "New York",
        "NASA Space Center",
    ]


def test_names_need_two_words_and_no_touching_letters_or_digits():
    assert find_names("Hello world") == []
    assert find_names("the A Team") == [(4, 10, "A Team")]  # 'A' is a capitalised word
    assert find_names("New York2 City") == []  # 'York2' touches a digit; 'New Yor' touches 'k'
    assert find_names("xNew York") == []  # "New" touches the letter x; "York" alone is one word


def test_names_tab_separated_and_curly_apostrophe():
    assert [n for _, _, n in find_names("met Anne\tD’Arcy today")] == ["Anne\tD’Arcy"]


def test_sentences_split_rule():
    assert sentences("Dr. Who lives in St. Louis. He met J. Smith! Really? yes\n\nnext line") == [
        "Dr",
        "Who lives in St",
        "Louis",
        "He met J. Smith",
        "Really",
        "yes",
        "next line",
    ]


SENTENCE_EDGE_CASES = [
    "A. B. C.\nD! e? F.G. H.  I",
    "x.y. Z.\tend",
    "É. Smith. Ü? a.\n\n.b",
    "US. Army.",
    ". . A. .",
    "",
    "No break.here but. here",
    "Dr.Who. J.R. Tolkien wrote.",
    "trailing space. ",
    "1. 2. 3.\r\nfour",
]


def test_fast_sentence_split_equals_the_spec_regex():
    for sample in SENTENCE_EDGE_CASES:
        assert sentences(sample) == [s for s in text.SENTENCE_BREAK.split(sample) if s], sample


@pytest.mark.slow
def test_fast_sentence_split_equals_the_spec_regex_on_the_2wiki_corpus():
    corpus = json.loads(shared_data("2wiki", "corpus.json").read_text(encoding="utf-8"))
    for i, p in enumerate(corpus):
        assert sentences(p["text"]) == [s for s in text.SENTENCE_BREAK.split(p["text"]) if s], f"item {i}"


def test_fast_path_equals_plain_rule_on_tricky_text():
    samples = [
        "The role_id of a.b-c is 3.5% (C++ and C# too)",
        "中华人民共和国的c++程序员",
        "Москва é ß ﬁ",
        "tab\tseparated\u00a0nbsp",
        "x-New York",
        "iPhone 13 Pro-Max_v2.0",
    ]
    for s in samples:
        assert tokenize(s) == tokenize_plain(s), s


@pytest.mark.slow
def test_fast_path_equals_plain_rule_on_the_whole_2wiki_corpus():
    corpus = json.loads(shared_data("2wiki", "corpus.json").read_text(encoding="utf-8"))
    for i, p in enumerate(corpus):
        for field in (p["title"], p["text"]):
            assert tokenize(field) == tokenize_plain(field), f"item {i}"


def test_ascii_chunks_without_joiners_equal_the_plain_rule():
    # the fast path for an ASCII chunk with no + # & . _ % - (its letter/digit runs, stopwords
    # dropped) against the SPEC rule, on hand-checked and random chunks
    assert text._chunk_tokens("(1987),") == ("1987",)
    assert text._chunk_tokens("smith's") == ("smith", "s") == tuple(tokenize_plain("smith's"))
    assert text._chunk_tokens('"the"') == ()
    rng = random.Random(7)
    alphabet = "abz09()[],;:!?'\"/*<>=@$^`{}|~\\" + "THE"
    for _ in range(3000):
        chunk = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        chunk = rng.choice(["", "the", "of", "x"]) + chunk
        assert text._chunk_tokens(text.normalize(chunk)) == tuple(tokenize_plain(chunk)), chunk


def test_joined_tokens_keeps_the_word_cache_bounded(monkeypatch):
    # the build's workers call joined_tokens for every new piece: the words it remembers stay
    # within the bound chunk_tokens keeps (they grew without one before)
    from workbench import text as textlib

    monkeypatch.setattr(textlib, "_WORD_CACHE", {})
    monkeypatch.setattr(textlib, "_CHUNK_CACHE_LIMIT", 3)
    for i in range(10):
        chunk = f"a.b-c{i}"  # a joiner: the jieba path, whose words are remembered
        assert textlib.joined_tokens(chunk) == " ".join(textlib._chunk_tokens(chunk))
    assert 0 < len(textlib._WORD_CACHE) <= 3
