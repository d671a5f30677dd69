"""workbench/protocols.py: what every judge kind declares (isinstance over each capability
Protocol), hand-made judges with one capability each, the flag and None-valued members read
by their helpers, what the cache wrapper declares over each judge and what moved into jev/,
and a scan of the sources: no capability probe (getattr/hasattr) outside the protocols module."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
from pathlib import Path

import diskcache
import pytest

from tests.conftest import FILM_WORLD, build_index
from workbench import protocols
from workbench.engine import Run
from workbench.judges.base import FunctionJudge
from workbench.judges.cached import CachedJudge, CacheMiss
from workbench.judges.jev.errors import JEVCacheMiss
from workbench.judges.jev.judge import USAGE_COUNTERS, JEVCachedJudge, JEVJudge, make_jev_judge
from workbench.judges.jev.served import DataHashJudge
from workbench.judges.jev.server import JudgeServer
from workbench.judges.learned import LearnedJudge
from workbench.judges.lexical import LexicalJudge, OracleJudge
from workbench.judges.semantic import SemanticJudge
from workbench.protocols import (
    AsyncJudge,
    BatchDependent,
    BulkStore,
    Closable,
    CountsJudgments,
    CountsPerCall,
    Explains,
    HasCacheKeys,
    HasUsage,
    Judge,
    JudgesSagRequests,
    NamesCacheMiss,
    PlansCache,
    ReadsModelFile,
    ReportsModel,
    Reusable,
    StartsClient,
    Streams,
)

REPO = Path(__file__).resolve().parent.parent
PROTOCOLS = (
    Judge,
    Explains,
    HasUsage,
    Closable,
    BatchDependent,
    CountsPerCall,
    AsyncJudge,
    Streams,
    HasCacheKeys,
    PlansCache,
    Reusable,
    ReportsModel,
    NamesCacheMiss,
    JudgesSagRequests,
    ReadsModelFile,
    StartsClient,
)
STORE_PROTOCOLS = (BulkStore, CountsJudgments)  # what a judgment store may offer a CachedJudge
CANDIDATES = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film.", "document": "Glass Harbour"}]


def declared(judge) -> set[str]:
    return {p.__name__ for p in PROTOCOLS if isinstance(judge, p)}


def members(protocol) -> list[str]:
    """A protocol's members: its annotated attributes and the methods it defines."""
    methods = [k for k, v in vars(protocol).items() if callable(v) and not k.startswith("_")]
    return [*protocol.__annotations__, *methods]


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    return build_index(tmp_path_factory.mktemp("film"), FILM_WORLD)


def jev_inner(style: str = "stateful") -> JEVJudge:
    return JEVJudge(None, url="http://127.0.0.1:9/v1/systemone", model="m", family="url:local", payload_style=style)


CACHED = {"Judge", "AsyncJudge", "HasUsage", "Closable", "BatchDependent"}
JEV = {
    *CACHED,
    "CountsPerCall",
    "Streams",
    "HasCacheKeys",
    "PlansCache",
    "Reusable",
    "ReportsModel",
    "NamesCacheMiss",
    "StartsClient",
}
KINDS = {  # judge kind -> (build(index, tmp_path), the protocols it declares)
    "lexical": (lambda ix, tmp: LexicalJudge(ix), {"Judge"}),
    "oracle": (lambda ix, tmp: OracleJudge(["Mara Quell"]), {"Judge"}),
    "function": (lambda ix, tmp: FunctionJudge(lambda q, c, x: [0.5] * len(c), name="half"), {"Judge"}),
    "lexical-bridge": (
        lambda ix, tmp: SemanticJudge(ix, signals=("coverage", "bridge")),
        {"Judge", "Explains", "HasUsage"},
    ),
    "semantic": (lambda ix, tmp: SemanticJudge(ix, cache_dir=tmp / "emb"), {"Judge", "Explains", "HasUsage"}),
    "learned": (lambda ix, tmp: LearnedJudge(ix), {"Judge", "Explains", "HasUsage", "ReadsModelFile"}),
    "jev": (lambda ix, tmp: jev_inner(), JEV),
    "jev-cached": (
        lambda ix, tmp: make_jev_judge("http://127.0.0.1:9", cache_dir=tmp / "jev"),  # no request is made
        {*CACHED, "CountsPerCall", "StartsClient"},
    ),
    "data-hash": (lambda ix, tmp: DataHashJudge(), {"Judge", "JudgesSagRequests"}),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_judge_kind_declares_what_it_can_do(kind, film, tmp_path):
    build, expected = KINDS[kind]
    judge = build(film, tmp_path)
    try:
        assert declared(judge) == expected
    finally:
        protocols.close_judge(judge)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "jev-cached"])
