"""The compiled o200k_base counter (`o200k_kernel`) against quicktok, its oracle and fallback:
hand-checked splits, every code point in contexts, adversarial strings (CRLF and whitespace runs,
contractions in mixed case, digit runs, emoji with ZWJ, 1 MB strings), the heap merge against the
linear one, lone surrogates, the class table against Python's Unicode 14, and (slow) every 2Wiki
title and passage, the HotpotQA sample, the bundled corpora and request states."""

from __future__ import annotations

import json
import random
import struct
import unicodedata
from pathlib import Path

import pytest

from workbench.judges.jev import o200k_kernel, payload, tokens

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
NO_SURROGATES = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


@pytest.fixture(scope="module")
def lib():
    found = o200k_kernel.load()
    if found is None:
        pytest.skip("no C compiler or no quicktok data: quicktok counts")
    return found


@pytest.fixture(scope="module")
def oracle():
    return tokens._encoding()


def kcount(lib, text: str) -> int:
    n = o200k_kernel.count(lib, text)
    assert n is not None
    return n


# (text, its pieces by the o200k split, worked out by hand from the pattern: BPE never merges
# across pieces, so the text's count is the sum of its pieces' counts, and each piece but one here
# is a single token)
HAND = [
    ("Who directed Glass Harbour?", ["Who", " directed", " Glass", " Harbour", "?"]),
    ("don't DON'T", ["don't", " DON'T"]),  # the contraction joins the letters, either case
    ("don'ſ", ["don", "'", "ſ"]),  # ASCII letters only: ſ does not fold to s here
    ("x  y", ["x", " ", " y"]),  # \s+(?!\S) leaves the last space to the word
    ("a\r\n\r\n  b", ["a", "\r\n\r\n", " ", " b"]),  # \s*[\r\n]+ ends at the last newline
    ("1234567", ["123", "456", "7"]),  # \p{N}{1,3}
    ("a!!/\n\nb", ["a", "!!/\n\n", "b"]),  # punctuation takes the newlines and slashes after it
    ("HelloWorld", ["Hello", "World"]),  # upper* lower+ stops where an upper letter follows lower
]


def test_hand_checked_splits(lib, oracle):
    for text, pieces in HAND:
        assert "".join(pieces) == text
        assert kcount(lib, text) == sum(oracle.count(p) for p in pieces) == oracle.count(text), text
    assert [oracle.count(p) for p in HAND[6][1]] == [1, 2, 1]  # "!!/\n\n" is two tokens
    assert sum(oracle.count(p) for text, pieces in HAND for p in pieces) == sum(len(p) for _, p in HAND) + 1


def in_one_context(lib, oracle, points: list[int]) -> list[str]:
    """The texts that count differently: each code point after and before letters of both cases,
    digits, spaces, punctuation, a newline, a mark, a CJK letter and an apostrophe, 64 code points
    to a text (a split that differs changes a count but for rare coincidences; the slow test
    below also counts each context alone)."""
    context = "{}a{}A{}b{} {}'s{}1{}!{}\n {}\u0301{}\u65e5{}  x{}"
    texts = ["".join(context.replace("{}", chr(c)) for c in points[lo : lo + 64]) for lo in range(0, len(points), 64)]
    return [t for t in texts if kcount(lib, t) != oracle.count(t)]


def test_every_bmp_code_point_in_one_context(lib, oracle):
    """The BMP and every 16th code point above it (the slow test below: all of them)."""
    assert in_one_context(lib, oracle, [c for c in NO_SURROGATES if c < 0x10000 or c % 16 == 0]) == []


@pytest.mark.slow
def test_every_code_point_in_one_context(lib, oracle):
    assert in_one_context(lib, oracle, NO_SURROGATES) == []


@pytest.mark.slow
def test_every_code_point_in_separate_contexts(lib, oracle):
    contexts = ["{}", "a{}a", "A{}b", " {}'s", "{}{}1", "1{}!", "!{}\n ", "x {}  y", "{}\u0301", "\u65e5{}", "{}'LL",
                "\u02b0{}A", "\r\n{}"]  # fmt: skip
    import quicktok

    for lo in range(0, len(NO_SURROGATES), 1 << 16):
        chunk = NO_SURROGATES[lo : lo + (1 << 16)]
        texts = [f.replace("{}", chr(c)) for c in chunk for f in contexts]
        expected = quicktok.count_batch(oracle, texts).tolist()
        got = [kcount(lib, t) for t in texts]
        assert [t for t, x, y in zip(texts, got, expected) if x != y] == []


def adversarial() -> list[str]:
    rng = random.Random(33)
    alphabet = [
        *"aAzZ09 '\r\n\t/!.,-_sStTlLdDmMrReEvV",
        "\u00a0", "\u2003", "\u3000", "\u0301", "\u0308", "\u200d", "\ufe0f", "\U0001f468", "\U0001f469", "\U0001f467",
        "\u00e9", "\u0130", "\u017f", "\u212a", "\u02b0", "\u01c5", "\u65e5", "\uac00", "\u0660", "\u2167", "\u00b2",
        "\x1c", "\x85", "\u2028", "\U00010d40", "\u0295", "\U0001f3fb",
    ]  # fmt: skip
    texts = [
        "\r\n" * 50 + "x", "a" + "\r\n" * 7 + "  \r\n b", " \t \n\n\t x", "x" + " " * 17 + "Letters", "\n" * 9,
        "It's THEY'RE we'Ve i'M you'LL he'D 'S 'sa ''s don'", "'re're'll", "A'S" * 20,
        "9" * 1001, "12 345 6789 0.0001 1e10 ٠١٢٣", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
        "\U0001f44d\U0001f3fb\U0001f44d\U0001f3ff", "<|endoftext|> <|endofprompt|>", "\x00\x01\x1f\x7f", "",
    ]  # fmt: skip
    for _ in range(3000):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    return texts


