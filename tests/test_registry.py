"""The judge registry: one place for every judge name. Each kind declares its text form and its
options (type, default, range, help); parse, print, help, messages and the dashboard's picker are
written from it, so a kind registered here alone shows up everywhere."""

from __future__ import annotations

import inspect
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FILM_WORLD, REPO, build_index
from workbench.index.units import Question
from workbench.judges.options import SEMANTIC_OPTIONS, OptionInfo
from workbench.judges.registry import (
    JUDGE_KINDS,
    JudgeKind,
    JudgeOptionError,
    JudgeSpec,
    UnknownJudge,
    judge_help,
    judge_names,
    picker_choices,
    register_judge_kind,
)
from workbench.judgment import JudgeError
from workbench.safeio import InputError


class ConstantJudge:
    """Every candidate the same score: the judge of the test's own kind."""

    def __init__(self, level: float):
        self.level, self.name, self.key = level, f"constant {level:g}", f"constant-v1:{level!r}"

    def judge(self, question, candidates, context):
        return [self.level] * len(candidates)


HALF = JudgeKind(
    "half",
    lambda spec, index, gold: ConstantJudge(spec.value("level")),
    "every candidate one score, a test's kind",
    (
        OptionInfo("level", float, 0.5, "the score", (0.0, 1.0, True), metavar="L"),
        OptionInfo("steps", int, 2, "a count", (1, 5, True), metavar="N"),
        OptionInfo("note", str, None, "a note given beside the text", in_text=False, none=True),
    ),
)

# one real process: the test's kind registered, then the CLI for each command line given (as JSON);
# each command's stdout and stderr end with a NUL line, and the exit codes come last
WITH_HALF = """
import json, sys
from tests.test_registry import HALF
from workbench.judges.registry import register_judge_kind
register_judge_kind(HALF)
from workbench.cli.main import main
codes = []
for argv in json.loads(sys.argv[1]):
    try:
        codes.append(main(argv))
    except SystemExit as exc:
        codes.append(exc.code)
    for stream in (sys.stdout, sys.stderr):
        print("\\0", file=stream, flush=True)
print(json.dumps(codes))
"""


