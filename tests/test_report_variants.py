"""`sag2wb report TRACE --db DB --vary ... --judge ...`: the variants page. The grid read from
--vary/--judge (Params and the judge registry decide what is valid), every bad value and every
grid over its limits refused before any work with one named line (exit 2), judgments shared
between variants (a judge asked once per judgment), each variant's data against its own run,
what changed between two variants exactly `Results.changes()`'s words, and the output contract.
The page in a real browser: tests/browser/test_report_browser.py (switching a variant).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from tests.conftest import ENC, sag2wb_here
from workbench.engine import Run
from workbench.index.corpora import load_questions
from workbench.judges import LexicalJudge
from workbench.judges.registry import JudgeSpec
from workbench.report import read_data
from workbench.report.variants import read_grid, run_grid, split_judges
from workbench.runs.experiment import Experiment
from workbench.runs.options import RunOptions
from workbench.runs.policies import Config
from workbench.safeio import InputError

QUESTION = "enc-01"  # 2 hops, gold reached through expansion: variants part in round 1


@pytest.fixture(scope="module")
def made(enc_index, tmp_path_factory):
    """enc-01's lexical trace (L=20, H=2) as a file, and a 2 x 2 variants page of it (L x judge)."""
    folder = tmp_path_factory.mktemp("variants")
    question = next(q for q in load_questions(ENC / "questions.jsonl") if q.id == QUESTION)
    trace = Run(enc_index, question, judge=LexicalJudge(enc_index)).run()
    path = folder / "t.json"
    path.write_text(trace.to_json(), encoding="utf-8")
    page = folder / "v.html"
    r = sag2wb_here(
        "report", path, "--db", enc_index.path, "--out", page, "--vary", "L=5,20", "--judge", "lexical,oracle",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {"question": question, "trace": trace, "path": path, "page": page, "folder": folder, "stdout": r.stdout}


@pytest.fixture(scope="module")
def data(made):
    return read_data(made["page"].read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("vary", "judges", "names"),
    [
        (["L=5,20", "H=1"], ["lexical"], ["L=5 · H=1 · lexical", "L=20 · H=1 · lexical"]),
        ([], ["lexical,learned"], ["lexical", "learned"]),
        (["diversity=true,false"], ["lexical"], ["diversity=true · lexical", "diversity=false · lexical"]),
        (
            ["field_weights=2,2,1;1,1,1"],
            ["lexical"],
            ["field_weights=2,2,1 · lexical", "field_weights=1,1,1 · lexical"],
        ),
        (["H=0,0,1"], ["lexical", "lexical"], ["H=0 · lexical", "H=1 · lexical"]),  # repeats once
        (["term_weighting=sag2,no_idf"], [], ["term_weighting=sag2 · lexical", "term_weighting=no_idf · lexical"]),
    ],
)
def test_the_grid_is_read_from_params_and_the_judge_registry(made, enc_index, vary, judges, names):
    grid = read_grid(vary, judges, made["trace"], enc_index)
    variants = grid.variants()
    assert [v.name for v in variants] == names
    assert all(v.params.B == made["trace"].params.B for v in variants)  # the rest is the trace's
    assert read_grid(["L=5,10,20", "H=0,1,2"], ["lexical,learned"], made["trace"], enc_index).count == 18


def test_judge_values_split_at_commas_keeping_options():
    assert split_judges(["lexical,learned", "semantic:gamma=0.5,signals=model,oracle"]) == [
        "lexical",
        "learned",
        "semantic:gamma=0.5,signals=model",
        "oracle",
    ]


MARKER_JUDGE = """
from pathlib import Path
def judge(question, candidates, context):
    Path(__file__).with_name("asked").write_text("asked")
    return [0.5] * len(candidates)
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "Q=1,2"], "--vary Q=1,2: unknown parameter 'Q'; parameters: B, s, L, H"),
        (["--vary", "H=1,3"], "--vary H=1,3: H (expansion rounds) must be 0, 1 or 2, got 3"),
        (["--vary", "L=5,x"], "--vary L=5,x: 'x' is not a valid int"),
        (["--vary", "L=0,5"], "--vary L=0,5: L (expansion terms) must be >= 1, got 0"),
        (["--vary", "diversity=maybe"], "--vary diversity=maybe: 'maybe' is not a valid bool"),
        (["--vary", "term_weighting=nope"], "--vary term_weighting=nope: unknown term weighting 'nope'"),
        (["--vary", "L=", "--judge", "lexical"], "--vary L=: give one or more values"),
        (["--vary", "L=5", "--vary", "L=10"], "--vary L=10: L is varied twice"),
        (["--judge", "lexical,nosuch"], "unknown judge 'nosuch'"),
        (["--judge", "semantic:depth=3"], "judge 'semantic:depth=3': bad option 'depth=3'"),
        (["--vary", "L=5", "--no-db"], "--vary/--judge: give --db DB"),
        (
            ["--vary", "L=5,10,20", "--vary", "H=0,1,2", "--max-variants", "8"],
            "18 variants (3 x 3 x 2 judge(s)), over the limit of 8",
        ),
        (["--vary", "L=5,10", "--max-mib", "0.01"], "4 variants (2 x 2 judge(s)), a page of about"),
    ],
)
def test_a_bad_grid_is_one_named_line_before_any_work(made, enc_index, tmp_path, args, message):
    (tmp_path / "marker.py").write_text(MARKER_JUDGE, encoding="utf-8")
    db = [] if "--no-db" in args else ["--db", enc_index.path]
    args = [a for a in args if a != "--no-db"]
    judge = [] if "--judge" in args else ["--judge", f"{tmp_path / 'marker.py'}:judge,lexical"]
    r = sag2wb_here("report", made["path"], *db, "--out", tmp_path / "p.html", *args, *judge)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "asked").exists() and not (tmp_path / "p.html").exists()  # no judge asked, no page


def test_the_limits_say_the_counts_and_how_to_raise_them(made, enc_index, tmp_path):
    base = ["report", made["path"], "--db", enc_index.path, "--out", tmp_path / "p.html", "--vary", "L=5,10,20"]
    r = sag2wb_here(*base, "--vary", "H=0,1,2", "--judge", "lexical,oracle", "--max-variants", "17")
    assert "18 variants (3 x 3 x 2 judge(s)), over the limit of 17" in r.stderr
    assert "raise it with --max-variants 18" in r.stderr
    r = sag2wb_here(*base, "--max-mib", "0.05")
    assert r.returncode == 2 and "3 variants (3 x 1 judge(s)), a page of about" in r.stderr
    assert "over the budget of 0.05 MiB" in r.stderr and "raise it with --max-mib" in r.stderr


def test_a_variant_never_asks_a_judgment_another_asked(made, enc_index, monkeypatch):
    """One judge, two variants that share round 0 (and more): every (context, passage) is asked once."""
    asked: list = []
    original = LexicalJudge.judge

    def counting(self, question, candidates, context):
        ctx = tuple((c["unit_id"], c.get("previous_score")) for c in context)
        asked.extend((ctx, c["unit_id"]) for c in candidates)
        return original(self, question, candidates, context)

    monkeypatch.setattr(LexicalJudge, "judge", counting)
    run = run_grid(read_grid(["L=5,20"], ["lexical"], made["trace"], enc_index), made["trace"], enc_index)
    twice = [k for k, n in Counter(asked).items() if n > 1]
    assert asked and twice == []
    assert run.memo.misses == len(asked) and run.memo.hits > 0
    alone = [t.stats["judgments"] for t in run.traces.values()]
    assert sum(alone) > len(asked)  # each variant alone needs more than the grid asked


@pytest.mark.slow  # a JEV client against a local judge server, twice: ~5 s
def test_a_jev_grid_run_again_asks_the_service_nothing_its_disk_cache_holds(made, enc_index, tmp_path):
    """The disk cache: a second run of the same grid (a new process's memo is empty) takes every judgment
    from it."""
    from workbench.judges.jev.server import JudgeServer, make_server_judge

    server = JudgeServer(make_server_judge("hash", None)).start()
    env = {"JEV_ENDPOINT": server.url, "JEV_API_KEY": "sk-variants-test", "SAG2WB_JEV_CACHE": tmp_path / "jc"}
    grid = ["report", made["path"], "--db", enc_index.path, "--vary", "L=5,20", "--judge", "jev"]
    try:
        first = sag2wb_here(*grid, "--out", tmp_path / "a.html", env=env)
        sent = server.requests
        second = sag2wb_here(*grid, "--out", tmp_path / "b.html", env=env)
    finally:
        server.stop()
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = (read_data((tmp_path / f"{n}.html").read_text(encoding="utf-8")) for n in "ab")
    stats = [v["data"]["stats"] for v in b["variants"]]
    assert sum(s["cache_hits"] for s in stats) == sum(s["judgments"] for s in stats) > 0  # every one from the disk
    # fewer requests than the first run (`sag2wb eval` rerun on a full cache also sends one: not the grid's)
    assert sent > 0 and server.requests - sent < sent
    assert [v["data"]["ranking"] for v in a["variants"]] == [v["data"]["ranking"] for v in b["variants"]]


def test_each_variant_is_its_own_run_round_by_round(made, data, enc_index):
    assert len(data["variants"]) == 4
    judges = {name: JudgeSpec.parse(name).build(enc_index, made["question"].gold) for name in ("lexical", "oracle")}
    for v in data["variants"]:
        s = v["settings"]
        params = made["trace"].params.replace(L=int(s["L"]))
        trace = Run(enc_index, made["question"], params, judges[s["judge"]]).run()
        assert [r["round"] for r in v["data"]["rounds"]] == [r.round for r in trace.rounds]
        for shown, state in zip(v["data"]["rounds"], trace.rounds):
            chosen = [t.term for t in sorted((t for t in state.terms if t.selected), key=lambda t: t.order)]
            assert [t["term"] for t in shown["terms"] if t["selected"]] == chosen
        assert [r["unit_id"] for r in v["data"]["ranking"]] == list(trace.final_ranking[:10])
    assert data["variants"][data["start"]]["settings"] == {"L": "20", "judge": "lexical"}  # the trace's own
    texts = data["texts"]
    assert texts and all(p["text"] is None for v in data["variants"] for p in v["data"]["passages"])
    assert all(str(p["unit_id"]) in texts for v in data["variants"] for p in v["data"]["passages"])


def test_what_changed_is_results_changes_for_every_pair(made, data, enc_index):
    names = [v["name"] for v in data["variants"]]
    start, settings = data["start"], [v["settings"] for v in data["variants"]]
    apart = {(i, j): sum(settings[i][k] != settings[j][k] for k in settings[i]) for i in range(4) for j in range(4)}
    pairs = [(i, j) for (i, j), n in apart.items() if n == 1 or (i == start and j != i)]
    assert sorted(data["changes"]) == sorted(f"{i}>{j}" for i, j in pairs) and len(pairs) == 9  # one switch apart
    configs = []
    for v in data["variants"]:
        s = v["settings"]
        params = made["trace"].params.replace(L=int(s["L"]))
        configs.append(Config(v["name"], params, JudgeSpec.parse(s["judge"])))
    experiment = Experiment(enc_index, [made["question"]], configs, RunOptions(progress=False, keep_traces=True))
    results = experiment.run()
    differ = 0
    for i, j in pairs:
        expected = results.changes(names[i], names[j], traces=experiment.traces).questions[0]
        shown = data["changes"][f"{i}>{j}"]
        assert shown["summary"] == expected.summary()
        assert shown["first_round"] == expected.first_round and shown["moves"] == expected.moves
        differ += expected.first_round is not None
    assert differ  # some pair really differs


def test_the_page_follows_the_output_contract(made, enc_index, tmp_path):
    grid = ["--db", enc_index.path, "--vary", "L=5,20"]
    r = sag2wb_here("report", made["path"], "--out", made["path"], *grid)
    assert r.returncode == 2 and "is an input" in r.stderr
    foreign = tmp_path / "p.html"
    foreign.write_text("mine", encoding="utf-8")
    r = sag2wb_here("report", made["path"], "--out", foreign, *grid)
    assert r.returncode == 2 and "--force" in r.stderr and foreign.read_text(encoding="utf-8") == "mine"
    r = sag2wb_here("report", made["path"], "--out", foreign, *grid, "--force")
    assert r.returncode == 0, r.stderr
    assert "2 variants" in r.stdout and len(read_data(foreign.read_text(encoding="utf-8"))["variants"]) == 2
    records = [json.loads(x) for x in (tmp_path / ".sag2wb-outputs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert any(x.get("name") == "p.html" for x in records)
    assert "judgments asked" in made["stdout"]


@pytest.mark.parametrize(
    ("judge", "read"), [("learned (sha256 cd68c0e05dcb)", "learned"), ("oracle (gold labels)", "oracle")]
)
def test_no_judge_means_the_traces_own(made, enc_index, judge, read):
    trace = dataclasses.replace(made["trace"], judge=judge)
    assert [str(j) for j in read_grid(["L=5"], [], trace, enc_index).judges] == [read]


def test_a_trace_judge_the_registry_cannot_read_needs_judge(made, enc_index):
    trace = dataclasses.replace(made["trace"], judge="my notebook's function")
    with pytest.raises(InputError, match='INPUT: its judge "my notebook\'s function" is not one --judge can name'):
        read_grid(["L=5"], [], trace, enc_index)