def test_the_cache_wrapper_declares_its_own_capabilities_over_each_kind(kind, film, tmp_path):
    """A CachedJudge is a Judge with an async API, usage, close and the inner's batch flag: it
    forwards nothing else (an explaining inner's explanations are not the cache's)."""
    inner = KINDS[kind][0](film, tmp_path)
    cached = CachedJudge(inner, diskcache.Cache(str(tmp_path / "store")), cache_dir=tmp_path / "store")
    try:
        assert declared(cached) == CACHED
        assert protocols.is_batch_dependent(cached) is protocols.is_batch_dependent(inner)
        assert not protocols.can_explain(cached)
        assert set(protocols.usage_of(cached)) >= {"cache_hits", "cache_misses"}
    finally:
        cached.close()


def test_only_stateful_jev_is_batch_dependent():
    assert protocols.is_batch_dependent(jev_inner("stateful"))
    assert isinstance(jev_inner("inline"), BatchDependent) and not protocols.is_batch_dependent(jev_inner("inline"))


def test_a_judge_with_only_judge_is_a_judge_and_nothing_else(film):
    class Bare:
        name, key = "bare", "bare-v1"

        def judge(self, question, candidates, context):
            return [0.5] * len(candidates)

    bare = Bare()
    assert declared(bare) == {"Judge"}
    assert protocols.usage_of(bare) == {} and not protocols.can_explain(bare)
    assert not protocols.is_batch_dependent(bare) and not protocols.streams(bare)
    assert protocols.answered_model(bare) is None and protocols.model_sha256(bare) is None
    protocols.close_judge(bare)  # nothing to close: no error
    trace = Run(film, "Who directed Glass Harbour?", judge=bare).run()
    assert trace.rounds and all(not r.explanations for r in trace.rounds)


def _member(name: str, annotation: str):
    if name in ("explains", "batch_dependent", "answers_in_parts"):
        return True
    if name in ("answered_model", "sha256"):
        return "m"
    if name == "ajudge":

        async def ajudge(self, question, candidates, context):
            return [0.5] * len(candidates)

        return ajudge
    return lambda self, *args, **kwargs: None


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p is not Judge], ids=lambda p: p.__name__)
def test_a_hand_made_object_with_one_capability_declares_only_it(protocol):
    cls = type(f"Only{protocol.__name__}", (), {m: _member(m, "") for m in members(protocol)})
    assert declared(cls()) == {protocol.__name__}
    without = type("Without", (), {m: _member(m, "") for m in members(protocol)[1:]})
    assert protocol.__name__ not in declared(without())  # one member short: not declared


def test_flags_and_none_values_are_read_not_just_found():
    class Flags:
        explains = False
        batch_dependent = False
        answers_in_parts = False
        answered_model = None
        sha256 = None

        def explain(self, question, candidates, context):
            raise AssertionError("a judge whose explains is false is never asked")

        def judge(self, question, candidates, context, on_answered=None):
            return [0.5] * len(candidates)

    flags = Flags()
    assert {"Explains", "BatchDependent", "Streams", "ReportsModel", "ReadsModelFile"} <= declared(flags)
    assert not protocols.can_explain(flags) and not protocols.is_batch_dependent(flags)
    assert not protocols.streams(flags)
    assert protocols.answered_model(flags) is None and protocols.model_sha256(flags) is None


