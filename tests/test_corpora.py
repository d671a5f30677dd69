"""Corpus and question loading: formats and the errors that name file and item."""

import json
import re

import pytest

from workbench.index.corpora import check_gold, document_units, load_corpus, load_folder, load_questions
from workbench.index.units import CorpusError


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_benchmark_corpus_one_unit_per_passage(tmp_path):
    f = write(tmp_path / "corpus.json", json.dumps([{"title": "A", "text": "x"}, {"title": "B", "text": "y"}]))
    units = load_corpus(f)
    assert [(u.title, u.body, u.document, u.location) for u in units] == [
        ("A", "x", "A", "item 0"),
        ("B", "y", "B", "item 1"),
    ]


@pytest.mark.parametrize(
    "content, message",
    [
        ('[{"title": "A", "text": "x"},', "not valid JSON"),
        ('{"title": "A"}', "expected a JSON list"),
        ("[]", "the corpus is empty"),
        ('[{"title": "A", "text": "x"}, {"title": "B"}]', 'item 1: missing "text"'),
        ('[{"text": "x"}]', 'item 0: missing "title"'),
        ('[{"title": "A", "text": "  "}]', "item 0 ('A'): empty \"text\""),
        ('[{"title": "A", "text": 3}]', '"text" must be a string'),
        ('[{"title": "A", "text": "x"}, {"title": "A", "text": "y"}]', "item 1: duplicate title 'A' (first at item 0)"),
        ('["just a string"]', "item 0: expected an object"),
    ],
)
def test_malformed_corpus_errors_name_file_and_item(tmp_path, content, message):
    f = write(tmp_path / "corpus.json", content)
    with pytest.raises(CorpusError) as err:
        load_corpus(f)
    assert str(f) in str(err.value) and message in str(err.value)


def test_missing_corpus(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        load_corpus(tmp_path / "nope.json")


def test_folder_groups_paragraphs_up_to_2200_chars_and_keeps_lines(tmp_path):
    para = "word " * 100  # 500 chars
    text = "# Title Here\n\n" + "\n\n".join([para.strip()] * 6) + "\n"
    write(tmp_path / "docs" / "a.md", text)
    units = load_folder(tmp_path / "docs")
    assert all(len(u.body) <= 2200 for u in units)
    # heading (12) + 4 paragraphs of 499 joined by blank lines = 2,016 chars; a fifth would make 2,517
    assert [u.location for u in units] == ["lines 1-9", "lines 11-13"]
    assert units[0].title == "Title Here" and units[0].document == "a.md" and units[0].heading == "Title Here"


def test_oversized_paragraph_stays_whole(tmp_path):
    big = "x" * 3000
    units = document_units(f"small\n\n{big}\n\nafter", "b.txt")
    assert [len(u.body) for u in units] == [5, 3000, 5]
    assert units[0].title == "b"  # no H1: the file stem


def test_heading_path_follows_markdown_sections(tmp_path):
    units = document_units("# Top\n\n## Sub\n\n" + "p " * 1200 + "\n\n### Deeper\n\ntext", "c.md")
    assert units[-1].heading == "Top > Sub > Deeper"


def test_non_utf8_file_in_folder_is_named(tmp_path):
    write(tmp_path / "docs" / "good.md", "fine")
    write(tmp_path / "docs" / "sub" / "bad.txt", "caf\xe9".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"sub/bad.txt: not UTF-8"):
        load_folder(tmp_path / "docs")


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match=re.escape("no .md or .txt files")):
        load_corpus(tmp_path / "empty")


def test_questions_file(tmp_path):
    f = write(
        tmp_path / "q.jsonl",
        "\n".join(
            [
                json.dumps(
                    {"_id": "2hop__1", "question": "Q1?", "supporting_titles": ["A", "B"], "type": "compositional"}
                ),
                "",
                json.dumps({"_id": "x", "question": "Q2?", "supporting_titles": ["A"], "hops": 1, "answer": "yes"}),
            ]
        ),
    )
    qs = load_questions(f)
    assert [(q.id, q.gold, q.hops, q.type, q.line) for q in qs] == [
        ("2hop__1", ("A", "B"), 2, "compositional", 1),
        ("x", ("A",), 1, None, 3),
    ]


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"question": "q"}', 'line 1: missing "_id"'),
        ('{"_id": 1}', 'line 1: missing "question"'),
        ('{"_id": 1, "question": "q", "supporting_titles": "A"}', "must be a list of strings"),
        ("not json", "line 1: not valid JSON"),
    ],
)
def test_bad_questions_name_the_line(tmp_path, line, message):
    f = write(tmp_path / "q.jsonl", line)
    with pytest.raises(CorpusError, match=message):
        load_questions(f)


def test_unknown_gold_title_names_the_line(tmp_path):
    f = write(
        tmp_path / "q.jsonl",
        json.dumps({"_id": "a", "question": "q", "supporting_titles": ["A"]})
        + "\n"
        + json.dumps({"_id": "b", "question": "q", "supporting_titles": ["Nope"]}),
    )
    with pytest.raises(CorpusError, match=r"line 2 \(question 'b'\): unknown gold title\(s\) \['Nope'\]"):
        check_gold(load_questions(f), {"A"}, f)
