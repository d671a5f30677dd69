"""What a variant changed (issue 24): `compare` / `Results.changes` / `sag2wb compare` on two
hand-made eval results with known differences, and on two real eval runs of the encyclopedia
(the paper's term weighting against a workbench.terms variant, lexical judge: deterministic)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.index import Index, load_corpus, load_questions
from workbench.metrics import question_metrics
from workbench.params import Params
from workbench.runs import Config, Experiment
from workbench.runs.changes import NEEDS_TRACES_ENTRY, NEEDS_TRACES_GOLD, compare
from workbench.runs.eval_records import ChangesError
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions
from workbench.runs.resume import trace_file_name
from workbench.trace import Candidate, RoundState, Seed, Term, Trace, UnitInfo

from .conftest import ENC, REPO

FILLER = [f"Filler {i}" for i in range(1, 21)]


# ---- hand-made runs ------------------------------------------------------------------------
def _term(term, seed, order, surface=None):
    return Term(term, "name" if surface else "token", surface or term, seed, 1, 1, 1.0, 0.5, 0.9, 1.0, 1.0, True, order)


def make_run(qid, gold, rounds, ranking):
    """(record, trace) of one question. `rounds`: [(seed titles, [(term, surface)], [(doc, via)])]."""
    docs = list(dict.fromkeys([*FILLER, *gold, *ranking, *(d for r in rounds for d, _ in r[2])]))
    ids = {d: i + 1 for i, d in enumerate(docs)}
    units = {i: UnitInfo(d, d, "corpus.json", "") for d, i in ids.items()}
    states = []
    for n, (seeds, terms, cands) in enumerate(rounds):
        states.append(
            RoundState(
                n,
                "expr",
                candidates=tuple(
                    Candidate(ids[d], k + 1, -1.0, via, 1 if via else None) for k, (d, via) in enumerate(cands)
                ),
                seeds=tuple(Seed(ids[s], k + 1, 0.9, 1.0) for k, s in enumerate(seeds)),
                terms=tuple(_term(t, ids[seeds[0]], k + 1, surf) for k, (t, surf) in enumerate(terms)),
                scored=True,
                judgments=len(cands),
            )
        )
    trace = Trace(
        f"question {qid}",
        Params(),
        "lexical",
        tuple(states),
        tuple(ids[d] for d in ranking),
        units,
        question_id=qid,
        gold=tuple(gold),
    )
    rec = {
        "_id": qid,
        "type": "compositional",
        "hops": 2,
        **question_metrics(trace.documents(), gold),
        "judgments": trace.judgments,
        "stop": trace.stop,
        "gold": list(gold),
        "ranking": trace.documents(),
        "rounds": trace.summary()["rounds"],
    }
    return rec, trace


def write_side(folder: Path, name: str, runs, failures=()):
    """An eval result file NAME.json and its trace folder traces-NAME/."""
    tdir = folder / f"traces-{name}"
    tdir.mkdir()
    for rec, trace in runs:
        (tdir / trace_file_name(rec["_id"])).write_text(trace.to_json(), encoding="utf-8")
    data = {"sag2wb": {"kind": "eval", "version": 1}, "config": {}, "questions": [r for r, _ in runs]}
    if failures:
        data["failures"] = [{"question": q, "round": 1, "error": "boom", "kind": "judge error"} for q in failures]
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path, tdir


ROUND0 = ([], [], [("Filler 1", None), ("Filler 2", None), ("Seed Page", None)])
NICKI = "Nicki Minaj"


def base_runs():
    # q1 (a win for B): A finds Nicki Minaj only in round 2 through 'rapper'; it ends 14th
    q1 = make_run(
        "q1",
        ["Seed Page", NICKI],
        [
            ROUND0,
            (["Seed Page"], [("alpha", None), ("beta", None)], [("Filler 3", "alpha")]),
            (["Filler 3"], [("rapper", None)], [(NICKI, "rapper")]),
        ],
        ["Seed Page", *FILLER[:12], NICKI],
    )
    # q2 (a loss for B): A has gold "Gold Two" at 2
    q2 = make_run(
        "q2",
        ["Seed Page", "Gold Two"],
        [ROUND0, (["Seed Page"], [("delta", None)], [("Gold Two", "delta")])],
        ["Seed Page", "Gold Two", *FILLER[:5]],
    )
    # q3: identical in both; q4: different terms, same metric (a tie)
    q3 = make_run("q3", ["Seed Page"], [ROUND0], ["Seed Page", "Filler 1"])
    q4 = make_run(
        "q4",
        ["Seed Page"],
        [ROUND0, (["Seed Page"], [("epsilon", None)], [("Filler 5", "epsilon")])],
        ["Seed Page", "Filler 5"],
    )
    return [q1, q2, q3, q4]


def variant_runs():
    q1 = make_run(
        "q1",
        ["Seed Page", NICKI],
        [
            ROUND0,
            (["Seed Page"], [("alpha", None), ("nicki minaj", NICKI)], [(NICKI, "nicki minaj")]),
            ([NICKI], [("rapper", None)], [("Filler 4", "rapper")]),
        ],
        ["Seed Page", "Filler 1", NICKI, *FILLER[1:8]],
    )
    q2 = make_run(
        "q2",
        ["Seed Page", "Gold Two"],
        [ROUND0, (["Filler 2"], [("zeta", None)], [("Filler 6", "zeta"), ("Gold Two", "zeta")])],
        ["Seed Page", *FILLER[:12], "Gold Two"],
    )
    q3 = make_run("q3", ["Seed Page"], [ROUND0], ["Seed Page", "Filler 1"])
    q4 = make_run(
        "q4",
        ["Seed Page"],
        [ROUND0, (["Seed Page"], [("eta", None)], [("Filler 5", "eta")])],
        ["Seed Page", "Filler 5"],
    )
    return [q1, q2, q3, q4]


@pytest.fixture
def hand_made(tmp_path):
    a, ta = write_side(tmp_path, "A", base_runs())
    b, tb = write_side(tmp_path, "B", variant_runs())
    return a, b, ta, tb


def test_hand_made_counts_rounds_terms_seeds_gold(hand_made):
    a, b, _, _ = hand_made
    ch = compare(a, b)
    assert ch.counts() == {"wins": 1, "losses": 1, "ties": 2}
    assert ch.scope is None
    q = {c.question: c for c in ch.questions}
    assert (q["q1"].base, q["q1"].variant, q["q1"].delta, q["q1"].outcome) == (50.0, 100.0, 50.0, "win")
    assert q["q2"].outcome == "loss" and q["q2"].delta == -50.0
    assert q["q1"].first_round == 1 and q["q2"].first_round == 1 and q["q4"].first_round == 1
    assert q["q3"].first_round is None and q["q3"].identical is True and q["q4"].identical is False
    # in order of first selection; without traces as a title of the round writes the term
    assert q["q1"].terms_gained == [NICKI] and q["q1"].terms_lost == ["beta"]
    assert q["q4"].terms_gained == ["eta"] and q["q4"].terms_lost == ["epsilon"]
    assert q["q1"].seeds_gained == [NICKI] and q["q1"].seeds_lost == ["Filler 3"]
    assert q["q2"].seeds_gained == ["Filler 2"] and q["q2"].seeds_lost == ["Seed Page"]
    assert q["q1"].gold_gained == [NICKI] and q["q1"].gold_lost == []
    assert q["q2"].gold_gained == [] and q["q2"].gold_lost == ["Gold Two"]
    assert q["q1"].moves == [f"{NICKI} rose 14 → 3"]  # the entry needs the traces
    assert NEEDS_TRACES_ENTRY in ch.needs_traces and NEEDS_TRACES_GOLD not in ch.needs_traces


def test_hand_made_with_traces_says_which_term_brought_a_passage_in(hand_made):
    a, b, ta, tb = hand_made
    ch = compare(a, b, traces_base=ta, traces_variant=tb)
    assert ch.needs_traces == []
    q = {c.question: c for c in ch.questions}
    assert q["q1"].moves == [f"{NICKI} entered through round 1's new term '{NICKI}' and rose 14 → 3"]
    assert q["q1"].terms_gained == [NICKI]  # as the seed text writes it
    assert q["q2"].moves == ["Gold Two lost round 1's term 'delta' that brought it in and fell 2 → 14"]


def test_hand_made_aggregates_and_report(hand_made):
    a, b, ta, tb = hand_made
    ch = compare(a, b, traces_base=ta, traces_variant=tb)
    terms = ch.term_counts()
    assert dict(terms["gained"]) == {NICKI: 1, "zeta": 1, "eta": 1}
    assert dict(terms["lost"]) == {"beta": 1, "delta": 1, "epsilon": 1}
    rows = {what: (n, w, lo, t) for what, n, w, lo, t in ch.associations()}
    assert rows["selected terms changed"] == (3, 1, 1, 1)
    assert rows["selected terms the same"] == (1, 0, 0, 1)
    assert rows["identical trajectories"] == (1, 0, 0, 1)
    assert rows["trajectories first differ at round 1"] == (3, 1, 1, 1)
    assert rows["the same gold passages reached the candidates"] == (4, 1, 1, 2)
    assert [c.question for c in ch.sorted()] == ["q1", "q3", "q4", "q2"]
    text = ch.report()
    assert text.splitlines()[0].endswith("1 wins, 1 losses, 2 ties over 4 questions (mean change +0.00)")
    assert f"{NICKI} entered through round 1's new term" in text
    frame = ch.frame().set_index("question")
    assert frame.loc["q1", ["delta", "terms_gained", "terms_lost", "gold_gained"]].tolist() == [50.0, 1, 1, 1]
    d = ch.to_dict()
    assert (d["wins"], d["losses"], d["ties"], d["scope"]) == (1, 1, 2, None)
    assert json.loads(json.dumps(d)) == d


def test_questions_in_one_file_or_failed_are_listed_and_left_out(tmp_path):
    runs_a, runs_b = base_runs(), variant_runs()
    extra = make_run("q5", ["Seed Page"], [ROUND0], ["Seed Page"])
    a, _ = write_side(tmp_path, "A", [*runs_a[:3], extra], failures=["q6"])
    b, _ = write_side(tmp_path, "B", [*runs_b[:2], runs_b[3]])  # q3 and q5 missing, q4 only here
    ch = compare(a, b)
    assert [c.question for c in ch.questions] == ["q1", "q2"]
    assert ch.only_base == ["q3", "q5"] and ch.only_variant == ["q4"] and list(ch.failed) == ["q6"]
    assert ch.counts() == {"wins": 1, "losses": 1, "ties": 0}
    assert ch.scope == (
        f"compared questions only: 2 of 6; left out: 2 only in {a} (q3, q5); 1 only in {b} (q4); "
        "1 failed in one run (q6)"
    )


def test_bad_inputs_are_named(tmp_path, hand_made):
    a, b, _ta, tb = hand_made
    bad = tmp_path / "bad.json"
    bad.write_text('{"questions": [1,]}', encoding="utf-8")
    with pytest.raises(ChangesError, match=r"bad.json: not valid JSON \(line 1, column 18"):
        compare(bad, b)
    ablate = tmp_path / "ablate.json"
    ablate.write_text(json.dumps({"sag2wb": {"kind": "ablate"}, "rows": {}}), encoding="utf-8")
    with pytest.raises(ChangesError, match="'ablate' result, which holds no per-question records"):
        compare(a, ablate)
    with pytest.raises(ChangesError, match="no such file"):
        compare(tmp_path / "nope.json", b)
    with pytest.raises(ChangesError, match="no such trace folder"):
        compare(a, b, traces_base=tmp_path / "none")
    with pytest.raises(ChangesError, match="the traces come from another run"):
        compare(a, b, traces_base=tb)  # B's traces given as A's
    with pytest.raises(ChangesError, match="unknown metric"):
        compare(a, b, "nDCG")


# ---- the CLI -------------------------------------------------------------------------------
def test_cli_compare_exit_codes(hand_made, tmp_path, capsys):
    a, b, ta, tb = hand_made
    assert main(["compare", str(a), str(b), "--traces-a", str(ta), "--traces-b", str(tb)]) == 0
    out = capsys.readouterr().out
    assert "1 wins, 1 losses, 2 ties over 4 questions" in out
    assert f"{NICKI} entered through round 1's new term '{NICKI}' and rose 14 → 3" in out
    assert main(["compare", str(a), str(b), "--json", "--metric", "R@5"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["metric"] == "R@5" and NEEDS_TRACES_ENTRY in d["needs_traces"]

    bad = tmp_path / "bad.json"
    bad.write_text("not json", encoding="utf-8")
    assert main(["compare", str(bad), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sag2wb compare: error:") and "bad.json: not valid JSON" in err
    assert main(["compare", str(a), str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err

    other = tmp_path / "other"
    other.mkdir()
    c, _ = write_side(other, "C", variant_runs()[:2])
    assert main(["compare", str(a), str(c)]) == 0
    out = capsys.readouterr().out
    assert f"scope: compared questions only: 2 of 4; left out: 2 only in {a} (q3, q4)" in out

    lone, _ = write_side(other, "D", [make_run("zz", ["Seed Page"], [ROUND0], ["Seed Page"])])
    assert main(["compare", str(a), str(lone)]) == 2
    assert "nothing to compare" in capsys.readouterr().err


# ---- two real runs -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def enc_runs(enc_index, tmp_path_factory):
    folder = tmp_path_factory.mktemp("changes")
    index = enc_index
    questions = load_questions(ENC / "questions.jsonl")
    out = {}
    for name in ("sag2", "no_query_connection"):
        res = evaluate(
            index,
            questions,
            "lexical",
            Params(term_weighting=name),
            RunOptions(progress=False, trace_dir=folder / name),
        )
        path = folder / f"{name}.json"
        path.write_text(json.dumps(res.to_dict(), ensure_ascii=False), encoding="utf-8")
        out[name] = (path, folder / name, res)
    return index, questions, out


@pytest.mark.slow
def test_real_runs_paper_rule_against_a_variant(enc_runs):
    _, questions, runs = enc_runs
    (pa, ta, ra), (pb, tb, rb) = runs["sag2"], runs["no_query_connection"]
    ch = compare(pa, pb, traces_base=ta, traces_variant=tb)
    va = {r["_id"]: r["R@10"] for r in ra.records}
    vb = {r["_id"]: r["R@10"] for r in rb.records}
    assert len(ch.questions) == len(questions) and ch.scope is None and ch.needs_traces == []
    assert ch.counts() == {
        "wins": sum(vb[q] > va[q] for q in va),
        "losses": sum(vb[q] < va[q] for q in va),
        "ties": sum(vb[q] == va[q] for q in va),
    }
    assert ch.counts()["wins"] + ch.counts()["losses"] > 0  # the variant changes something here
    top = {name: {r["_id"]: r["ranking"][:10] for r in res.records} for name, (_, _, res) in runs.items()}
    for c in ch.questions:
        gold = set(next(q.gold for q in questions if q.id == c.question))
        assert set(c.gold_gained) == (set(top["no_query_connection"][c.question]) - set(top["sag2"][c.question])) & gold
        assert set(c.gold_lost) == (set(top["sag2"][c.question]) - set(top["no_query_connection"][c.question])) & gold
        if c.outcome == "win":
            assert c.gold_gained and c.first_round is not None
    # the trajectory changes are far more common than the metric changes (issue 24's finding)
    rows = {what: n for what, n, *_ in ch.associations()}
    assert rows["selected terms changed"] > ch.counts()["wins"] + ch.counts()["losses"]


@pytest.mark.slow
def test_results_changes_matches_the_file_comparison(enc_runs):
    index, questions, runs = enc_runs
    configs = [
        Config("sag2", judge="lexical"),
        Config("nqc", Params(term_weighting="no_query_connection"), judge="lexical"),
    ]
    exp = Experiment(index, questions, configs, RunOptions(progress=False, keep_traces=True))
    results = exp.run()
    files = compare(
        runs["sag2"][0],
        runs["no_query_connection"][0],
        traces_base=runs["sag2"][1],
        traces_variant=runs["no_query_connection"][1],
    )
    ch = results.changes("sag2", "nqc", traces=exp.traces)
    assert ch.counts() == files.counts() and ch.needs_traces == []
    assert [c.to_dict() for c in ch.questions] == [c.to_dict() for c in files.questions]
    bare = results.changes("sag2", "nqc")  # records only: the rest is named, not left empty
    assert bare.counts() == files.counts()
    assert NEEDS_TRACES_GOLD in bare.needs_traces and "needs traces" in bare.report()


def test_missing_traces_are_said_not_silently_empty(hand_made):
    a, b, ta, tb = hand_made
    (tb / trace_file_name("q1")).unlink()
    ch = compare(a, b, traces_base=ta, traces_variant=tb)
    assert ch.variant.missing_traces == ["q1"] and NEEDS_TRACES_ENTRY in ch.needs_traces
    assert f"traces missing for 1 of 4 questions of {b} (q1)" in ch.report()
    assert {c.question: c.moves for c in ch.questions}["q1"] == [f"{NICKI} rose 14 → 3"]


# ---- the dashboard view --------------------------------------------------------------------
@pytest.mark.slow
def test_changes_view_lists_by_change_and_opens_two_trajectories(hand_made):
    from widgets import ChangesView
    from widgets.chart import Chart

    a, b, ta, tb = hand_made
    view = ChangesView(compare(a, b, traces_base=ta, traces_variant=tb))
    assert [v for _, v in view.list.options] == ["q1", "q2", "q3", "q4"]  # |delta| 50, 50, then ties
    view.sort.value = "largest loss first"
    assert [v for _, v in view.list.options] == ["q2", "q3", "q4", "q1"]
    view.outcome.value = "win"
    assert [v for _, v in view.list.options] == ["q1"] and view.list.value == "q1"
    assert "trajectories first differ at round 1" in view.detail.value
    assert f"{NICKI} entered through round 1" in html_unescape(view.detail.value)
    left, right = view.sides.children
    for side, name in ((left, str(a)), (right, str(b))):
        assert name in side.children[0].value
        charts = [c for c in side.children if isinstance(c, Chart)]
        assert len(charts) == 1
    view.outcome.value = "all"
    view.open("q2")
    assert view.list.value == "q2" and "Gold Two" in view.detail.value
    with pytest.raises(KeyError, match="no compared question 'nope'"):
        view.open("nope")


def test_changes_view_without_traces_says_how_to_get_them(hand_made):
    from widgets import ChangesView

    a, b, _, _ = hand_made
    view = ChangesView(compare(a, b))
    assert "needs traces" in view.heading.value
    left, _right = view.sides.children
    assert "run `sag2wb eval` with --trace-dir" in left.children[1].value


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


# ---- the how-to's pasted output is what the commands give ------------------------------------
DOC = REPO / "docs" / "experiments.md"


def _blocks(text: str) -> list[str]:
    """The fenced blocks of a Markdown text, fences removed."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


