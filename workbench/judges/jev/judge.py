"""The JEV judge: a question's candidates packed into requests, sent concurrently, answered
in order; `make_jev_judge` puts it behind the judgment cache on disk.

>>> judge = make_jev_judge(endpoint=judge_server.url, cache_dir=".sag2wb/jev-cache")  # here: a local server
>>> candidates = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
...               {"unit_id": 2, "title": "Porto Calven", "text": "A town."}]
>>> judge.judge("Who directed Glass Harbour?", candidates[:1], [])
[0.69163...]
>>> import asyncio        # the async API; in a notebook: await judge.ajudge(...)
>>> asyncio.run(judge.ajudge("Who directed Glass Harbour?", candidates, []))
[0.69163..., 0.0]
>>> judge.usage()      # requests, tokens, cost, cache hits (stateful: another batch is another judgment)
{'requests': 2, 'http_requests': 2, 'retries': 0, 'judgments_sent': 3, 'cache_hits': 0, 'cache_misses': 3, ...}
>>> judge.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from pathlib import Path

from workbench.judges.cached import CachedJudge, valid_entry
from workbench.judges.jev.cache import DEFAULT_CACHE_DIR, open_store, request_keys
from workbench.judges.jev.client import JEVClient, JEVUnreachable, _LoopThread, resolve_endpoint
from workbench.judges.jev.errors import JEVAuthError, JEVCacheMiss, JEVError
from workbench.judges.jev.instructions import Template, get_instructions
from workbench.judges.jev.payload import (
    MAX_ITEM_TOKENS,
    MAX_QUESTIONS,
    MAX_REQUEST_TOKENS,
    PAYLOAD_STYLES,
    encode_request,
    plan_requests,
)
from workbench.judges.jev.tokens import load_tokenizer
from workbench.protocols import judgments_held
from workbench.usage import count_usage, current_scope, using

USAGE_COUNTERS = (
    "requests",
    "http_requests",
    "retries",
    "judgments_sent",
    "input_tokens",
    "output_tokens",
    "cost",
    "estimated_input_tokens",
    "usage_unknown",  # answered requests whose usage was missing or not counts: in no token or cost total
)


class JEVJudge:
    """The workbench judge interface over JEV: batched concurrent requests (no cache of its
    own: `make_jev_judge` wraps it in a CachedJudge).

    `on_answered(indices, probabilities, model)`, if given, receives each request's validated
    answers as they arrive (indices into `candidates`; model: what the service answered with),
    so a call that fails part-way still hands over the answers it got.

    >>> client = JEVClient(judge_server.url)           # e.g. "http://127.0.0.1:8765/v1/systemone"
    >>> judge = JEVJudge(client, url=client.url, model=client.model, family=client.family)
    >>> judge.judge("Who directed Glass Harbour?", [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
    ...                                             {"unit_id": 2, "title": "Porto Calven", "text": "A town."}], [])
    [0.69163..., 0.0]
    >>> judge.usage()["requests"], judge.usage()["judgments_sent"]   # sync, also inside a running event loop
    (1, 2)
    >>> judge.close()
    """

    answers_in_parts = True  # workbench.protocols.Streams: each request's answers go to `on_answered` as they arrive
    usage_per_call = True  # workbench/usage.py: every counter is also counted to the run whose call it is

    def __init__(
        self,
        client: JEVClient | None,
        *,
        url: str,
        model: str,
        family: str,
        payload_style: str = "stateful",
        max_request_tokens: int = MAX_REQUEST_TOKENS,
        max_questions: int | None = MAX_QUESTIONS,
        instructions: str | Template | None = None,
        max_item_tokens: int = MAX_ITEM_TOKENS,
    ):
        if payload_style not in PAYLOAD_STYLES:
            raise JEVError(f"payload style {payload_style!r}: expected one of {', '.join(PAYLOAD_STYLES)}")
        self.client, self.url, self.model, self.family = client, url, model, family
        self.payload_style = payload_style
        self.instructions = get_instructions(instructions)
        self.max_request_tokens, self.max_questions = max_request_tokens, max_questions
        self.max_item_tokens = max_item_tokens
        self.name = f"jev ({model} via {family})"
        self.key = f"jev:{family}:{model}:{self.instructions.key}:{payload_style}"
        # the model the service answered with last (None until it has answered in this process):
        # a cached judgment is reused on a live run only if it was answered by this model
        self.answered_model: str | None = None
        self._counters = dict.fromkeys(USAGE_COUNTERS, 0)
        self._lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._finalizer: weakref.finalize | None = None
        load_tokenizer()

    def __repr__(self) -> str:
        return f"JEVJudge({self.url!r}, model={self.model!r}, payload_style={self.payload_style!r})"

    # ---- what a judgment cache asks of it -------------------------------------------------
    def request_plan(self, question, candidates, context) -> list[tuple[list[int], dict]]:
        """(candidate positions, request body) of each request this judge would send for the call."""
        return plan_requests(
            self.model,
            question,
            candidates,
            context,
            self.payload_style,
            max_tokens=self.max_request_tokens,
            max_item_tokens=self.max_item_tokens,
            max_questions=self.max_questions,
            instructions=self.instructions,
        )

    def _keys(self, question, context, batch: list[dict]) -> list[str]:
        return request_keys(self.family, self.model, self.instructions, self.payload_style, question, context, batch)

    def cache_keys(self, question: str, candidates: list[dict], context: list[dict]) -> list[str]:
        """The key of each candidate's judgment (`request_keys`: never the API key). Stateful:
        keyed by the request the candidate is sent in (its batch and position), as planned."""
        if self.payload_style != "stateful":
            return self._keys(question, context, candidates)
        keys = [""] * len(candidates)
        for idx, _ in self.request_plan(question, candidates, context):
            for i, k in zip(idx, self._keys(question, context, [candidates[i] for i in idx])):
                keys[i] = k
        return keys

    def cache_plan(self, question: str, candidates: list[dict], context: list[dict]):
        """Stateful style: the requests the candidates are sent in, [(indices, keys, body)]; a
        judgment cache treats a request as one unit (reused whole or sent whole), so a round's
        requests are those of a fresh run whatever the cache holds. Inline style: None (each
        judgment stands alone)."""
        if self.payload_style != "stateful":
            return None
        return [
            (idx, self._keys(question, context, [candidates[i] for i in idx]), body)
            for idx, body in self.request_plan(question, candidates, context)
        ]

    @property
    def batch_dependent(self) -> bool:
        """Stateful style: an answer depends on the request's other candidates (its state holds
        them), so an in-process memo keys a whole call, never one candidate of it."""
        return self.payload_style == "stateful"

    def reusable(self, value: dict) -> bool | None:
        """Whether a cached judgment may be reused now: always in replay (no client); on a live
        run only if the model it was answered with is the one the service answers with now
        (None: not known yet, the service has not answered in this process)."""
        if self.client is None:
            return True
        if self.answered_model is None:
            return None
        return (value.get("model") or "") == self.answered_model

    def cache_miss_error(self, question: str, missing: list[dict], where) -> JEVCacheMiss:
        first = missing[0]
        return JEVCacheMiss(
            f"cache-only (replay) mode: {len(missing)} judgment(s) not in {where}, e.g. candidate "
            f"{first.get('title', '')!r} for question {question[:80]!r} ({self.model} via {self.family}, "
            f"{self.payload_style} payloads, instructions {self.instructions.name})"
        )

    # ---- counters ------------------------------------------------------------------------
    def _add(self, **amounts):
        with self._lock:
            for k, v in amounts.items():
                self._counters[k] += v
        count_usage(**amounts)  # and to the run whose call this is (workbench/usage.py)

    def usage(self) -> dict:
        """Cumulative counters: requests, http_requests (incl. retries), judgments sent, tokens, cost;
        tokens and cost add up only answers that reported them validly, `usage_unknown` counts the others."""
        with self._lock:
            out = dict(self._counters)
        if self.client is not None:
            out["http_requests"] = self.client.counters["http_requests"]
            out["retries"] = self.client.counters["retries"]
        return out

    # ---- judging -------------------------------------------------------------------------
    def judge(
        self, question: str, candidates: list[dict], context: list[dict], on_answered=None, plan=None
    ) -> list[float]:
        """One probability per candidate (sync; safe inside a running event loop). `plan`: some
        of `cache_plan`'s requests, sent as they are (the answers: their candidates' in order)."""
        if not candidates:
            return []
        scope = current_scope()  # the calling run's: its requests run on the loop thread
        fut = self._runner().submit(self._judge(question, candidates, context, on_answered, plan, scope))
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # Ctrl-C or a cancelled caller: stop the in-flight requests too
            raise

    async def ajudge(
        self, question: str, candidates: list[dict], context: list[dict], on_answered=None, plan=None
    ) -> list[float]:
        """The async API: `await judge.ajudge(...)`; cancelling it cancels the in-flight requests."""
        if not candidates:
            return []
        scope = current_scope()
        return await asyncio.wrap_future(
            self._runner().submit(self._judge(question, candidates, context, on_answered, plan, scope))
        )

    def start_client(self) -> None:
        """Start the event loop's thread and the HTTP client (importing httpx, ~0.1-0.2 s of CPU) now,
        in the background, instead of at the first request. A process pool's worker calls it when it
        builds its judges: the setup then overlaps the first questions' work, where it delayed every
        first request of the worker (issue 33). Not before a fork: the threads would not follow."""
        if self.client is not None:
            self._runner().submit(self.client._client())  # its first post finds the same client

    def _runner(self) -> _LoopThread:
        if self._loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop = _LoopThread()
                    self._finalizer = weakref.finalize(self, _shutdown, self._loop, self.client)
        return self._loop

    async def _judge(self, question, candidates, context, on_answered, plan=None, scope=None) -> list[float]:
        if self.client is None:
            raise JEVError("this JEV judge has no client (replay only)")
        with using(scope):  # the tasks made below (one per request) count to the caller's run
            return await self._requests(question, candidates, context, on_answered, plan)

    async def _requests(self, question, candidates, context, on_answered, plan) -> list[float]:
        assert self.client is not None
        plans = self.request_plan(question, candidates, context) if plan is None else [(p[0], p[-1]) for p in plan]
        out: dict[int, float] = {}
        tasks = [asyncio.ensure_future(self._one_request(idx, body, on_answered)) for idx, body in plans]
        errors = []
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    if t.cancelled():  # we cancelled it after a refused key; that error is the one to report
                        continue
                    exc = t.exception()
                    if exc is None:
                        out.update(t.result())
                    else:
                        errors.append(exc)
                        if isinstance(exc, JEVAuthError):  # a refused key refuses every request: stop now
                            for p in pending:
                                p.cancel()
        finally:
            for t in tasks:
                t.cancel()  # no-op for finished ones; cancels in-flight requests when we are cancelled
        if errors:
            first = next((e for e in errors if isinstance(e, JEVAuthError)), errors[0])
            if isinstance(first, JEVError):
                cancelled = sum(1 for t in tasks if t.cancelled())
                answered = len(plans) - len(errors) - cancelled
                # the answers handed to on_answered are kept (by the cache that passed it)
                kept = answered if on_answered is not None else 0
                more = (
                    (
                        f" ({len(errors)} of {len(plans)} requests failed"
                        + (f", {cancelled} cancelled" if cancelled else "")
                        + (f"; the answers of {kept} are cached" if kept else "")
                        + ")"
                    )
                    if len(plans) > 1
                    else ""
                )
                raise type(first)(self.client.scrub(str(first) + more)) from None
            raise JEVError(f"JEV request failed: {type(first).__name__}: {self.client.scrub(str(first))}") from None
        if plan is not None:
            return [out[i] for p in plan for i in p[0]]
        return [out[i] for i in range(len(candidates))]

    async def _one_request(self, indices: list[int], body: dict, on_answered) -> dict[int, float]:
        assert self.client is not None  # only _judge makes requests, after checking the client
        held = self.client.unreachable()
        if held is not None:  # fails at once, no request made (the retries were paid once, issue 34)
            raise JEVUnreachable(held)
        content, estimate = encode_request(body)
        qkeys = list(body["questions"])
        self._add(requests=1, estimated_input_tokens=estimate)
        probabilities, usage, model = await self.client.post(body, qkeys, content)
        self.answered_model = model or ""  # "": the service names no model (then only such judgments are reused)
        # validated: only now is anything handed over (to be cached)
        if any(v is None for v in usage.values()):  # missing, fractional, negative: unknown, never added as 0
            self._add(judgments_sent=len(indices), usage_unknown=1)
        else:
            self._add(
                judgments_sent=len(indices),
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                cost=usage.get("cost", 0),
            )
        if on_answered is not None:
            on_answered(indices, probabilities, model)  # a cache stores the request's judgments in one transaction
        return dict(zip(indices, probabilities))

    def close(self):
        """Stop the client's loop thread (also done at garbage collection)."""
        if self._finalizer is not None:
            self._finalizer()
            self._loop = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _shutdown(runner: _LoopThread, client: JEVClient | None):
    if client is not None and runner.loop.is_running():
        with contextlib.suppress(Exception):  # the loop is going away anyway
            runner.submit(client.aclose()).result(timeout=5)
    runner.stop()


