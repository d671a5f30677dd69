"""Attacks on the run commands (issue 34, item 7): `compare` on results that are not as eval
writes them, `fit-judge` on questions or teachers that cannot teach, JEV templates that cannot
be read, and which learned model an eval's out.json was made with. Every failure is exit 2 and
one line naming the input (never a traceback), its inputs untouched; each kind is one test
over its examples, and one real process per kind checks the same from the outside."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.index.corpora import load_questions
from workbench.runs import Config, Experiment
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions
from workbench.runs.resume import trace_file_name

from .conftest import ENC, sag2wb


def refused(capsys, args, *fragments) -> str:
    """`args` exits 2 with one line that starts as the CLI's errors do and holds `fragments`."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sag2wb {args[0]}: error:"), err
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def runs(enc_index, tmp_path_factory):
    """Two real eval results on 6 questions (lexical with its traces, oracle) and the questions file."""
    folder = tmp_path_factory.mktemp("runs")
    questions = folder / "q6.jsonl"
    questions.write_text("".join((ENC / "questions.jsonl").read_text(encoding="utf-8").splitlines(True)[:6]))
    base = ["eval", "--db", str(enc_index.path), "--questions", str(questions), "--quiet"]
    assert main([*base, "--judge", "lexical", "--out", str(folder / "A.json"), "--trace-dir", str(folder / "ta")]) == 0
    assert main([*base, "--judge", "oracle", "--out", str(folder / "B.json")]) == 0
    return folder


# ---- compare -------------------------------------------------------------------------------
def _set(path, value):
    def change(d):
        *head, last = path
        for key in head:
            d = d[key]
        d[last] = value

    return change


def _drop(path):
    def change(d):
        *head, last = path
        for key in head:
            d = d[key]
        del d[last]

    return change


