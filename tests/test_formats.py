"""BEIR folders, JSON Lines corpora, TREC run/qrels files, irds: sources and `sag2wb convert`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ENC, shared_data
from workbench.cli.main import main
from workbench.formats import write_trec_run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.readers import (
    FormatError,
    decode_id,
    encode_id,
    load_beir_questions,
    read_trec_qrels,
    read_trec_run,
)
from workbench.index.store import Index
from workbench.index.units import CorpusError
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions

ENC_CORPUS, ENC_QUESTIONS = ENC / "corpus.json", ENC / "questions.jsonl"


def cli(*args) -> int:
    return main([str(a) for a in args])


def test_ids_in_trec_lines_are_percent_encoded_and_decode_back():
    assert encode_id("Glass Harbour") == "Glass%20Harbour"
    assert encode_id("50% off\tnow") == "50%25%20off%09now"
    for name in ("Glass Harbour", "Élodie Marchetti", "a%b", "100%20", "plain"):
        assert decode_id(encode_id(name)) == name


def test_corpus_json_to_beir_and_back_is_exact(tmp_path):
    assert (
        cli("convert", "--corpus", ENC_CORPUS, "--questions", ENC_QUESTIONS, "--to", "beir", "--out", tmp_path / "beir")
        == 0
    )
    beir = tmp_path / "beir"
    assert sorted(p.relative_to(beir).as_posix() for p in beir.rglob("*") if p.is_file()) == [
        ".sag2wb-outputs.jsonl",  # the record of what convert wrote (workbench/safeio.py)
        "corpus.jsonl",
        "qrels/.sag2wb-outputs.jsonl",
        "qrels/test.tsv",
        "queries.jsonl",
    ]
    first = json.loads((beir / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first == {
        "_id": "Adèle%20Ferrand",
        "title": "Adèle Ferrand",
        "text": json.loads(ENC_CORPUS.read_text())[0]["text"],
    }
    assert (beir / "qrels" / "test.tsv").read_text().splitlines()[:2] == [
        "query-id\tcorpus-id\tscore",
        "enc-01\tGlass%20Harbour\t1",
    ]
    # the BEIR folder loads to the same passages and questions
    original, again = load_corpus(ENC_CORPUS), load_corpus(beir)
    assert [(u.title, u.body, u.document) for u in again] == [(u.title, u.body, u.document) for u in original]
    assert load_questions(beir) == load_questions(ENC_QUESTIONS)  # ids, text, gold, type, hops, answer
    # and back to the workbench's own files: the same JSON content
    assert cli("convert", "--corpus", beir, "--questions", beir, "--to", "workbench", "--out", tmp_path / "wb") == 0
    assert json.loads((tmp_path / "wb" / "corpus.json").read_text()) == json.loads(ENC_CORPUS.read_text())
    assert load_questions(tmp_path / "wb" / "questions.jsonl") == load_questions(ENC_QUESTIONS)


@pytest.mark.slow
def test_beir_index_and_trec_run_round_trip(tmp_path):
    """corpus.json -> BEIR -> index -> eval --run -> TREC run: the run read back is the eval's ranking,
    and the index built from BEIR ranks exactly as the one built from corpus.json."""
    cli("convert", "--corpus", ENC_CORPUS, "--questions", ENC_QUESTIONS, "--to", "beir", "--out", tmp_path / "beir")
    assert cli("index", tmp_path / "beir", "--db", tmp_path / "beir.sqlite") == 0
    assert cli("index", ENC_CORPUS, "--db", tmp_path / "enc.sqlite") == 0
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "beir.sqlite",
            "--questions",
            tmp_path / "beir",
            "--split",
            "test",
            "--judge",
            "bm25",
            "--out",
            tmp_path / "r.json",
            "--run",
            tmp_path / "r.trec",
            "--qrels",
            tmp_path / "g.qrels",
            "--quiet",
        )
        == 0
    )
    direct = evaluate(
        Index(tmp_path / "enc.sqlite"), load_questions(ENC_QUESTIONS), "bm25", options=RunOptions(progress=False)
    )
    records = json.loads((tmp_path / "r.json").read_text())["questions"]
    assert [r["ranking"] for r in records] == [r["ranking"] for r in direct.records]
    run = read_trec_run(tmp_path / "r.trec")
    assert {q: [d for d, _, _ in rows] for q, rows in run.items()} == {r["_id"]: r["ranking"] for r in records}
    first = (tmp_path / "r.trec").read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "bm25"
    assert read_trec_qrels(tmp_path / "g.qrels") == {
        q.id: {g: 1 for g in q.gold} for q in load_questions(ENC_QUESTIONS)
    }
    # convert --to trec from the result file writes the same run, plus topics and qrels that load back
    assert (
        cli(
            "convert",
            "--questions",
            ENC_QUESTIONS,
            "--results",
            tmp_path / "r.json",
            "--to",
            "trec",
            "--tag",
            "bm25",
            "--out",
            tmp_path / "trec",
        )
        == 0
    )
    assert (tmp_path / "trec" / "run.trec").read_bytes() == (tmp_path / "r.trec").read_bytes()
    assert load_questions(tmp_path / "trec") == [
        q.__class__(q.id, q.question, q.gold) for q in load_questions(ENC_QUESTIONS)
    ]
    # and back: the TREC run scored with the paper's metrics is the eval's result
    assert (
        cli(
            "convert",
            "--run",
            tmp_path / "r.trec",
            "--questions",
            ENC_QUESTIONS,
            "--to",
            "workbench",
            "--out",
            tmp_path / "back",
        )
        == 0
    )
    back = json.loads((tmp_path / "back" / "results.json").read_text())
    original = json.loads((tmp_path / "r.json").read_text())
    assert back["metrics"] == {**original["metrics"], "judgments": 0}
    assert [(r["_id"], r["R@5"], r["R@10"], r["AE@10"], r["ranking"]) for r in back["questions"]] == [
        (r["_id"], r["R@5"], r["R@10"], r["AE@10"], r["ranking"]) for r in original["questions"]
    ]


def test_jsonl_corpus_with_and_without_ids(tmp_path):
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        '{"title": "Glass Harbour", "text": "A film by Mara Quell."}\n\n'
        '{"title": "Mara Quell", "text": "Born in Tessaly."}\n',
        encoding="utf-8",
    )
    units = load_corpus(plain)
    assert [(u.title, u.document, u.location) for u in units] == [
        ("Glass Harbour", "Glass Harbour", "line 1"),
        ("Mara Quell", "Mara Quell", "line 3"),
    ]
    ids = tmp_path / "ids.jsonl"
    ids.write_text('{"_id": "d1", "title": "", "text": "No title here."}\n{"_id": 7, "title": "T", "text": "x"}\n')
    assert [(u.title, u.document) for u in load_corpus(ids)] == [("d1", "d1"), ("T", "7")]
    assert cli("index", ids, "--db", tmp_path / "ids.sqlite") == 0


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"title": "A", "text": "x"}\n{"title": "A", "text": "y"}\n', "line 2: duplicate title 'A' (first at line 1)"),
        ('{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n', "line 2: duplicate _id 'a' (first at line 1)"),
        ('{"title": "A"}\n', 'line 1: missing "text"'),
        ('{"text": "x"}\n', 'line 1: missing "title"'),
        ("[1, 2]\n", "line 1: expected a JSON object, got list"),
        ('{"title": "A", "text": "x"\n', "line 1: not valid JSON"),
        ("\n\n", "the corpus is empty"),
    ],
)
def test_bad_jsonl_corpus_is_named(tmp_path, content, message):
    path = tmp_path / "c.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_corpus(path)


def _beir(tmp_path, queries=True, qrels="query-id\tcorpus-id\tscore\nq1\tA\t1\n", split="test"):
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "A", "title": "A", "text": "Alpha."}\n')
    if queries:
        (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha?"}\n{"_id": "q2", "text": "beta?"}\n')
    if qrels is not None:
        (folder / "qrels").mkdir()
        (folder / "qrels" / f"{split}.tsv").write_text(qrels)
    return folder


def test_beir_questions_take_the_split_and_binarise_grades(tmp_path):
    folder = _beir(tmp_path, qrels="query-id\tcorpus-id\tscore\nq2\tA\t2\nq2\tB\t0\n")
    (folder / "qrels" / "dev.tsv").write_text("q1\tA\t1\n")
    [q2] = load_beir_questions(folder)  # test by default; q1 belongs to dev only
    assert (q2.id, q2.gold) == ("q2", ("A",))
    assert [q.id for q in load_questions(folder, split="dev")] == ["q1"]


@pytest.mark.parametrize(
    "kind, message",
    [
        ("no queries", "beir: a BEIR folder needs queries.jsonl"),
        ("no qrels", "needs qrels/SPLIT.tsv"),
        ("two fields", r"test.tsv, line 2: expected 3 tab-separated fields \(query-id, corpus-id, score\), got 2"),
        ("bad score", "test.tsv, line 2: score 'high' is not an integer"),
        ("unknown query", r"query id\(s\) \['q9'\] are not in"),
        ("no such split", "no qrels for split 'train' \\(splits present: test\\)"),
    ],
)
def test_bad_beir_folder_is_named(tmp_path, kind, message):
    qrels = {
        "two fields": "query-id\tcorpus-id\tscore\nq1\tA\n",
        "bad score": "query-id\tcorpus-id\tscore\nq1\tA\thigh\n",
        "unknown query": "q9\tA\t1\n",
        "no qrels": None,
    }.get(kind, "q1\tA\t1\n")
    folder = _beir(tmp_path, queries=kind != "no queries", qrels=qrels)
    with pytest.raises(FormatError, match=message):
        load_questions(folder, split="train" if kind == "no such split" else None)


def test_cli_names_a_beir_folder_without_queries(tmp_path, capsys):
    folder = _beir(tmp_path, queries=False)
    assert cli("index", folder, "--db", tmp_path / "b.sqlite") == 0
    capsys.readouterr()
    assert (
        cli("eval", "--db", tmp_path / "b.sqlite", "--questions", folder, "--out", tmp_path / "o.json", "--quiet") == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("sag2wb eval: error: ") and "a BEIR folder needs queries.jsonl" in err and "\n" not in err


@pytest.mark.parametrize(
    "reader, content, message",
    [
        (
            read_trec_qrels,
            "q1 0 A 1\nq1 0 B\n",
            r"line 2: a qrels line has 4 fields \(qid iteration docno relevance\), got 3",
        ),
        (read_trec_qrels, "q1 0 A yes\n", "line 1: relevance 'yes' is not an integer"),
        (read_trec_qrels, "q1 0 A 1\nq1 0 A 0\n", "line 2: docno 'A' judged twice for qid 'q1'"),
        (
            read_trec_run,
            "q1 Q0 A 1 2.0 t\nq1 Q0 B 2 1.0 t\nq1 Q0 A 3 0.5 t\n",
            r"line 3: duplicate docno 'A' for qid 'q1' \(first at line 1\)",
        ),
        (read_trec_run, "q1 Q0 A 1 2.0\n", r"line 1: a run line has 6 fields \(qid Q0 docno rank score tag\), got 5"),
        (read_trec_run, "q1 Q0 A one 2.0 t\n", "line 1: rank 'one' is not an integer"),
        (read_trec_run, "q1 Q0 A 1 nan t\n", "line 1: score 'nan' is not finite"),
        (read_trec_run, "q1 Q0 A 1 high t\n", "line 1: score 'high' is not a number"),
        (read_trec_run, "", "no run lines"),
    ],
)
def test_bad_trec_files_are_named(tmp_path, reader, content, message):
    path = tmp_path / "f.txt"
    path.write_text(content)
    with pytest.raises(FormatError, match=message):
        reader(path)


def test_trec_run_is_read_in_trec_eval_order(tmp_path):
    path = write_trec_run(tmp_path / "r.trec", [("q 1", "B b", 2, 1.0), ("q 1", "A a", 1, 2.0), ("q 1", "C", 3, 1.0)])
    assert path.read_text().splitlines()[0] == "q%201 Q0 B%20b 2 1.000000 sag2wb"
    # score descending, ties by docno descending (what trec_eval and ir_measures do)
    assert read_trec_run(path) == {"q 1": [("A a", 1, 2.0), ("C", 3, 1.0), ("B b", 2, 1.0)]}


def test_convert_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(FormatError, match="TREC has no corpus format"):
        from workbench.formats import convert

        convert("trec", tmp_path / "t", corpus=ENC_CORPUS)
    (tmp_path / "f").write_text("x")
    assert cli("convert", "--corpus", ENC_CORPUS, "--to", "beir", "--out", tmp_path / "f") == 2


def test_unknown_measure_is_refused_before_any_work(tmp_path, capsys):
    pytest.importorskip("ir_measures")
    with pytest.raises(SystemExit) as exc:
        cli(
            "eval",
            "--db",
            tmp_path / "none.sqlite",
            "--questions",
            ENC_QUESTIONS,
            "--out",
            tmp_path / "o.json",
            "--measure",
            "nDCG@ten",
        )
    assert exc.value.code == 2 and "--measure 'nDCG@ten': not an ir_measures measure" in capsys.readouterr().err


def test_eval_measures_land_beside_the_paper_metrics(tmp_path):
    pytest.importorskip("ir_measures")
    cli("index", ENC_CORPUS, "--db", tmp_path / "enc.sqlite")
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "enc.sqlite",
            "--questions",
            ENC_QUESTIONS,
            "--judge",
            "bm25",
            "--out",
            tmp_path / "r.json",
            "--measure",
            "R@5",
            "--measure",
            "R@10",
            "--measure",
            "nDCG@10",
            "--quiet",
        )
        == 0
    )
    data = json.loads((tmp_path / "r.json").read_text())
    # ir_measures' R@k (0-1) is the paper's R@k (a percentage) on every question
    for rec in data["questions"]:
        assert rec["measures"]["R@5"] * 100 == pytest.approx(rec["R@5"])
        assert rec["measures"]["R@10"] * 100 == pytest.approx(rec["R@10"])
        assert 0 <= rec["measures"]["nDCG@10"] <= 1
    assert round(data["stats"]["measures"]["R@10"] * 100, 2) == data["metrics"]["R@10"]


@pytest.mark.slow
def test_irds_questions_and_corpus_from_a_locally_registered_dataset(tmp_path, monkeypatch):
    """ir_datasets cannot download here: register the encyclopedia, converted to BEIR, from
    local files with ir_datasets' own BEIR readers, then use it through `irds:NAME`."""
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds_home"))
    ir_datasets = pytest.importorskip("ir_datasets")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import LocalDownload

    cli("convert", "--corpus", ENC_CORPUS, "--questions", ENC_QUESTIONS, "--to", "beir", "--out", tmp_path / "beir")
    name = f"sag2wb-test/enc-{tmp_path.name}"
    ir_datasets.registry.register(
        name,
        Dataset(
            BeirDocs(name, LocalDownload(tmp_path / "beir" / "corpus.jsonl"), BeirTitleDoc),
            BeirQueries(name, LocalDownload(tmp_path / "beir" / "queries.jsonl"), GenericQuery),
            BeirQrels(LocalDownload(tmp_path / "beir" / "qrels" / "test.tsv"), qrels_defs={}),
        ),
    )
    from workbench.index.readers import load_irds

    questions = load_irds(name)
    assert [q.id for q in questions] == [q.id for q in load_questions(ENC_QUESTIONS)]
    assert questions[0].gold == ("Glass%20Harbour", "Élodie%20Marchetti")  # ir_datasets keeps the file's ids
    assert cli("index", f"irds:{name}", "--db", tmp_path / "irds.sqlite") == 0
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "irds.sqlite",
            "--questions",
            f"irds:{name}",
            "--judge",
            "bm25",
            "--out",
            tmp_path / "irds.json",
            "--quiet",
        )
        == 0
    )
    cli("index", ENC_CORPUS, "--db", tmp_path / "enc.sqlite")
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "enc.sqlite",
            "--questions",
            ENC_QUESTIONS,
            "--judge",
            "bm25",
            "--out",
            tmp_path / "enc.json",
            "--quiet",
        )
        == 0
    )

    def metrics(p):
        return json.loads(Path(p).read_text())["metrics"]

    assert metrics(tmp_path / "irds.json") == metrics(tmp_path / "enc.json")
    with pytest.raises(CorpusError, match="irds:no/such/dataset: ir_datasets knows no dataset"):
        load_questions("irds:no/such/dataset")


