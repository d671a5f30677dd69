"""The learned judge (issue 25): a hand-checked logistic fit, folds by question, the model
file's integrity errors, a real `sag2wb fit-judge` on the bundled encyclopedia with the
oracle teacher, and the fitted judge through eval, the judge server and a JEV cache teacher."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.engine import Run, judge_items
from workbench.index.corpora import load_questions
from workbench.judges.features import FEATURES, FeatureError, FeatureExtractor
from workbench.judges.learned import (
    LearnedJudge,
    LearnedModelError,
    _canonical,
    default_model_path,
    fit_logistic,
    load_model,
)
from workbench.runs.options import RunOptions
from workbench.runs.training import (
    MIN_EXAMPLES,
    collect_examples,
    fit_examples,
    fit_judge,
    folds_by_question,
    spearman,
    teacher_for,
)

from .conftest import ENC

NO_MODEL = tuple(n for n in FEATURES if n not in ("cosine", "cosine_x_bridge"))


@pytest.fixture(scope="module")
def fitted(enc_index, tmp_path_factory):
    """A real `sag2wb fit-judge` run (oracle teacher, every feature) and what it printed."""
    out = tmp_path_factory.mktemp("fit") / "J.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(
            ["fit-judge", "--db", str(enc_index.path), "--questions", str(ENC / "questions.jsonl"), "--out", str(out)]
        )
    return code, out, buf.getvalue()


# ---- the fit ---------------------------------------------------------------------------------
def test_a_logistic_fit_by_hand():
    # x = 0: 1 positive of 4; x = 1: 3 of 4. Unpenalised, the fit reproduces both rates:
    # p = sigmoid(b + w x) with b = logit(1/4) = -ln 3 and w = logit(3/4) - logit(1/4) = 2 ln 3
    X = np.array([[0.0]] * 4 + [[1.0]] * 4)
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1.0])
    m = fit_logistic(X, y, ["coverage"], l2=0.0)
    w, b = m.raw_weights()
    assert w[0] == pytest.approx(2 * math.log(3), abs=1e-6) and b == pytest.approx(-math.log(3), abs=1e-6)
    assert m.predict(np.array([[0.0], [1.0]])) == pytest.approx([0.25, 0.75], abs=1e-6)
    # soft targets: the groups' rates as probabilities give the same fit (distillation)
    soft = fit_logistic(np.array([[0.0], [1.0]]), np.array([0.25, 0.75]), ["coverage"], l2=0.0)
    assert soft.raw_weights()[0][0] == pytest.approx(2 * math.log(3), abs=1e-6)
    # L2 shrinks the standardised weight: the gradient is 0 where mean(p - y) z = -l2 w
    shrunk = fit_logistic(X, y, ["coverage"], l2=0.5)
    z = (X[:, 0] - shrunk.mean[0]) / shrunk.std[0]
    p = shrunk.predict(X)
    assert 0 < shrunk.weights[0] < m.weights[0]
    assert float(np.mean((p - y) * z)) == pytest.approx(-0.5 * shrunk.weights[0], abs=1e-9)
    # separable data stays finite (the backtracking Newton step)
    sep = fit_logistic(np.array([[0.0], [1.0]]), np.array([0.0, 1.0]), ["coverage"], l2=0.01)
    assert np.all(np.isfinite(sep.weights)) and sep.predict(np.array([[1.0]]))[0] > 0.9


def test_contributions_add_up_to_the_logit():
    rng = np.random.default_rng(3)
    X = rng.random((50, 3))
    y = (X[:, 0] + 0.2 * rng.random(50) > 0.6).astype(float)
    m = fit_logistic(X, y, ["coverage", "bridge", "bm25"])
    parts = m.contributions(X[7])
    assert m.bias + sum(parts.values()) == pytest.approx(float(m.logits(X[7:8])[0]))


def test_folds_never_share_a_question_and_cover_all():
    ids = [f"q{i}" for i in range(23)] + ["q3", "q5"]  # repeats (one question, many rows) count once
    folds = folds_by_question(ids, 5)
    assert len(folds) == 5
    seen = [q for f in folds for q in f]
    assert len(seen) == len(set(seen)) == 23


@pytest.mark.slow
def test_cross_validation_holds_out_whole_questions(enc_index):
    qs = load_questions(ENC / "questions.jsonl")[:12]
    fits = []
    import workbench.runs.training as training

    real = training.fit_examples

    def spy(examples, **kw):
        fits.append(set(examples.questions))
        return real(examples, **kw)

    training.fit_examples = spy
    try:
        _, info = fit_judge(enc_index, qs, teacher_for("oracle", enc_index), names=NO_MODEL, folds=3)
    finally:
        training.fit_examples = real
    folds = folds_by_question([q.id for q in qs], 3)
    assert [r["questions"] for r in info["cv"]["per_fold"]] == [len(f) for f in folds]
    for trained, fold in zip(fits, folds):  # each fold's model saw none of its held-out questions
        assert trained.isdisjoint(fold) and trained | set(fold) == {q.id for q in qs}
    assert fits[-1] == {q.id for q in qs}  # the shipped fit: every question
    assert set(info["cv"]["per_question_R@10"]) == {q.id for q in qs}


def test_examples_are_the_candidates_of_every_scored_round(enc_index):
    q = load_questions(ENC / "questions.jsonl")[0]
    ex = collect_examples(enc_index, [q], teacher_for("oracle", enc_index), names=("coverage", "bridge"))
    trace = Run(enc_index, q, judge=teacher_for("oracle", enc_index)(q)).run()
    pools = [(r.round, e.unit_id) for r in trace.rounds if r.scored for e in r.pool]
    assert list(zip(ex.round.tolist(), ex.unit.tolist())) == pools
    assert ex.y.tolist() == [s for r in trace.rounds if r.scored for s in r.scores]
    assert ex.hard and np.array_equal(ex.y, ex.gold)


def test_features_are_what_the_judge_call_shows(enc_index):
    ids = {t: i for i, t in enc_index.documents.items()}
    film, director = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"]])
    ex = FeatureExtractor(enc_index, NO_MODEL)
    q = "Where was the director of Glass Harbour born?"
    r0 = ex.rows(q, [film, director], [])
    r2 = ex.rows(q, [director], [dict(film, previous_score=0.9)])
    assert r0[0]["title_in_question"] == 1.0 and r0[1]["title_in_question"] == 0.0
    assert r0[0]["round1"] == r0[0]["round2"] == 0.0 and r2[0]["round2"] == 1.0
    assert r2[0]["bridge"] == 0.9 and r2[0]["_named_by"] == "Glass Harbour"
    assert r2[0]["bridge_coverage"] == pytest.approx(r0[0]["coverage"])  # the film passage's own coverage
    assert r0[0]["bm25_rank"] > 0 and 0 < r0[0]["bm25"] <= 1


def test_relative_context_weights_by_hand(enc_index):
    """The film's passage (previous score 0.04) names the director; another context passage has
    the context's best score, 0.08. Relative weights: the bridge is 0.04 / 0.08 = 0.5 instead of
    0.04, and the overlap bridge is scaled by the same 1 / 0.08; nothing else changes."""
    ids = {t: i for i, t in enc_index.documents.items()}
    film, director, other = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"], ids["Brindmoor"]])
    q = "Where was the director of Glass Harbour born?"
    context = [dict(film, previous_score=0.04), dict(other, previous_score=0.08)]
    plain = FeatureExtractor(enc_index, NO_MODEL).rows(q, [director], context)[0]
    rel = FeatureExtractor(enc_index, NO_MODEL, context_weights="relative").rows(q, [director], context)[0]
    assert plain["bridge"] == 0.04 and rel["bridge"] == 0.5 and rel["_named_by"] == "Glass Harbour"
    assert plain["overlap_bridge"] > 0 and rel["overlap_bridge"] == pytest.approx(plain["overlap_bridge"] / 0.08)
    assert rel["coverage_x_bridge"] == pytest.approx(rel["coverage"] * 0.5)
    same = ("coverage", "bridge_coverage", "title_in_question", "title_overlap", "bm25", "bm25_rank", "round2")
    assert {k: rel[k] for k in same} == {k: plain[k] for k in same}
    # before the final round every weight is 1 either way; a context scored all 0 bridges nothing
    assert (
        FeatureExtractor(enc_index, NO_MODEL, context_weights="relative").rows(q, [director], [film])[0]["bridge"]
        == 1.0
    )
    zero = [dict(film, previous_score=0.0)]
    assert (
        FeatureExtractor(enc_index, NO_MODEL, context_weights="relative").rows(q, [director], zero)[0]["bridge"] == 0.0
    )
    with pytest.raises(FeatureError, match="context weights 'max'"):
        FeatureExtractor(enc_index, NO_MODEL, context_weights="max")


def test_a_model_keeps_the_context_weights_it_was_fitted_with(enc_index, tmp_path):
    """The weights are the model file's (and so its sha256's): the judge computes its rows as the
    examples were computed. A file without the field (fitted before it existed) is "previous" and
    keeps its bytes; an unknown value is a named error; examples of two weightings do not mix."""
    from workbench.judges.learned import save_model

    qs = load_questions(ENC / "questions.jsonl")[:6]
    names = ("coverage", "bridge", "title_in_question")
    got = {}
    for w in ("previous", "relative"):
        ex = collect_examples(enc_index, qs, teacher_for("oracle", enc_index), names=names, context_weights=w)
        model = fit_examples(ex)
        path = tmp_path / f"{w}.json"
        save_model(model, path)
        got[w] = (ex, json.loads(path.read_text()), LearnedJudge(enc_index, path))
    assert "context_weights" not in got["previous"][1]["model"]
    assert got["relative"][1]["model"]["context_weights"] == "relative"
    assert [j.extractor.context_weights for _, _, j in got.values()] == ["previous", "relative"]
    assert got["previous"][2].sha256 != got["relative"][2].sha256
    with pytest.raises(ValueError, match="cannot be fitted together"):
        got["previous"][0] + got["relative"][0]
    bad = _rewrite(
        tmp_path / "relative.json", tmp_path / "bad.json", lambda d: d["model"].update(context_weights="max"), True
    )
    with pytest.raises(LearnedModelError, match="context_weights 'max'"):
        LearnedJudge(enc_index, bad)


# ---- the CLI and the file -----------------------------------------------------------------------
@pytest.mark.slow
def test_fit_judge_on_the_encyclopedia_with_the_oracle(fitted, enc_index):
    code, out, printed = fitted
    assert code == 0, printed
    data = json.loads(out.read_text())
    cv = data["cv"]
    assert cv["folds"] == 5 and len(cv["per_fold"]) == 5 and sum(f["questions"] for f in cv["per_fold"]) == 40
    assert all(f"fold {i}:" in printed for i in range(1, 6)) and f"R@10 {cv['R@10']:.2f}" in printed
    assert data["features"] == list(FEATURES) and data["teacher"] == "oracle" and data["targets"] == "hard (0/1)"
    assert data["examples"] >= MIN_EXAMPLES and 0 < cv["R@10"] <= 100
    _model, sha = load_model(out)
    assert sha == data["sha256"] == hashlib.sha256(_canonical(data)).hexdigest()
    judge = LearnedJudge(enc_index, out)
    assert sha in judge.key and sha[:12] in judge.name
    trace = Run(enc_index, load_questions(ENC / "questions.jsonl")[0], judge=judge).run()
    assert sha[:12] in trace.judge
    last = [r for r in trace.rounds if r.scored][-1]
    sentence, comp = last.explanations[0]
    assert sentence.startswith("scored") and set(comp["contributions"]) == set(FEATURES)
    assert comp["intercept"] + sum(comp["contributions"].values()) == pytest.approx(
        math.log(comp["score"] / (1 - comp["score"])), abs=1e-4
    )


def _rewrite(path: Path, dest: Path, change, reseal: bool) -> Path:
    data = json.loads(path.read_text())
    change(data)
    if reseal:
        data["sha256"] = hashlib.sha256(_canonical(data)).hexdigest()
    dest.write_text(json.dumps(data))
    return dest


@pytest.mark.slow
def test_a_bad_model_file_is_a_named_error(fitted, enc_index, tmp_path):
    _, good, _ = fitted
    cases = {
        "missing": (tmp_path / "nope.json", "no such file"),
        "altered": (
            _rewrite(good, tmp_path / "a.json", lambda d: d["model"]["weights"].__setitem__(0, 9.0), False),
            "altered since it was fitted",
        ),
        "schema version": (
            _rewrite(good, tmp_path / "v.json", lambda d: d.__setitem__("version", 2), True),
            "schema version 2",
        ),
        "features version": (
            _rewrite(good, tmp_path / "f.json", lambda d: d.__setitem__("features_version", 99), True),
            "features version 99",
        ),
        "other features": (
            _rewrite(good, tmp_path / "o.json", lambda d: d["features"].__setitem__(0, "entering_term_kind"), True),
            "fitted on other features",
        ),
        "not a model": (_rewrite(good, tmp_path / "s.json", lambda d: d.__setitem__("schema", "x"), True), "schema"),
    }
    for _name, (path, message) in cases.items():
        with pytest.raises(LearnedModelError, match=message):
            LearnedJudge(enc_index, path)


@pytest.fixture(scope="module")
def study(enc_index, tmp_path_factory):
    """A JEV study's cache: the lexical judge served as if it were JEV, 6 questions asked."""
    from workbench.judges.jev import make_jev_judge
    from workbench.judges.jev.server import JudgeServer, make_server_judge

    cache = tmp_path_factory.mktemp("study") / "jev-cache"
    qs = load_questions(ENC / "questions.jsonl")[:6]
    with JudgeServer(make_server_judge("lexical", str(enc_index.path))) as server:
        jev = make_jev_judge(endpoint=server.url, cache_dir=cache)
        traces = [Run(enc_index, q, judge=jev).run() for q in qs]
        jev.close()
        yield server.url, cache, qs, traces