WRONG_FIELDS = {
    "judgments a string": (_set(["questions", 0, "judgments"], "87"), "'judgments' is '87', not a count"),
    "judgments negative": (_set(["questions", 0, "judgments"], -3), "'judgments' is -3, not a count"),
    "ranking an int": (_set(["questions", 0, "ranking"], 7), "'ranking' is 7, not a list of titles"),
    "R@10 a string": (_set(["questions", 0, "R@10"], "100"), "R@10 is '100', not a number from 0 to 100"),
    "R@10 an object": (_set(["questions", 0, "R@10"], {"v": 1}), "R@10 is an object"),
    "R@10 above 100": (_set(["questions", 0, "R@10"], 250.0), "R@10 is 250.0"),
    "R@10 null with gold": (_set(["questions", 0, "R@10"], None), "R@10 is null but the question has gold"),
    "R@10 missing": (_drop(["questions", 0, "R@10"]), "no R@10"),
    "id a number": (_set(["questions", 0, "_id"], 1), "'_id' is 1, not a question id"),
    "id null": (_set(["questions", 0, "_id"], None), "'_id' is null"),
    "a record a list": (_set(["questions", 0], [1, 2]), "record 1: a list, not an object"),
    "rounds an object": (_set(["questions", 0, "rounds"], {"0": []}), "'rounds' is an object"),
    "a round's terms a number": (_set(["questions", 0, "rounds", 1, "terms"], 5), "'terms' is 5"),
    "a round without its number": (_drop(["questions", 0, "rounds", 0, "round"]), "'round' is null"),
    "failures a number": (_set(["failures"], 3), "'failures' is 3, not a list"),
    "a failure without a question": (_set(["failures"], [{"error": "x"}]), "failure 1:"),
    "trace_dir a list": (_set(["config", "trace_dir"], ["ta"]), "'trace_dir' is a list"),
    "questions an object": (_set(["questions"], {"q": 1}), "its 'questions' is an object"),
    "marker a string": (_set(["sag2wb"], "eval"), "not a sag2wb result marker"),
    "a repeated question id": (lambda d: d["questions"].append(copy.deepcopy(d["questions"][2])), "appears twice"),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", WRONG_FIELDS)
def test_compare_refuses_a_field_of_the_wrong_type(runs, tmp_path, capsys, what):
    change, says = WRONG_FIELDS[what]
    data = json.loads((runs / "A.json").read_text(encoding="utf-8"))
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    before = bad.read_bytes()
    for args in (["compare", bad, runs / "B.json"], ["compare", runs / "B.json", bad, "--json"]):
        refused(capsys, args, str(bad), says)
    assert bad.read_bytes() == before


NOT_RESULTS = {
    "empty": (b"", "empty file"),
    "a list at the top": (b"[]", "a list at the top, not an eval result"),
    "not UTF-8": ('{"questions": ["é"]}'.encode("latin-1"), "not UTF-8"),
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "a number past the digit limit": (b'{"questions": [' + b"9" * 5000 + b"]}", "a value cannot be read"),
    "1e400": (None, "Infinity (or a number too large, such as 1e400)"),
    "NaN": (None, "R@5 is NaN"),
    "an ablate result": (b'{"sag2wb": {"kind": "ablate", "version": 1}, "rows": {}}', "a sag2wb 'ablate' result"),
}


@pytest.mark.parametrize("what", NOT_RESULTS)
def test_compare_refuses_a_file_that_is_not_an_eval_result(runs, tmp_path, capsys, what):
    data, says = NOT_RESULTS[what]
    if data is None:  # the JSON eval writes, one value changed to what Python's parser reads as inf / nan
        text = (runs / "A.json").read_text(encoding="utf-8")
        field = '"R@10": ' if what == "1e400" else '"R@5": '
        at = text.index(field, text.index('"questions"')) + len(field)  # the first record's, not the means
        end = text.index(",", at)
        data = (text[:at] + ("1e400" if what == "1e400" else "NaN") + text[end:]).encode("utf-8")
    bad = tmp_path / "bad.json"
    bad.write_bytes(data)
    refused(capsys, ["compare", runs / "A.json", bad], str(bad), says)
    assert bad.read_bytes() == data


def test_compare_refuses_one_id_for_two_questions_and_names_unshared_ones(runs, tmp_path, capsys):
    data = json.loads((runs / "B.json").read_text(encoding="utf-8"))
    data["questions"][1]["gold"] = ["Some Other Title"]  # the same id, another question
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    refused(capsys, ["compare", runs / "A.json", other], "has gold", "different question files")
    # a subset of the questions is compared, and what is left out is said
    data = json.loads((runs / "B.json").read_text(encoding="utf-8"))
    data["questions"] = data["questions"][:4]
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(data), encoding="utf-8")
    assert main(["compare", str(runs / "A.json"), str(fewer)]) == 0
    assert "scope: compared questions only: 4 of 6; left out: 2 only in" in capsys.readouterr().out


DAMAGED_TRACES = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "a list": "[1, 2]",
    "rounds a number": _set(["rounds"], 3),
    "a candidate of no unit": _set(["rounds", 1, "candidates", 0, "unit_id"], 99_999),
    "a term that is a list": _set(["rounds", 1, "terms", 0, "term"], ["x"]),
}


@pytest.mark.parametrize("what", DAMAGED_TRACES)
def test_compare_refuses_a_damaged_trace_file(runs, tmp_path, capsys, what):
    import shutil

    traces = tmp_path / "ta"
    shutil.copytree(runs / "ta", traces)
    victim = traces / trace_file_name("enc-01")
    text = DAMAGED_TRACES[what]
    if callable(text):
        data = json.loads(victim.read_text(encoding="utf-8"))
        text(data)
        text = json.dumps(data)
    victim.write_text(text, encoding="utf-8")
    refused(capsys, ["compare", runs / "A.json", runs / "B.json", "--traces-a", traces], victim.name)


# ---- fit-judge -----------------------------------------------------------------------------
def _without_gold(src: Path, dst: Path, every: int) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        d = json.loads(line)
        if i % every == every - 1:
            d.pop("supporting_titles")
        out.append(json.dumps(d))
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dst


