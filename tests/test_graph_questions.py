"""The corpus graph's questions tokenized in bulk (`graph_questions`, `graph_chunks`: one look-up
per distinct chunk, the compiled passes or their Python twin) equal `passage_tokens` per passage:
the same tokens in the same order, cut at the same place, and the vocabulary in the order of first
use, on passages with repeated tokens, Chinese text, titles and headings, joiners, white space
other than the space, and questions below and above the cut."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.feedback import graph_chunks, graph_questions, graph_scoring
from workbench.index import Index
from workbench.index.units import Unit

# (title, heading, body): hand-checked questions for query_tokens=5 below
PASSAGES = [
    ("Harbour Glass", "", "The harbour boats: glass, harbour, boats and GLASS again."),
    ("登录系统", "", "用户登录系统后可以修改密码。登录失败三次会锁定。"),
    ("Rates", "Tables", "3.5% of a.b-c smith's Café\u2028quay\u0085pier\u1680dock\u3000mole"),
    ("Long", "", " ".join(f"w{i}" for i in range(100)) + " long w0"),
    ("The", "", "the of and"),  # no token at all: an empty question
]
EXPECTED_5 = [
    ["harbour", "glass", "boats", "again"],
    ["登录", "系统", "用户", "后", "可以"],
    ["rates", "tables", "3.5%", "a.b-c", "smith"],
    ["long", "w0", "w1", "w2", "w3"],
    [],
]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Index:
    units = [Unit(title=t, heading=h, body=b, document=t, source="inline", location="") for t, h, b in PASSAGES]
    return Index.build(units, tmp_path_factory.mktemp("questions") / "q.sqlite")


@pytest.fixture(params=["compiled", "python"])
def path(request, monkeypatch):
    if request.param == "compiled" and graph_chunks.load() is None:
        pytest.skip("no compiled kernel (SAG2WB_GRAPH_KERNEL=numpy or no C compiler)")
    if request.param == "python":
        monkeypatch.setattr(graph_chunks, "load", lambda: None)
    return request.param


def _texts(questions) -> list[list[str]]:
    return [[questions.vocabulary[p] for p in questions.of(i).tolist()] for i in range(len(questions.ids))]


def _definition(index: Index, ids, query_tokens: int) -> tuple[list[list[str]], list[str]]:
    """passage_tokens per passage, and the vocabulary in order of first use."""
    texts = [graph_scoring.passage_tokens(u, query_tokens) for u in index.units(ids)]
    return texts, list(dict.fromkeys(t for text in texts for t in text))


@pytest.mark.parametrize("query_tokens", [5, 80])
def test_questions_equal_passage_tokens(index, path, query_tokens):
    ids = np.array(sorted(index.documents), dtype=np.int64)
    questions = graph_scoring.questions_of(index, ids, query_tokens, 1)
    texts, vocabulary = _definition(index, ids.tolist(), query_tokens)
    assert _texts(questions) == texts
    assert questions.vocabulary == vocabulary
    assert questions.phrases.dtype == np.int32 and questions.offsets[0] == 0
    if query_tokens == 5:
        assert texts == EXPECTED_5  # by hand: repeats once, the title first, stopwords out
    else:
        assert len(texts[3]) == 80 and texts[3][:3] == ["long", "w0", "w1"] and texts[3][-1] == "w78"
        rates = ["rates", "tables", "3.5%", "a.b-c", "smith", "s", "caf", "é", "quay", "pier", "dock", "mole"]
        assert texts[2] == rates


def test_a_subset_of_ids_and_two_workers(index, path):
    ids = np.array(sorted(index.documents)[1:4], dtype=np.int64)
    texts, vocabulary = _definition(index, ids.tolist(), 80)
    for workers in (1, 2):  # 2: two forked processes, each a run of the ids on its own connection
        questions = graph_scoring.questions_of(index, ids, 80, workers)
        assert _texts(questions) == texts and questions.vocabulary == vocabulary


def test_the_chunk_table_splits_where_str_split_does():
    """Every code point `str.isspace` names splits, and no other (multi-byte neighbours of the
    white space ones: U+2027, U+2030, U+205E, U+1681, U+3001, U+00A1, a 4-byte emoji)."""
    lib = graph_chunks.load()
    if lib is None:
        pytest.skip("no compiled kernel")
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert len(spaces) == 29
    others = ["\u2027", "\u2030", "\u205e", "\u1681", "\u3001", "\u00a1", "\U0001f600", "é", "中"]
    words = [f"w{i}{others[i % len(others)]}x" for i in range(200)]
    text = "".join(w + spaces[i % len(spaces)] * (1 + i % 2) for i, w in enumerate(words))
    data = text.encode()
    starts = np.array([0, len(data)], dtype=np.int64)
    table = graph_chunks.ChunkTable(lib)
    slots, ends, at, size = table.pending(data, starts)
    assert [data[a : a + n].decode() for a, n in zip(at.tolist(), size.tolist(), strict=True)] == text.split()
    assert ends.tolist() == [len(words)]
    # found again: no chunk pending, the same slots
    slots2, _, at2, _ = table.pending(data, starts)
    assert len(at2) == 0 and slots2[: len(words)].tolist() == slots[: len(words)].tolist()


def test_a_table_grown_midway_and_one_emptied(tmp_path, path, monkeypatch):
    """40k distinct chunks in one batch (the table grows past 32k entries midway and the batch is
    gone over again), and a table emptied every few passages: the same questions."""
    rng = np.random.default_rng(7)
    passages = [
        (f"T{i}", "", " ".join(f"z{x}" for x in rng.integers(0, 60_000, size=int(rng.integers(1, 200)))))
        for i in range(700)
    ]
    units = [Unit(title=t, heading=h, body=b, document=t, source="inline", location="") for t, h, b in passages]
    index = Index.build(units, tmp_path / "many.sqlite")
    ids = np.array(sorted(index.documents), dtype=np.int64)
    texts, vocabulary = _definition(index, ids.tolist(), 80)
    monkeypatch.setattr(graph_questions, "BATCH", 1000)
    questions = graph_scoring.questions_of(index, ids, 80, 1)
    assert _texts(questions) == texts and questions.vocabulary == vocabulary
    monkeypatch.setattr(graph_questions, "BATCH", 7)
    monkeypatch.setattr(graph_questions, "CHUNKS_LIMIT", 50)
    questions = graph_scoring.questions_of(index, ids, 80, 1)
    assert _texts(questions) == texts and questions.vocabulary == vocabulary