@pytest.mark.slow
def test_fit_judge_refuses_a_teacher_cache_without_the_questions(enc_index, study, tmp_path, capsys):
    url, cache, _, _ = study
    out = tmp_path / "J.json"
    args = [
        "fit-judge",
        "--db",
        str(enc_index.path),
        "--out",
        str(out),
        "--teacher",
        f"cache:{cache}",
        "--jev-endpoint",
        url,
    ]
    few = tmp_path / "two.jsonl"
    few.write_text("".join(ln for ln in (ENC / "questions.jsonl").read_text().splitlines(True)[:2]))
    assert main([*args, "--questions", str(few)]) == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "example(s) from 2 of 2 question(s)" in err and f"at least {MIN_EXAMPLES} examples from 4 questions" in err
    # all 40 asked, 6 in the cache: the other 34 are named as not answered
    q40 = load_questions(ENC / "questions.jsonl")
    ex = collect_examples(enc_index, q40, teacher_for(f"cache:{cache}", enc_index, endpoint=url), names=("coverage",))
    assert len(ex.questions) == 6 and len(ex.missing) == 34
    assert "not in" in next(iter(ex.missing.values()))


@pytest.mark.slow
def test_a_judge_served_as_jev_is_distilled_from_its_cache(enc_index, study, tmp_path, capsys):
    url, cache, _qs, traces = study
    six = tmp_path / "six.jsonl"
    six.write_text("".join((ENC / "questions.jsonl").read_text().splitlines(True)[:6]))
    out = tmp_path / "student.json"
    args = ["fit-judge", "--db", str(enc_index.path), "--questions", str(six), "--out", str(out), "--folds", "2"]
    assert main([*args, "--teacher", f"cache:{cache}", "--jev-endpoint", url, "--no-model"]) == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["targets"] == "soft (the teacher's probabilities)" and data["questions"] == 6
    assert data["examples"] == sum(len(r.pool) for t in traces for r in t.rounds if r.scored)
    assert data["train_agreement_spearman"] > 0.5 and data["cv"]["folds"] == 2