@pytest.mark.parametrize("every, count", [(2, 20), (1, 40)], ids=["half without gold", "none with gold"])
def test_fit_judge_with_the_oracle_refuses_questions_without_gold(enc_index, tmp_path, capsys, every, count):
    questions = _without_gold(ENC / "questions.jsonl", tmp_path / "q.jsonl", every)
    before = questions.read_bytes()
    out = tmp_path / "J.json"
    args = ["fit-judge", "--db", enc_index.path, "--questions", questions, "--teacher", "oracle", "--out", out]
    refused(capsys, args, f"{questions}: {count} question(s) have no gold labels")
    assert not out.exists() and questions.read_bytes() == before
    # eval says the same of the same file with the oracle
    args = ["eval", "--db", enc_index.path, "--questions", questions, "--judge", "oracle", "--out", tmp_path / "o.json"]
    refused(capsys, args, f"{questions}: {count} question(s) have no gold labels")


BAD_TEACHERS = {
    "a cache folder that is missing": ("cache:{tmp}/none", "--teacher cache:"),
    "a damaged cache file": ("cache:{tmp}/damaged", "not a readable SQLite database"),
    "cache: without a folder": ("cache:", "needs the cache folder"),
    "an unknown judge": ("nosuch", "unknown judge 'nosuch'"),
    "bm25": ("bm25", "scores nothing"),
    "a model file that is missing": ("learned:{tmp}/none.json", "no such file"),
}


@pytest.mark.parametrize("what", BAD_TEACHERS)
def test_fit_judge_names_a_teacher_it_cannot_use(enc_index, tmp_path, capsys, what):
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "cache.db").write_bytes(b"not a database" * 100)
    teacher, says = BAD_TEACHERS[what]
    out = tmp_path / "J.json"
    args = ["fit-judge", "--db", enc_index.path, "--questions", ENC / "questions.jsonl", "--out", out, "--no-model"]
    refused(capsys, [*args, "--teacher", teacher.format(tmp=tmp_path)], says)
    assert not out.exists() and (damaged / "cache.db").read_bytes() == b"not a database" * 100


def test_fit_judge_refuses_a_teacher_that_scores_every_candidate_alike(runs, enc_index, tmp_path, capsys):
    (tmp_path / "teach.py").write_text("def same(question, candidates, context):\n    return [0.0] * len(candidates)\n")
    out = tmp_path / "J.json"
    args = ["fit-judge", "--db", enc_index.path, "--questions", runs / "q6.jsonl", "--out", out, "--no-model"]
    refused(capsys, [*args, "--teacher", f"{tmp_path / 'teach.py'}:same", "--quiet"], "scored all", "nothing to learn")
    assert not out.exists()


def test_fit_judge_distils_questions_without_gold_and_says_it_could_not_cross_validate(
    runs, enc_index, tmp_path, capsys
):
    questions = _without_gold(runs / "q6.jsonl", tmp_path / "q.jsonl", 1)
    out = tmp_path / "J.json"
    args = ["fit-judge", "--db", enc_index.path, "--questions", questions, "--teacher", "lexical", "--out", out]
    assert main([str(a) for a in args] + ["--no-model", "--quiet"]) == 0
    assert "not cross-validated" in capsys.readouterr().err
    model = json.loads(out.read_text(encoding="utf-8"), parse_constant=pytest.fail)  # strict JSON: no NaN
    assert model["cv"]["folds"] == 0


def test_fit_judge_refuses_repeated_question_ids(runs, enc_index, tmp_path, capsys):
    lines = (runs / "q6.jsonl").read_text(encoding="utf-8").splitlines()
    questions = tmp_path / "dup.jsonl"
    questions.write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")
    args = ["fit-judge", "--db", enc_index.path, "--questions", questions, "--out", tmp_path / "J.json", "--no-model"]
    refused(capsys, args, str(questions), "enc-01")


