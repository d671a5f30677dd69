"""Reading the IR toolbox's file formats: BEIR folders, JSON Lines corpora, TREC topics,
qrels and run files, and ir_datasets, as the workbench's `Unit`s and `Question`s;
`corpora.load_corpus` / `load_questions` dispatch to them (`corpus_loader`, `questions_loader`).
Writing these formats and `sag2wb convert` are in workbench/formats.py, which re-exports
everything here.

Identities. A workbench document is named by `Unit.document` (the title in a `corpus.json`,
the relative path in a folder of documents); gold labels, R@k and every file the workbench
writes use that name as the `docno`. A BEIR corpus names its documents by `_id`, so a BEIR folder
loads with `document = _id` (the title stays the title), and a workbench corpus converts to
BEIR with `_id = document`, which makes corpus.json -> BEIR -> corpus.json exact.

TREC files split lines on whitespace, and Wikipedia titles have spaces, so in TREC run and
qrels files, and in the ids of a BEIR folder (whose qrels TSV ir_datasets also splits on
whitespace), a qid or docno has whitespace and `%` percent-encoded (`Glass%20Harbour`);
readers decode them. A workbench JSON Lines corpus keeps names as they are.

>>> units = load_beir_corpus(enc_beir)          # enc_beir: the encyclopedia as a BEIR folder
>>> questions = load_beir_questions(enc_beir, split="test")
>>> len(units), units[0].document, questions[0].gold
(169, 'Adèle Ferrand', ('Glass Harbour', 'Élodie Marchetti'))
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal, overload
from urllib.parse import unquote

from workbench.index.units import CorpusError, Question, Unit, json_objects
from workbench.safeio import InputError

BEIR_CORPUS = "corpus.jsonl"
BEIR_QUERIES = "queries.jsonl"
BEIR_QRELS_DIR = "qrels"
TREC_TOPICS = "topics.tsv"
TREC_QRELS = "qrels.txt"
IRDS_PREFIX = "irds:"


class FormatError(CorpusError, InputError):
    """A BEIR / JSONL / TREC / ir_datasets input that cannot be used, naming the file and line."""


# ---- names inside whitespace-separated TREC files ---------------------------------------------
_ENCODE = re.compile(r"[%\s]")


def encode_id(name: str) -> str:
    """A qid/docno safe in a TREC line: whitespace and '%' percent-encoded.

    >>> encode_id("Glass Harbour"), encode_id("100% Élodie")
    ('Glass%20Harbour', '100%25%20Élodie')
    """
    return _ENCODE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), name)


def decode_id(token: str) -> str:
    """Inverse of `encode_id` (UTF-8 percent escapes; a docno from another tool with a literal
    `%XX` in it would be decoded too, which TREC names practically never contain).

    >>> decode_id("100%25%20%C3%89lodie"), decode_id("Glass_Harbour")
    ('100% Élodie', 'Glass_Harbour')
    """
    return unquote(token) if "%" in token else token


# ---- reading helpers ---------------------------------------------------------------------------
def _read_lines(path: Path, what: str) -> list[str]:
    if not path.exists():
        raise FormatError(f"{path}: no such {what}")
    if path.is_dir():
        raise FormatError(f"{path}: is a folder, expected a {what}")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _json_lines(path: Path, what: str):
    """(line number, object) for every non-blank line of a JSON Lines file."""
    return json_objects(path, _read_lines(path, what), FormatError)


@overload
def _string_field(item: dict, name: str, where: str, required: Literal[True] = True) -> str: ...


@overload
def _string_field(item: dict, name: str, where: str, required: bool) -> str | None: ...


def _string_field(item: dict, name: str, where: str, required: bool = True) -> str | None:
    if name not in item:
        if required:
            raise FormatError(f'{where}: missing "{name}"')
        return None
    value = item[name]
    if isinstance(value, int) and not isinstance(value, bool) and name == "_id":
        return str(value)  # some BEIR exports write numeric ids
    if not isinstance(value, str):
        raise FormatError(f'{where}: "{name}" must be a string, got {type(value).__name__}')
    return value


# ---- corpora -----------------------------------------------------------------------------------
def load_jsonl_corpus(path: str | Path, *, require_id: bool = False, encoded_ids: bool = False) -> list[Unit]:
    """A JSON Lines corpus, one passage per line: {"_id"?, "title", "text"}.

    With `_id` (BEIR style) the document is named by it and the title may be empty (the id
    then stands in as the displayed title); without it the title names the document, as in
    corpus.json. One unit per line (benchmark passages are not split, SPEC §2).
    `encoded_ids`: the ids are percent-encoded (a BEIR folder's, see the module docstring).

    >>> _ = Path("corpus.jsonl").write_text('{"title": "Glass Harbour", "text": "A film."}\\n', encoding="utf-8")
    >>> load_jsonl_corpus("corpus.jsonl")[0].document
    'Glass Harbour'
    >>> load_jsonl_corpus(enc_beir / "corpus.jsonl", encoded_ids=True)[0].document   # named by _id
    'Adèle Ferrand'
    """
    path = Path(path)
    units: list[Unit] = []
    first_seen: dict[str, int] = {}
    for n, item in _json_lines(path, "JSON Lines corpus"):
        where = f"{path}, line {n}"
        doc_id = _string_field(item, "_id", where, required=require_id)
        title = _string_field(item, "title", where, required=doc_id is None)
        text = _string_field(item, "text", where)
        title, text = (title or "").strip(), text.strip()
        if doc_id is not None:
            doc_id = decode_id(doc_id.strip()) if encoded_ids else doc_id.strip()
            if not doc_id:
                raise FormatError(f'{where}: empty "_id"')
        elif not title:
            raise FormatError(f'{where}: empty "title" (and no "_id" to name the document)')
        if not text:
            raise FormatError(f'{where} ({doc_id or title!r}): empty "text"')
        document = doc_id if doc_id is not None else title
        if document in first_seen:
            key = "_id" if doc_id is not None else "title"
            raise FormatError(f"{where}: duplicate {key} {document!r} (first at line {first_seen[document]})")
        first_seen[document] = n
        units.append(
            Unit(
                title=title or document,
                heading="",
                body=text,
                document=document,
                source=path.name,
                location=f"line {n}",
            )
        )
    if not units:
        raise FormatError(f"{path}: the corpus is empty")
    return units


def is_beir_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and any((path / name).is_file() for name in (BEIR_CORPUS, BEIR_QUERIES))


def load_beir_corpus(folder: str | Path) -> list[Unit]:
    """The documents of a BEIR folder (`corpus.jsonl`: {"_id", "title", "text", "metadata"?})."""
    folder = Path(folder)
    corpus = folder / BEIR_CORPUS
    if not corpus.is_file():
        raise FormatError(f"{folder}: a BEIR folder needs {BEIR_CORPUS} (found: {_listing(folder)})")
    return load_jsonl_corpus(corpus, require_id=True, encoded_ids=True)


def _listing(folder: Path) -> str:
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()) if folder.is_dir() else []
    return ", ".join(names[:8]) + (" ..." if len(names) > 8 else "") if names else "nothing"


# ---- questions ---------------------------------------------------------------------------------
def qrels_split_path(folder: Path, split: str | None) -> Path:
    """The BEIR qrels file for `split`; without one, `test` or the only split present."""
    qdir = folder / BEIR_QRELS_DIR
    splits = sorted(p.stem for p in qdir.glob("*.tsv")) if qdir.is_dir() else []
    if split is not None:
        path = qdir / f"{split}.tsv"
        if not path.is_file():
            raise FormatError(f"{path}: no qrels for split {split!r} (splits present: {', '.join(splits) or 'none'})")
        return path
    if not splits:
        raise FormatError(f"{folder}: a BEIR folder needs {BEIR_QRELS_DIR}/SPLIT.tsv for the gold labels (none found)")
    if "test" in splits:
        return qdir / "test.tsv"
    if len(splits) == 1:
        return qdir / f"{splits[0]}.tsv"
    raise FormatError(f"{folder}: several qrels splits ({', '.join(splits)}); choose one with --split")


def read_beir_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV (`query-id<TAB>corpus-id<TAB>score`, header optional) -> {qid: {docid: score}}."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate(_read_lines(path, "BEIR qrels file"), start=1):
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        fields = line.split("\t") if "\t" in line else line.split()  # BEIR writes tabs; some copies spaces
        if n == 1 and fields[:2] == ["query-id", "corpus-id"]:
            continue
        if len(fields) != 3:
            raise FormatError(
                f"{path}, line {n}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}"
            )
        qid, docid, score = (decode_id(f.strip()) for f in fields)
        rel = _number(score, int, f"{path}, line {n}: score")
        qrels.setdefault(qid, {})[docid] = rel
    return qrels


def _question(qid: str, text: str, gold, metadata: dict, line: int) -> Question:
    hops = metadata.get("hops")
    return Question(
        id=qid,
        question=text,
        gold=tuple(dict.fromkeys(gold)),
        type=metadata.get("type") if isinstance(metadata.get("type"), str) else None,
        hops=hops if isinstance(hops, int) else None,
        answer=metadata.get("answer") if isinstance(metadata.get("answer"), str) else None,
        line=line,
    )


def load_beir_questions(folder: str | Path, split: str | None = None) -> list[Question]:
    """The questions of a BEIR split: queries named in `qrels/SPLIT.tsv`, in queries.jsonl
    order; gold = documents with score > 0 (graded relevance is binarised, as R@k counts it).

    >>> qs = load_beir_questions(enc_beir, split="test")   # enc_beir: the encyclopedia as a BEIR folder
    >>> qs[0].id, qs[0].gold, qs[0].type
    ('enc-01', ('Glass Harbour', 'Élodie Marchetti'), 'compositional')
    """
    folder = Path(folder)
    queries = folder / BEIR_QUERIES
    if not queries.is_file():
        raise FormatError(f"{folder}: a BEIR folder needs {BEIR_QUERIES} (found: {_listing(folder)})")
    qrels_path = qrels_split_path(folder, split)
    qrels = read_beir_qrels(qrels_path)
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for n, item in _json_lines(queries, "BEIR queries file"):
        where = f"{queries}, line {n}"
        qid = decode_id(_string_field(item, "_id", where))
        text = _string_field(item, "text", where)
        if qid in seen:
            raise FormatError(f"{where}: duplicate _id {qid!r} (first at line {seen[qid]})")
        seen[qid] = n
        if qid not in qrels:
            continue  # a query of another split
        metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        gold = [d for d, rel in qrels[qid].items() if rel > 0]
        questions.append(_question(qid, text, gold, metadata, n))
    unknown = [q for q in qrels if q not in seen]
    if unknown:
        raise FormatError(f"{qrels_path}: query id(s) {unknown[:5]!r} are not in {queries}")
    if not questions:
        raise FormatError(f"{qrels_path}: no questions (the split names no query of {queries})")
    return questions


def _trec_lines(path: Path, kind: str, layout: str):
    """(line number, fields) of a whitespace-separated TREC file, every line with the fields of `layout`."""
    names = layout.split()
    for n, line in enumerate(_read_lines(path, f"TREC {kind} file"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != len(names):
            raise FormatError(f"{path}, line {n}: a {kind} line has {len(names)} fields ({layout}), got {len(fields)}")
        yield n, fields


def _number(text: str, kind: type, what: str):
    """An int or a finite float, or a named error (`what` says where and which field)."""
    try:
        value = kind(text)
    except ValueError:
        raise FormatError(f"{what} {text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not math.isfinite(value):
        raise FormatError(f"{what} {text!r} is not finite")
    return value


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels (`qid iteration docno relevance`, 4 whitespace-separated fields) -> {qid: {docno: rel}}.

    >>> _ = Path("gold.qrels").write_text("enc-01 0 Glass%20Harbour 1\\nenc-01 0 Élodie%20Marchetti 1\\n",
    ...                                   encoding="utf-8")
    >>> read_trec_qrels("gold.qrels")["enc-01"]
    {'Glass Harbour': 1, 'Élodie Marchetti': 1}
    """
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for n, fields in _trec_lines(path, "qrels", "qid iteration docno relevance"):
        rel = _number(fields[3], int, f"{path}, line {n}: relevance")
        qid, docno = decode_id(fields[0]), decode_id(fields[2])
        docs = qrels.setdefault(qid, {})
        if docno in docs:
            raise FormatError(f"{path}, line {n}: docno {docno!r} judged twice for qid {qid!r}")
        docs[docno] = rel
    if not qrels:
        raise FormatError(f"{path}: no qrels lines")
    return qrels


def read_topics_tsv(path: str | Path) -> dict[str, str]:
    """`qid<TAB>query` lines (PyTerrier's and ir_datasets' plain topics) -> {qid: query}."""
    path = Path(path)
    topics: dict[str, str] = {}
    for n, line in enumerate(_read_lines(path, "topics file"), start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 2:
            raise FormatError(f"{path}, line {n}: expected qid<TAB>query, got {len(fields)} tab-separated fields")
        qid = fields[0].strip()
        if qid in topics:
            raise FormatError(f"{path}, line {n}: duplicate qid {qid!r}")
        topics[qid] = fields[1]
    if not topics:
        raise FormatError(f"{path}: no topics")
    return topics


def load_trec_questions(folder: str | Path) -> list[Question]:
    """A TREC folder as `convert --to trec` writes it: topics.tsv + qrels.txt (gold = rel > 0).

    >>> Path("enc-trec").mkdir()
    >>> _ = Path("enc-trec/topics.tsv").write_text("enc-01\\tWhere was the director of Glass Harbour born?\\n")
    >>> _ = Path("enc-trec/qrels.txt").write_text("enc-01 0 Glass%20Harbour 1\\nenc-01 0 Élodie%20Marchetti 1\\n",
    ...                                           encoding="utf-8")
    >>> load_trec_questions("enc-trec")[0].gold
    ('Glass Harbour', 'Élodie Marchetti')
    """
    folder = Path(folder)
    topics = read_topics_tsv(folder / TREC_TOPICS)
    qrels_path = folder / TREC_QRELS
    qrels = read_trec_qrels(qrels_path) if qrels_path.exists() else {}
    unknown = [q for q in qrels if q not in topics]
    if unknown:
        raise FormatError(f"{qrels_path}: qid(s) {unknown[:5]!r} are not in {folder / TREC_TOPICS}")
    return [
        _question(qid, text, [d for d, r in qrels.get(qid, {}).items() if r > 0], {}, n)
        for n, (qid, text) in enumerate(topics.items(), start=1)
    ]


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, int, float]]]:
    """TREC run (`qid Q0 docno rank score tag`) -> {qid: [(docno, rank, score), ...]} ordered
    as trec_eval reads it (score descending, ties by docno descending). Refuses duplicate
    docnos within a qid, naming both lines.

    >>> _ = Path("sag2.trec").write_text("enc-01 Q0 Porto%20Calven 2 99 sag2\\nenc-01 Q0 Glass%20Harbour 1 100 sag2\\n")
    >>> read_trec_run("sag2.trec")["enc-01"]
    [('Glass Harbour', 1, 100.0), ('Porto Calven', 2, 99.0)]
    """
    path = Path(path)
    run: dict[str, list[tuple[str, int, float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for n, fields in _trec_lines(path, "run", "qid Q0 docno rank score tag"):
        qid, docno = decode_id(fields[0]), decode_id(fields[2])
        rank = _number(fields[3], int, f"{path}, line {n}: rank")
        score = _number(fields[4], float, f"{path}, line {n}: score")
        if (qid, docno) in seen:
            raise FormatError(
                f"{path}, line {n}: duplicate docno {docno!r} for qid {qid!r} (first at line {seen[qid, docno]})"
            )
        seen[qid, docno] = n
        run.setdefault(qid, []).append((docno, rank, score))
    if not run:
        raise FormatError(f"{path}: no run lines")
    for rows in run.values():
        rows.sort(key=lambda r: (r[2], r[0]), reverse=True)
    return run


# ---- ir_datasets -------------------------------------------------------------------------------
def _irds(name: str):
    try:
        import ir_datasets
    except ImportError:
        raise FormatError(
            f"{IRDS_PREFIX}{name}: ir_datasets is not installed (pip install 'sag2-workbench[pyterrier]')"
        ) from None
    try:
        return ir_datasets.load(name)
    except KeyError:
        raise FormatError(f"{IRDS_PREFIX}{name}: ir_datasets knows no dataset {name!r}") from None


def load_irds(name: str) -> list[Question]:
    """Questions of an ir_datasets dataset (queries with qrels; gold = relevance > 0). The
    dataset's files must be available locally (ir_datasets downloads them on first use).

    >>> qs = load_irds("sag2wb/encyclopedia")   # a local one (conftest.py); e.g. beir/hotpotqa/test downloads
    >>> len(qs), qs[0].gold                     # ir_datasets keeps the files' ids, encoded here
    (40, ('Glass%20Harbour', 'Élodie%20Marchetti'))
    """
    ds = _irds(name)
    if not (ds.has_queries() and ds.has_qrels()):
        raise FormatError(f"{IRDS_PREFIX}{name}: the dataset has no queries with qrels")
    try:
        gold: dict[str, list[str]] = {}
        for qrel in ds.qrels_iter():
            if qrel.relevance > 0:
                gold.setdefault(qrel.query_id, []).append(qrel.doc_id)
        questions = [
            _question(q.query_id, q.text, gold[q.query_id], {}, n)
            for n, q in enumerate(ds.queries_iter(), start=1)
            if q.query_id in gold
        ]
    except (OSError, ConnectionError) as exc:
        raise FormatError(
            f"{IRDS_PREFIX}{name}: its files are not available here ({type(exc).__name__}: {exc})"
        ) from None
    if not questions:
        raise FormatError(f"{IRDS_PREFIX}{name}: no query has a positive qrel")
    return questions


def load_irds_corpus(name: str) -> list[Unit]:
    """Documents of an ir_datasets dataset: `document = doc_id`, title when the dataset has one.

    >>> load_irds_corpus("sag2wb/encyclopedia")[0].document   # a local one (conftest.py)
    'Adèle%20Ferrand'
    """
    ds = _irds(name)
    if not ds.has_docs():
        raise FormatError(f"{IRDS_PREFIX}{name}: the dataset has no documents")
    units = []
    try:
        for n, doc in enumerate(ds.docs_iter(), start=1):
            text = (getattr(doc, "text", None) or getattr(doc, "body", "") or "").strip()
            if not text:
                continue
            title = (getattr(doc, "title", "") or "").strip() or doc.doc_id
            units.append(
                Unit(
                    title=title,
                    heading="",
                    body=text,
                    document=doc.doc_id,
                    source=f"{IRDS_PREFIX}{name}",
                    location=f"doc {n}",
                )
            )
    except (OSError, ConnectionError) as exc:
        raise FormatError(
            f"{IRDS_PREFIX}{name}: its files are not available here ({type(exc).__name__}: {exc})"
        ) from None
    if not units:
        raise FormatError(f"{IRDS_PREFIX}{name}: no documents with text")
    return units


# ---- dispatch (called from corpora.load_corpus / load_questions) -------------------------------
def corpus_loader(path):
    """The loader for a corpus path this module handles, or None (corpus.json, folders of .md)."""
    text = str(path)
    if text.startswith(IRDS_PREFIX):
        return lambda: load_irds_corpus(text[len(IRDS_PREFIX) :])
    p = Path(path)
    if p.is_dir() and (p / BEIR_CORPUS).is_file():
        return lambda: load_beir_corpus(p)
    if p.is_file() and p.suffix.lower() == ".jsonl":
        return lambda: load_jsonl_corpus(p)
    return None


def questions_loader(path, split: str | None = None):
    """The loader for a questions source this module handles, or None (questions.jsonl).
    A `split` is refused for anything but a BEIR folder rather than silently ignored."""
    text = str(path)
    p = Path(path)
    if p.is_dir() and not (p / TREC_TOPICS).is_file():
        if not is_beir_folder(p):
            raise FormatError(
                f"{p}: Is a directory, not a questions file; give a file path, or a BEIR folder with "
                f"{BEIR_QUERIES} and {BEIR_QRELS_DIR}/SPLIT.tsv (found: {_listing(p)})"
            )
        return lambda: load_beir_questions(p, split)  # names what a BEIR folder lacks
    if split is not None:
        raise FormatError(
            f"--split {split}: {path} is not a BEIR folder (a split selects a BEIR folder's qrels/SPLIT.tsv)"
        )
    if text.startswith(IRDS_PREFIX):
        return lambda: load_irds(text[len(IRDS_PREFIX) :])
    if p.is_dir():
        return lambda: load_trec_questions(p)
    return None