class JEVCachedJudge(CachedJudge):
    """The JEV judge behind its judgment cache (a CachedJudge). When the service cannot be
    reached, the error says how many of the round's judgments the cache holds and that
    `--cache-only` replays them without the service (issue 34). Its `client` (counters,
    requests in flight; None in replay) is the JEV judge's."""

    inner: JEVJudge
    usage_per_call = True  # the JEV judge's counters and the cache's hits and misses (workbench/usage.py)

    @property
    def client(self) -> JEVClient | None:
        return self.inner.client

    def start_client(self) -> None:
        self.inner.start_client()

    def usage(self) -> dict:
        """The JEV judge's counters with the cache's hits and misses right after `judgments_sent`
        (where they have always been: the order a trace's stats are written in)."""
        out = super().usage()
        mine = ("cache_hits", "cache_misses")
        keys = [k for k in out if k not in mine]
        if "judgments_sent" in keys:
            at = keys.index("judgments_sent") + 1
            keys[at:at] = mine
        else:
            keys += mine
        return {k: out[k] for k in keys}

    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        try:
            return super().judge(question, candidates, context)
        except JEVUnreachable as exc:
            raise self._replay_hint(exc, question, candidates, context) from None

    async def ajudge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        try:
            return await super().ajudge(question, candidates, context)
        except JEVUnreachable as exc:
            raise self._replay_hint(exc, question, candidates, context) from None

    def _replay_hint(self, exc: JEVUnreachable, question, candidates, context) -> JEVUnreachable:
        """`exc` plus what the cache holds of this call's judgments, and the flag that replays them."""
        keys = list(dict.fromkeys(self.inner.cache_keys(question, candidates, context)))
        cached = sum(1 for k in keys if valid_entry(self.store.get(k)))
        where = self.cache_dir if self.cache_dir is not None else "the judgment store"
        count = judgments_held(self.store)
        held = f"the cache {where}" + (f" (it holds {count} judgments)" if count is not None else "")
        replay = "--cache-only replays cached judgments without the service"
        if cached == len(keys):
            hint = f"All {len(keys)} judgments of this round are in {held}: {replay}"
        elif cached:
            hint = f"{cached} of this round's {len(keys)} judgments are in {held}: {replay}, failing on the first other"
        else:
            hint = f"None of this round's {len(keys)} judgments is in {held}"
        return JEVUnreachable(f"{exc}. {hint}")