@pytest.mark.slow
def test_experiments_doc_output_is_what_compare_gives(tmp_path, monkeypatch):
    """docs/experiments.md pastes `sag2wb compare paper.json nqc.json ... --top 2` on the
    encyclopedia with the semantic judge: the same commands must print the same text."""
    text = DOC.read_text(encoding="utf-8")
    pasted = next(b for b in _blocks(text) if b.startswith("nqc.json vs paper.json") and "needs traces" not in b)
    without = next(b for b in _blocks(text) if b.startswith("nqc.json vs paper.json") and "needs traces" in b)
    monkeypatch.chdir(tmp_path)
    index = Index.build(load_corpus(ENC / "corpus.json"), tmp_path / "enc.sqlite")
    questions = load_questions(ENC / "questions.jsonl")
    for out, rule in (("paper", "sag2"), ("nqc", "no_query_connection")):
        res = evaluate(
            index,
            questions,
            "semantic",
            Params(term_weighting=rule),
            RunOptions(progress=False, trace_dir=f"traces-{out}"),
        )
        Path(f"{out}.json").write_text(json.dumps(res.to_dict(), ensure_ascii=False), encoding="utf-8")
    assert (
        compare("paper.json", "nqc.json", traces_base="traces-paper", traces_variant="traces-nqc").report(2) == pasted
    )
    assert compare("paper.json", "nqc.json").report(0).startswith(without + "\n")


