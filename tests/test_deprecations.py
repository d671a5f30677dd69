"""Issue 35, item 4: a run's record shape is a value, evaluate's and Experiment's options are one
frozen `RunOptions`, and the old names and call forms still work only with a DeprecationWarning,
which no import path of the package itself ever triggers."""

from __future__ import annotations

import ast
import importlib
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import workbench.runs
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index
from workbench.index.units import CorpusError
from workbench.judges.jev.server import JudgeServer
from workbench.judges.lexical import LexicalJudge
from workbench.judges.registry import JudgeSpec
from workbench.params import Params
from workbench.runs.evaluation import evaluate
from workbench.runs.experiment import Experiment, paper_ablation
from workbench.runs.options import Hooks, RunOptions
from workbench.runs.policies import Config
from workbench.runs.records import EVALUATION, EXPERIMENT, ExperimentError
from workbench.runs.tasks import QuestionTask

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_corpora"
FACES = [
    "workbench.runs.evaluation",
    "workbench.runs.experiment",
    "workbench.formats",
    "workbench.pyterrier",
    "workbench.index.corpora",
]

# every module of the package, imported with DeprecationWarning as an error (extra: more to import)
IMPORT_ALL = """
import importlib, pkgutil, sys, warnings
warnings.simplefilter("error", DeprecationWarning)
import workbench, widgets
names = [m.name for pkg in (workbench, widgets) for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in names + sys.argv[1:]:
    if name.endswith("__main__") or "voila_config" in name:
        continue
    importlib.import_module(name)
print(len(names), "modules")
"""