def make_jev_judge(
    endpoint: str | None = None,
    model: str | None = None,
    payload_style: str = "stateful",
    cache_dir: str | Path | None = None,
    cache_only: bool = False,
    *,
    max_request_tokens: int = MAX_REQUEST_TOKENS,
    max_questions: int | None = MAX_QUESTIONS,
    instructions: str | Template | None = None,
    **client_options,
) -> JEVCachedJudge:
    """A JEV judge from CLI-style options, behind its judgment cache on disk (a JEVCachedJudge).
    `cache_dir=None` uses $SAG2WB_JEV_CACHE or .sag2wb/jev-cache.

    Replay (`cache_only=True`) needs no key and makes no request: a miss is a JEVCacheMiss.

    >>> candidates = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
    ...               {"unit_id": 2, "title": "Porto Calven", "text": "A town."}]
    >>> judge = make_jev_judge(judge_server.url, cache_dir="study-cache")   # e.g. "openrouter" (a key)
    >>> judge.judge("Who directed Glass Harbour?", candidates, [])
    [0.69163..., 0.0]
    >>> judge.close()
    >>> replay = make_jev_judge(judge_server.url, cache_dir="study-cache", cache_only=True)
    >>> replay.judge("Who directed Glass Harbour?", candidates, [])
    [0.69163..., 0.0]
    >>> replay.judge("Who composed it?", candidates, [])
    Traceback (most recent call last):
    ...
    workbench.judges.jev.errors.JEVCacheMiss: cache-only (replay) mode: 2 judgment(s) not in study-cache, e.g. ...
    >>> replay.usage()["requests"]
    0
    >>> replay.close()
    """
    if cache_dir is None:
        cache_dir = os.environ.get("SAG2WB_JEV_CACHE") or DEFAULT_CACHE_DIR
    url, model, family, _ = resolve_endpoint(endpoint, model)
    client = None if cache_only else JEVClient(url, model, **client_options)
    inner = JEVJudge(
        client,
        url=url,
        model=model,
        family=family,
        payload_style=payload_style or "stateful",
        max_request_tokens=max_request_tokens,
        max_questions=max_questions,
        instructions=instructions,
    )
    store = open_store(cache_dir, cache_only=cache_only)
    return JEVCachedJudge(inner, store, cache_dir=cache_dir, cache_only=cache_only)
