"""SAG2 text processing (SPEC §1): tokens, name phrases, sentences.

>>> tokenize("After login, the session stores the user's role_id.")
['after', 'login', 'session', 'stores', 'user', 's', 'role', 'id', 'role_id']

`tokenize` is the fast path used everywhere; `tokenize_plain` is the rule written out
straight (one jieba pass over the whole text) and exists so tests can prove the fast
path emits exactly the same tokens.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import marshal
import os
import re
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

import regex

if TYPE_CHECKING:
    import jieba  # imported on first use: the import alone costs ~0.3 s (pkg_resources)

# Bump when any rule below changes: indexes record it and refuse a mismatched open.
TOKENIZER_VERSION = "sag2-text-1"

# SPEC §1.2: keep connected Latin tokens (role_id, a.b-c, 3.5%) whole in jieba's
# fallback segmenter. jieba reads this module attribute at call time.
CONNECTED_LATIN = r"([a-zA-Z0-9]+(?:[._-][a-zA-Z0-9]+)*%?)"

STOPWORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "或",
        "哪",
        "什么",
        "哪个",
        "哪些",
        "如何",
        "怎么",
        "为什么",
        "是否",
        "这",
        "那",
        "一个",
        "一种",
        "请",
        "我",
        "你",
        "他",
        "它",
        "吗",
        "呢",
        "吧",
        "地",
        "得",
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "by",
        "with",
        "from",
        "which",
        "what",
        "who",
        "how",
        "when",
        "where",
        "does",
        "do",
        "did",
        "that",
        "this",
        "it",
        "as",
    ]
)

_SEPARATOR = re.compile(r"[._-]")
_LATIN_LETTER = re.compile(r"[a-z]")
_LETTER_OR_DIGIT = regex.compile(r"[\p{L}\p{N}]")
# jieba.cut's own block splitter (re_han_default): each block is segmented on its own,
# which is what makes per-block memoisation exact.
HAN_FIRST, HAN_LAST = "\u4e00", "\u9fd5"  # the Han characters jieba segments with its dictionary
HAN_STARTS = (HAN_FIRST, chr(ord(HAN_LAST) + 1))  # string bounds of the words that start with one
_JIEBA_JOINERS = "+#&\\._%\\-"  # the ASCII characters of jieba's blocks besides letters and digits (escaped)
_JIEBA_BLOCK = re.compile(f"([{HAN_FIRST}-{HAN_LAST}a-zA-Z0-9{_JIEBA_JOINERS}]+)", re.U)


@functools.cache
def _jieba() -> jieba.Tokenizer:
    # Loading the dictionary takes ~0.4 s (~1 s through jieba's own reader): once per process, on first use.
    _import_jieba()
    import jieba
    import jieba.finalseg

    jieba.setLogLevel(logging.WARNING)
    jieba.finalseg.re_skip = re.compile(CONNECTED_LATIN)
    if not _read_jieba_cache(jieba.dt):
        jieba.dt.check_initialized()  # jieba's own way: builds (and caches) the dictionary when no cache file is there
    return jieba.dt


def _import_jieba():
    """jieba without pkg_resources. jieba._compat imports pkg_resources only to open jieba's own
    data files, and opens the same files with `open` when it is missing; the import costs ~0.12 s
    of CPU per process (issue 33). A None entry in sys.modules makes that one import fail while
    jieba is imported (as for httpx._main, judges/jev/client.py); it is removed afterwards."""
    if "jieba" not in sys.modules and "pkg_resources" not in sys.modules:
        sys.modules["pkg_resources"] = None
        try:
            import jieba
        finally:
            if sys.modules.get("pkg_resources", 0) is None:
                del sys.modules["pkg_resources"]
    import jieba

    return jieba


def _read_jieba_cache(dt) -> bool:
    """Initialise jieba's default tokenizer `dt` from the cache file jieba writes for its default
    dictionary and reads back without further checks (`Tokenizer.initialize`: "jieba.cache" in
    `dt.tmp_dir` or the temp folder, or `dt.cache_file` there), read here in one piece: jieba's
    `marshal.load(file)` reads it object by object through the file object, ~0.75 s for 500,000
    words, where `marshal.loads` of its bytes takes ~0.25 s (issue 33: paid before a pool forks).
    The same bytes give the same (FREQ, total). False, `dt` untouched, in every other case (another
    dictionary, no cache file yet, a file that does not load): then jieba initialises itself."""
    if dt.initialized:
        return True
    if dt.dictionary is not None:  # jieba.DEFAULT_DICT is None: another dictionary checks its file's mtime
        return False
    path = os.path.join(dt.tmp_dir or tempfile.gettempdir(), dt.cache_file or "jieba.cache")
    try:
        with open(path, "rb") as f:
            freq, total = marshal.loads(f.read())
    except Exception:  # missing, unreadable or not jieba's: as jieba, build the dictionary instead
        return False
    with dt.lock:
        if not dt.initialized:
            dt.FREQ, dt.total, dt.initialized = freq, total, True
    return True


def load_jieba() -> None:
    """Load jieba's dictionary now (e.g. before a process pool forks: workers inherit it)."""
    _jieba()


