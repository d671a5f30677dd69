"""The name bridge, the model-free lexical-bridge judge, judge options and cache keys,
default judges per corpus, and explanations in traces (no embedding model needed here)."""

from __future__ import annotations

import json

import pytest

from workbench.engine import Run
from workbench.index.store import open_or_build
from workbench.judges.registry import auto_reason, default_judge, make_judge, resolve_judge
from workbench.judges.semantic import NameMatcher, SemanticJudge, name_bridge, name_bridges, title_name
from workbench.judgment import JudgeError
from workbench.trace import Trace

from .conftest import BRIDGE_WORLD, REPO, build_index


def ctx(unit_id, title, text, document=None, previous_score=None):
    item = {"unit_id": unit_id, "title": title, "text": text, "document": document or title}
    if previous_score is not None:
        item["previous_score"] = previous_score
    return item


def cand(unit_id, title, document=None):
    return {"unit_id": unit_id, "title": title, "text": "", "document": document or title}


def test_title_names_drop_the_disambiguator_and_ignore_short_titles():
    assert title_name("Ridin' Kid from Powder River (film)") == "ridin' kid from powder river"
    assert title_name("Glass Harbor (band)") == "glass harbor"
    assert title_name("Élodie Marchetti") == "elodie marchetti"  # accents folded, case folded
    assert title_name("Io") is None and title_name("UK (band)") is None
    assert title_name("Kiev") == "kiev"


@pytest.mark.parametrize(
    "text, named",
    [
        ("She directed Glass Harbour in 1961.", True),
        ("she directed GLASS HARBOUR.", True),  # case-folded
        ("the film Glass Harbours was lost", False),  # word boundary at the end
        ("Moglass Harbour is elsewhere", False),  # word boundary at the start
        ("Glass\nHarbour", False),  # a name is one phrase
        ("(Glass Harbour)", True),
    ],
)
def test_name_bridge_needs_the_whole_title_between_word_boundaries(text, named):
    bridge, by = name_bridge(NameMatcher(), cand(9, "Glass Harbour (film)"), [ctx(1, "Mara Quell", text)])
    assert (bridge, by is not None) == ((1.0, True) if named else (0.0, False))


def test_name_bridge_takes_the_strongest_naming_passage_by_its_previous_score():
    context = [
        ctx(1, "A", "Mara Quell directed it.", previous_score=0.4),
        ctx(2, "B", "A film by Mara Quell.", previous_score=0.9),
        ctx(3, "C", "Nothing relevant here.", previous_score=1.0),  # strongest, but does not name her
    ]
    bridge, by = name_bridge(NameMatcher(), cand(7, "Mara Quell"), context)
    assert (bridge, by["unit_id"]) == (0.9, 2)


def test_a_passage_never_bridges_to_itself_or_its_own_document():
    context = [
        ctx(7, "Mara Quell", "Mara Quell was a director."),
        ctx(8, "Mara Quell", "Mara Quell later taught.", document="Mara Quell"),
    ]
    assert name_bridge(NameMatcher(), cand(7, "Mara Quell", document="Mara Quell"), context) == (0.0, None)


def test_equal_weights_give_the_first_naming_passage_in_context_order():
    context = [
        ctx(1, "A", "Nothing here.", previous_score=0.6),
        ctx(2, "B", "Mara Quell again.", previous_score=0.6),
        ctx(3, "C", "By Mara Quell.", previous_score=0.6),
        ctx(4, "D", "Mara Quell, once more.", previous_score=0.0),  # a weight of 0 never bridges
    ]
    assert name_bridge(NameMatcher(), cand(7, "Mara Quell"), context) == (0.6, context[1])
    assert name_bridge(NameMatcher(), cand(7, "Mara Quell"), context[3:]) == (0.0, None)


def _bridge_by_the_rule(matcher, candidate, context):
    """The rule read literally: over the context in order, keep a naming passage whose weight beats the best."""
    pattern = matcher.pattern(candidate["title"])
    best, by = 0.0, None
    for item in context:
        if item["unit_id"] == candidate["unit_id"] or item["document"] == candidate["document"]:
            continue
        weight = 1.0 if item.get("previous_score") is None else item["previous_score"]
        if pattern is not None and weight > best and pattern.search(matcher.folded(item["text"])):
            best, by = weight, item
    return best, by


