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
>>> judge.usage()                                           # requests, tokens, cost, cache hits
{'requests': 2, 'http_requests': 2, 'retries': 0, 'judgments_sent': 2, 'cache_hits': 1, 'cache_misses': 2, ...}
>>> judge.close()
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from pathlib import Path

from workbench.judges.cached import CachedJudge
from workbench.judges.jev.cache import DEFAULT_CACHE_DIR, judgment_keys, open_store
from workbench.judges.jev.client import JEVClient, _LoopThread, resolve_endpoint
from workbench.judges.jev.errors import JEVAuthError, JEVCacheMiss, JEVError
from workbench.judges.jev.payload import (
    INSTRUCTION_VERSION,
    MAX_QUESTIONS,
    MAX_REQUEST_TOKENS,
    PAYLOAD_STYLES,
    encode_request,
    plan_requests,
)

USAGE_COUNTERS = (
    "requests",
    "http_requests",
    "retries",
    "judgments_sent",
    "input_tokens",
    "output_tokens",
    "cost",
    "estimated_input_tokens",
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

    def __init__(
        self,
        client: JEVClient | None,
        *,
        url: str,
        model: str,
        family: str,
        payload_style: str = "stateful",
        max_request_tokens: int = MAX_REQUEST_TOKENS,
        max_questions: int = MAX_QUESTIONS,
    ):
        if payload_style not in PAYLOAD_STYLES:
            raise JEVError(f"payload style {payload_style!r}: expected one of {', '.join(PAYLOAD_STYLES)}")
        self.client, self.url, self.model, self.family = client, url, model, family
        self.payload_style = payload_style
        self.max_request_tokens, self.max_questions = max_request_tokens, max_questions
        self.name = f"jev ({model} via {family})"
        self.key = f"jev:{family}:{model}:{INSTRUCTION_VERSION}:{payload_style}"
        self._counters = dict.fromkeys(USAGE_COUNTERS, 0)
        self._lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._finalizer: weakref.finalize | None = None

    def __repr__(self) -> str:
        return f"JEVJudge({self.url!r}, model={self.model!r}, payload_style={self.payload_style!r})"

    # ---- what a judgment cache asks of it -------------------------------------------------
    def cache_keys(self, question: str, candidates: list[dict], context: list[dict]) -> list[str]:
        """The key of each candidate's judgment (`judgment_keys`: never the API key)."""
        return judgment_keys(self.family, self.model, self.payload_style, question, context, candidates)

    def cache_miss_error(self, question: str, missing: list[dict], where) -> JEVCacheMiss:
        first = missing[0]
        return JEVCacheMiss(
            f"cache-only (replay) mode: {len(missing)} judgment(s) not in {where}, e.g. candidate "
            f"{first.get('title', '')!r} for question {question[:80]!r} ({self.model} via {self.family}, "
            f"{self.payload_style} payloads)"
        )

    # ---- counters ------------------------------------------------------------------------
    def _add(self, **amounts):
        with self._lock:
            for k, v in amounts.items():
                self._counters[k] += v

    def usage(self) -> dict:
        """Cumulative counters: requests, http_requests (incl. retries), judgments sent, tokens, cost."""
        with self._lock:
            out = dict(self._counters)
        if self.client is not None:
            out["http_requests"] = self.client.counters["http_requests"]
            out["retries"] = self.client.counters["retries"]
        return out

    # ---- judging -------------------------------------------------------------------------
    def judge(self, question: str, candidates: list[dict], context: list[dict], on_answered=None) -> list[float]:
        """One probability per candidate (sync; safe inside a running event loop)."""
        if not candidates:
            return []
        fut = self._runner().submit(self._judge(question, candidates, context, on_answered))
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # Ctrl-C or a cancelled caller: stop the in-flight requests too
            raise

    async def ajudge(self, question: str, candidates: list[dict], context: list[dict], on_answered=None) -> list[float]:
        """The async API: `await judge.ajudge(...)`; cancelling it cancels the in-flight requests."""
        if not candidates:
            return []
        return await asyncio.wrap_future(self._runner().submit(self._judge(question, candidates, context, on_answered)))

    def _runner(self) -> _LoopThread:
        if self._loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop = _LoopThread()
                    self._finalizer = weakref.finalize(self, _shutdown, self._loop, self.client)
        return self._loop

    async def _judge(self, question, candidates, context, on_answered) -> list[float]:
        if self.client is None:
            raise JEVError("this JEV judge has no client (replay only)")
        plans = plan_requests(
            self.model,
            question,
            candidates,
            context,
            self.payload_style,
            max_tokens=self.max_request_tokens,
            max_questions=self.max_questions,
        )
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
        return [out[i] for i in range(len(candidates))]

    async def _one_request(self, indices: list[int], body: dict, on_answered) -> dict[int, float]:
        assert self.client is not None  # only _judge makes requests, after checking the client
        content, estimate = encode_request(body)
        qkeys = list(body["questions"])
        self._add(requests=1, estimated_input_tokens=estimate)
        probabilities, usage, model = await self.client.post(body, qkeys, content)
        # validated: only now is anything handed over (to be cached)
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
        try:
            runner.submit(client.aclose()).result(timeout=5)
        except Exception:  # the loop is going away anyway
            pass
    runner.stop()


def make_jev_judge(
    endpoint: str | None = None,
    model: str | None = None,
    payload_style: str = "stateful",
    cache_dir: str | Path | None = None,
    cache_only: bool = False,
    *,
    max_request_tokens: int = MAX_REQUEST_TOKENS,
    max_questions: int = MAX_QUESTIONS,
    **client_options,
) -> CachedJudge:
    """A JEV judge from CLI-style options, behind its judgment cache on disk (a CachedJudge).
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
    )
    return CachedJudge(inner, open_store(cache_dir, cache_only=cache_only), cache_dir=cache_dir, cache_only=cache_only)