@pytest.fixture(scope="module")
def wiki_index(tmp_path_factory):
    return Index.build(
        load_corpus(shared_data("2wiki", "corpus.json")), tmp_path_factory.mktemp("2wiki") / "2wiki.sqlite"
    )


@pytest.mark.slow
@pytest.mark.parametrize("judge", ["bm25", "lexical"])
def test_ir_measures_recall_equals_ours_on_2wiki_dev(judge, wiki_index):
    """The same document-level dedup: ir_measures' R@5/R@10 equal the paper's on every 2Wiki dev question."""
    pytest.importorskip("ir_measures")
    from workbench.measures import per_question

    questions = load_questions(shared_data("2wiki", "questions-dev.jsonl"))
    result = evaluate(wiki_index, questions, judge, options=RunOptions(progress=False))
    values = per_question(result.records, questions, ["R@5", "R@10"])
    assert len(values) == len(result.records) == 100
    for rec in result.records:
        assert values[rec["_id"]]["R@5"] * 100 == pytest.approx(rec["R@5"])
        assert values[rec["_id"]]["R@10"] * 100 == pytest.approx(rec["R@10"])


def test_split_is_refused_where_there_is_no_split(tmp_path):
    with pytest.raises(FormatError, match=r"--split dev: .*questions.jsonl is not a BEIR folder"):
        load_questions(ENC_QUESTIONS, split="dev")