def jieba_version() -> str:
    """jieba's version from its installed metadata (equal to `jieba.__version__`, tested),
    without importing it."""
    return importlib.metadata.version("jieba")


def _jieba_dictionary() -> Path:
    """jieba's default dictionary file (`jieba.dt.get_dict_file()`, tested), found without
    importing jieba."""
    spec = importlib.util.find_spec("jieba")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "dict.txt"


def normalize(text: str) -> str:
    """SPEC §1.1: NFKC, then lower-case. ASCII text is its own NFKC form (no ASCII character
    has a compatibility mapping, and composing needs a combining mark): `isascii` is one flag
    read, where NFKC's quick check reads every character (~3% of a build's worker)."""
    return text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).lower()


@functools.cache
def _ascii_dictionary_words() -> tuple[str, ...]:
    """The ASCII words of jieba's dictionary (frequency > 0); the facts below derive from it.
    Read from the dictionary file the way jieba reads it (a later line of a word wins), so
    that ASCII text is tokenized without loading jieba (~1 s): the same set as jieba's FREQ
    (tested)."""
    freq: dict[str, int] = {}
    with open(_jieba_dictionary(), "rb") as f:
        for raw in f:
            if raw.isascii():
                word, count = raw.strip().decode("utf-8").split(" ")[:2]
                freq[word] = int(count)
    return tuple(w for w, c in freq.items() if c > 0)


def _frequencies() -> dict:
    return _jieba().FREQ


@functools.cache
def _ascii_short_words() -> tuple[str, ...]:
    return tuple(w for w in _ascii_dictionary_words() if len(w) in (2, 3))


def _expand_word(word: str, freq: dict | None = None) -> list[str]:
    """SPEC §1.3-4: separator parts, dictionary sub-words of length 2 and 3, the word; filtered.
    `freq`: jieba's dictionary, loaded here if a look-up needs it and it is not given."""
    out: list[str] = []
    # An ASCII word can only contain an ASCII dictionary word; jieba 0.42.1 has two
    # ('c#', 'c++'), so for nearly every English word the look-ups below are skipped.
    skip_lookups = word.isascii() and not any(w in word for w in _ascii_short_words())
    if _SEPARATOR.search(word):
        out.extend(p for p in _SEPARATOR.split(word) if len(p) >= 2 and _LATIN_LETTER.search(p))
    if not skip_lookups and freq is None and len(word) > 2:
        freq = _frequencies()
    for n in (2, 3):
        if len(word) > n and not skip_lookups:
            assert freq is not None
            out.extend(word[i : i + n] for i in range(len(word) - n + 1) if freq.get(word[i : i + n], 0) > 0)
    out.append(word)
    return [t for t in out if t not in STOPWORDS and _LETTER_OR_DIGIT.search(t)]


def tokenize_plain(text: str) -> list[str]:
    """The SPEC §1 rule, one jieba pass over the whole text (slow reference path)."""
    dt = _jieba()
    out: list[str] = []
    for word in dt.cut(normalize(text), HMM=True):
        out.extend(_expand_word(word, dt.FREQ))
    return out