def test_the_engine_asks_explain_only_of_a_judge_whose_flag_is_true(film):
    class Explaining:
        name, key, explains = "explaining", "explaining-v1", True

        def judge(self, question, candidates, context):
            return [0.5] * len(candidates)

        def explain(self, question, candidates, context):
            return [("because", {"n": 1})] * len(candidates)

    class Quiet(Explaining):
        explains = False

        def explain(self, question, candidates, context):
            raise AssertionError("not asked")

    loud = Run(film, "Who directed Glass Harbour?", judge=Explaining()).run()
    assert any(r.explanations for r in loud.rounds)
    quiet = Run(film, "Who directed Glass Harbour?", judge=Quiet()).run()
    assert quiet.rounds and all(not r.explanations for r in quiet.rounds)


@pytest.mark.parametrize("in_parts", [True, False])
def test_the_cache_stores_parts_as_they_arrive_only_from_a_judge_that_streams(in_parts, tmp_path):
    """A judge that answers in parts and then fails keeps its first part in the store, but only
    when it declares `answers_in_parts`; otherwise it is called without `on_answered`."""
    calls = []

    class Parts:
        name, key, answers_in_parts = "parts", "parts-v1", in_parts

        def judge(self, question, candidates, context, on_answered=None):
            calls.append(on_answered is not None)
            if on_answered is not None:
                on_answered([0], [0.25], "m")
            raise RuntimeError("the second part failed")

    store = diskcache.Cache(str(tmp_path / "store"))
    cached = CachedJudge(Parts(), store)
    two = [*CANDIDATES, {"unit_id": 2, "title": "Porto Calven", "text": "A town.", "document": "Porto Calven"}]
    with pytest.raises(RuntimeError, match="second part"):
        cached.judge("Who directed it?", two, [])
    assert calls == [in_parts]
    assert len(store) == (1 if in_parts else 0)
    cached.close()


@pytest.mark.parametrize(("inner", "error"), [("lexical", CacheMiss), ("jev", JEVCacheMiss)])
def test_a_replay_miss_is_the_inner_judges_own_error_when_it_names_one(inner, error, film, tmp_path):
    judge = CachedJudge(
        KINDS[inner][0](film, tmp_path), diskcache.Cache(str(tmp_path / "s")), cache_dir=tmp_path, cache_only=True
    )
    with pytest.raises(error, match="cache-only"):
        judge.judge("Who directed it?", CANDIDATES, [])
    assert type(judge._miss("q", CANDIDATES)) is error
    judge.close()


def test_what_belongs_to_jev_is_in_jev(film, tmp_path):
    """The JEV client and the order of JEV's counters are the JEV cached judge's; the generic
    wrapper has no `client` and adds its counters at the end."""
    server = JudgeServer(LexicalJudge(film)).start()
    try:
        judge = make_jev_judge(server.url, cache_dir=tmp_path / "jev")
        assert isinstance(judge, JEVCachedJudge) and judge.client is judge.inner.client is not None
        assert judge.judge("Who directed Glass Harbour?", CANDIDATES, []) == judge.inner.judge(
            "Who directed Glass Harbour?", CANDIDATES, []
        )
        asyncio.run(judge.ajudge("Who directed Glass Harbour?", CANDIDATES, []))
        order = list(USAGE_COUNTERS)
        order[order.index("judgments_sent") + 1 : order.index("judgments_sent") + 1] = ["cache_hits", "cache_misses"]
        assert list(judge.usage()) == order
        assert judge.usage()["cache_hits"] == 1 and judge.usage()["requests"] == 2
        assert type(judge.with_store(diskcache.Cache(str(tmp_path / "other")))) is JEVCachedJudge
        judge.close()
    finally:
        server.stop()

    class Counting:
        name, key = "counting", "counting-v1"

        def judge(self, question, candidates, context):
            return [0.5] * len(candidates)

        def usage(self):
            return {"requests": 1, "judgments_sent": 1, "cost": 0}

    generic = CachedJudge(Counting(), diskcache.Cache(str(tmp_path / "generic")))
    assert not hasattr(generic, "client")
    assert list(generic.usage()) == ["requests", "judgments_sent", "cost", "cache_hits", "cache_misses"]
    assert type(generic.with_store(diskcache.Cache(str(tmp_path / "g2")))) is CachedJudge
    generic.close()