def test_eval_outputs_must_be_distinct_files(tmp_path, capsys):
    cli("index", ENC_CORPUS, "--db", tmp_path / "enc.sqlite")
    capsys.readouterr()
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "enc.sqlite",
            "--questions",
            ENC_QUESTIONS,
            "--judge",
            "bm25",
            "--quiet",
            "--out",
            tmp_path / "r.json",
            "--run",
            tmp_path / "r.json",
        )
        == 2
    )
    assert "--run " in capsys.readouterr().err and not (tmp_path / "r.json").exists()
    assert (
        cli(
            "eval",
            "--db",
            tmp_path / "enc.sqlite",
            "--questions",
            ENC_QUESTIONS,
            "--judge",
            "bm25",
            "--quiet",
            "--out",
            tmp_path / "r.json",
            "--run",
            ENC_QUESTIONS,
        )
        == 2
    )
    assert "is an input of this command" in capsys.readouterr().err


def test_an_external_run_is_scored_in_trec_eval_order(tmp_path):
    """The gold document has rank 1 but the lowest score: trec_eval (and we) put it 6th."""
    from workbench.formats import score_run
    from workbench.index.units import Question

    lines = ["q1 Q0 G 1 0.5 x"] + [f"q1 Q0 D{i} {i + 1} {9 - i}.0 x" for i in range(5)]
    (tmp_path / "x.trec").write_text("\n".join(lines) + "\n")
    run = read_trec_run(tmp_path / "x.trec")
    questions = [Question("q1", "?", ("G",)), Question("q2", "?", ("H", "G"))]
    [q1, q2] = score_run(run, questions).records
    assert q1["ranking"] == ["D0", "D1", "D2", "D3", "D4", "G"]
    assert (q1["R@5"], q1["R@10"], q1["AE@10"]) == (0.0, 100.0, 100.0)
    assert (q2["ranking"], q2["R@10"]) == ([], 0.0)  # not in the run: counts 0, as trec_eval -c
