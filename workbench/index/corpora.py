"""Corpus and question loaders: benchmark `corpus.json`, question `*.jsonl`, document folders.

>>> units = load_corpus("sample_corpora/encyclopedia/corpus.json")
>>> len(units), units[0].title, units[0].location
(169, 'Adèle Ferrand', 'item 0')
>>> docs = load_corpus("sample_corpora/internal_docs")   # a folder: paragraphs grouped into units
>>> len(docs), docs[0].document, docs[0].location
(24, 'CHANGELOG.md', 'lines 1-19')
>>> load_questions("sample_corpora/internal_docs.questions.jsonl")[0].gold
('auth/login.md', 'access/roles.md', 'api/gateway.md', 'api/permission_registry.md')
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from workbench.deprecation import keep_old_names
from workbench.index.readers import BEIR_CORPUS, BEIR_QRELS_DIR, BEIR_QUERIES, corpus_loader, questions_loader
from workbench.index.units import (
    DOCUMENT_SUFFIXES,
    UNIT_MAX_CHARS,
    CorpusError,
    Question,
    Unit,
    json_objects,
    json_problem,
)

# what a corpus is made of lives in workbench/index/units.py; older code imported it from here
# (readable with a DeprecationWarning; this module's own code uses the names as before)
keep_old_names(__name__, dict.fromkeys(["CorpusError", "Question", "Unit"], "workbench.index.units"))


def load_corpus(path: str | Path) -> list[Unit]:
    """Units from a benchmark `corpus.json`, a folder of .md/.txt documents, a JSON Lines
    corpus, a BEIR folder or `irds:NAME` (the last three: workbench/index/readers.py)."""
    if (loader := corpus_loader(path)) is not None:
        return loader()
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    if path.is_dir():
        return load_folder(path)
    return load_benchmark_corpus(path)


def load_benchmark_corpus(path: str | Path) -> list[Unit]:
    """`corpus.json`: a JSON list of {"title", "text"}; one unit per passage (SPEC §2)."""
    path = Path(path)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"{path}, line {exc.lineno}: not valid JSON at column {exc.colno}: {json_problem(exc)}"
        ) from None
    if not isinstance(items, list):
        raise CorpusError(f'{path}: expected a JSON list of {{"title", "text"}} objects, got {type(items).__name__}')
    if not items:
        raise CorpusError(f"{path}: the corpus is empty")
    first_seen: dict[str, int] = {}
    return [_benchmark_unit(item, i, path, first_seen) for i, item in enumerate(items)]


def _benchmark_unit(item, i: int, path: Path, first_seen: dict[str, int]) -> Unit:
    """Item `i` of a benchmark corpus as a unit, checked (`first_seen`: title -> item)."""
    where = f"{path}, item {i}"
    if not isinstance(item, dict):
        raise CorpusError(f'{where}: expected an object with "title" and "text", got {type(item).__name__}')
    for name in ("title", "text"):
        if name not in item:
            raise CorpusError(f'{where}: missing "{name}"')
        if not isinstance(item[name], str):
            raise CorpusError(f'{where}: "{name}" must be a string, got {type(item[name]).__name__}')
    # surrounding whitespace carries nothing (and would change what a judge is shown)
    title, text = item["title"].strip(), item["text"].strip()
    if not title.strip():
        raise CorpusError(f'{where}: empty "title"')
    if not text.strip():
        raise CorpusError(f'{where} ({title!r}): empty "text"')
    if title in first_seen:
        raise CorpusError(f"{where}: duplicate title {title!r} (first at item {first_seen[title]})")
    first_seen[title] = i
    return Unit(title=title, heading="", body=text, document=title, source=path.name, location=f"item {i}")


def iter_corpus(path: str | Path) -> Iterator[Unit]:
    """The units of `load_corpus(path)`, one at a time: a benchmark corpus.json is parsed
    incrementally (ijson) and a folder read file by file, so memory does not grow with
    the corpus. Errors are the same, raised when the stream reaches them.

    >>> sum(1 for _ in iter_corpus("sample_corpora/encyclopedia/corpus.json"))
    169
    """
    if (loader := corpus_loader(path)) is not None:  # JSON Lines, BEIR folders, irds: (read whole)
        yield from loader()
        return
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    if path.is_dir():
        yield from iter_folder(path)
    elif path.suffix.lower() == ".json":
        yield from iter_benchmark_corpus(path)
    else:
        yield from load_corpus(path)


def iter_benchmark_corpus(path: str | Path) -> Iterator[Unit]:
    """`load_benchmark_corpus`, streamed."""
    import ijson

    path = Path(path)
    first_seen: dict[str, int] = {}
    with open(path, "rb") as f:
        try:
            for i, item in enumerate(ijson.items(f, "item", use_float=True)):
                yield _benchmark_unit(item, i, path, first_seen)
        except (ijson.JSONError, UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, CorpusError):
                raise
            load_benchmark_corpus(path)  # the whole-file reader names the problem precisely
            raise CorpusError(f"{path}: not valid JSON ({exc})") from None
    if not first_seen:
        load_benchmark_corpus(path)  # not a list, or an empty one: the same message as there
        raise CorpusError(f"{path}: the corpus is empty")


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BLANK = re.compile(r"^\s*$")


def load_folder(root: str | Path) -> list[Unit]:
    """Every .md/.txt file under `root` (sorted), split into paragraph groups of <= 2,200 chars."""
    return list(iter_folder(root))


def folder_files(root: Path) -> list[Path]:
    """The document files of a folder, in index order (sorted paths). None is an error
    that says what the folder holds instead (a BEIR folder without its corpus.jsonl, or
    only files of kinds that are not read).

    >>> Path("papers").mkdir(); _ = Path("papers/a.pdf").write_bytes(b"%PDF")
    >>> folder_files(Path("papers"))
    Traceback (most recent call last):
    ...
    workbench.index.units.CorpusError: papers: no .md or .txt files found (skipped 1 file of another kind: a.pdf; ...
    """
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES)
    if not files:
        beir = [name for name in (BEIR_QUERIES, BEIR_QRELS_DIR) if (root / name).exists()]
        if beir:
            raise CorpusError(
                f"{root}: a BEIR folder (it has {' and '.join(beir)}) needs {root / BEIR_CORPUS}, which is missing; "
                f'put the corpus there as {BEIR_CORPUS} (one {{"_id", "title", "text"}} per line)'
            )
        other = skipped_files(root)
        found = (
            f" (skipped {len(other)} file{'s' if len(other) != 1 else ''} of another kind: {_names(other)}; "
            "only .md and .txt are read: convert them to text first)"
            if other
            else ""
        )
        raise CorpusError(f"{root}: no .md or .txt files found{found}")
    return files


def skipped_files(root: Path) -> list[str]:
    """Files under `root` that a folder index does not read (.pdf, .docx, ...), relative,
    sorted; hidden files and folders (.git, .DS_Store) are not listed.

    >>> Path("own/.git").mkdir(parents=True); _ = Path("own/.git/HEAD").write_text("ref")
    >>> for name in ("notes.md", "a.pdf", "b.docx"):
    ...     _ = Path("own", name).write_text("text")
    >>> skipped_files(Path("own"))
    ['a.pdf', 'b.docx']
    """
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if (
            p.is_file()
            and p.suffix.lower() not in DOCUMENT_SUFFIXES
            and not any(s.startswith(".") for s in rel.split("/"))
        ):
            out.append(rel)
    return sorted(out)


def _names(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def file_units(root: Path, file: Path) -> list[Unit]:
    rel = file.relative_to(root).as_posix()
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{rel}: not UTF-8 ({exc.reason} at byte {exc.start}); convert it or remove it") from None
    return document_units(text, rel)


def iter_folder(root: str | Path) -> Iterator[Unit]:
    """`load_folder`, one file at a time."""
    root = Path(root)
    for file in folder_files(root):
        yield from file_units(root, file)


def _paragraphs(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each blank-line separated paragraph, 1-based lines."""
    out, start = [], None
    for n, line in enumerate([*lines, ""], start=1):
        if _BLANK.match(line):
            if start is not None:
                out.append((start, n - 1, "\n".join(lines[start - 1 : n - 1])))
                start = None
        elif start is None:
            start = n
    return out


def document_units(text: str, rel_path: str) -> list[Unit]:
    """Units of one document: adjacent paragraphs grouped while the unit stays <= 2,200 chars;
    a single longer paragraph stays whole (SPEC §2). Title = first Markdown H1, else the file stem."""
    lines = text.splitlines()
    paragraphs = _paragraphs(lines)
    if not paragraphs:
        return []
    title = Path(rel_path).stem
    for line in lines:
        m = _HEADING.match(line)
        if m and len(m.group(1)) == 1:
            title = m.group(2)
            break
    # heading in effect at each paragraph: the path of Markdown headings above it
    heading_path: list[str] = []
    groups: list[list[tuple[int, int, str, str]]] = []
    for first, last, para in paragraphs:
        m = _HEADING.match(para.splitlines()[0])
        if m:
            level = len(m.group(1))
            heading_path = [*heading_path[: level - 1], m.group(2)]
        heading = " > ".join(heading_path)
        current = groups[-1] if groups else None
        if current is not None and len("\n\n".join(p[2] for p in current)) + 2 + len(para) <= UNIT_MAX_CHARS:
            current.append((first, last, para, heading))
        else:
            groups.append([(first, last, para, heading)])
    return [
        Unit(
            title=title,
            heading=group[0][3],
            body="\n\n".join(p[2] for p in group),
            document=rel_path,
            source=rel_path,
            location=f"lines {group[0][0]}-{group[-1][1]}",
        )
        for group in groups
    ]


def find_questions(corpus: str | Path) -> Path | None:
    """The questions file that goes with a corpus when none is given: `<folder>.questions.jsonl`
    beside it (so indexing the folder does not index them), then `questions.jsonl` inside or beside.

    >>> Path("docs").mkdir(); _ = Path("docs.questions.jsonl").write_text("")
    >>> find_questions("docs")
    PosixPath('docs.questions.jsonl')
    """
    path = Path(corpus)
    for candidate in (
        path.with_name(path.name + ".questions.jsonl"),
        path / "questions.jsonl",
        path.parent / "questions.jsonl",
    ):
        if candidate.is_file():
            return candidate
    return None


def load_questions(path: str | Path, split: str | None = None) -> list[Question]:
    """`*.jsonl`: one {"_id", "question", "supporting_titles", "type"?, "hops"?, "answer"?} per line;
    also a BEIR folder (`split`: its qrels/SPLIT.tsv), a TREC folder or `irds:NAME` (workbench/index/readers.py)."""
    if (loader := questions_loader(path, split)) is not None:
        return loader()
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such questions file")
    questions: list[Question] = []
    seen: dict[str, int] = {}  # id -> its line
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    for n, item in json_objects(path, lines):
        where = f"{path}, line {n}"
        for name in ("_id", "question"):
            if name not in item:
                raise CorpusError(f'{where}: missing "{name}"')
        if not isinstance(item["question"], str):
            raise CorpusError(f'{where}: "question" must be a string, not {_json_kind(item["question"])}')
        if isinstance(item["_id"], bool) or not isinstance(item["_id"], (str, int)):
            raise CorpusError(f'{where}: "_id" must be a string or an integer, not {_json_kind(item["_id"])}')
        gold = item.get("supporting_titles", [])
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            raise CorpusError(f'{where}: "supporting_titles" must be a list of strings')
        qid = str(item["_id"])
        if qid in seen:
            raise CorpusError(f"{where}: duplicate _id {qid!r} (first at line {seen[qid]}); each _id must be unique")
        seen[qid] = n
        hops = item.get("hops")
        if hops is None:
            m = re.match(r"(\d)hop", qid)
            hops = int(m.group(1)) if m else None
        questions.append(
            Question(
                id=qid,
                question=str(item["question"]),
                gold=tuple(dict.fromkeys(gold)),
                type=item.get("type"),
                hops=hops,
                answer=item.get("answer") if isinstance(item.get("answer"), str) else None,
                line=n,
            )
        )
    if not questions:
        raise CorpusError(f"{path}: no questions")
    return questions


def _json_kind(value) -> str:
    """How a JSON value reads in an error message: null, a list, an object, a number, true/false."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {list: "a list", dict: "an object", int: "a number", float: "a number"}.get(type(value), repr(value))


def check_gold(questions: list[Question], documents: set[str], path: str | Path = "questions") -> None:
    """Refuse gold labels that name no document of the index, naming the question."""
    for q in questions:
        unknown = [g for g in q.gold if g not in documents]
        if unknown:
            raise CorpusError(
                f"{path}, line {q.line} (question {q.id!r}): unknown gold title(s) {unknown!r} (not in the index)"
            )
