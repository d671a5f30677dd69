"""The exact JEV cache (issue 20, item 3): whatever can change an answer is in its key, so a
run gives the same trajectory from an empty cache and after any cache history, against a
batch-sensitive server (jevcompat's reference mock with its batch-leaks and order-leaks
faults: an answer depends on the request's size and the question's position)."""

from __future__ import annotations

import json

import diskcache
import pytest

from workbench.cli.main import main as cli_main
from workbench.engine import Run
from workbench.index.store import Index
from workbench.index.units import Unit
from workbench.judges import jev
from workbench.params import Params

mock = pytest.importorskip("jevcompat.mock")

from tests.test_jev import NAMES  # noqa: E402  (the same eighteen place names)

QUESTIONS = [
    "Where was the director of the harbour film born?",
    "Which town is near Rowan?",
    "Which river joins Alder and Fernvale?",
    "Which town lies between Kestrel and Oakhurst?",
]
BIG, SMALL = (
    Params(B=8, s=2, L=8, p=2, incoming_limit=4, context_size=3),
    Params(B=8, s=2, L=4, p=2, incoming_limit=4, context_size=3),
)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    units = []
    for i, n in enumerate(NAMES):
        a, b = NAMES[(i + 1) % len(NAMES)], NAMES[(i + 5) % len(NAMES)]
        extra = " The harbour film director was born here." if i < 4 else ""
        units.append(Unit(n, "", f"{n} is a town near {a}. A river joins {n} and {b}.{extra}", n, "inline", str(i)))
    return Index.build(units, tmp_path_factory.mktemp("idx") / "towns.sqlite")


@pytest.fixture
def clean():
    """jevcompat's mock as Jev specifies it: an answer depends on its question and the state only."""
    with mock.Running(mock.MockConfig()) as srv:
        yield srv.url + "/v1/systemone"


@pytest.fixture
def leaky():
    """jevcompat's mock: answers hash the state, the question and (faults) the batch size and position."""
    with mock.Running(mock.MockConfig(faults=frozenset({"batch-leaks", "order-leaks"}))) as srv:
        yield srv.url + "/v1/systemone"


def run(index, url, cache_dir, params, style, question=QUESTIONS[0]):
    judge = jev.make_jev_judge(url, cache_dir=cache_dir, payload_style=style, backoff_base=0.01, timeout=10)
    try:
        trace = Run(index, question, params, judge).run()
    finally:
        judge.close()
    return trace


def trajectory(trace):
    """Every round as the trace writes it (pools, scores, contexts, rankings) and the final ranking."""
    return json.loads(trace.to_json())["rounds"], trace.final_ranking


@pytest.mark.slow
@pytest.mark.parametrize("style, server", [("stateful", "leaky"), ("stateful", "clean"), ("inline", "clean")])
def test_the_same_trajectory_from_an_empty_cache_and_after_another_runs_cache(index, request, tmp_path, style, server):
    """Stateful keys hold the batch and the position: exact even when the server leaks them
    into its answers. Inline keys hold the candidate alone: exact for a server that answers
    each question on its own, as Jev requires (semantics.batching, semantics.question-order)."""
    leaky = request.getfixturevalue(server)
    fresh = run(index, leaky, tmp_path / "fresh", SMALL, style)
    run(index, leaky, tmp_path / "history", BIG, style)  # a history: L=8 first ...
    warm = run(index, leaky, tmp_path / "history", SMALL, style)  # ... then L=4 from that cache
    assert trajectory(warm) == trajectory(fresh)
    again = run(index, leaky, tmp_path / "history", SMALL, style)  # and once more, all from the cache
    assert trajectory(again) == trajectory(fresh)
    assert again.stats["cache_hits"] == again.judgments  # (one request re-sent: the model check)


def test_stateful_batches_really_change_the_answers(leaky, tmp_path):
    """The premise: against this server a candidate's answer depends on its batch mates and
    position, so a per-candidate key would replay wrong answers."""
    cands = [{"unit_id": i, "title": n, "text": f"{n} is a town."} for i, n in enumerate(NAMES[:3])]
    judge = jev.make_jev_judge(leaky, cache_dir=tmp_path / "c")
    alone = judge.judge("Q?", cands[:1], [])[0]
    first = judge.judge("Q?", cands, [])[0]
    last = judge.judge("Q?", [cands[1], cands[2], cands[0]], [])[2]
    assert len({alone, first, last}) == 3
    assert judge.judge("Q?", cands, [])[0] == first  # the same request: from the cache
    judge.close()