def test_moved_doc_links_resolve():
    """Links between experiments.md and performance.md (the history moved) name real headings."""

    def anchors(path: Path) -> set:
        out = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("#") and not line.startswith("#!"):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)))
        return out

    docs = REPO / "docs"
    checked = 0
    for source in (REPO / "README.md", *docs.glob("*.md")):
        for target, anchor in re.findall(
            r"\]\(((?:docs/)?(?:experiments|performance)\.md)#([^)]+)\)", source.read_text()
        ):
            path = (source.parent / target) if source.parent == docs else REPO / target
            assert anchor in anchors(path), f"{source.name}: no heading #{anchor} in {target}"
            checked += 1
    assert checked >= 4


def test_token_forms_split_at_accents_are_shown_as_a_title_writes_them(tmp_path):
    """Without traces a term's surface comes from the titles of its round: the index's
    'é lodie marchetti' is shown 'Élodie Marchetti'; a single word keeps its token form."""
    gold = ["Seed Page", "Élodie Marchetti"]
    base = make_run("q1", gold, [ROUND0], ["Seed Page"])
    variant = make_run(
        "q1",
        gold,
        [
            ROUND0,
            (
                ["Seed Page"],
                [("é lodie marchetti", None), ("son", None)],
                [("Élodie Marchetti", "é lodie marchetti"), ("Son", "son")],
            ),
        ],
        ["Seed Page", "Élodie Marchetti"],
    )
    a, _ = write_side(tmp_path, "A", [base])
    b, _ = write_side(tmp_path, "B", [variant])
    (q,) = compare(a, b).questions
    assert q.terms_gained == ["Élodie Marchetti", "son"]
    assert q.moves == ["Élodie Marchetti entered the ranking at 2"]