# ---- JEV templates -------------------------------------------------------------------------
TEMPLATE = {"question": "Needed?", "criteria": {"true": "yes", "false": "no"}, "evidence_score_note": "n"}
BAD_TEMPLATES = {
    "JSON nested 100,000 deep": ("t.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "TOML nested 100,000 deep": ("t.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "a lone surrogate": ("t.json", json.dumps({**TEMPLATE, "name": "x\ud800"}).encode(), "lone surrogate"),
    "not UTF-8": ("t.json", json.dumps(TEMPLATE).encode("utf-16"), "not UTF-8"),
    "a number past the digit limit": ("t.json", b'{"name": ' + b"9" * 5000 + b"}", "a value cannot be read"),
    "a list": ("t.json", b"[]", "expected an object"),
}


def jev_eval(enc_index, questions, template, out) -> list:
    # nothing listens on the endpoint: a template is read before any request
    return ["eval", "--db", enc_index.path, "--questions", questions, "--judge", "jev", "--jev-instructions", template,
            "--jev-endpoint", "http://127.0.0.1:9/", "--out", out, "--quiet"]  # fmt: skip


@pytest.mark.parametrize("what", BAD_TEMPLATES)
def test_a_template_that_cannot_be_read_is_named(runs, enc_index, tmp_path, capsys, what):
    name, data, says = BAD_TEMPLATES[what]
    template = tmp_path / name
    template.write_bytes(data)
    out = tmp_path / "o.json"
    refused(capsys, jev_eval(enc_index, runs / "q6.jsonl", template, out), f"--jev-instructions {template}", says)
    assert template.read_bytes() == data and not out.exists()


# ---- which model answered ------------------------------------------------------------------
@pytest.mark.slow
def test_out_json_records_the_learned_models_sha256_and_a_refit_is_a_new_judge(runs, enc_index, tmp_path, capsys):
    questions = runs / "q6.jsonl"
    model, out = tmp_path / "J.json", tmp_path / "out.json"
    partial = tmp_path / "out.json.partial.jsonl"  # eval's resume file for --out out.json

    def fit(l2: str) -> str:
        args = ["fit-judge", "--db", enc_index.path, "--questions", questions, "--out", model, "--no-model"]
        assert main([str(a) for a in args] + ["--features", "coverage,bridge", "--l2", l2, "--quiet"]) == 0
        return json.loads(model.read_text(encoding="utf-8"))["sha256"]

    def eval_() -> dict:
        args = ["eval", "--db", enc_index.path, "--questions", questions, "--judge", f"learned:{model}", "--out", out]
        assert main([str(a) for a in args] + ["--quiet"]) == 0, capsys.readouterr().err
        return json.loads(out.read_text(encoding="utf-8"))

    old = fit("1")
    qs = load_questions(questions)
    evaluate(
        enc_index, qs, f"learned:{model}", options=RunOptions(progress=False, resume_path=partial)
    )  # an interrupted run's lines
    data = eval_()
    assert data["config"]["judge_sha256"] == old
    assert data["stats"]["resumed_questions"] == 6  # the same model: resumed
    evaluate(enc_index, qs, f"learned:{model}", options=RunOptions(progress=False, resume_path=partial))
    new = fit("0.01")  # refitted in place
    assert new != old
    data = eval_()
    assert data["config"]["judge_sha256"] == new
    assert data["stats"]["resumed_questions"] == 0  # another model: another judge, nothing resumed
    # an experiment (ablate's loop) says which model each learned row read
    results = Experiment(
        enc_index, qs[:2], [Config("learned", judge=f"learned:{model}")], RunOptions(progress=False)
    ).run()
    assert results.stats["judge_sha256"] == {"learned": new}


# ---- the same, from the outside --------------------------------------------------------------
@pytest.mark.slow
def test_each_kind_in_a_real_process_exits_2_in_one_line_without_a_traceback(runs, enc_index, tmp_path):
    data = json.loads((runs / "A.json").read_text(encoding="utf-8"))
    data["questions"][0]["judgments"] = "87"
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(data), encoding="utf-8")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    no_gold = _without_gold(runs / "q6.jsonl", tmp_path / "q.jsonl", 2)
    cases = [
        (["compare", wrong, runs / "B.json"], "'judgments' is '87'"),
        (["compare", runs / "A.json", deep], "nested too deeply"),
        (["fit-judge", "--db", enc_index.path, "--questions", no_gold, "--out", tmp_path / "J.json"], "no gold labels"),
        (jev_eval(enc_index, runs / "q6.jsonl", deep, tmp_path / "o.json"), "nested too deeply"),
    ]
    for args, says in cases:
        proc = sag2wb(*args, cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"sag2wb {args[0]}: error:") and proc.stderr.count("\n") == 1, proc.stderr
        assert says in proc.stderr
    assert not (tmp_path / "J.json").exists() and not (tmp_path / "o.json").exists()
