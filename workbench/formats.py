"""Writing the IR toolbox's file formats (BEIR folders, the workbench's own files, TREC run,
qrels and topics files), `sag2wb convert` between them, and scoring any system's TREC run
with the paper's metrics.

The readers (BEIR, JSON Lines, TREC, ir_datasets; `encode_id` / `decode_id`) live in the
index layer, workbench/index/readers.py, whose docstring says how documents are named and
why names are percent-encoded in TREC files; `from workbench.formats import load_beir_corpus`
and the other readers' old names here still work, with a DeprecationWarning.

>>> from workbench.index.readers import load_beir_corpus, load_beir_questions
>>> from workbench.runs import RunOptions, evaluate
>>> units = load_beir_corpus(enc_beir)          # enc_beir: the encyclopedia as a BEIR folder
>>> questions = load_beir_questions(enc_beir, split="test")
>>> result = evaluate(enc_index, questions, "bm25", options=RunOptions(progress=False))
>>> write_trec_run("bm25.trec", run_rows(result.records), tag="bm25")
PosixPath('bm25.trec')
>>> Path("bm25.trec").read_text().splitlines()[0]
'enc-01 Q0 Glass%20Harbor 1 52.000000 bm25'
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

from workbench.deprecation import keep_old_names
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.readers import (
    BEIR_CORPUS,
    BEIR_QRELS_DIR,
    BEIR_QUERIES,
    TREC_QRELS,
    TREC_TOPICS,
    FormatError,
    encode_id,
    is_beir_folder,
    read_trec_run,
)
from workbench.index.units import Question, Unit
from workbench.metrics import question_metrics

# the run layer's result: a scored run is written in exactly the shape `sag2wb eval` writes
# (EvalResult.to_dict; interop sits above runs, so this arrow points down)
from workbench.runs.evaluation import EvalResult
from workbench.safeio import OutputError, Outputs, atomic_writer, check_name

# the readers, which older code imported from here: readable with a DeprecationWarning
keep_old_names(
    __name__,
    dict.fromkeys(
        [
            "BEIR_CORPUS",
            "BEIR_QRELS_DIR",
            "BEIR_QUERIES",
            "IRDS_PREFIX",
            "TREC_QRELS",
            "TREC_TOPICS",
            "FormatError",
            "corpus_loader",
            "decode_id",
            "encode_id",
            "is_beir_folder",
            "load_beir_corpus",
            "load_beir_questions",
            "load_irds",
            "load_irds_corpus",
            "load_jsonl_corpus",
            "load_trec_questions",
            "qrels_split_path",
            "questions_loader",
            "read_beir_qrels",
            "read_topics_tsv",
            "read_trec_qrels",
            "read_trec_run",
        ],
        "workbench.index.readers",
    ),
)

TREC_RUN = "run.trec"
RUN_DEPTH = 100  # the depth `eval` records keep (question_record's ranking[:100])


def documents_of(units: list[Unit]) -> list[dict]:
    """One record per document, in first-seen order: {"_id", "title", "text"} (a document's
    units joined by blank lines, as a folder of .md files splits them)."""
    docs: dict[str, dict] = {}
    for u in units:
        d = docs.get(u.document)
        if d is None:
            docs[u.document] = {"_id": u.document, "title": u.title, "text": u.body, "units": 1}
        else:
            d["text"] += "\n\n" + u.body
            d["units"] += 1
    return list(docs.values())


# ---- writing -----------------------------------------------------------------------------------
def _jsonl(f, items) -> None:
    for item in items:
        f.write(json.dumps(item, ensure_ascii=False) + "\n")


def _metadata(q: Question) -> dict:
    return {k: v for k, v in (("answer", q.answer), ("type", q.type), ("hops", q.hops)) if v is not None}


def write_beir(
    folder: str | Path,
    units: list[Unit] | None = None,
    questions: list[Question] | None = None,
    split: str = "test",
    record: str = "write_beir",
) -> list[Path]:
    """A BEIR folder: corpus.jsonl (`_id` = document, encoded), queries.jsonl, qrels/SPLIT.tsv.
    Every file written is recorded as ours (workbench/safeio.py: `record`), as in every writer here.

    >>> write_beir("enc-beir", load_corpus("sample_corpora/encyclopedia/corpus.json"),
    ...            load_questions("sample_corpora/encyclopedia/questions.jsonl"))
    [PosixPath('enc-beir/corpus.jsonl'), PosixPath('enc-beir/queries.jsonl'), PosixPath('enc-beir/qrels/test.tsv')]
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if units is not None:
        with atomic_writer(folder / BEIR_CORPUS, record=record) as f:
            _jsonl(
                f, ({"_id": encode_id(d["_id"]), "title": d["title"], "text": d["text"]} for d in documents_of(units))
            )
        written.append(folder / BEIR_CORPUS)
    if questions is not None:
        with atomic_writer(folder / BEIR_QUERIES, record=record) as f:
            _jsonl(
                f,
                (
                    {"_id": encode_id(q.id), "text": q.question, **({"metadata": _metadata(q)} if _metadata(q) else {})}
                    for q in questions
                ),
            )
        (folder / BEIR_QRELS_DIR).mkdir(exist_ok=True)
        qrels = folder / BEIR_QRELS_DIR / f"{split}.tsv"
        with atomic_writer(qrels, record=record) as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for q in questions:
                for g in q.gold:
                    f.write(f"{encode_id(q.id)}\t{encode_id(g)}\t1\n")
        written += [folder / BEIR_QUERIES, qrels]
    return written