# ---- no capability probe outside the protocols module ----------------------------------------
# Every capability member, and `judge` itself (is_judge_object): read only in workbench/protocols.py.
CAPABILITY_MEMBERS = {m for p in (*PROTOCOLS, *STORE_PROTOCOLS) for m in members(p)} - {"name", "key"}
# (attribute, receiver) of the getattr/hasattr calls named like a capability that probe no judge
NOT_A_JUDGE = {("close", "self.outcomes"): "an iterator of outcomes (a generator-based map), stopped early"}
# Every other getattr/hasattr outside the protocols module, by its attribute name, and why it is no capability probe
ALLOWED = {
    **dict.fromkeys(("name", "key"), "a Judge's own name or key read with a default (display, resume keys)"),
    "build": "a JudgeSpec-like value (run_arguments.judge_from)",
    **dict.fromkeys(("__code__", "__defaults__", "__name__", "__qualname__", "func", "co_code"), "functions, code"),
    **dict.fromkeys(("__iter__", "__len__", "item", "dtype", "shape", "to_dict"), "plain values"),
    **dict.fromkeys(("cached_df", "cached_idf", "cheap_df", "N", "_phrases"), "an index's parts"),
    **dict.fromkeys(("body", "text", "title"), "an ir_datasets document's fields"),
    **dict.fromkeys(("msg", "strerror", "sqlite_errorcode"), "an exception's fields"),
    **dict.fromkeys(("id", "method", "_significance", "surface_form"), "a question, a model, a cache, a module"),
    **dict.fromkeys(("SHA256", "declare_io", "sag2wb_bounds"), "a package's, a command module's, an option type's"),
}
# receivers whose attribute is named by a variable: argparse namespaces and actions, dataclasses' own
# fields, run options' hooks, modules (plug-ins, deprecated names' new homes), records
DYNAMIC_RECEIVERS = {
    *("args", "a", "self", "default", "old", "new", "p", "c", "q", "fn", "self.hooks"),
    *("module", "importlib.import_module(home)", "self._module"),  # self._module: workbench/lazy.py
    "lib",  # a compiled kernel's functions, by the names of its signature table (ckernel.declare)
}


def probes(sources: dict[str, str]) -> list[tuple[str, int, str, str | None]]:
    """(file, line, receiver, attribute name or None) of each getattr/hasattr call."""
    out = []
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2):
                continue
            if node.func.id in ("getattr", "hasattr"):
                attr = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
                out.append((path, node.lineno, ast.unparse(node.args[0]), attr))
    return out


@functools.cache
def package_probes() -> list[tuple[str, int, str, str | None]]:
    """The probes of workbench/ and widgets/ but the protocols module."""
    files = [*sorted((REPO / "workbench").rglob("*.py")), *sorted((REPO / "widgets").rglob("*.py"))]
    return probes({str(f.relative_to(REPO)): f.read_text() for f in files if f != REPO / "workbench" / "protocols.py"})


def capability_probes(found) -> list[str]:
    return [
        f"{path}:{line}: {receiver}.{attr}"
        for path, line, receiver, attr in found
        if attr in CAPABILITY_MEMBERS and (attr, receiver) not in NOT_A_JUDGE
    ]


@pytest.mark.slow
def test_no_capability_probe_outside_the_protocols_module():
    found = capability_probes(package_probes())
    assert not found, "read these through workbench/protocols.py (isinstance or its helpers):\n" + "\n".join(found)