@pytest.mark.slow
def test_the_same_fit_twice_is_the_same_file(enc_index, tmp_path, capsys):
    """Nothing that varies between runs (timings) is in the file: refitting the same inputs gives the
    same bytes, so the same sha256, cache keys and trace names."""
    six = tmp_path / "six.jsonl"
    six.write_text("".join((ENC / "questions.jsonl").read_text().splitlines(True)[:6]))
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in outs:
        args = ["fit-judge", "--db", str(enc_index.path), "--questions", str(six), "--out", str(out), "--folds", "2"]
        assert main([*args, "--features", "coverage,bridge,title_in_question", "--quiet"]) == 0, capsys.readouterr()
    assert " s\n" in capsys.readouterr().out  # the time is still said
    assert outs[0].read_bytes() == outs[1].read_bytes() and "seconds" not in json.loads(outs[0].read_text())


def test_fit_judge_never_overwrites_a_file_that_is_not_a_model(enc_index, tmp_path, capsys):
    out = tmp_path / "notes.json"
    out.write_text('{"mine": true}')
    args = ["fit-judge", "--db", str(enc_index.path), "--questions", str(ENC / "questions.jsonl"), "--out", str(out)]
    assert main([*args[:-1], str(tmp_path / "J.json"), "--features", "coverage,nonsense"]) == 2
    assert "unknown" in capsys.readouterr().err
    assert main(args) == 2 and out.read_text() == '{"mine": true}'
    assert "not a result written by sag2wb" in capsys.readouterr().err