def write_workbench(
    folder: str | Path,
    units: list[Unit] | None = None,
    questions: list[Question] | None = None,
    record: str = "write_workbench",
) -> list[Path]:
    """The workbench's own files: corpus.json when every document is one passage named by
    its title (else corpus.jsonl with `_id`, which keeps the names), questions.jsonl.

    >>> write_workbench("enc-again", load_corpus(enc_beir), load_questions(enc_beir))  # enc_beir: a BEIR folder
    [PosixPath('enc-again/corpus.json'), PosixPath('enc-again/questions.jsonl')]
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if units is not None:
        docs = documents_of(units)
        if all(d["_id"] == d["title"] for d in docs):
            path = folder / "corpus.json"
            with atomic_writer(path, record=record) as f:
                f.write(
                    json.dumps([{"title": d["title"], "text": d["text"]} for d in docs], ensure_ascii=False, indent=1)
                    + "\n"
                )
        else:
            path = folder / "corpus.jsonl"
            with atomic_writer(path, record=record) as f:
                _jsonl(f, ({"_id": d["_id"], "title": d["title"], "text": d["text"]} for d in docs))
        written.append(path)
    if questions is not None:
        path = folder / "questions.jsonl"
        with atomic_writer(path, record=record) as f:
            _jsonl(
                f,
                (
                    {
                        "_id": q.id,
                        "question": q.question,
                        "supporting_titles": list(q.gold),
                        **{
                            k: v for k, v in (("type", q.type), ("hops", q.hops), ("answer", q.answer)) if v is not None
                        },
                    }
                    for q in questions
                ),
            )
        written.append(path)
    return written


def write_trec_qrels(path: str | Path, questions: list[Question], record: str = "write_trec_qrels") -> Path:
    """The gold as TREC qrels: `qid 0 docno 1` per gold document (questions without gold omitted).

    >>> write_trec_qrels("gold.qrels", load_questions("sample_corpora/encyclopedia/questions.jsonl"))
    PosixPath('gold.qrels')
    >>> Path("gold.qrels").read_text(encoding="utf-8").splitlines()[:2]
    ['enc-01 0 Glass%20Harbour 1', 'enc-01 0 Élodie%20Marchetti 1']
    """
    path = Path(path)
    with atomic_writer(path, record=record) as f:
        for q in questions:
            for g in q.gold:
                f.write(f"{encode_id(q.id)} 0 {encode_id(g)} 1\n")
    return path


def write_topics_tsv(path: str | Path, questions: list[Question], record: str = "write_topics_tsv") -> Path:
    path = Path(path)
    with atomic_writer(path, record=record) as f:
        for q in questions:
            if "\t" in q.id or "\n" in q.question or "\t" in q.question:
                raise FormatError(
                    f"question {q.id!r}: a tab or newline cannot be written to {path.name} (qid<TAB>query)"
                )
            f.write(f"{q.id}\t{q.question}\n")
    return path


def rank_score(rank: int, depth: int) -> float:
    """The score written for 1-based `rank` of `depth`: depth - rank + 1. trec_eval and
    ir_measures order a run by score (ties by docno), not by rank, so the score must fall
    strictly with our rank for their R@k to be ours; judge probabilities tie too often."""
    return float(depth - rank + 1)


def run_rows(records: list[dict], depth: int = RUN_DEPTH):
    """(qid, docno, rank, score) for every question record of an evaluation (its ranking of
    unique documents, first occurrences kept: the R@k dedup).

    >>> from workbench.runs import RunOptions, evaluate
    >>> next(run_rows(evaluate(index, questions, "bm25", options=RunOptions(progress=False)).records))
    ('docs-01', 'onboarding/new_engineers.md', 1, 12.0)
    """
    for rec in records:
        docs = rec.get("ranking") or []
        docs = docs[:depth]
        for i, doc in enumerate(docs, start=1):
            yield rec["_id"], doc, i, rank_score(i, len(docs))


def write_trec_run(path: str | Path, rows, tag: str = "sag2wb", record: str = "write_trec_run") -> Path:
    """`qid Q0 docno rank score tag` lines (names percent-encoded; see the module docstring)."""
    path = Path(path)
    tag = encode_id(tag) or "sag2wb"
    with atomic_writer(path, record=record) as f:
        for qid, docno, rank, score in rows:
            f.write(f"{encode_id(qid)} Q0 {encode_id(docno)} {rank} {score:.6f} {tag}\n")
    return path


def _convert_hint(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full: free some space and rerun convert"
    if exc.errno == errno.EFBIG:
        return "the file grew past this system's file-size limit: raise the limit or choose another location"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "the folder is not writable: choose another --out"
    return "check the folder and rerun convert"


# ---- convert -----------------------------------------------------------------------------------
CONVERT_TARGETS = ("beir", "workbench", "trec")


def convert(
    to: str,
    out: str | Path,
    *,
    corpus=None,
    questions=None,
    split: str | None = None,
    results=None,
    run=None,
    tag: str | None = None,
    force: bool = False,
) -> list[Path]:
    """`sag2wb convert`: write the corpus / questions / an `eval` result in another layout.

    - `beir`: OUT/corpus.jsonl, OUT/queries.jsonl, OUT/qrels/SPLIT.tsv (split default test)
    - `workbench`: OUT/corpus.json (or corpus.jsonl when documents are not named by their
      title), OUT/questions.jsonl and, from a TREC run (any system's), OUT/results.json: the
      run scored with the paper's R@5, R@10, AE@10, in the shape `sag2wb eval` writes
    - `trec`: OUT/topics.tsv, OUT/qrels.txt and, from an `eval` result JSON, OUT/run.trec

    Sources are anything `sag2wb index` / `--questions` read (corpus.json, .jsonl, folders,
    BEIR folders, TREC folders, irds:NAME).

    Every file it will write is checked before any is written (workbench/safeio.py:
    Outputs): an input is never replaced; a folder that holds an input, and an existing file
    sag2wb has no record of writing there (whatever it looks like), are refused unless
    `force`; `split` must be a plain name.

    >>> convert("beir", "enc-beir", corpus="sample_corpora/encyclopedia/corpus.json",
    ...         questions="sample_corpora/encyclopedia/questions.jsonl")
    [PosixPath('enc-beir/corpus.jsonl'), PosixPath('enc-beir/queries.jsonl'), PosixPath('enc-beir/qrels/test.tsv')]
    >>> convert("trec", "enc-trec", questions="enc-beir")
    [PosixPath('enc-trec/topics.tsv'), PosixPath('enc-trec/qrels.txt')]
    """
    if to not in CONVERT_TARGETS:
        raise FormatError(f"--to {to!r}: choose one of {', '.join(CONVERT_TARGETS)}")
    if corpus is None and questions is None and results is None and run is None:
        raise FormatError("convert: give --corpus, --questions, --results and/or --run to convert")
    if run is not None and (to != "workbench" or questions is None):
        raise FormatError("--run: a TREC run converts --to workbench, scored against --questions (give both)")
    if split is not None:
        check_name("--split", split)
    io = declare_convert_inputs(Outputs(force=force), out, corpus=corpus, questions=questions, results=results, run=run)
    io.check()  # the folder itself, before anything is read
    out = Path(out)
    units = load_corpus(corpus) if corpus is not None else None
    # --split names the split read from a BEIR source and the split written to a BEIR target
    read_split = split if questions is not None and is_beir_folder(questions) else None
    qs = load_questions(questions, split=read_split) if questions is not None else None
    if to == "beir" and results is not None:
        raise FormatError("--results: a run converts to TREC (--to trec), BEIR has no run format")
    if to == "workbench" and results is not None:
        raise FormatError("--results: an eval result is already a workbench file; use --to trec for a run")
    if to == "trec" and units is not None:
        raise FormatError("--corpus: TREC has no corpus format here; convert the corpus --to beir or --to workbench")
    split = split or "test"
    for path in convert_plan(to, out, units, qs, split=split, results=results, run=run):
        io.output("--out", path, by="convert --out")  # replaced only when recorded so, never by its look
    io.check()  # every file, before the first is written
    try:
        return _write_converted(to, out, units, qs, split=split, results=results, run=run, tag=tag)
    except OSError as exc:  # a full disk: name the file (never a temporary one); what was written is whole
        where = exc.filename or out
        raise OutputError(
            f"--out {out}: could not write {where} ({exc.strerror or exc}); {_convert_hint(exc)}"
        ) from None


def declare_convert_inputs(io: Outputs, out, *, corpus=None, questions=None, results=None, run=None) -> Outputs:
    """convert's inputs and its --out folder (which must not hold an input unless --force)."""
    for option, src in (("--corpus", corpus), ("--questions", questions), ("--results", results), ("--run", run)):
        io.input(option, src)
    io.output("--out", out, kind="dir", hold_inputs=False)
    return io


def convert_plan(to: str, out: Path, units, qs, *, split: str, results=None, run=None) -> list[Path]:
    """The files `convert` writes, in order (known before any is written)."""
    if to == "beir":
        return ([out / BEIR_CORPUS] if units is not None else []) + (
            [out / BEIR_QUERIES, out / BEIR_QRELS_DIR / f"{split}.tsv"] if qs is not None else []
        )
    if to == "workbench":
        plan = []
        if units is not None:
            docs = documents_of(units)
            plan.append(out / ("corpus.json" if all(d["_id"] == d["title"] for d in docs) else "corpus.jsonl"))
        if qs is not None:
            plan.append(out / "questions.jsonl")
        if run is not None:
            plan.append(out / "results.json")
        return plan
    return ([out / TREC_TOPICS, out / TREC_QRELS] if qs is not None else []) + (
        [out / TREC_RUN] if results is not None else []
    )


def _write_converted(to, out: Path, units, qs, *, split: str, results=None, run=None, tag=None) -> list[Path]:
    by = "convert --out"
    if to == "beir":
        return write_beir(out, units, qs, split=split, record=by)
    if to == "workbench":
        written = write_workbench(out, units, qs, record=by)
        if run is not None:
            assert qs is not None  # --run needs --questions (checked above)
            written.append(write_scored_run(out / "results.json", read_trec_run(run), qs, str(run), record=by))
        return written
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if qs is not None:
        written += [write_topics_tsv(out / TREC_TOPICS, qs, by), write_trec_qrels(out / TREC_QRELS, qs, by)]
    if results is not None:
        records = read_eval_records(results)
        written.append(write_trec_run(out / TREC_RUN, run_rows(records), tag=tag or Path(results).stem, record=by))
    return written


def score_run(run: dict, questions: list[Question], source: str = "run"):
    """An `EvalResult` for a TREC run read by `read_trec_run`: each question's docnos in
    trec_eval's order, deduplicated (first occurrence kept), scored with the paper's
    metrics. A question the run does not name has an empty ranking (it counts 0).

    >>> _ = Path("other.trec").write_text("enc-01 Q0 Glass%20Harbour 1 2 other\\nenc-01 Q0 Porto%20Calven 2 1 other\\n")
    >>> first = load_questions("sample_corpora/encyclopedia/questions.jsonl")[:1]   # gold: 2 documents
    >>> score_run(read_trec_run("other.trec"), first).metrics
    {'R@5': 50.0, 'R@10': 50.0, 'AE@10': 0.0, 'questions': 1, 'judgments': 0}
    """
    records = []
    for q in questions:
        docs = list(dict.fromkeys(doc for doc, _, _ in run.get(q.id, ())))
        records.append(
            {
                "_id": q.id,
                "type": q.type,
                "hops": q.hops,
                **question_metrics(docs, q.gold),
                "judgments": 0,
                "stop": None,
                "gold": list(q.gold),
                "ranking": docs[:RUN_DEPTH],
                "rounds": [],
            }
        )
    return EvalResult({"run": source}, records)


def write_scored_run(
    path: Path, run: dict, questions: list[Question], source: str = "run", record: str = "write_scored_run"
) -> Path:
    result = score_run(run, questions, source)
    with atomic_writer(path, record=record) as f:
        f.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=1, allow_nan=False))
    return path


def read_eval_records(path: str | Path) -> list[dict]:
    """The per-question records of an `sag2wb eval` result JSON."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError(f"{path}: no such eval result file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}: not an sag2wb eval result ({exc})") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("questions"), list)
        or not all(isinstance(r, dict) and "_id" in r and isinstance(r.get("ranking"), list) for r in data["questions"])
    ):
        raise FormatError(f'{path}: not an sag2wb eval result (expected "questions" with "_id" and "ranking")')
    return data["questions"]