def sag2wb_with_half(commands: list[list], cwd: Path) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each command line, run in one process with HALF registered."""
    proc = subprocess.run(
        [sys.executable, "-c", WITH_HALF, json.dumps([[str(a) for a in argv] for argv in commands])],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    *outs, codes = proc.stdout.split("\0\n")
    return list(zip(json.loads(codes), outs, proc.stderr.split("\0\n"), strict=False))


HELPS = ("eval", "search", "ablate", "dashboard", "judge-server")


@pytest.fixture(scope="module")
def half_cli(tmp_path_factory):
    """The CLI's answers with the test's kind registered: every command's help, an eval with
    the kind, one with a value outside its range, and a search with an unknown judge."""
    root = tmp_path_factory.mktemp("half")
    build_index(root, FILM_WORLD, "film.sqlite")
    questions = root / "q.jsonl"
    question = {"_id": "q1", "question": "Where was Mara Quell born?", "supporting_titles": ["Mara Quell"]}
    questions.write_text(json.dumps(question) + "\n")
    run = ["eval", "--db", root / "film.sqlite", "--questions", questions, "--quiet"]
    commands = {
        **{f"help {c}": [c, "--help"] for c in HELPS},
        "eval": [*run, "--out", root / "out.json", "--judge", "half:level=0.25"],
        "eval out of range": [*run, "--out", root / "bad.json", "--judge", "half:level=7"],
        "unknown": ["search", "--db", root / "film.sqlite", "glass", "--judge", "nosuch"],
    }
    answers = sag2wb_with_half(list(commands.values()), root)
    return root, dict(zip(commands, answers, strict=True))


@pytest.fixture
def half():
    """The test's kind in this process's registry, removed after."""
    register_judge_kind(HALF)
    yield HALF
    JUDGE_KINDS.pop(HALF.name, None)


@pytest.fixture
def film(tmp_path):
    index = build_index(tmp_path, FILM_WORLD)
    questions = [Question("q1", "Where was the director of Glass Harbour born?", ("Glass Harbour", "Mara Quell"))]
    return index, questions


# ---- every text form ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "auto",
        "bm25",
        "lexical",
        "lexical-bridge",
        "oracle",
        "semantic",
        "semantic:gamma=0.5,signals=model+coverage",
        "semantic:cjk=coverage,scale=20.0,shift=-0.5",
        "learned",
        "learned:J.json",
        "jev",
        "jev:instructions=NAME",
        "jev:instructions=my/template.toml",
        "my_judges.py:score",
    ],
)
def test_every_text_form_round_trips_and_is_canonical(text):
    spec = JudgeSpec.parse(text)
    assert str(spec) == text
    assert JudgeSpec.parse(str(spec)) == spec
    assert pickle.loads(pickle.dumps(spec)) == spec  # a task argument for another process


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("semantic:signals=model+coverage,gamma=0.5", "semantic:gamma=0.5,signals=model+coverage"),
        ("semantic: gamma = 0.5 ,", "semantic:gamma=0.5"),
        ("semantic:gamma=1", "semantic:gamma=1.0"),
        ("semantic:", "semantic"),
    ],
)
def test_other_spellings_print_as_the_canonical_text(text, canonical):
    assert str(JudgeSpec.parse(text)) == canonical
    assert JudgeSpec.parse(canonical) == JudgeSpec.parse(text)


def test_options_given_beside_the_text_are_checked_but_not_printed(tmp_path):
    spec = JudgeSpec.parse("jev:instructions=NAME", endpoint="http://127.0.0.1:1", cache_dir=tmp_path, cache_only="yes")
    assert str(spec) == "jev:instructions=NAME"
    assert spec.get("cache_dir") == str(tmp_path) and spec.get("cache_only") is True  # the declared types
    assert JudgeSpec.parse(spec, concurrency=3).get("concurrency") == 3


# ---- a kind registered in the test alone --------------------------------------------------------
def test_a_registered_kind_parses_prints_and_builds(half):
    assert "half" in judge_names()
    spec = JudgeSpec.parse("half:level=0.25,steps=3", note="beside")
    assert spec == JudgeSpec("half", (("level", 0.25), ("note", "beside"), ("steps", 3)))
    assert str(spec) == "half:level=0.25,steps=3" and JudgeSpec.parse(str(spec)) == JudgeSpec(
        "half", (("level", 0.25), ("steps", 3))
    )
    assert str(JudgeSpec.parse("half")) == "half"
    assert JudgeSpec.parse("half").value("level") == 0.5 and JudgeSpec.parse("half").build(None).level == 0.5
    assert spec.build(None).level == 0.25
    assert "half[:level=L,steps=N] (every candidate one score, a test's kind)" in judge_help()


@pytest.mark.slow
def test_a_registered_kind_is_in_the_picker_and_runs_from_it(half, film):
    from widgets import Dashboard

    index, questions = film
    dash = Dashboard(index, questions, judge="lexical")
    assert "half" in dash.model.judge_options() and "half" in dash.judge.picker.options
    assert "half" in picker_choices()
    dash.judge.picker.value = "half"  # the control, as a user would
    assert dash.model.judge == JudgeSpec("half") and isinstance(dash.model.judge, JudgeSpec)
    assert set(dash.model.frames["ranking"]["score"]) == {0.5}
    dash.model.set_judge("half:level=0.75")
    assert dash.model.judge_spec == "half:level=0.75" and set(dash.model.frames["ranking"]["score"]) == {0.75}
    assert "half:level=0.75" in dash.judge.picker.options


@pytest.mark.slow
def test_a_registered_kind_is_in_every_commands_help(half_cli):
    _, answers = half_cli

    def help_of(command: str) -> str:
        code, out, err = answers[f"help {command}"]
        assert code == 0, err
        return "".join(out.split())  # argparse wraps lines anywhere, even inside a word

    for command in ("eval", "search", "ablate", "dashboard"):
        shown = help_of(command)
        assert "half[:level=L,steps=N](everycandidateonescore,atest'skind)" in shown, command
        assert "learned[:PATH]" in shown and "FILE.py:NAME" in shown
    served = help_of("judge-server").split("options:")[1].split("--judgeJUDGE")[1].split("--dbDB")[0]
    assert "half[:level=L,steps=N]" in served and "learned[:PATH]" in served and "data-hash" in served
    assert "oracle" not in served and "jev[:" not in served  # it needs gold; it would call a server


@pytest.mark.slow
def test_a_registered_kind_runs_through_eval_in_a_real_process(half_cli):
    root, answers = half_cli
    code, _, err = answers["eval"]
    assert code == 0, err
    assert json.loads((root / "out.json").read_text())["config"]["judge"] == "half:level=0.25"
    code, _, err = answers["eval out of range"]
    assert code == 2 and "bad option 'level=7' (level must be in [0, 1], got 7.0)" in err
    assert not (root / "bad.json").exists()


def test_the_unknown_judge_message_names_every_kind(half_cli):
    code, _, err = half_cli[1]["unknown"]
    message = err.strip()
    assert code == 2 and len(message.splitlines()) == 1
    assert "unknown judge 'nosuch'; valid judges: bm25, lexical, oracle" in message
    forms = [n for n in judge_names() if n != "semantic"] + ["semantic[:", "learned[:PATH]", "FILE.py:NAME", "half"]
    assert [f for f in forms if f not in message] == []


# ---- every declared option is enforced ------------------------------------------------------
@pytest.mark.parametrize(
    "text, problem",
    [
        ("half:level=2", "bad option 'level=2' (level must be in [0, 1], got 2.0)"),
        ("half:level=high", "level must be a number in [0, 1], got 'high'"),
        ("half:level=nan", "level must be in [0, 1], got nan"),
        ("half:steps=0", "steps must be in [1, 5], got 0"),
        ("half:steps=1.5", "steps must be a whole number in [1, 5], got '1.5'"),
        ("half:speed=3", "bad option 'speed=3' (known options: level, steps)"),
        ("half:note=x", "known options: level, steps"),  # given beside the text, never in it
        ("half:level", "expected NAME=VALUE"),
        ("half:level=0.1,level=0.2", "level given twice"),
        ("lexical:gamma=0.5", "bad option 'gamma=0.5' (known options: none"),
        ("jev:endpoint=http://x", "known options: instructions"),
        ("learned:", "give learned:PATH, the model file from `sag2wb fit-judge`"),
    ],
)
def test_options_in_the_text_are_checked_by_their_declaration(half, text, problem):
    with pytest.raises(JudgeOptionError) as caught:
        JudgeSpec.parse(text)
    assert problem in str(caught.value) and str(caught.value).startswith(f"judge {text!r}: ")
    assert isinstance(caught.value, JudgeError) and isinstance(caught.value, InputError)  # the CLI: exit 2


@pytest.mark.parametrize(
    "text, options, problem",
    [
        ("half", {"level": True}, "level must be a number in [0, 1], got True"),
        ("half", {"level": float("inf")}, "level must be in [0, 1], got inf"),
        ("half", {"steps": 2.0}, "steps must be a whole number in [1, 5], got 2.0"),
        ("half", {"note": 5}, "note must be a text, got 5"),
        ("half", {"speed": 1}, "unknown option 'speed' (known options: level, steps, note)"),
        ("jev", {"concurrency": 0}, "concurrency must be >= 1, got 0"),
        ("jev", {"cache_only": "maybe"}, "cache_only must be true or false, got 'maybe'"),
        ("jev", {"payload_style": "xml"}, "payload_style must be 'inline' or 'stateful', got 'xml'"),
        ("jev", {"timeout": 0}, "timeout must be > 0, got 0.0"),
        ("jev", {"endpiont": "http://x"}, "unknown option 'endpiont' (known options: instructions, endpoint"),
        ("my.py:score", {"timeout": "soon"}, "timeout='soon': expected a number of seconds"),
        ("my.py:score", {"timeout": -1}, "expected a number of seconds >= 0"),
        ("semantic", {"gamma": 2}, "gamma must be in [0, 1], got 2.0"),
        ("semantic", {"signals": ("model", "magic")}, "signals must be a non-empty subset"),
        ("learned", {"path": 5}, "path must be a path, got 5"),
        ("lexical", {"gamma": 0.5}, "unknown option 'gamma' (known options: none)"),
    ],
)
def test_options_given_in_code_are_checked_by_their_declaration(half, text, options, problem):
    with pytest.raises(JudgeOptionError, match=r"^judge ") as caught:
        JudgeSpec.parse(text, **options)
    assert problem in str(caught.value)
    with pytest.raises(JudgeOptionError):
        JudgeSpec.parse(text).with_options(**options)


def test_the_semantic_declarations_are_the_judges_defaults():
    """The builder passes the declared defaults; they are the judge's own, so a spec without
    options and SemanticJudge() are the same judge."""
    from workbench.judges.semantic import SemanticJudge

    signature = inspect.signature(SemanticJudge).parameters
    assert {o.name: o.default for o in SEMANTIC_OPTIONS} == {
        o.name: signature[o.name].default for o in SEMANTIC_OPTIONS
    }


def test_the_function_judges_time_limit_is_an_option_of_its_spec(tmp_path, monkeypatch):
    path = tmp_path / "mine.py"
    path.write_text("def score(question, candidates, context):\n    return [0.5] * len(candidates)\n")
    monkeypatch.setenv("SAG2WB_JUDGE_TIMEOUT", "7")
    text = f"{path}:score"
    assert JudgeSpec.parse(text).build(None).timeout == 7.0  # not given: the variable, the user's own default
    spec = JudgeSpec.parse(text, timeout="2.5")
    assert str(spec) == text and spec.get("timeout") == 2.5  # not part of the text; it travels in the spec
    assert pickle.loads(pickle.dumps(spec)).build(None).timeout == 2.5
    assert JudgeSpec.parse(text, timeout="none").build(None).timeout is None
    assert JudgeSpec.parse(text, timeout=0).build(None).timeout is None  # 0: no limit


def test_unknown_judges_are_their_own_error():
    with pytest.raises(UnknownJudge, match="unknown judge 'function'"):
        JudgeSpec.parse("function")  # a kind named only by its own form, FILE.py:NAME
    with pytest.raises(UnknownJudge, match="unknown judge 'half'"):
        JudgeSpec.parse("half")  # not registered here


def test_a_kind_is_registered_once_and_by_a_usable_name(half):
    with pytest.raises(JudgeError, match="registered already"):
        register_judge_kind(HALF)
    with pytest.raises(JudgeError, match="a name without ':'"):
        register_judge_kind(JudgeKind("a:b", HALF.build, "bad"))


# ---- the widget holds a JudgeSpec ---------------------------------------------------------------
def test_the_dashboard_holds_a_spec_and_checks_its_jev_options(film, tmp_path, monkeypatch):
    from widgets.model import DashboardModel

    for variable in ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    index, questions = film
    model = DashboardModel(index, questions, judge="semantic:signals=coverage")
    assert model.judge == JudgeSpec("semantic", (("signals", ("coverage",)),))
    assert model.judge_spec == "semantic:signals=coverage" and "jev" not in model.judge_options()
    with pytest.raises(JudgeOptionError, match="unknown option 'cache_dri'"):
        DashboardModel(index, questions, judge="lexical", jev_options={"cache_dri": str(tmp_path)})
    configured = DashboardModel(index, questions, judge="lexical", jev_options={"cache_dir": Path(tmp_path)})
    assert "jev" in configured.judge_options()  # a cache configures JEV without a key
    assert configured.configured["jev"].get("cache_dir") == str(tmp_path)
    with pytest.raises(UnknownJudge, match=r"valid judges: bm25, .* or mine"):
        DashboardModel(index, questions, judge="nosuch", judges={"mine": lambda q, c, x: [0.1] * len(c)})


# ---- the old name lists still import, with a warning ----------------------------------------
@pytest.mark.parametrize(
    "module, name, says",
    [
        ("workbench.judges", "OFFLINE_JUDGES", "judge_names()"),
        ("workbench.judges.registry", "OFFLINE_JUDGES", "judge_names()"),
        ("workbench.judges.registry", "VALID", "valid_judges()"),
        ("workbench.judges.options", "SEMANTIC_RANGES", "SEMANTIC_OPTIONS"),
        ("widgets.model", "JEV_KEY_VARIABLES", "workbench.judges.jev.client"),
    ],
)
def test_the_old_name_lists_warn_and_are_written_from_the_registry(module, name, says):
    import importlib

    with pytest.warns(DeprecationWarning, match=re.escape(says)):
        value = getattr(importlib.import_module(module), name)
    expected = {
        "OFFLINE_JUDGES": ("bm25", "lexical", "oracle", "lexical-bridge", "semantic", "learned"),
        "VALID": "valid judges: bm25, lexical, oracle, lexical-bridge, semantic[:",
        "SEMANTIC_RANGES": {"gamma": (0.0, 1.0, True), "scale": (0.0, 300.0, False), "shift": (-1.0, 1.0, True)},
        "JEV_KEY_VARIABLES": ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY"),
    }[name]
    assert value.startswith(expected) if isinstance(value, str) else value == expected
