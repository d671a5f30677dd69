"""Any judge behind a persistent judgment store; the inner judge never knows it is cached.

>>> import diskcache
>>> from workbench.judges import LexicalJudge
>>> judge = CachedJudge(LexicalJudge(enc_index), diskcache.Cache("judgments"), cache_dir="judgments")
>>> candidates = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
...               {"unit_id": 2, "title": "Porto Calven", "text": "A town."}]
>>> judge.judge("Who directed Glass Harbour?", candidates, [])
[0.69163..., 0.0]
>>> more = candidates + [{"unit_id": 3, "title": "Élodie Marchetti", "text": "A director of films."}]
>>> judge.judge("Who directed Glass Harbour?", more, [])   # the store first, the inner judge for the rest
[0.69163..., 0.0, 0.0]
>>> judge.usage()                                 # the inner's counters, cache_hits, cache_misses
{'cache_hits': 2, 'cache_misses': 3}
>>> judge.close()

The store is anything with `get(key, default=None)`, `set(key, value)`, `transact()` (a
context manager) and `close()`: a `diskcache.Cache` fits. A store may also offer
`get_many(keys) -> {key: value}` (the keys present) and `set_many([(key, value)])` (one
transaction), `workbench.protocols.BulkStore`: a call's look-ups and each part's writes then go in
bulk (the JEV JudgmentStore).
One value per judgment, `{"p": probability, "model": what answered, or None}`; only validated
answers are stored.

What an inner judge may offer (all optional, each a Protocol of `workbench.protocols`):
  HasCacheKeys: cache_keys(question, candidates, context) -> [str]   the store key of each
      judgment (else `generic_keys` from the judge's `key`, the question, the context and the candidate)
  Streams: answers_in_parts = True, judge(..., on_answered=None) (and ajudge, if AsyncJudge)   a
      judge that answers in parts (JEV: one HTTP request per batch) calls `on_answered(indices,
      probabilities, model)` with each part's validated answers as they arrive; each part is
      stored in one transaction then, so a call that fails part-way keeps the answers it did get
  NamesCacheMiss: cache_miss_error(question, missing, where) -> Exception   what replay raises on
      a miss (else a CacheMiss naming the candidate and the question)
  PlansCache: cache_plan(question, candidates, context) -> [(indices, keys, ...)] or None   the
      groups a judge asks together when an answer depends on its group (JEV stateful: a
      request's state holds its batch): a group is reused only whole, else sent whole, as
      planned, via judge(..., plan=[the missing groups]); so a call sends what a fresh run would send
  Reusable: reusable(value) -> True | False | None   whether a stored judgment may be reused now
      (JEV: answered by the model the service answers with now); None: not known yet, so the
      first call asks its judgments again and the others wait for its answers (ReportsModel:
      `answered_model` not None says the inner judge has learnt it)
  HasUsage, Closable, BatchDependent, AsyncJudge: read through, or run on a worker thread

The wrapper itself is a Judge, AsyncJudge, HasUsage, Closable and BatchDependent (its inner's flag).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
from pathlib import Path

from workbench.judgment import JudgeError, validate_scores
from workbench.protocols import (
    AsyncJudge,
    BulkStore,
    HasCacheKeys,
    NamesCacheMiss,
    PlansCache,
    Reusable,
    answered_model,
    close_judge,
    is_batch_dependent,
    streams,
    usage_of,
)
from workbench.usage import count_usage

GENERIC_KEY_PREFIX = "judgment-v1:"
_SET = threading.Event()
_SET.set()


class CacheMiss(JudgeError):
    """Replay (cache-only) mode met a judgment that is not in the store."""


def generic_keys(judge_key: str, question: str, context: list[dict], candidates: list[dict]) -> list[str]:
    """The store key of each candidate's judgment by a judge that names none: sha256 of the
    judge's key, the question, the context (titles, texts, earlier scores) and the candidate."""
    rest = json.dumps(
        {
            "context": [[c["title"], c["text"], c.get("previous_score")] for c in context],
            "judge": judge_key,
            "question": question,
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    out = []
    for c in candidates:
        head = json.dumps([c["title"], c["text"]], ensure_ascii=False, separators=(",", ":"))
        out.append(GENERIC_KEY_PREFIX + hashlib.sha256(f'{{"candidate":{head},{rest[1:]}'.encode()).hexdigest())
    return out


def valid_entry(value) -> bool:
    """Whether a stored value is a judgment: a dict whose "p" is a probability in [0, 1]."""
    if not isinstance(value, dict):
        return False
    p = value.get("p")
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        return False
    try:
        return math.isfinite(p) and 0.0 <= p <= 1.0
    except OverflowError:  # an integer too large for a float
        return False


class CachedJudge:
    """Any judge behind a persistent judgment store (diskcache); the inner judge never knows."""

    def __init__(self, inner, store, *, cache_dir: str | Path | None = None, cache_only: bool = False):
        self.inner, self.store = inner, store
        self._bulk = isinstance(store, BulkStore)  # a call's look-ups in one read, a part's writes in one transaction
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.cache_only = bool(cache_only)
        self._keys = inner.cache_keys if isinstance(inner, HasCacheKeys) else None
        self._streams = streams(inner)
        self._astreams = self._streams and isinstance(inner, AsyncJudge)
        self._plan = inner.cache_plan if isinstance(inner, PlansCache) else None
        self._reusable = inner.reusable if isinstance(inner, Reusable) else None
        self._hits = self._misses = 0
        self._lock = threading.Lock()
        self._verifying: threading.Event | None = None  # set by the call learning what is reusable
        self._verified: threading.Event = _SET

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def key(self) -> str:
        return self.inner.key

    def __repr__(self) -> str:
        return f"CachedJudge({self.inner!r}, cache_dir={str(self.cache_dir)!r}, cache_only={self.cache_only})"

    def with_store(self, store) -> CachedJudge:
        """The same inner judge over another store (its own hit and miss counters): e.g. a
        process worker's, which records new judgments to send them to the parent."""
        return type(self)(self.inner, store, cache_dir=self.cache_dir, cache_only=self.cache_only)

    @property
    def batch_dependent(self) -> bool:
        """The inner judge's flag: the memo keys whole calls of a batch-dependent judge (JudgmentMemo)."""
        return is_batch_dependent(self.inner)

    # ---- judging -------------------------------------------------------------------------
    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        """One probability per candidate: the stored ones, the inner judge's for the rest
        (each distinct judgment asked once)."""
        if not candidates:
            return []
        while True:
            looked = self._decide(question, candidates, context)
            if looked is None:
                self._verified.wait()  # another call is learning the service's model: then look again
            elif looked[-1]:  # this call learns it: one request (its answers are stored), then look again
                self._verify(question, candidates, context, looked)
            else:
                break
        keys, results, todo, plans, _ = looked
        if plans:
            got = self.inner.judge(question, candidates, context, on_answered=self._recorder(keys), plan=plans)
            results.update(zip([keys[i] for p in plans for i in p[0]], got))
        elif todo:
            todo_keys, asked = list(todo), list(todo.values())
            if self._streams:
                got = self.inner.judge(question, asked, context, on_answered=self._recorder(todo_keys))
            else:
                got = self._ask_whole(question, asked, context, todo_keys)
            results.update(zip(todo_keys, got))
        return [results[k] for k in keys]

    async def ajudge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        """The async API; an inner judge without one runs on a worker thread."""
        if not candidates:
            return []
        while True:
            looked = self._decide(question, candidates, context)
            if looked is None:
                await asyncio.to_thread(self._verified.wait)
            elif looked[-1]:
                await asyncio.to_thread(self._verify, question, candidates, context, looked)
            else:
                break
        keys, results, todo, plans, _ = looked
        if plans:
            rec = self._recorder(keys)
            if self._astreams:
                got = await self.inner.ajudge(question, candidates, context, on_answered=rec, plan=plans)
            else:
                got = await asyncio.to_thread(
                    self.inner.judge, question, candidates, context, on_answered=rec, plan=plans
                )
            results.update(zip([keys[i] for p in plans for i in p[0]], got))
        elif todo:
            todo_keys, asked = list(todo), list(todo.values())
            if self._astreams:
                got = await self.inner.ajudge(question, asked, context, on_answered=self._recorder(todo_keys))
            elif self._streams:
                got = await asyncio.to_thread(
                    self.inner.judge, question, asked, context, on_answered=self._recorder(todo_keys)
                )
            else:
                got = await asyncio.to_thread(self._ask_whole, question, asked, context, todo_keys)
            results.update(zip(todo_keys, got))
        return [results[k] for k in keys]

    # ---- what is reused ------------------------------------------------------------------
    def _status(self, value) -> bool | None:
        """Whether a stored value is reused: a judgment the inner judge accepts now (`reusable`;
        None: it cannot tell yet)."""
        if not valid_entry(value):
            return False
        return True if self._reusable is None else self._reusable(value)

    def _verify(self, question, candidates, context, looked) -> None:
        """Send the one request (or judgment) chosen by `_decide`, so the inner judge learns
        what is reusable now; its answers are stored. Always ends the verification."""
        keys, _, todo, plans, _ = looked
        try:
            if plans:
                self.inner.judge(question, candidates, context, on_answered=self._recorder(keys), plan=plans)
            elif todo:
                todo_keys, asked = list(todo), list(todo.values())
                if self._streams:
                    self.inner.judge(question, asked, context, on_answered=self._recorder(todo_keys))
                else:
                    self._ask_whole(question, asked, context, todo_keys)
        finally:
            self._end_verification()

    def _end_verification(self) -> None:
        with self._lock:
            event, self._verifying = self._verifying, None
            if self._reusable is not None and self._verified_ok():
                self._verified = _SET
        if event is not None:
            event.set()

    def _verified_ok(self) -> bool:
        return answered_model(self.inner) is not None

    def _decide(self, question: str, candidates: list[dict], context: list[dict]):
        """(keys, stored results, {missing key: candidate}, missing planned requests, whether
        this call verifies), or None: wait for the call that is learning what is reusable.

        A stored judgment the inner judge cannot vouch for yet (`reusable` is None: a live JEV
        run whose service has not answered yet) is asked again by the first such call, whose
        answers tell the model the service answers with now; the others wait for it."""
        plan = self._plan(question, candidates, context) if self._plan is not None else None
        if plan is not None:
            keys: list[str] = [""] * len(candidates)
            for p in plan:
                for i, k in zip(p[0], p[1]):
                    keys[i] = k
        elif self._keys is not None:
            keys = self._keys(question, candidates, context)
        else:
            keys = generic_keys(self.inner.key, question, context, candidates)
        store = self.store
        status: dict[str, bool | None] = {}
        values: dict[str, float] = {}
        distinct = list(dict.fromkeys(keys))
        found = store.get_many(distinct) if self._bulk else None  # else one look-up per key
        for k in distinct:
            value = found.get(k) if found is not None else store.get(k)
            st = self._status(value)
            status[k] = st
            if st is not False:
                values[k] = float(value["p"])
        gate = False
        if any(st is None for st in status.values()):
            with self._lock:
                if self._verifying is None:
                    self._verifying = threading.Event()
                    self._verified = self._verifying
                    gate = True
            if not gate:
                return None
        if gate:  # one request holding an unverified judgment: its answer says what is reusable now
            if plan is not None:
                first = next(p for p in plan if any(status[k] is None for k in p[1]))
                return keys, {}, {}, [first], True
            k, c = next((k, c) for k, c in zip(keys, candidates) if status[k] is None)
            return keys, {}, {k: c}, [], True
        reuse = {k for k, st in status.items() if st is True}
        if plan is not None:
            todo_plans = [p for p in plan if not all(k in reuse for k in p[1])]
            resent = {k for p in todo_plans for k in p[1]}
            results = {k: v for k, v in values.items() if k in reuse and k not in resent}
            todo: dict[str, dict] = {}
        else:
            todo_plans = []
            results = {k: v for k, v in values.items() if k in reuse}
            todo = {}
            for k, c in zip(keys, candidates):
                if k not in results and k not in todo:
                    todo[k] = c
        hits = sum(1 for k in keys if k in results)
        with self._lock:
            self._hits += hits
            self._misses += len(keys) - hits
        count_usage(cache_hits=hits, cache_misses=len(keys) - hits)  # to the calling run (workbench/usage.py)
        if (todo or todo_plans) and self.cache_only:
            missing = [c for k, c in zip(keys, candidates) if k not in results]
            raise self._miss(question, missing)
        return keys, results, todo, todo_plans, False

    def _miss(self, question: str, missing: list[dict]) -> Exception:
        where = self.cache_dir if self.cache_dir is not None else "the judgment store"
        if isinstance(self.inner, NamesCacheMiss):
            return self.inner.cache_miss_error(question, missing, where)
        return CacheMiss(
            f"cache-only (replay) mode: {len(missing)} judgment(s) not in {where}, e.g. candidate "
            f"{missing[0].get('title', '')!r} for question {question[:80]!r} ({self.inner.name})"
        )

    def _recorder(self, keys: list[str]):
        """The `on_answered` for one call: a part's answers (indices into `keys`) stored in one
        transaction, all of them or none."""

        def on_answered(indices, probabilities, model=None) -> None:
            self.keep([(keys[i], {"p": p, "model": model}) for i, p in zip(indices, probabilities)])

        return on_answered

    def keep(self, pairs: list[tuple[str, dict]]) -> None:
        """Store validated (key, value) pairs in one transaction, all or none: in bulk when the
        store can (one INSERT: JudgmentStore), else key by key."""
        if self._bulk:
            self.store.set_many(pairs)
            return
        with self.store.transact():
            for k, v in pairs:
                self.store.set(k, v)

    def _ask_whole(self, question, asked, context, keys) -> list[float]:
        scores = validate_scores(self.inner.name, self.inner.judge(question, asked, context), len(asked))
        self._recorder(keys)(range(len(asked)), scores)
        return scores

    # ---- counters, closing ---------------------------------------------------------------
    def usage(self) -> dict:
        """The inner judge's counters plus cache_hits and cache_misses (per candidate asked)."""
        with self._lock:
            mine = {"cache_hits": self._hits, "cache_misses": self._misses}
        return {**usage_of(self.inner), **mine}

    def close(self) -> None:
        """Close the inner judge, then the store."""
        close_judge(self.inner)
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