def _import_all(*extra: str, path: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        "PYTHONPATH": f"{path}:{ROOT}" if path else str(ROOT),
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_no_module_of_the_package_imports_an_old_name():
    proc = _import_all()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "modules" in proc.stdout


@pytest.mark.slow
def test_the_import_check_fails_on_a_module_that_imports_an_old_name(tmp_path):
    (tmp_path / "old_user.py").write_text("from workbench.formats import load_beir_corpus\n")
    proc = _import_all("old_user", path=tmp_path)
    assert proc.returncode != 0
    assert "workbench.formats.load_beir_corpus is deprecated" in proc.stderr


def _old_names():
    for face in FACES:
        module = importlib.import_module(face)
        for name, where in type(module).old_names.items():
            yield face, name, where


@pytest.mark.parametrize(("face", "name", "where"), list(_old_names()), ids=lambda v: v if "." not in v else None)
def test_each_old_name_warns_and_is_the_object_where_it_lives(face, name, where):
    home, _, new = where.partition(":")
    with pytest.warns(DeprecationWarning, match=rf"^{face}\.{name} is deprecated: import it from {home} "):
        got = getattr(importlib.import_module(face), name)
    assert got is getattr(importlib.import_module(home), new or name)


def test_the_from_import_form_warns_at_the_importing_line():
    with pytest.warns(DeprecationWarning) as caught:
        exec("from workbench.runs.evaluation import trace_file_name", {})
    assert caught[0].filename == "<string>"  # the user's line, not the helper's


def test_a_face_module_uses_the_names_it_keeps_without_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(CorpusError, match="no such file or folder"):  # corpora raising its CorpusError
            load_corpus(tmp_path / "missing.json")


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    index = Index.build(SAMPLES / "internal_docs", tmp_path_factory.mktemp("docs") / "docs.sqlite")
    return index, load_questions(SAMPLES / "internal_docs.questions.jsonl")


def _body(result) -> dict:
    data = json.loads(json.dumps(result.to_dict()))
    data["stats"].pop("seconds", None)
    return data


def test_old_evaluate_form_warns_and_gives_what_the_new_form_gives(tmp_path, docs):
    index, questions = docs
    new = evaluate(index, questions, "lexical", Params(H=1), RunOptions(progress=False, resume_path=tmp_path / "a"))
    with pytest.warns(DeprecationWarning, match=r"evaluate's option keywords \(progress, resume_path\)"):
        old = workbench.runs.evaluate(
            index, questions, "lexical", Params(H=1), progress=False, resume_path=tmp_path / "b"
        )
    assert _body(old) == _body(new)
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


@pytest.mark.slow
def test_old_evaluate_form_puts_jev_options_in_the_spec_and_names_the_judge_as_given(tmp_path, docs):
    index, questions = docs
    server = JudgeServer(LexicalJudge(index)).start()
    try:
        options = {"endpoint": server.url, "cache_dir": str(tmp_path / "cache")}
        new = evaluate(index, questions[:3], JudgeSpec.parse("jev", **options), options=RunOptions(progress=False))
        with pytest.warns(DeprecationWarning, match="cache_dir, endpoint, progress"):
            old = workbench.runs.evaluate(index, questions[:3], "jev", progress=False, **options)
    finally:
        server.stop()
    assert _body(old)["config"]["judge"] == "jev" and _body(old)["questions"] == _body(new)["questions"]


@pytest.mark.slow
def test_old_experiment_keywords_warn_and_give_the_same_rows(tmp_path, docs):
    index, questions = docs
    configs = paper_ablation(judge="lexical")
    new = Experiment(index, questions, configs, RunOptions(progress=False, resume_path=tmp_path / "a")).run()
    with pytest.warns(DeprecationWarning, match="Experiment's option keywords"):
        old = Experiment(index, questions, configs, progress=False, resume_path=tmp_path / "b").run()
    assert old.records == new.records
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    with pytest.raises(TypeError, match="unexpected keyword arguments: resume"):
        Experiment(index, questions, configs, RunOptions(progress=False), resume="x")


def test_the_new_forms_and_the_face_do_not_warn(docs):
    index, questions = docs
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        workbench.runs.evaluate(index, questions[:2], "lexical", options=RunOptions(progress=False))
        workbench.runs.Experiment(index, questions[:2], [Config("a", judge="lexical")], RunOptions(progress=False))


@pytest.mark.parametrize(
    "options",
    [
        RunOptions(trace_dir="traces"),
        RunOptions(hooks=Hooks(judge_for=print)),
        RunOptions(hooks=Hooks(map_outcomes=map)),
    ],
    ids=["trace_dir", "judge_for", "map_outcomes"],
)
def test_one_configuration_options_are_refused_for_an_experiment_of_several(docs, options):
    index, questions = docs
    with pytest.raises(ExperimentError, match="only a run of one configuration takes it; this one has 2"):
        Experiment(index, questions, [Config("a", judge="lexical"), Config("b", judge="bm25")], options)


def test_the_record_shape_is_a_value_that_travels_by_name(docs):
    index, questions = docs
    assert pickle.loads(pickle.dumps(EVALUATION)) is EVALUATION
    task = pickle.loads(pickle.dumps(QuestionTask.evaluating(questions[0], "lexical", Params())))
    assert task.shape is EVALUATION
    trace = Experiment(index, questions[:1], [Config("a", judge="lexical")], RunOptions(progress=False))
    trace = trace.trace(trace.configs[0], questions[0])
    assert list(EVALUATION.record(questions[0], trace, "a"))[:2] == ["_id", "type"]
    assert list(EXPERIMENT.record(questions[0], trace, "a"))[:3] == ["config", "question", "type"]
    with pytest.warns(DeprecationWarning, match="question_record is deprecated"):
        assert workbench.runs.question_record(questions[0], trace) == EVALUATION.record(questions[0], trace, "a")


def test_no_boolean_mode_is_left_in_the_run_layer():
    """The shape is chosen once: no `evaluation` flag as a parameter, field or attribute in runs/."""
    found = []
    for path in sorted((ROOT / "workbench" / "runs").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            args = node.args.args + node.args.kwonlyargs if isinstance(node, ast.FunctionDef) else []
            names = [a.arg for a in args]
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.append(node.target.id)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.append(node.attr)
            found += [f"{path.name}:{node.lineno}" for n in names if n == "evaluation"]
    assert found == []