_ASCII_BLOCK = re.compile(r"[a-z0-9._%-]+")


@functools.cache
def _ascii_blocks_skip_dictionary() -> bool:
    # jieba segments a block by dictionary words; if no dictionary word is made only of
    # [a-z0-9._%-] (true for jieba 0.42.1: only 'c#' and 'c++'), such a block falls through
    # to the fallback segmenter whole, i.e. it is split by CONNECTED_LATIN alone.
    return not any(_ASCII_BLOCK.fullmatch(w) for w in _ascii_dictionary_words())


_CONNECTED = re.compile(CONNECTED_LATIN)


@functools.cache
def _plain_words_stay_whole() -> bool:
    # With no dictionary word made only of ASCII letters/digits, a chunk like 'harbour' is one
    # block, one word, no separator parts and no dictionary sub-words: its token is itself.
    return _ascii_blocks_skip_dictionary() and not any(w.isalnum() for w in _ascii_short_words())


_JOINER = re.compile(f"[{_JIEBA_JOINERS}]")
_ALNUM_RUN = re.compile(r"[a-zA-Z0-9]+")


def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    """Tokens of one whitespace-free, normalised chunk (jieba never joins across spaces)."""
    if chunk.isascii() and _plain_words_stay_whole():
        if chunk.isalnum():
            return () if chunk in STOPWORDS else (chunk,)
        if not _JOINER.search(chunk):
            # '(1987),' or "smith's": the blocks are its letter/digit runs, each a plain word
            # (below); every other ASCII character is a word of its own without a letter or
            # digit, which is dropped
            return tuple(w for w in _ALNUM_RUN.findall(chunk) if w not in STOPWORDS)
    # jieba (its dictionary takes ~1 s to load) only for blocks that need it
    out: list[str] = []
    for block in _JIEBA_BLOCK.split(chunk):
        if not block:
            continue
        if _JIEBA_BLOCK.match(block):
            if _ASCII_BLOCK.fullmatch(block) and _ascii_blocks_skip_dictionary():
                words = [w for w in _CONNECTED.split(block) if w]
            elif block.isascii() and not any(w in block for w in _ascii_dictionary_words()):
                # no dictionary word inside ('AT&T', 'a+b'): jieba's DAG is all single
                # characters, so the whole block goes to its fallback segmenter, which
                # splits it by CONNECTED_LATIN (re_skip) alone
                words = [w for w in _CONNECTED.split(block) if w]
            else:
                words = _jieba().cut(block, HMM=True)
            for word in words:
                tokens = _WORD_CACHE.get(word)
                if tokens is None:
                    tokens = _WORD_CACHE[word] = tuple(_expand_word(word))
                out.extend(tokens)
        else:
            # Outside jieba's blocks every character is its own word (punctuation, and
            # letters jieba does not treat as word characters, e.g. 'é').
            out.extend(ch for ch in block if ch not in STOPWORDS and _LETTER_OR_DIGIT.match(ch))
    return tuple(out)


_WORD_CACHE: dict[str, tuple[str, ...]] = {}
_CHUNK_CACHE: dict[str, tuple[str, ...]] = {}
_CHUNK_CACHE_LIMIT = 1 << 20


def tokenize(text: str) -> list[str]:
    """Tokens of `text` in order, duplicates kept (SPEC §1). Same output as `tokenize_plain`.

    >>> tokenize("J. Smith's 3.5% a.b-c")
    ['j', 'smith', 's', '3.5%', 'a.b-c']
    """
    cache = _CHUNK_CACHE
    out: list[str] = []
    for chunk in normalize(text).split():
        tokens = cache.get(chunk)
        if tokens is None:
            if len(cache) >= _CHUNK_CACHE_LIMIT:
                cache.clear()
                _WORD_CACHE.clear()
            tokens = cache[chunk] = _chunk_tokens(chunk)
        out.extend(tokens)
    return out