@pytest.mark.slow
def test_eval_records_its_trace_dir_and_compare_finds_the_traces(tmp_path, capsys):
    """`eval --trace-dir` writes the folder (relative to out.json) into config, so `compare`
    needs no --traces-a/--traces-b; a moved pair (results and traces together) still works."""
    qs = tmp_path / "q.jsonl"
    qs.write_text("".join((ENC / "questions.jsonl").read_text(encoding="utf-8").splitlines(True)[:4]), encoding="utf-8")
    db = tmp_path / "enc.sqlite"
    assert main(["index", str(ENC / "corpus.json"), "--db", str(db)]) == 0
    for name, weighting in (("a", "sag2"), ("b", "no_idf")):
        args = ["eval", "--db", str(db), "--questions", str(qs), "--judge", "lexical", "--quiet"]
        args += ["--param", f"term_weighting={weighting}", "--out", str(tmp_path / "runs" / f"{name}.json")]
        assert main([*args, "--trace-dir", str(tmp_path / "traces" / name)]) == 0
    data = json.loads((tmp_path / "runs" / "a.json").read_text(encoding="utf-8"))
    assert data["config"]["trace_dir"] == "../traces/a"
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "runs" / "a.json"), str(tmp_path / "runs" / "b.json")]) == 0
    assert "needs traces" not in capsys.readouterr().out
    moved = tmp_path / "moved"
    moved.mkdir()
    (tmp_path / "runs").rename(moved / "runs")
    (tmp_path / "traces").rename(moved / "traces")
    assert main(["compare", str(moved / "runs" / "a.json"), str(moved / "runs" / "b.json")]) == 0
    assert "needs traces" not in capsys.readouterr().out