def test_adversarial_strings(lib, oracle):
    texts = adversarial()
    assert [kcount(lib, t) for t in texts] == [oracle.count(t) for t in texts]


@pytest.mark.parametrize("size", [1 << 16, pytest.param(1 << 20, marks=pytest.mark.slow)])
def test_long_strings(lib, oracle, size):
    """Pieces of 64 KiB and (slow) 1 MiB: one letter run, one punctuation run, one space run (the
    heap merge); a mixed text of as many short pieces."""
    rng = random.Random(7)
    parts = ["the", " Cat", "'s", " 42", "\n", "!!", " \u65e5\u672c", "\u00e9t\u00e9"]
    mixed = "".join(rng.choice(parts) for _ in range(size // 3))[:size]
    for text in ("a" * size, "ab" * (size // 2), "!" * size, " " * size + "x", mixed):
        assert kcount(lib, text) == oracle.count(text)


def test_heap_merge_equals_the_linear_merge(lib, oracle):
    """The heap (long pieces) merges in the linear scan's order: both on the same pieces."""
    texts = [t for t in adversarial() if t] + ["antidisestablishmentarianism" * 9, "\u00e9" * 100, "abab" * 60]
    linear = [kcount(lib, t) for t in texts]
    try:
        lib.o200k_set_heap_from(2)
        heap = [kcount(lib, t) for t in texts]
    finally:
        lib.o200k_set_heap_from(256)
    assert heap == linear == [oracle.count(t) for t in texts]


def test_lone_surrogates_are_refused_as_before(lib):
    """UTF-8 cannot encode a lone surrogate: quicktok gets the text and refuses it (TypeError), as
    count_tokens always did."""
    text = b"a\xed\xa0\x80b".decode("utf-8", "surrogatepass")
    assert o200k_kernel.count(lib, text) is None
    with pytest.raises(TypeError):
        tokens._count(text + " not remembered")


def test_fallback_without_the_kernel_counts_the_same(monkeypatch):
    monkeypatch.setenv(o200k_kernel.VARIABLE, "quicktok")
    assert o200k_kernel.load() is None
    monkeypatch.setattr(tokens, "_KERNEL", [None])  # what a process with that setting finds first
    assert tokens._count("Who directed Glass Harbour? (fallback)") == 8


def test_other_data_files_are_left_to_quicktok(lib, monkeypatch):
    """Files other than those the counts were checked on (another quicktok's) build no kernel;
    the tables are built once a process (a second load keeps them)."""
    assert o200k_kernel._compile() is not None
    monkeypatch.setitem(o200k_kernel.CHECKED, "o200k.vocab", "0" * 64)
    assert o200k_kernel._compile() is None
    assert lib.o200k_load(b"", 0, b"", 0) == 0 and kcount(lib, "Who directed Glass Harbour?") == 5


def class_table() -> dict[str, set[int]]:
    data = (o200k_kernel.data_dir() / "uniclass_o200k.bin").read_bytes()
    out, p = {}, 0
    for name in ("L", "N", "S", "UP", "LO"):
        (n,) = struct.unpack_from("<I", data, p)
        ranges = struct.unpack_from(f"<{2 * n}I", data, p + 4)
        p += 4 + 8 * n
        out[name] = {c for i in range(n) for c in range(ranges[2 * i], ranges[2 * i + 1] + 1)}
    return out


@pytest.mark.slow
def test_class_table_against_unicode_14():
    """Why the kernel reads quicktok's class table instead of making one from `unicodedata`
    (Unicode 14 in Python 3.11): the table is Unicode 16's. They agree on every code point
    assigned in Unicode 14 but U+0295 (Ll in 14, Lo in 16: an "upper" letter for o200k); the
    code points assigned since are letters, marks and numbers only in the table; and \\s is
    White_Space, without the separators U+001C-001F that str.isspace counts."""
    table = class_table()
    changed, new = set(), set()
    for c in NO_SURROGATES:
        cat = unicodedata.category(chr(c))
        mine = {
            "L": cat[0] == "L",
            "N": cat[0] == "N",
            "UP": cat in ("Lu", "Lt", "Lm", "Lo") or cat[0] == "M",
            "LO": cat in ("Ll", "Lm", "Lo") or cat[0] == "M",
        }
        if any(mine[k] != (c in table[k]) for k in mine):
            (new if cat == "Cn" else changed).add(c)
    assert changed == {0x295}
    assert 0x295 in table["UP"] and 0x295 in table["LO"]
    assert len(new) > 10_000 and new <= table["L"] | table["N"] | table["UP"]
    assert {c for c in NO_SURROGATES if chr(c).isspace()} - table["S"] == {0x1C, 0x1D, 0x1E, 0x1F}
    assert table["S"] <= {c for c in NO_SURROGATES if chr(c).isspace()}


def corpus_texts(path: Path) -> list[str]:
    units = json.loads(path.read_text())
    out = []
    for u in units:
        title, text = u.get("title", ""), u.get("text", u.get("passage", ""))
        out += [title, text, payload._dumps({"1": {"title": title, "passage": text}})]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["2wiki/corpus.json", "hotpotqa-sample/corpus.json"])
def test_shared_corpora(lib, oracle, corpus):
    path = DATA / corpus
    if not path.exists():
        pytest.skip(f"no {path}")
    texts = corpus_texts(path)
    texts.append("\n".join(texts[:5000]))  # one long text across many passages
    assert [kcount(lib, t) for t in texts] == [oracle.count(t) for t in texts]