def chunk_tokens(chunk: str) -> tuple[str, ...]:
    """A normalised, whitespace-free chunk's tokens: `tokenize(text)` is these of each chunk of
    `normalize(text).split()`, one after another. Not remembered here (a caller that meets many
    chunks keeps its own memory of them, e.g. the corpus graph's questions).

    >>> chunk_tokens("smith's"), chunk_tokens("3.5%")
    (('smith', 's'), ('3.5%',))
    """
    tokens = _CHUNK_CACHE.get(chunk)
    if tokens is None:
        if len(_WORD_CACHE) >= _CHUNK_CACHE_LIMIT:  # bounded, as in tokenize
            _WORD_CACHE.clear()
        tokens = _chunk_tokens(chunk)
    return tokens


def joined_tokens(chunk: str) -> str:
    """A normalised chunk's tokens joined by spaces ('' for none), not remembered (the build's
    workers keep their own memory of chunks, by id). A chunk's tokens never hold a space, so the
    non-empty joined chunks of `normalize(text).split()`, joined by spaces, are `tokenize(text)`
    joined by spaces (the build's FTS5 rows; tests/test_build_positions.py)."""
    return " ".join(chunk_tokens(chunk))


@functools.lru_cache(maxsize=1 << 16)
def phrase(text: str) -> str:
    """A lexical term's text: the space-joined tokens (SPEC §1 "name's term"); names recur."""
    return " ".join(tokenize(text))


# SPEC §1 "Name phrases": >= 2 capitalised words (initial tried first, then an upper-case
# letter with letters/marks, optionally joined by - ’ ' to further parts), separated by
# spaces/tabs, not touching a letter or digit on either side.
_PART = r"(?:\p{Lu}\.|\p{Lu}[\p{L}\p{M}]*)"
_CAPITALISED = rf"{_PART}(?:[-’']{_PART})*"
NAME = regex.compile(rf"(?<![\p{{L}}\p{{N}}]){_CAPITALISED}(?:[ \t]+{_CAPITALISED})+(?![\p{{L}}\p{{N}}])")


def find_names(text: str) -> list[tuple[int, int, str]]:
    """Name phrases as (start, end, surface) by a left-to-right scan of original-case text.

    >>> find_names("Lothair II married Teutberga of Lotharingia.")
    [(0, 10, 'Lothair II')]
    """
    return [(m.start(), m.end(), m.group()) for m in NAME.finditer(text)]


# SPEC §1 "Sentences": '.', '!' or '?' plus whitespace ends a sentence unless it follows a
# lone capital (the initial in 'J. Smith'); newlines always split.
SENTENCE_BREAK = re.compile(r"(?<!\b[A-Z])[.!?]\s+|\n+")
# The same rule with the look-behind moved after the punctuation mark, so it is tried at
# '.', '!' and '?' only, not at every character: 2.5x faster, same splits (tested).
_SENTENCE_BREAK_FAST = re.compile(r"[.!?](?<!\b[A-Z][.!?])\s+|\n+")


def sentences(text: str) -> list[str]:
    """Sentences of a passage (empty pieces dropped).

    >>> sentences("J. Smith met Mr. Brown. They left!\\nNext")
    ['J. Smith met Mr', 'Brown', 'They left', 'Next']
    """
    return [s for s in _SENTENCE_BREAK_FAST.split(text) if s]


# ---- display: a term as the text writes it (never used by the engine) -----------------------
_WORD_SPAN = re.compile(r"\S+")
_EDGE_CHAR = regex.compile(r"[^\p{L}\p{N}\p{M}]")
# scripts written without spaces: a word boundary may fall between any two characters
_SPACELESS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def _trimmed(span: str) -> str:
    # '(Élodie' → 'Élodie', '3.5%.' → '3.5%': edge punctuation goes while the tokens stay the same
    tokens = tokenize(span)
    while len(span) > 1 and _EDGE_CHAR.match(span[0]) and tokenize(span[1:]) == tokens:
        span = span[1:]
    while len(span) > 1 and _EDGE_CHAR.match(span[-1]) and tokenize(span[:-1]) == tokens:
        span = span[:-1]
    return span