def test_the_batched_name_bridge_equals_the_rule_on_real_passages(enc_index):
    """Every encyclopedia passage as a candidate against contexts of real passages with tied,
    zero and distinct weights: `name_bridges` (one pass over the context per call) gives the
    rule's bridge and naming passage for each."""
    import random

    from workbench.engine import judge_items

    items = judge_items(enc_index, sorted(enc_index.documents))
    rng = random.Random(7)
    matcher, found = NameMatcher(), 0
    for trial in range(30):
        context = [dict(c) for c in rng.sample(items, 8)]
        for c in context:
            c["previous_score"] = rng.choice([None, 0.0, 0.5, 0.5, 0.9, rng.random()]) if trial % 3 else None
            if c["previous_score"] is None:
                del c["previous_score"]
        want = [_bridge_by_the_rule(matcher, c, context) for c in items]
        assert name_bridges(matcher, items, context) == want
        found += sum(by is not None for _, by in want)
    assert found > 30  # bridges were there to find


def test_accented_titles_are_named_by_unaccented_text():
    bridge, _ = name_bridge(NameMatcher(), cand(2, "José Arriaga"), [ctx(1, "X", "scored by Jose Arriaga")])
    assert bridge == 1.0


def test_lexical_bridge_scores_a_named_second_hop_above_a_topical_distractor(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    judge = make_judge("lexical-bridge", index)
    assert judge.name == "lexical-bridge" and judge._embedder is None and '"model"' not in judge.key  # no model loaded
    q = "Where was the director of Glass Harbour born?"
    context = [ctx(1, "Glass Harbour", BRIDGE_WORLD[0][1])]
    candidates = [ctx(2, "Mara Quell", BRIDGE_WORLD[1][1]), ctx(5, "Harbour Lights", BRIDGE_WORLD[4][1])]
    s_quell, s_lights = judge.judge(q, candidates, context)
    comps = judge.components(q, candidates, context)
    # Mara Quell shares no question token: coverage 0, bridge 1 -> 1 - (1 - 0) * (1 - 0.8 * 1) = 0.8
    assert comps[0]["coverage"] == 0.0 and comps[0]["bridge"] == 1.0 and comps[0]["named_by"] == "Glass Harbour"
    assert s_quell == pytest.approx(0.8)
    # Harbour Lights: relevance = coverage only, no bridge
    assert comps[1]["bridge"] == 0.0 and "named_by" not in comps[1]
    assert s_lights == pytest.approx(comps[1]["coverage"]) and s_lights < s_quell


def test_every_parameter_is_in_the_cache_key(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    base = SemanticJudge(index, signals=("coverage", "bridge"))
    keys = {base.key}
    for options in (
        {"gamma": 0.5},
        {"scale": 5.0},
        {"shift": 0.2},
        {"signals": ("coverage",)},
        {"signals": ("bridge",)},
        {"signals": ("coverage",), "gamma": 0.5},
    ):
        keys.add(SemanticJudge(index, **{"signals": ("coverage", "bridge"), **options}).key)
    assert len(keys) == 7
    # the same configuration written differently is the same judge
    assert SemanticJudge(index, signals=("bridge", "coverage")).key == base.key
    assert make_judge("semantic:signals=bridge+coverage,gamma=0.8", index).key == base.key
    assert make_judge("lexical-bridge", index).key == base.key
    assert SemanticJudge(index, signals=("coverage", "bridge"), cjk="coverage").key == base.key  # no model: no CJK rule


@pytest.mark.parametrize(
    "spec, message",
    [
        ("semantic:gamma=2", "gamma must be in [0, 1]"),
        ("semantic:signals=model+magic", "signals must be a non-empty subset"),
        ("semantic:speed=3", "known options: gamma, scale, shift, signals, cjk"),
        ("semantic:gamma", "expected NAME=VALUE"),
        ("semantic:cjk=guess", "cjk must be 'coverage' or 'model'"),
    ],
)
def test_bad_semantic_options_are_named(tmp_path, spec, message):
    index = build_index(tmp_path, BRIDGE_WORLD)
    with pytest.raises(JudgeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make_judge(spec, index)


def test_default_judge_per_bundled_corpus(tmp_path):
    docs, _ = open_or_build(REPO / "sample_corpora" / "internal_docs", tmp_path / "docs.sqlite")
    enc, _ = open_or_build(REPO / "sample_corpora" / "encyclopedia" / "corpus.json", tmp_path / "enc.sqlite")
    assert default_judge(docs) == "lexical"  # a folder of files: the overlap bridge follows identifiers
    assert default_judge(enc) == "learned"  # titled passages: the shipped learned judge won every held-out check
    assert resolve_judge("auto", enc) == "learned" and resolve_judge("lexical", enc) == "lexical"
    assert auto_reason(enc).startswith("auto: learned for a passage corpus")
    assert auto_reason(docs).startswith("auto: lexical for a folder of documentation files")


@pytest.mark.slow
def test_eval_says_what_auto_picked_and_why(tmp_path, capsys):
    """`--judge auto` (the default) names its pick and the reason on stderr; --quiet does not."""
    from workbench.cli.main import main

    docs, _ = open_or_build(REPO / "sample_corpora" / "internal_docs", tmp_path / "docs.sqlite")
    q = REPO / "sample_corpora" / "internal_docs.questions.jsonl"
    assert main(["eval", "--db", str(docs.path), "--questions", str(q), "--out", str(tmp_path / "a.json")]) == 0
    assert "auto: lexical for a folder of documentation files" in capsys.readouterr().err
    args = ["eval", "--db", str(docs.path), "--questions", str(q), "--out", str(tmp_path / "b.json"), "--quiet"]
    assert main(args) == 0
    assert "auto:" not in capsys.readouterr().err
    assert json.loads((tmp_path / "b.json").read_text())["config"]["judge"] == "lexical"


def test_explanations_reach_the_passages_frame_and_round_trip(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    trace = Run(index, "Where was the director of Glass Harbour born?", judge=make_judge("lexical-bridge", index)).run()
    passages = trace.frames()["passages"]
    scored = passages[passages["score"].notna()]
    assert scored["explanation"].notna().all() and scored["components"].notna().all()
    row = scored[(scored["title"] == "Mara Quell") & (scored["round"] >= 1)].iloc[0]
    assert row["components"]["named_by"] == "Glass Harbour"
    assert row["explanation"].startswith(f"scored {row['score']:.2f}: named by 'Glass Harbour'")
    assert Trace.from_json(trace.to_json()).to_json() == trace.to_json()


def test_judges_that_do_not_explain_keep_their_json(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    trace = Run(index, "Where was the director of Glass Harbour born?", judge=make_judge("lexical", index)).run()
    assert all("explanations" not in r for r in json.loads(trace.to_json())["rounds"])
    passages = trace.frames()["passages"]
    assert passages["explanation"].isna().all() and passages["components"].isna().all()


LEXICAL_SCORES = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.conftest import FILM_WORLD, units_from
from workbench.index.store import Index
from workbench.judges.lexical import LexicalJudge
ix = Index.build(units_from(FILM_WORLD), {db!r})
cands = [{{"unit_id": i + 1, "title": t, "text": x}} for i, (t, x) in enumerate(FILM_WORLD)]
ctx = [dict(cands[0], previous_score=0.7), dict(cands[1], previous_score=0.4)]
questions = ("Where was the director of Glass Harbour born?", "Which composer scored the drama film shot in Vellor?")
print(json.dumps([LexicalJudge(ix).judge(q, cands, ctx) for q in questions]))
"""


@pytest.mark.slow
def test_lexical_scores_do_not_depend_on_the_hash_seed(tmp_path):
    """Set iteration order follows PYTHONHASHSEED; the idf mass is summed exactly (fsum), so
    two processes with different seeds give bit-identical scores (before: docs-09's ranking
    changed with the seed)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    outputs = set()
    for seed in ("1", "2", "3"):
        code = LEXICAL_SCORES.format(repo=str(REPO), db=str(tmp_path / f"ix{seed}.sqlite"))
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
        )
        assert proc.returncode == 0, proc.stderr
        outputs.add(proc.stdout)
    assert len(outputs) == 1


def test_offline_judges_share_one_bounded_cache_of_passage_tokens(tmp_path):
    """A passage's tokens are computed once per process, not once per judge (lexical or
    semantic): a later run (or a worker forked from a warm process) does not tokenize it
    again. Scores are unchanged."""
    from tests.conftest import FILM_WORLD
    from workbench.judges.lexical import LexicalJudge, passage_tokens
    from workbench.text import tokenize

    index = build_index(tmp_path, FILM_WORLD)
    cands = [{"unit_id": i + 1, "title": t, "text": x} for i, (t, x) in enumerate(FILM_WORLD)]
    q = "Where was the director of Glass Harbour born?"
    passage_tokens.cache_clear()
    first = LexicalJudge(index).judge(q, cands, [])
    assert passage_tokens.cache_info().misses == len(cands) and passage_tokens.cache_info().hits == 0
    assert LexicalJudge(index).judge(q, cands, []) == first  # a new judge: every passage a hit
    assert passage_tokens.cache_info().hits == len(cands) and passage_tokens.cache_info().misses == len(cands)
    make_judge("semantic:signals=coverage", index).judge(q, cands, [])  # the semantic judge's coverage: the same cache
    assert passage_tokens.cache_info().hits == 2 * len(cands) and passage_tokens.cache_info().misses == len(cands)
    title, text = FILM_WORLD[0]
    assert passage_tokens(title, text) == frozenset(tokenize(title + "\n" + text))
    assert passage_tokens.cache_info().maxsize == 8192  # bounded (22 MB full of 2Wiki passages)


class _CountingExplainer:
    """The lexical-bridge judge, counting what it is asked to explain; `fail` makes explaining raise."""

    explains = True

    def __init__(self, index, fail=False):
        self.inner, self.fail, self.explained = make_judge("lexical-bridge", index), fail, 0
        self.key, self.name = self.inner.key, "counting"

    def judge(self, question, candidates, context):
        return self.inner.judge(question, candidates, context)

    def explain(self, question, candidates, context):
        self.explained += len(candidates)
        if self.fail:
            raise RuntimeError("no reasons today")
        return self.inner.explain(question, candidates, context)


def test_a_run_not_asked_to_explain_has_the_same_trajectory_and_no_reasons(tmp_path):
    index = build_index(tmp_path, BRIDGE_WORLD)
    q = "Where was the director of Glass Harbour born?"
    asked, quiet = _CountingExplainer(index), _CountingExplainer(index)
    full, bare = Run(index, q, judge=asked).run(), Run(index, q, judge=quiet, explain=False).run()
    assert asked.explained > 0 and quiet.explained == 0
    assert [(r.ranking, r.scores) for r in full.rounds] == [(r.ranking, r.scores) for r in bare.rounds]
    assert all(not r.explanations for r in bare.rounds) and any(r.explanations for r in full.rounds)
    failing = _CountingExplainer(index, fail=True)  # a judge that cannot explain stops only runs that ask
    assert "could not explain" in (Run(index, q, judge=failing).run().rounds[-1].error or "")
    assert Run(index, q, judge=failing, explain=False).run().documents() == bare.documents()


def test_eval_asks_for_reasons_only_when_traces_are_kept_or_written(tmp_path):
    from workbench.index.units import Question
    from workbench.runs.evaluation import evaluate
    from workbench.runs.options import Hooks, RunOptions

    index = build_index(tmp_path, BRIDGE_WORLD)
    qs = [Question("q1", "Where was the director of Glass Harbour born?", ("Mara Quell",))]
    runs = {}
    for label, options in (("records", {}), ("kept", {"keep_traces": True}), ("files", {"trace_dir": tmp_path / "t"})):
        judge = _CountingExplainer(index)
        hooks = Hooks(judge_for=lambda q, j=judge: j)
        result = evaluate(index, qs, options=RunOptions(progress=False, hooks=hooks, **options))
        runs[label] = (judge.explained, result.records)
    assert runs["records"][0] == 0 and runs["kept"][0] > 0 and runs["files"][0] > 0
    assert runs["records"][1] == runs["kept"][1] == runs["files"][1]  # the same records either way
    written = json.loads(next((tmp_path / "t").glob("*.json")).read_text())
    assert any(r.get("explanations") for r in written["rounds"])
