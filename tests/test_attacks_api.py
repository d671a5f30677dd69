"""Issue 34, items 7 and 8: the notebook API (`Run.rerun`, `Run`, `dashboard_for`) takes what a
researcher naturally passes or refuses it by name; a stored corpus graph that is damaged is
built again and one that is no graph of this version is refused and kept; a learned judge's
model file of any shape is a named error; a writer killed with SIGKILL while replacing a model
or a stale graph leaves a temporary file that the next run removes; `RankingView` is a class."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FILM_WORLD, REPO, build_index
from workbench.cli.main import main
from workbench.engine import Run
from workbench.feedback import GraphParams, build_graph, corpus_graph, graph_path, graph_status
from workbench.feedback.graph import GraphProblem
from workbench.index import Index, update_folder
from workbench.index.units import Question
from workbench.judges import JudgeError, JudgeSpec, LexicalJudge
from workbench.judges.learned import LearnedModelError, _canonical, default_model_path, load_model
from workbench.params import ParamsError
from workbench.safeio import TEMP_PREFIX, InputError
from workbench.terms import TermWeightingError

DOCS = REPO / "sample_corpora" / "internal_docs"
QUESTIONS = REPO / "sample_corpora" / "internal_docs.questions.jsonl"
PY = sys.executable
SAG2WB = Path(sys.executable).parent / "sag2wb"
QUESTION = Question("f1", "Where was the director of Glass Harbour born?", ("Glass Harbour", "Mara Quell"))
NAMED = (InputError, ParamsError, JudgeError, TermWeightingError)  # the project's errors for bad input


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX))


# ---- Run.rerun and Run: what a researcher passes ---------------------------------------------------
@pytest.fixture
def film_run(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    run = Run(index, QUESTION, judge=LexicalJudge(index))
    run.run()
    return run


@pytest.mark.slow
def test_rerun_takes_a_dict_of_overrides_and_a_judge_spec(film_run):
    index = film_run.index
    by_dict = film_run.rerun(params={"L": 3, "field_weights": [2, 2, 0.5]})
    by_params = film_run.rerun(params=film_run.params.replace(L=3, field_weights=(2.0, 2.0, 0.5)))
    assert by_dict.params == by_params.params and by_dict.run().final_ranking == by_params.run().final_ranking
    by_spec = film_run.rerun(judge=JudgeSpec.parse("oracle")).run()  # built for this index and the question's gold
    assert by_spec.judge.startswith("oracle") and by_spec.rounds[0].judgments > 0
    assert film_run.rerun(judge=None).run().judge == "bm25"
    fresh = Run(index, QUESTION, {"L": 3}, JudgeSpec.parse("lexical")).run()  # the constructor reads them too
    assert fresh.params.L == 3 and fresh.final_ranking == by_params.trace().final_ranking


@pytest.mark.parametrize(
    "arguments, error, needle",
    [
        ({"judge": "semantic"}, JudgeError, "judge='semantic' is a judge's name; give a judge: JudgeSpec.parse"),
        ({"judge": "semantic:depth=3"}, JudgeError, "JudgeSpec.parse('semantic:depth=3')"),
        ({"judge": JudgeSpec.parse("learned:no-such-model.json")}, LearnedModelError, "no-such-model.json: no such"),
        ({"judge": lambda q, c, x: [0.5] * len(c)}, JudgeError, "a plain function; wrap it: FunctionJudge"),
        ({"judge": 5}, JudgeError, "judge=5: not a judge"),
        ({"params": {"l": 10}}, ParamsError, "unknown parameter 'l'; known: B, s, L"),
        ({"params": ["L=10"]}, ParamsError, "give a Params or a dict of overrides"),
        ({"params": "L=10"}, ParamsError, "give a Params or a dict of overrides"),
        ({"params": {"field_weights": 5}}, ParamsError, "params:"),
        ({"params": {"L": "10"}}, ParamsError, "L must be an integer, got '10'"),
        ({"params": {"B": 10**400}}, ParamsError, "B=an integer of 401 digits is too large"),
        ({"params": {"H": 3}}, ParamsError, "H (expansion rounds) must be 0, 1 or 2"),
        ({"params": {"term_weighting": "nope"}}, TermWeightingError, "unknown term weighting 'nope'"),
        ({"pins": [(1, 2)]}, InputError, "pins=[(1, 2)]: give a dict {(round, unit_id): score}"),
        ({"pins": {1: 0.5}}, InputError, "pins: key 1 is not a (round, unit_id) pair"),
        ({"pins": {(1, 2): float("nan")}}, InputError, "pins[(1, 2)]=nan: a pinned score is a number in [0, 1]"),
        ({"pins": {(1, 2): True}}, InputError, "a pinned score is a number in [0, 1]"),
        ({"from_round": "1"}, InputError, "from_round='1': give a round number >= 0"),
        ({"from_round": -1}, InputError, "from_round=-1"),
        ({"from_round": True}, InputError, "from_round=True"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_rerun_refuses_a_wrong_argument_by_name_and_keeps_the_run(film_run, arguments, error, needle):
    before = (film_run.params, film_run.judge, dict(film_run.pins), list(film_run.rounds))
    with pytest.raises(error) as caught:
        film_run.rerun(**arguments)
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert (film_run.params, film_run.judge, dict(film_run.pins), list(film_run.rounds)) == before


# ---- dashboard_for: questions, db, arguments --------------------------------------------------------
@pytest.fixture(scope="module")
def docs_db(tmp_path_factory):
    return tmp_path_factory.mktemp("dash") / "docs.sqlite"  # built by the first dashboard_for, reopened after


@pytest.mark.parametrize(
    "given, ids, first",
    [
        ("file.json", ["x1", "x2"], "How are refunds approved?"),  # a questions file not named .jsonl
        (Path("file.json"), ["x1", "x2"], "How are refunds approved?"),  # a Path (it was a TypeError)
        ("folder/file.json", ["x1", "x2"], "How are refunds approved?"),
        (["docs-03", "docs-05"], ["docs-03", "docs-05"], None),  # ids of the corpus's own questions, with gold
        ("docs-09", ["docs-09"], None),
        (Question("mine", "Who approves refunds?"), ["mine"], "Who approves refunds?"),
        ("Who approves refunds?", ["q1"], "Who approves refunds?"),
        (["Who approves refunds?", "What is SSO?"], ["q1", "q2"], "Who approves refunds?"),
        ((q for q in ["Who approves refunds?"]), ["q1"], "Who approves refunds?"),
    ],
    ids=lambda v: repr(v)[:30],
)
@pytest.mark.slow
def test_dashboard_for_reads_questions_as_a_researcher_gives_them(docs_db, tmp_path, monkeypatch, given, ids, first):
    from widgets import dashboard_for

    monkeypatch.chdir(tmp_path)
    Path("folder").mkdir()
    lines = [{"_id": "x1", "question": "How are refunds approved?"}, {"_id": "x2", "question": "What is SSO?"}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    Path("file.json").write_text(text)
    Path("folder/file.json").write_text(text)
    dash = dashboard_for(DOCS, questions=given, judge="lexical", db=docs_db)
    assert [q.id for q in dash.model.questions] == ids
    own = {q["_id"]: q for q in map(json.loads, QUESTIONS.read_text().splitlines())}
    expected = first or own[ids[0]]["question"]
    assert dash.trace.question == expected
    if first is None:  # the corpus's own questions keep their gold
        assert list(dash.model.question.gold) == own[ids[0]]["supporting_titles"]
    assert Path("file.json").read_text() == text


@pytest.mark.parametrize(
    "arguments, error, needle",
    [
        ({"questions": "nope.jsonl"}, InputError, "questions='nope.jsonl': no such file or folder"),
        ({"questions": Path("nope.txt")}, InputError, "questions='nope.txt': no such file or folder"),
        ({"questions": Path(".")}, InputError, "Is a directory, not a questions file"),
        ({"questions": Path("plain.txt")}, ValueError, "plain.txt, line 1: not valid JSON"),
        ({"questions": Path("empty.jsonl")}, ValueError, "empty.jsonl: no questions"),
        ({"questions": 5}, InputError, "questions=5: give a list of Question objects or question texts"),
        ({"questions": {"docs-01": 1}}, InputError, "questions={'docs-01': 1}"),
        ({"questions": []}, InputError, "questions: none given"),
        ({"questions": ["Who approves refunds?", 7]}, InputError, "questions[1]=7: give a Question or a question text"),
        ({"questions": ["docs-03", "docs-99"]}, InputError, "unknown question 'docs-99'; the questions are docs-01"),
        ({"question": "docs-99"}, InputError, "unknown question 'docs-99'"),
        ({"question": 3.5}, InputError, "question=3.5: give a question id"),
        ({"corpus": 5}, InputError, "corpus=5: give a folder of .md/.txt files or a corpus.json"),
        ({"db": 5}, InputError, "db=5: give a file path for the index"),
        ({"db": Path(".")}, InputError, "db=.: is a folder; give a file path for the index"),
        ({"db": Path("plain.txt") / "x.sqlite"}, InputError, "cannot write the index there"),
        ({"params": {"l": 10}}, ParamsError, "unknown parameter 'l'"),
        ({"params": 10}, ParamsError, "params=10: give a Params or a dict of overrides"),
        ({"judge": ["lexical"]}, JudgeError, "judge=['lexical']: give a judge name"),
        ({"judge": "semantic:depth=3"}, JudgeError, "bad option 'depth=3'"),
        ({"colour": "red"}, InputError, "dashboard_for: unknown argument(s) colour; known: corpus"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_dashboard_for_refuses_what_it_cannot_use_by_name(docs_db, tmp_path, monkeypatch, arguments, error, needle):
    from widgets import dashboard_for

    monkeypatch.chdir(tmp_path)
    Path("plain.txt").write_text("How are refunds approved?\n")
    Path("empty.jsonl").write_text("")
    given = {"corpus": DOCS, "judge": "lexical", "db": docs_db, **arguments}
    with pytest.raises(error) as caught:
        dashboard_for(**given)
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, (*NAMED, ValueError)) and type(caught.value).__module__ != "builtins"
    assert Path("plain.txt").read_text() == "How are refunds approved?\n"  # inputs intact


@pytest.mark.parametrize(
    "change, error, needle",
    [
        (lambda m: m.set_params(l=3), ParamsError, "set_params: unknown parameter 'l'"),
        (lambda m: m.set_params(L="3"), ParamsError, "L must be an integer, got '3'"),
        (lambda m: m.pin(1, 2, 1.5), InputError, "a pinned score is a number in [0, 1]"),
        (lambda m: m.pin("one", 2, 0.5), InputError, "pins: key ('one', 2) is not a (round, unit_id) pair"),
        (lambda m: m.set_judge(["lexical"]), JudgeError, "judge=['lexical']: give a judge name"),
    ],
    ids=["unknown-param", "param-type", "pin-score", "pin-round", "judge-type"],
)
def test_the_dashboard_model_refuses_a_bad_change_by_name_and_keeps_its_trace(film_run, change, error, needle):
    from widgets import DashboardModel

    model = DashboardModel(film_run.index, [QUESTION], judge="lexical")
    before = (model.params, model.pins, model.judge_spec, model.trace)
    with pytest.raises(error) as caught:
        change(model)
    assert needle in str(caught.value)
    assert (model.params, model.pins, model.judge_spec, model.trace) == before


@contextlib.contextmanager
def read_only_folder(tmp_path: Path):
    """A folder nobody may write in: chmod a-w, or (as root, who ignores modes) a read-only tmpfs."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    if shutil.which("mount") is None:
        pytest.skip("root, and no mount command to make a read-only folder")
    folder = Path(tempfile.mkdtemp(prefix="sag2wb-ro-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(folder)]).returncode:
        folder.rmdir()
        pytest.skip("root, and no read-only tmpfs can be mounted here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)])
        folder.rmdir()


def test_dashboard_for_names_a_db_in_a_read_only_folder(tmp_path):
    from widgets import dashboard_for

    with read_only_folder(tmp_path) as ro:
        for db in (ro / "docs.sqlite", ro / "sub" / "docs.sqlite"):
            with pytest.raises(InputError) as caught:
                dashboard_for(DOCS, judge="lexical", db=db)
            message = str(caught.value)
            assert message.startswith(f"db={db}: cannot write the index there (") and "writable folder" in message
            assert ".building-" not in message and TEMP_PREFIX not in message  # our temporary file is never named


# ---- the stored corpus graph -------------------------------------------------------------------------
PARAMS = GraphParams(neighbours=4)


@pytest.fixture
def graph_db(tmp_path):
    db = tmp_path / "docs.sqlite"
    Index.build(DOCS, db)
    corpus_graph(Index(db), PARAMS, progress=False)
    return db


def _rewrite(path: Path, **changes) -> None:
    """The stored graph with some arrays (or its meta, a dict) replaced."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    meta.update(changes.pop("meta", {}))
    arrays.update(changes)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path.write_bytes(buf.getvalue())


def _damage_member(path: Path, member: str) -> None:
    """Flip bytes in the middle of one member's compressed data: its CRC no longer matches."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + info.compress_size // 3, start + info.compress_size // 3 + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: _damage_member(p, "neighbours.npy"),  # a bad CRC in an array
        lambda p: _damage_member(p, "meta.npy"),  # a bad CRC in the meta (the zip still lists our members)
        lambda p: _rewrite(p, ids=np.load(p)["ids"] + 1000),  # lists naming other units
        lambda p: _rewrite(p, neighbours=np.full_like(np.load(p)["neighbours"], 99999)),
        lambda p: _rewrite(p, scores=np.full_like(np.load(p)["scores"], np.nan)),
        lambda p: _rewrite(p, neighbours=np.load(p)["neighbours"][:, :2]),  # fewer lists than its meta says
        lambda p: _rewrite(p, ids=np.load(p)["ids"].reshape(-1, 1)),
        lambda p: _rewrite(p, meta={"params": "eight"}),
        lambda p: p.write_bytes(_npz(np.frombuffer(b"[" * 100000, np.uint8))),  # our members, its meta unreadable
        lambda p: p.write_bytes(_npz(np.zeros(4))),
    ],
    ids=[
        "crc-array",
        "crc-meta",
        "other-ids",
        "unknown-neighbours",
        "nan-scores",
        "short-lists",
        "2d-ids",
        "meta",
        "deep-meta",
        "float-meta",
    ],
)
@pytest.mark.slow
def test_a_damaged_corpus_graph_is_built_again(graph_db, capsys, damage):
    path = graph_path(Index(graph_db), PARAMS)
    damage(path)
    index = Index(graph_db)
    assert graph_status(index, PARAMS) == "damaged"
    graph = corpus_graph(index, PARAMS, progress=False)
    assert "damaged" in capsys.readouterr().err
    assert graph.as_documents(index) == build_graph(index, PARAMS, progress=False).as_documents(index)
    assert graph_status(Index(graph_db), PARAMS) == "current"


def _npz(meta: dict) -> bytes:
    buf = io.BytesIO()
    ids = np.arange(3, dtype=np.int64)
    np.savez_compressed(buf, ids=ids, neighbours=np.zeros((3, 1), np.int64), scores=np.zeros((3, 1)), meta=meta)
    return buf.getvalue()


def zip_of(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"", "not a zip file (empty, cut short or another kind of file)"),
        (b"my notes", "not a zip file"),
        ("truncated", "not a zip file"),
        (np.lib.format.MAGIC_PREFIX + b"\x01\x00", "not a zip file"),  # a .npy
        ("folder", "a folder"),
        (_npz(np.frombuffer(json.dumps({"format": "sag2wb-corpus-graph-2"}).encode(), np.uint8)), "another sag2wb"),
        (_npz(np.frombuffer(b'{"format": "something else"}', np.uint8)), "not a corpus graph of this workbench"),
        (zip_of({"notes.txt": b"[" * 1000}), "not a readable corpus graph"),  # a zip, but not ours
    ],
    ids=["empty", "text", "truncated", "npy", "folder", "newer", "other-format", "other-zip"],
)
def test_a_file_that_is_no_graph_of_this_version_is_refused_and_kept(graph_db, content, needle):
    path = graph_path(Index(graph_db), PARAMS)
    if content == "truncated":
        content = path.read_bytes()[: path.stat().st_size // 2]
    if content == "folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(content)
    for call in (graph_status, corpus_graph):
        with pytest.raises(GraphProblem) as caught:
            call(Index(graph_db), PARAMS)
        assert needle in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert path.is_dir() if content == "folder" else path.read_bytes() == content


def test_a_graph_of_another_index_is_refused_by_name(tmp_path):
    other = build_index(tmp_path, FILM_WORLD, "films.sqlite")
    graph = build_graph(other, PARAMS, progress=False)
    with pytest.raises(GraphProblem, match=r"unit 999 is not in the corpus graph \(built for another index\?\)"):
        graph.neighbours_of(999)


# ---- learned judge model files -------------------------------------------------------------------------
def _signed(mutate) -> str:
    data = json.loads(default_model_path().read_text())
    mutate(data)
    data["sha256"] = hashlib.sha256(_canonical(data)).hexdigest()  # a correct checksum: the content is checked
    return json.dumps(data)


def _set(path: str, value):
    def mutate(data):
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value(copy.deepcopy(node[last])) if callable(value) else value

    return mutate


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[" * 100000 + "]" * 100000, "JSON nested too deeply to read"),
        ('{"schema": "sag2wb-learned-judge", "version": ' + "9" * 5000 + "}", "a value cannot be read"),
        (_signed(_set("model.bias", "0.5")), '"model.bias" must be a finite number, not a string'),
        (_signed(_set("model.weights", lambda w: [str(x) for x in w])), '"model.weights[0]" must be a finite number'),
        (_signed(_set("model.weights", lambda w: [True] * len(w))), "not true/false"),
        (_signed(_set("model.mean", lambda m: m[:2])), '"model.mean" must be a list of'),
        (_signed(_set("model.std", lambda s: [0.0] * len(s))), '"model.std" must be positive'),
        (_signed(_set("model.l2", None)), '"model.l2" must be a finite number, not null'),
        (_signed(_set("model.context_weights", ["relative"])), "context_weights ['relative'] is none of"),
        (_signed(_set("model", [])), '"model" must be an object, not a list'),
        (_signed(_set("features", "coverage")), '"features" must be a list of feature names'),
        (_signed(_set("version", True)), "schema version True"),
        (json.dumps(json.loads(default_model_path().read_text()) | {"weights": [math.nan]}), "not canonical JSON"),
        (default_model_path().read_text().replace('"weights": [', '"weights": [NaN, ', 1), "not canonical JSON"),
        ("folder", "is a folder; give the model file"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_a_model_file_of_any_shape_is_a_named_error(tmp_path, text, needle):
    path = tmp_path / "J.json"
    if text == "folder":
        path.mkdir()
    else:
        path.write_text(text)
    with pytest.raises(LearnedModelError) as caught:
        load_model(path)
    assert needle in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, InputError)  # exit 2


@pytest.mark.slow
def test_a_model_file_nested_too_deeply_is_one_line_and_exit_2_from_the_cli(tmp_path):
    db = build_index(tmp_path, FILM_WORLD).path
    model = tmp_path / "J.json"
    model.write_text("[" * 100000 + "]" * 100000)
    proc = subprocess.run(
        [str(SAG2WB), "search", "--db", str(db), "Glass Harbour", "--judge", f"learned:{model}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert "JSON nested too deeply" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# ---- kill -9 while a model or a stale graph is replaced ---------------------------------------------
def _killed_while_replacing(target: Path, code: str) -> None:
    """Run `code` in a fresh Python whose os.replace onto `target` announces itself and hangs;
    SIGKILL it there (the temporary file is written and fsynced, the rename not done)."""
    hang = f"""
import os, sys, time
from pathlib import Path
real = os.replace
def replace(src, dst, *a, **k):
    if Path(dst).name == {target.name!r}:
        print("replacing", flush=True)
        time.sleep(600)
    return real(src, dst, *a, **k)
os.replace = replace
"""
    child = subprocess.Popen([PY, "-c", hang + code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "replacing"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL


FIT = (
    "from workbench.cli.main import main; sys.exit(main(['fit-judge', '--db', {db!r}, '--questions', {q!r}, "
    "'--teacher', 'oracle', '--out', {out!r}, '--no-model', '--folds', '2', '--rounds', '1', '--quiet', '--force']))"
)
GRAPH = (
    "from workbench.feedback import GraphParams, corpus_graph; from workbench.index import Index; "
    "corpus_graph(Index({db!r}), GraphParams(neighbours=4), progress=False)"
)


@pytest.mark.slow
def test_kill_9_while_fit_judge_replaces_a_model_leaves_a_temp_the_next_fit_removes(tmp_path):
    db = tmp_path / "docs.sqlite"
    Index.build(DOCS, db)
    out = tmp_path / "J.json"
    shutil.copy(default_model_path(), out)
    old = out.read_bytes()
    code = FIT.format(db=str(db), q=str(QUESTIONS), out=str(out))
    _killed_while_replacing(out, code)
    assert out.read_bytes() == old and len(temps(tmp_path)) == 1  # the old model whole; the temp left
    argv = ["fit-judge", "--db", str(db), "--questions", str(QUESTIONS), "--teacher", "oracle", "--out", str(out)]
    assert main([*argv, "--no-model", "--folds", "2", "--rounds", "1", "--quiet", "--force"]) == 0  # the next fit
    assert temps(tmp_path) == [] and out.read_bytes() != old
    load_model(out)


@pytest.mark.slow
def test_kill_9_while_a_stale_graph_is_replaced_leaves_a_temp_the_next_run_removes(tmp_path, capsys):
    docs = Path(shutil.copytree(DOCS, tmp_path / "docs"))
    db = tmp_path / "docs.sqlite"
    Index.build(docs, db)
    corpus_graph(Index(db), PARAMS, progress=False)
    (docs / "auth" / "sso.md").write_text("# Single sign-on\n\nSSO is switched off; the session keeps role_id.\n")
    update_folder(db, docs)
    path = graph_path(Index(db), PARAMS)
    stale = path.read_bytes()
    assert graph_status(Index(db), PARAMS) == "stale"
    _killed_while_replacing(path, GRAPH.format(db=str(db)))
    assert path.read_bytes() == stale and len(temps(tmp_path)) == 1
    corpus_graph(Index(db), PARAMS, progress=False)  # the next run
    assert "stale" in capsys.readouterr().err
    assert temps(tmp_path) == [] and graph_status(Index(db), PARAMS) == "current"


# ---- item 8: RankingView is a class, one view per model ---------------------------------------------
@pytest.mark.slow
def test_ranking_view_is_a_class_and_lets_its_model_go(docs_db):
    # in its own process: closing every widget there cannot close one a later test shares
    code = f"""
import gc, weakref
import ipywidgets
from pathlib import Path
from widgets import Dashboard, views
from workbench.index.store import Index
from workbench.index.units import Question
db, docs = Path({str(docs_db)!r}), Path({str(DOCS)!r})
index = Index(db) if db.exists() else Index.build(docs, db)
questions = [Question("a", "How are refunds approved?")]
dash = Dashboard(index, questions, judge="lexical")
assert isinstance(dash.ranking, views.RankingView) and issubclass(views.RankingView, views.TableView)
other = views.RankingView(dash.model)
assert other is not dash.ranking  # a view per call, not one cached per model
model = Dashboard(index, questions, judge="lexical").model
gone = weakref.ref(model)
views.RankingView(model)
del model, dash, other
ipywidgets.Widget.close_all()  # the widget registry lets go of every view ...
gc.collect()
assert gone() is None  # ... and nothing else keeps a closed dashboard's model (its index, its trace) alive
"""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