def test_a_partly_cached_stateful_request_is_sent_whole(leaky, tmp_path):
    cands = [{"unit_id": i, "title": n, "text": f"{n} is a town."} for i, n in enumerate(NAMES[:3])]
    judge = jev.make_jev_judge(leaky, cache_dir=tmp_path / "c")
    want = judge.judge("Q?", cands, [])
    keys = judge.inner.cache_keys("Q?", cands, [])
    judge.store.cache.delete(keys[1])  # one judgment of the request gone
    before = judge.usage()["requests"]
    assert judge.judge("Q?", cands, []) == want
    assert judge.usage()["requests"] == before + 1 and judge.usage()["judgments_sent"] == 6
    judge.close()


@pytest.mark.slow
def test_concurrency_1_and_16_give_the_same_trajectories(index, leaky, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(
            json.dumps({"_id": f"q{i}", "question": q, "supporting_titles": ["Alder"]}) + "\n"
            for i, q in enumerate(QUESTIONS)
        ),
        encoding="utf-8",
    )
    out = {}
    for n in (1, 16):
        args = [
            "eval",
            "--db",
            str(index.path),
            "--questions",
            str(questions),
            "--out",
            str(tmp_path / f"o{n}.json"),
            "--trace-dir",
            str(tmp_path / f"t{n}"),
            "--quiet",
            "--judge",
            "jev",
            "--jev-endpoint",
            leaky,
            "--cache-dir",
            str(tmp_path / f"c{n}"),
            "--concurrency",
            str(n),
            "--param",
            "L=4",
        ]
        assert cli_main(args) == 0
        out[n] = {p.name: json.loads(p.read_text())["rounds"] for p in sorted((tmp_path / f"t{n}").glob("*.json"))}
    assert out[1] == out[16] and len(out[1]) == len(QUESTIONS)


# ---- the model that answered -----------------------------------------------------------------
@pytest.mark.slow
def test_judgments_of_another_model_are_asked_again_not_replayed(index, leaky, tmp_path, capsys):
    cache_dir = tmp_path / "c"
    first = run(index, leaky, cache_dir, SMALL, "stateful")
    cache = diskcache.Cache(str(cache_dir))
    for k in list(cache.iterkeys()):
        if isinstance(k, str) and k.startswith(jev.CACHE_KEY_PREFIX):
            cache.set(k, {**cache.get(k), "model": "jev-old-release"})  # as if answered by an earlier release
    cache.close()
    assert cli_main(["cache", "stats", "--cache-dir", str(cache_dir)]) == 0
    assert "answered by jev-old-release:" in capsys.readouterr().out
    second = run(index, leaky, cache_dir, SMALL, "stateful")
    # every judgment asked again, once: the first request (the model check) and then the rest
    assert second.stats["requests"] == first.stats["requests"]
    assert second.stats["judgments_sent"] == first.stats["judgments_sent"]
    assert trajectory(second) == trajectory(first)
    assert cli_main(["cache", "stats", "--cache-dir", str(cache_dir)]) == 0
    shown = capsys.readouterr().out
    assert "answered by jevcompat-mock-0.1:" in shown and "jev-old-release" not in shown  # replaced, answer by answer
    # replay (no service to ask) uses what the cache holds, whatever answered it
    replay = jev.make_jev_judge(leaky, cache_dir=cache_dir, cache_only=True)
    assert trajectory(Run(index, QUESTIONS[0], SMALL, replay).run()) == trajectory(first)
    replay.close()


# ---- a cache of the previous client ----------------------------------------------------------
def test_a_cache_written_by_the_previous_client_is_refused_with_how_to_rebuild(tmp_path):
    old = diskcache.Cache(str(tmp_path / "old"))
    old.set("jev-judgment-v1:" + "0" * 64, {"p": 0.5, "model": "m"})
    old.close()
    with pytest.raises(jev.JEVCacheError, match=r"older client.*never mixed in.*Rebuild it: move or delete"):
        jev.make_jev_judge("http://127.0.0.1:9/v1/systemone", cache_dir=tmp_path / "old")
    with pytest.raises(jev.JEVCacheError, match="older client"):
        jev.make_jev_judge("http://127.0.0.1:9/v1/systemone", cache_dir=tmp_path / "old", cache_only=True)
    export = tmp_path / "old.jsonl"
    export.write_text(json.dumps({"key": "jev-judgment-v1:" + "1" * 64, "p": 0.5, "model": "m"}) + "\n")
    with pytest.raises(jev.JEVInputError, match=r"line 1: an export of an older client's cache.*Rebuild"):
        jev.import_cache(tmp_path / "new", export)
    # a new cache carries the format marker
    jev.make_jev_judge("http://127.0.0.1:9/v1/systemone", cache_dir=tmp_path / "new").close()
    assert jev.cache_stats(tmp_path / "new")["format"] == 2