def test_the_shipped_default_loads_and_says_what_it_was_fitted_on():
    """Fitted on the encyclopedia and 2Wiki dev only: the internal docs stay unseen (the demo's
    figures are held out), no local path is recorded, and the recipe's held-out figures are kept."""
    model, sha = load_model(default_model_path())
    data = json.loads(default_model_path().read_text())
    assert data["fitted_on"]["corpora"] == ["encyclopedia", "2wiki"]
    assert "Apache-2.0" in data["fitted_on"]["sources"]["2wiki"]
    text = json.dumps(data)
    assert "shared" not in text and "/work" not in text and "/tmp" not in text
    held = data["held_out"]
    assert held["internal_docs"]["how"].startswith("never seen")
    assert {"encyclopedia", "2wiki", "2wiki (cross-validated)"} <= set(held)
    assert all(0 <= v["R@10"] <= 100 for v in held.values())
    assert model.features == tuple(data["features"]) and len(sha) == 64


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [0, 0, 1]) == pytest.approx(1.0)  # ties share a rank


# ---- everywhere a judge is ------------------------------------------------------------------------
@pytest.mark.slow
def test_learned_is_a_judge_spec_with_its_file(fitted, enc_index):
    from workbench.judges.registry import JudgeSpec, judge_key

    _, out, _ = fitted
    spec = JudgeSpec.parse(f"learned:{out}")
    assert spec == JudgeSpec("learned", (("path", str(out)),)) and JudgeSpec.parse(str(spec)) == spec
    assert JudgeSpec.parse("learned").kind.needs_index and not spec.kind.needs_gold
    with pytest.raises(Exception, match="learned:PATH"):
        JudgeSpec.parse("learned:")
    sha = json.loads(out.read_text())["sha256"]
    assert sha in judge_key(spec, spec.build(enc_index))
    default_sha = load_model(default_model_path())[1]
    assert default_sha in judge_key(JudgeSpec.parse("learned"), JudgeSpec.parse("learned").build(enc_index))