def _runs_in(tokens: tuple, want: tuple) -> bool:
    n = len(want)
    return any(tokens[i : i + n] == want for i in range(len(tokens) - n + 1))


def _boundary(text: str, inner: int, outer: int) -> bool:
    """Is the edge between text[inner] (in the span) and text[outer] (beside it) a word edge?"""
    if outer < 0 or outer >= len(text) or not _LETTER_OR_DIGIT.match(text[outer]):
        return True
    return bool(_SPACELESS.match(text[inner]) or _SPACELESS.match(text[outer]))


def _inside_word(word: str, want: tuple) -> str | None:
    """The shortest substring of one whitespace-free word whose tokens hold `want` and that
    starts and ends at word edges (Chinese '保存' in '系统保存role_id'); None when there is none."""
    low = normalize(word)
    if len(low) != len(word):  # normalisation changed the length: offsets would not line up
        return None
    starts = [m.start() for m in re.finditer(re.escape(want[0]), low)]
    ends = [m.end() for m in re.finditer(re.escape(want[-1]), low)]
    for _length, s, e in sorted((e - s, s, e) for s in starts for e in ends if e > s)[:200]:
        if _boundary(word, s, s - 1) and _boundary(word, e - 1, e) and _runs_in(tuple(tokenize(word[s:e])), want):
            return word[s:e]
    return None


@functools.lru_cache(maxsize=1 << 12)
def _words_of(text: str) -> tuple[list, frozenset]:
    """`text`'s words (start, end, tokens) and all their tokens: one text is asked about many terms."""
    words = [(m.start(), m.end(), tuple(tokenize(m.group()))) for m in _WORD_SPAN.finditer(text)]
    return words, frozenset(t for w in words for t in w[2])


@functools.lru_cache(maxsize=1 << 14)
def surface_form(term: str, text: str) -> str:
    """The span of `text` whose tokenisation gives the lexical term `term`, as `text` writes it;
    `term` itself when the text has none. For display only: terms, tokens and the engine are
    untouched. Tried in order: whole words whose tokens are exactly the term's; a piece of a
    word at word edges (scripts without spaces); the word(s) whose tokens contain the term
    (a fragment such as 'ț' shows the word it came from).

    >>> surface_form("é lodie marchetti", "A film by Élodie Marchetti (1998).")
    'Élodie Marchetti'
    >>> surface_form("jos é arriaga", "Directed by José Arriaga.")
    'José Arriaga'
    >>> surface_form("otto geb ü hr", "starring Otto Gebühr, 1925")
    'Otto Gebühr'
    >>> surface_form("ț", "born in Brațov in 1901")
    'Brațov'
    >>> surface_form("保存", "登录后系统保存role_id到会话。")
    '保存'
    >>> surface_form("中华人民共和国", "成立了中华人民共和国。")
    '中华人民共和国'
    >>> surface_form("lighthouse", "no such word here")
    'lighthouse'
    """
    want = tuple(term.split(" "))
    if not term or not text:
        return term
    words, tokens = _words_of(text)
    if not tokens.issuperset(want):  # every way below needs each of the term's tokens in some word
        return term
    # 1. whole words, tokens exactly the term's
    for i, (start, _, first) in enumerate(words):
        if not first or want[: len(first)] != first:
            continue
        acc: tuple = ()
        for _, end, toks in words[i:]:
            acc += toks
            if acc == want:
                return _trimmed(text[start:end])
            if want[: len(acc)] != acc:
                break
    # 2. a piece of one word, at word edges
    for start, end, toks in words:
        if _runs_in(toks, want):
            piece = _inside_word(text[start:end], want)
            if piece is not None:
                return piece
    # 3. the fewest whole words whose tokens contain the term
    for i in range(len(words)):
        acc = ()
        for j in range(i, min(len(words), i + len(want) + 2)):
            acc += words[j][2]
            if _runs_in(acc, want):
                inner = sum((w[2] for w in words[i + 1 : j + 1]), ())
                if i < j and _runs_in(inner, want):
                    break  # word i is not needed: a later start is shorter
                return _trimmed(text[words[i][0] : words[j][1]])
    return term