def test_every_other_getattr_is_allow_listed():
    unknown = [
        f"{path}:{line}: getattr({receiver}, {attr!r})"
        for path, line, receiver, attr in package_probes()
        if (attr, receiver) not in NOT_A_JUDGE
        and attr not in CAPABILITY_MEMBERS
        and attr not in ALLOWED
        and not (attr is None and receiver in DYNAMIC_RECEIVERS)
        and receiver != "args"
    ]
    assert not unknown, (
        "a getattr/hasattr this test does not know: a judge capability belongs in workbench/protocols.py; "
        "anything else goes in ALLOWED in tests/test_protocols.py with its reason:\n" + "\n".join(unknown)
    )


def test_the_scan_finds_the_probes_it_forbids():
    """The scan itself: the probes of the code before the protocols module are found."""
    before = {
        "cached.py": 'self._keys = getattr(inner, "cache_keys", None)\nx = getattr(self.inner, "answered_model", None)',
        "engine.py": 'if self.explain and getattr(self.judge, "explains", False): pass',
        "judgment.py": 'usage = getattr(judge, "usage", None)\nhasattr(judge, "judge_sag")',
        "tasks.py": 'close = getattr(self.outcomes, "close", None)',
    }
    assert capability_probes(probes(before)) == [
        "cached.py:1: inner.cache_keys",
        "cached.py:2: self.inner.answered_model",
        "engine.py:1: self.judge.explains",
        "judgment.py:1: judge.usage",
        "judgment.py:2: judge.judge_sag",
    ]


# ---- what a judgment store offers: read through BulkStore and CountsJudgments -----------------
class DictStore:
    """A store with get, set, transact and close only: read and written key by key."""

    def __init__(self):
        self.data, self.calls = {}, []

    def get(self, key, default=None):
        self.calls.append("get")
        return self.data.get(key, default)

    def set(self, key, value):
        self.calls.append("set")
        self.data[key] = value

    def transact(self):
        return contextlib.nullcontext()

    def close(self):
        pass


class BulkDictStore(DictStore):
    def get_many(self, keys):
        self.calls.append(("get_many", len(keys)))
        return {k: self.data[k] for k in keys if k in self.data}

    def set_many(self, pairs):
        self.calls.append(("set_many", len(pairs)))
        self.data.update(pairs)


class ReadsOnlyInBulk(DictStore):  # half of BulkStore: not a bulk store
    def get_many(self, keys):
        raise AssertionError("a store without set_many is read key by key")


def test_a_store_is_read_and_written_in_bulk_only_when_it_is_a_bulk_store(tmp_path):
    from workbench.judges.jev.cache import open_store

    jev_store = open_store(tmp_path / "jev-cache")
    assert isinstance(jev_store, BulkStore) and protocols.judgments_held(jev_store) == 0
    jev_store.close()
    plain = diskcache.Cache(str(tmp_path / "plain"))
    assert not isinstance(plain, BulkStore) and protocols.judgments_held(plain) is None  # its `count`: a setting
    plain.close()
    assert isinstance(BulkDictStore(), BulkStore) and not isinstance(ReadsOnlyInBulk(), BulkStore)

    cands = [{"unit_id": i, "title": f"T{i}", "text": f"text {i}", "document": f"T{i}"} for i in range(1, 5)]
    twice = [*cands[:2], cands[0]]  # a repeated candidate is looked up once
    results = {}
    for store in (DictStore(), BulkDictStore(), ReadsOnlyInBulk()):
        judge = CachedJudge(FunctionJudge(lambda q, c, x: [0.25 * c_["unit_id"] for c_ in c], "quarters"), store)
        results[type(store).__name__] = (judge.judge("Q?", twice, []), judge.judge("Q?", cands, []), store.data)
        if type(store) is BulkDictStore:  # one read per call, one write per part answered
            assert store.calls == [("get_many", 2), ("set_many", 2), ("get_many", 4), ("set_many", 2)]
        else:
            assert store.calls == ["get"] * 2 + ["set"] * 2 + ["get"] * 4 + ["set"] * 2
    assert results["DictStore"] == results["BulkDictStore"] == results["ReadsOnlyInBulk"]
    assert results["DictStore"][:2] == ([0.25, 0.5, 0.25], [0.25, 0.5, 0.75, 1.0])