@pytest.mark.slow
def test_the_learned_judge_through_eval(fitted, enc_index, tmp_path, capsys):
    _, model, _ = fitted
    out = tmp_path / "eval.json"
    trace_dir = tmp_path / "traces"
    args = ["eval", "--db", str(enc_index.path), "--questions", str(ENC / "questions.jsonl"), "--out", str(out)]
    assert main([*args, "--judge", f"learned:{model}", "--trace-dir", str(trace_dir), "--quiet"]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["metrics"]["questions"] == 40 and f"learned:{model}" in printed
    sha = json.loads(model.read_text())["sha256"]
    trace = json.loads(next(trace_dir.glob("*.json")).read_text())  # a trace (the folder holds other files too)
    assert sha[:12] in trace["judge"] and data["config"]["judge_sha256"] == sha  # which model answered
    # the same rankings as the judge run in this process
    judge = LearnedJudge(enc_index, model)
    for q, record in list(zip(load_questions(ENC / "questions.jsonl"), data["questions"]))[:3]:
        assert record["ranking"][:10] == Run(enc_index, q, judge=judge).run().documents()[:10]
    # a damaged model file: exit 2 and a named error, nothing written
    bad = tmp_path / "bad.json"
    altered = json.loads(model.read_text())
    altered["model"]["bias"] += 1.0  # still valid JSON, no longer what was fitted
    bad.write_text(json.dumps(altered))
    assert main([*args[:-1], str(tmp_path / "e2.json"), "--judge", f"learned:{bad}"]) == 2
    assert "altered since it was fitted" in capsys.readouterr().err and not (tmp_path / "e2.json").exists()
    assert main([*args[:-1], str(tmp_path / "e3.json"), "--judge", f"learned:{tmp_path / 'none.json'}"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_the_learned_judge_served_over_http_equals_in_process(fitted, enc_index):
    from workbench.judges.jev import make_jev_judge
    from workbench.judges.jev.server import JudgeServer, make_server_judge

    _, model, _ = fitted
    ids = {t: i for i, t in enc_index.documents.items()}
    film, director = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"]])
    q = "Where was the director of Glass Harbour born?"
    context = [dict(film, previous_score=0.9)]
    local = LearnedJudge(enc_index, model).judge(q, [film, director], context)
    with JudgeServer(make_server_judge(f"learned:{model}", str(enc_index.path))) as server:
        jev = make_jev_judge(endpoint=server.url, cache_dir=str(Path(model).parent / "served-cache"))
        served = jev.judge(q, [film, director], context)
        jev.close()
    assert served == pytest.approx(local, abs=1e-6)


@pytest.mark.slow
def test_experiments_and_ablations_take_the_learned_judge(fitted, enc_index, tmp_path):
    from workbench.params import Params
    from workbench.runs.experiment import Experiment, paper_ablation
    from workbench.runs.policies import Config

    _, model, _ = fitted
    qs = load_questions(ENC / "questions.jsonl")[:4]
    configs = [Config("learned", Params(), f"learned:{model}"), Config("default", Params(), "learned")]
    ablation = paper_ablation(judge=f"learned:{model}")
    results = Experiment(enc_index, qs, configs + ablation, RunOptions(progress=False)).run()
    assert len(results.values("learned")) == 4 and len(results.values("default")) == 4
    # the ablation's full row is the learned judge's own run
    assert results.values("H=2") == results.values("learned")


@pytest.mark.slow
def test_the_dashboard_offers_the_learned_judge(fitted, enc_index):
    from widgets import Dashboard

    _, model, _ = fitted
    qs = load_questions(ENC / "questions.jsonl")[:2]
    dash = Dashboard(enc_index, qs, judge="lexical")
    assert "learned" in dash.judge.picker.options
    dash.judge.picker.value = "learned"
    assert dash.model.trace.judge.startswith("learned (sha256 ")
    dash.model.set_judge(f"learned:{model}")
    assert json.loads(model.read_text())["sha256"][:12] in dash.model.trace.judge
    assert f"learned:{model}" in dash.model.judge_options()


def test_a_score_does_not_depend_on_the_batch_it_is_judged_in(enc_index):
    items = judge_items(enc_index, sorted(enc_index.documents)[:40])
    context = [dict(items[0], previous_score=0.7), dict(items[5], previous_score=0.4)]
    judge = LearnedJudge(enc_index)
    q = "Where was the director of Glass Harbour born?"
    together = judge.judge(q, items, context)
    assert together == [judge.judge(q, [c], context)[0] for c in items] == judge.judge(q, items[::-1], context)[::-1]


def _round_calls(enc_index, n=4):
    """(question, candidates, context) of every scored round of n real trajectories (lexical judge)."""
    from workbench.engine import context_items
    from workbench.judges.lexical import LexicalJudge

    calls = []
    for q in load_questions(ENC / "questions.jsonl")[:n]:
        trace = Run(enc_index, q, judge=LexicalJudge(enc_index)).run()
        for r in trace.rounds:
            if r.scored:
                calls.append(
                    (
                        trace.question,
                        judge_items(enc_index, [e.unit_id for e in r.pool]),
                        context_items(enc_index, r.context),
                    )
                )
    return calls


def test_the_overlap_bridge_is_the_lexical_judges_bridge_on_real_rounds(enc_index):
    """The feature against the lexical judge's definition, summed over sets, on real rounds'
    contexts; a fresh extractor per call (every token first seen in that call) and one kept
    across calls must both give it."""
    from workbench import text as textlib
    from workbench.judges.lexical import passage_tokens

    def reference(question, candidates, context):
        q = frozenset(textlib.tokenize(question))
        ctx = []
        for item in context:
            toks = passage_tokens(item["title"], item["text"]) - q
            mass = math.fsum(enc_index.idf(t) for t in toks)
            if mass > 0:
                prev = item.get("previous_score")
                ctx.append((item["unit_id"], toks, mass, 1.0 if prev is None else prev))
        out = []
        for c in candidates:
            toks = passage_tokens(c["title"], c["text"])
            out.append(
                max(
                    [w * math.fsum(enc_index.idf(t) for t in ct & toks) / m for u, ct, m, w in ctx if u != c["unit_id"]]
                    or [0]
                )
            )
        return out

    kept = FeatureExtractor(enc_index, ("overlap_bridge",))
    calls = [c for c in _round_calls(enc_index) if c[2]]
    assert len(calls) >= 6 and any(v > 0.1 for call in calls for v in reference(*call))
    for call in calls:
        want = reference(*call)
        fresh = FeatureExtractor(enc_index, ("overlap_bridge",)).columns(*call)[0]["overlap_bridge"]
        assert fresh == pytest.approx(want, abs=1e-9)
        assert kept.columns(*call)[0]["overlap_bridge"] == fresh


def test_features_remembered_for_a_question_equal_fresh_ones(enc_index):
    """The context-free features are kept per question (a candidate comes back in later rounds):
    the matrix of every real round equals one computed from nothing."""
    kept = FeatureExtractor(enc_index, NO_MODEL)
    calls = _round_calls(enc_index)
    repeats = sum(len(c) for _, c, _ in calls) - len({(q, i["unit_id"]) for q, c, _ in calls for i in c})
    assert repeats > 20  # the memory is exercised
    for call in calls:
        assert np.array_equal(kept.matrix(*call), FeatureExtractor(enc_index, NO_MODEL).matrix(*call))


@pytest.mark.slow
def test_the_default_recipe_keeps_the_internal_docs_unseen(tmp_path):
    """`fit_default` without 2Wiki (what any checkout can run): fitted on the encyclopedia alone,
    the internal docs measured as never seen, every figure named by how it was held out."""
    from workbench.runs.training import SHIPPED_FEATURES, fit_default

    seen = []
    model = fit_default(tmp_path, report=lambda tag, got: seen.append(tag))
    assert model.features == SHIPPED_FEATURES and "overlap_bridge" not in model.features
    assert model.info["fitted_on"]["corpora"] == ["encyclopedia"]
    assert model.info["questions"] == 40 and seen == ["internal_docs"]
    assert model.info["held_out"]["internal_docs"]["how"] == "never seen: the shipped model itself"
    assert 0 < model.info["held_out"]["internal_docs"]["R@10"] <= 100


def test_no_candidates_give_an_empty_matrix(enc_index):
    """A call with no candidates (the features kept per question must not need one)."""
    ex = FeatureExtractor(enc_index, NO_MODEL)
    assert ex.matrix("Where was the director of Glass Harbour born?", [], []).shape == (0, len(NO_MODEL))
    assert all(v == [] for v in ex.columns("Who?", [], [])[0].values())


@pytest.mark.parametrize("max_postings", [1, 0])  # the in-memory postings and FTS5's own bm25()
def test_the_bm25_ranking_read_off_all_scores_is_index_search(enc_index, max_postings):
    """The feature's BM25 ranking comes from the one all-scores query: for every question's
    round-0 expression it is `Index.search`'s first BM25_DEPTH, ties and order included."""
    from workbench.engine import question_expression
    from workbench.index.store import Index
    from workbench.judges.features import BM25_DEPTH, bm25_ranking
    from workbench.params import Params

    index, params = Index(enc_index.path, max_postings=max_postings), Params()
    questions = load_questions(ENC / "questions.jsonl")
    ties = 0
    for q in questions:
        _, expression = question_expression(index, q.question, params)
        scores = index.bm25_all(expression, params.field_weights)
        want = [u for u, _ in index.search(expression, BM25_DEPTH, params.field_weights)]
        assert bm25_ranking(scores, BM25_DEPTH) == want
        ties += len(want) - len({scores[u] for u in want})
    assert ties > 0  # equal scores were there to order


def test_an_explanation_is_the_same_whichever_call_scored_the_candidate(enc_index):
    """`explain` right after the scoring call (the engine's order), after other calls, and for
    candidates never scored (a shared cache answered): the same sentences and numbers."""
    items = judge_items(enc_index, sorted(enc_index.documents)[:30])
    context = [dict(items[0], previous_score=0.7)]
    q = "Where was the director of Glass Harbour born?"
    judge = LearnedJudge(enc_index)
    judge.judge(q, items[:20], context)
    right_after = judge.explain(q, items[:20], context)
    judge.judge(q, items[20:], context)
    judge.judge("Who wrote Glass Harbour?", items[:20], [])
    later = judge.explain(q, items[:20], context)
    fresh = LearnedJudge(enc_index).explain(q, items[:20], context)  # nothing scored: scored on asking
    mixed = judge.explain(q, items[15:25], context)  # rows of two calls
    assert right_after == later == fresh and mixed == right_after[15:] + judge.explain(q, items[20:25], context)
    # every row of one call, in another order: its rows are read in that order, not the call's
    assert judge.explain(q, items[:20][::-1], context) == right_after[::-1]
    assert [s for s, _ in right_after] != [right_after[0][0]] * 20  # the explanations differ per candidate
