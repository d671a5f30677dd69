"""The JEV HTTP client: endpoints and presets, the API key (never shown, scrubbed from every
message and log line), retries with backoff and Retry-After, and the HTTP threads.

>>> JEVClient("openrouter")          # the key from $JEV_API_KEY or $OPENROUTER_API_KEY: none here
Traceback (most recent call last):
...
workbench.judges.jev.errors.JEVAuthError: no API key for https://openrouter.ai/api/alpha/decisions: set one of ...
>>> os.environ["OPENROUTER_API_KEY"] = "sk-or-example"      # (restored after this example)
>>> JEVClient("openrouter")          # no request yet, and the key is never shown
JEVClient('https://openrouter.ai/api/alpha/decisions', model='typesafe/jev-1.13')
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import sys
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from workbench.judges.jev.errors import JEVAuthError, JEVError
from workbench.judges.jev.payload import _dumps, parse_answer
from workbench.usage import count_usage

log = logging.getLogger("workbench.jev")

KEY_VARIABLES = ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY")
CONCURRENCY = 20  # requests in flight per client (the paper's cap)
ATTEMPTS = 4
# After a request found the service unreachable (no attempt connected), the client fails every
# request at once for this long: a run pays the retries once, not once per question (issue 34)
UNREACHABLE_HOLD = 300.0
RETRY_STATUSES = frozenset({408, 429, 499}) | frozenset(range(500, 600))
AUTH_STATUSES = frozenset({401, 403})


@dataclass(frozen=True)
class Preset:
    url: str
    model: str
    key_variables: tuple[str, ...]


PRESETS = {
    "typesafe": Preset(
        "https://api.typesafe.ai/v1/systemone", "jev-latest", ("JEV_API_KEY", "TYPESAFE_API_KEY", "OPENROUTER_API_KEY")
    ),
    "openrouter": Preset(
        "https://openrouter.ai/api/alpha/decisions",
        "typesafe/jev-1.13",
        ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY"),
    ),
}
DEFAULT_ENDPOINT = "openrouter"  # the paper's route (§4: JEV through OpenRouter's Noul interface)


class JEVUnreachable(JEVError):
    """No attempt of a request could connect to the JEV service (refused, no route, DNS); for
    `unreachable_hold` seconds afterwards the client fails every request at once with this."""


# ---- endpoint, key -------------------------------------------------------------------------
def resolve_endpoint(endpoint: str | None, model: str | None) -> tuple[str, str, str, tuple[str, ...]]:
    """(url, model, endpoint family, key variables) from a preset name or a URL."""
    endpoint = endpoint or os.environ.get("JEV_ENDPOINT") or DEFAULT_ENDPOINT
    model = model or os.environ.get("JEV_MODEL") or None
    if endpoint in PRESETS:
        p = PRESETS[endpoint]
        return p.url, model or p.model, endpoint, p.key_variables
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JEVError(f"JEV endpoint {endpoint!r}: expected {' or '.join(PRESETS)} or an http(s) URL")
    if parts.username or parts.password or parts.query:
        raise JEVError(
            "JEV endpoint: put no credentials or query string in the URL; the key is read from "
            + ", ".join(KEY_VARIABLES)
        )
    # SPEC §3b: the URL without a trailing "/", and "/systemone" appended unless it already
    # ends in /systemone or /decisions (so a server root or a bare .../v1 works too)
    endpoint = endpoint.rstrip("/")
    if not endpoint.endswith(("/systemone", "/decisions")):
        endpoint += "/systemone"
    for name, p in PRESETS.items():
        if endpoint == p.url:
            return p.url, model or p.model, name, p.key_variables
    # the family keys the cache: a local server's ephemeral port must not split it
    host = parts.hostname
    port = "" if _is_loopback(host) or parts.port is None else f":{parts.port}"
    family = f"url:{host}{port}{urlsplit(endpoint).path}"
    return endpoint, model or "jev-latest", family, KEY_VARIABLES


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class _Secret:
    """An API key that never shows itself in a repr, str or log line."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str):
        self._value, self.source = value, source

    def reveal(self) -> str:
        return self._value

    def spellings(self) -> list[str]:
        """The key as it may appear in a message: plain, inside a repr, inside JSON."""
        forms = {
            self._value,
            repr(self._value)[1:-1],
            json.dumps(self._value)[1:-1],
            json.dumps(self._value, ensure_ascii=False)[1:-1],
        }
        return sorted((f for f in forms if f), key=len, reverse=True)

    def __repr__(self) -> str:
        return f"<API key from ${self.source}>"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("an API key is not pickled")


# Loggers whose records may quote what a server sent (httpcore logs response headers at DEBUG,
# asyncio logs unretrieved task exceptions): a filter scrubs every key read in this process.
SCRUBBED_LOGGERS = (
    "workbench.jev",
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "asyncio",
)
_KEY_SPELLINGS: set[str] = set()


def scrub_known_keys(text: str) -> str:
    """`text` with every API key read by this process (any spelling) replaced by ***."""
    for spelling in sorted(_KEY_SPELLINGS, key=len, reverse=True):
        text = text.replace(spelling, "***")
    return text


class _KeyScrubber(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _KEY_SPELLINGS:
            text = record.getMessage()
            clean = scrub_known_keys(text)
            if clean != text:
                record.msg, record.args = clean, ()
            if record.exc_info and not record.exc_text:
                import traceback

                record.exc_text = scrub_known_keys("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return True


_SCRUBBER = _KeyScrubber()


def _register_key(secret: _Secret) -> None:
    _KEY_SPELLINGS.update(secret.spellings())
    for name in SCRUBBED_LOGGERS:
        logger = logging.getLogger(name)
        if _SCRUBBER not in logger.filters:
            logger.addFilter(_SCRUBBER)


def read_key(variables: tuple[str, ...], url: str) -> _Secret | None:
    for name in variables:
        value = os.environ.get(name, "").strip()
        if value:
            secret = _Secret(value, name)
            _register_key(secret)
            return secret
    if _is_loopback(urlsplit(url).hostname or ""):
        return None  # a local server needs no key
    raise JEVAuthError(f"no API key for {url}: set one of {', '.join(variables)} (read in that order)")


def is_json_media_type(content_type: str) -> bool:
    """Whether a Content-Type header names JSON (parameters such as charset aside).

    >>> [is_json_media_type(t) for t in ("application/json; charset=utf-8", "application/problem+json", "text/plain")]
    [True, True, False]
    """
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


# ---- the HTTP client -----------------------------------------------------------------------
def import_httpx():
    """httpx without its command-line client. httpx's `__init__` imports `httpx._main` only to offer
    `httpx.main`, and with rich, click and pygments installed (as beside jupyterlab) that costs
    ~0.1 s of CPU per process (issue 33); the client never calls it. A None entry in sys.modules
    makes that one import fail as if they were missing (httpx then defines a stub `main`); the
    entry is removed afterwards, so an explicit `import httpx._main` still works."""
    if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
        sys.modules["httpx._main"] = None
        try:
            import httpx
        finally:
            if "httpx._main" in sys.modules and sys.modules["httpx._main"] is None:
                del sys.modules["httpx._main"]
        return httpx
    import httpx

    return httpx


def tls_unused(url: str) -> bool:
    """Whether requests to `url` never use TLS: a plain-http URL, and no proxy in the environment
    (httpx reads the same settings, `urllib.request.getproxies`; an https proxy would need TLS).
    Then the HTTP client loads no CA certificates (~30 ms of CPU per process, issue 33)."""
    if urlsplit(url).scheme != "http":
        return False
    import urllib.request

    return not urllib.request.getproxies()


class _LoopThread:
    """A private event loop on a daemon thread: the sync API blocks on it, the async API awaits
    it, so both work inside a notebook's running loop and share one connection pool."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="jev-client-loop", daemon=True)
        self.thread.start()

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self):
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _HTTPThreads:
    """HTTP on `n` daemon threads sharing one `httpx.Client` (n keep-alive connections); the
    event loop awaits each request as a future. httpx's async client cost ~3 ms of CPU per
    50 kB request here (its connection pool and anyio, upstream httpx#3215), about a quarter
    of a JEV client's CPU with 16 questions at once; the sync client in threads cost a
    quarter of that and releases the GIL while it waits. The threads are the hard cap on
    requests in flight: at most `n`, whatever is cancelled or retried.

    Cancelling a request that has not started drops it; one already sent finishes (or times
    out) on its thread and its answer is thrown away. Daemon threads never hold up exit."""

    def __init__(self, n: int, timeout: float, url: str = ""):
        import queue

        httpx = import_httpx()
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            verify=not tls_unused(url),  # False only where no TLS is ever made (plain http, no proxy)
        )
        self.jobs: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"jev-http-{i}", daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    async def post(self, url: str, content: bytes, headers: dict, timeout: float):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.jobs.put((fut, loop, url, content, headers, timeout))
        return await fut

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fut, loop, url, content, headers, timeout = job
            if fut.cancelled():
                continue
            try:
                resp = self.http.post(url, content=content, headers=headers, timeout=timeout)
                outcome = (resp, None)
            except BaseException as exc:  # handed to the awaiting coroutine, which classifies it
                outcome = (None, exc)
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile: nobody is waiting
                loop.call_soon_threadsafe(_settle, fut, outcome)

    def close(self):
        for _ in self.threads:
            self.jobs.put(None)
        self.http.close()


def _settle(fut: asyncio.Future, outcome) -> None:
    if not fut.done():
        resp, exc = outcome
        if exc is None:
            fut.set_result(resp)
        else:
            fut.set_exception(exc)


class JEVClient:
    """Posts request bodies to a Noul-compatible endpoint with retries; counts what it does.

    >>> client = JEVClient(judge_server.url, timeout=10)   # e.g. "http://127.0.0.1:8765/v1/systemone"
    >>> client
    JEVClient('http://127.0.0.1:.../v1/systemone', model='jev-latest')
    >>> client.family, client.counters
    ('url:127.0.0.1/v1/systemone', {'http_requests': 0, 'retries': 0})
    """

    def __init__(
        self,
        endpoint: str | None = None,
        model: str | None = None,
        *,
        timeout: float = 60.0,
        attempts: int = ATTEMPTS,
        concurrency: int = CONCURRENCY,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        retry_after_max: float = 60.0,
        require_key: bool = True,
        unreachable_hold: float = UNREACHABLE_HOLD,
    ):
        self.url, self.model, self.family, self.key_variables = resolve_endpoint(endpoint, model)
        if attempts < 1 or concurrency < 1 or timeout <= 0:
            raise JEVError("JEV client: attempts and concurrency must be >= 1 and timeout > 0")
        self.timeout, self.attempts, self.concurrency = float(timeout), int(attempts), int(concurrency)
        self.backoff_base, self.backoff_max, self.retry_after_max = backoff_base, backoff_max, retry_after_max
        self.unreachable_hold = float(unreachable_hold)
        # (what failed, when: time.monotonic()) after a request that never connected; cleared by any answer
        self._unreachable: tuple[str, float] | None = None
        self._key = read_key(self.key_variables, self.url) if require_key else None
        # httpx and httpcore (which httpx imports when its first client is made) imported now, not by
        # the first request: a process pool's workers forked after this inherit them, where each
        # imported them (~0.1 s of CPU) on its event loop's thread while its question threads held
        # the GIL, delaying its first requests by up to ~0.6 s (issue 33)
        import_httpx()
        import httpcore  # noqa: F401

        self._http: _HTTPThreads | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self.in_flight = 0
        self.counters = {"http_requests": 0, "retries": 0}

    def __repr__(self) -> str:
        return f"JEVClient({self.url!r}, model={self.model!r})"

    def scrub(self, text: str) -> str:
        """`text` with the API key, should it appear (e.g. echoed by a server), replaced by ***,
        also in its repr- and JSON-escaped spellings (messages quote values with !r)."""
        if self._key is not None:
            for spelling in self._key.spellings():
                text = text.replace(spelling, "***")
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """A response body with the key's UTF-8 bytes replaced, before anything reads it."""
        if self._key is not None:
            data = data.replace(self._key.reveal().encode("utf-8"), b"***")
        return data

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json", "User-Agent": "sag2-workbench"}
        if self._key is not None:
            h["Authorization"] = "Bearer " + self._key.reveal()
        return h

    def _key_hint(self) -> str:
        if self._key is None:
            return f"no key was sent; set one of {', '.join(self.key_variables)}"
        return (
            f"the key from ${self._key.source} was refused; check it (variables read: {', '.join(self.key_variables)})"
        )

    async def _client(self) -> _HTTPThreads:
        if self._http is None:
            self._http = _HTTPThreads(self.concurrency, self.timeout, self.url)
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._http

    def unreachable(self) -> str | None:
        """While the service is held unreachable (`unreachable_hold` seconds after a request that
        never connected): the message every request fails with at once; else None."""
        if self._unreachable is None:
            return None
        failure, since = self._unreachable
        age = time.monotonic() - since
        if age >= self.unreachable_hold:
            return None
        return (
            f"JEV {self.url}: not tried: the service could not be reached {age:.0f} s ago ({failure}); "
            f"this client tries it again {self.unreachable_hold:.0f} s after that"
        )

    async def post(
        self, body: dict, keys: list[str], content: bytes | None = None
    ) -> tuple[list[float], dict, str | None]:
        """Send one request, retrying transient failures; returns the validated answer.
        `content`: the body already encoded (`encode_request`).

        When no attempt could connect, the request fails with JEVUnreachable, and so does every
        request for `unreachable_hold` seconds after it, at once and without an HTTP attempt."""
        httpx = import_httpx()

        held = self.unreachable()
        if held is not None:
            raise JEVUnreachable(held)
        http = await self._client()
        assert self._semaphore is not None  # _client sets it with the first client; nothing unsets it
        if content is None:
            content = _dumps(body).encode("utf-8")
        where = f"JEV {self.url}"
        last = "no attempt"
        connected = False  # whether any attempt reached the service (an answer, or a failure after connecting)
        for attempt in range(1, self.attempts + 1):
            held = self.unreachable() if attempt > 1 and not connected else None
            if held is not None:  # another request found the service unreachable meanwhile
                raise JEVUnreachable(held)
            wait_hint = None
            async with self._semaphore:
                self.counters["http_requests"] += 1
                count_usage(http_requests=1)  # to the run whose request this is (workbench/usage.py)
                self.in_flight += 1
                try:
                    log.debug(
                        "POST %s: %d questions, %d bytes (attempt %d/%d)",
                        self.url,
                        len(keys),
                        len(content),
                        attempt,
                        self.attempts,
                    )
                    resp = await http.post(self.url, content=content, headers=self._headers(), timeout=self.timeout)
                    raw = self.scrub_bytes(resp.content)  # a server may echo the key: gone before any parsing
                except httpx.TimeoutException as exc:
                    resp, last = None, f"no answer within {self.timeout:g} s"
                    connected = connected or not isinstance(exc, httpx.ConnectTimeout)
                except httpx.TransportError as exc:
                    resp, last = None, f"connection error ({type(exc).__name__})"
                    connected = connected or not isinstance(exc, httpx.ConnectError)
                finally:
                    self.in_flight -= 1
            if resp is not None:
                connected, self._unreachable = True, None
                status = resp.status_code
                if 200 <= status < 300:
                    ctype = resp.headers.get("Content-Type", "")
                    if not is_json_media_type(ctype):  # e.g. text/plain: whatever the body, not an answer
                        shown = repr(self.scrub(ctype))[:80] if ctype else "absent"
                        raise JEVError(
                            f"{where}: HTTP {status} with Content-Type {shown}, not JSON "
                            "(application/json or a +json type); the answer is not used. Not retried."
                        )
                    return parse_answer(raw, keys, where, scrub=self.scrub)
                excerpt = self.scrub(raw[:200].decode("utf-8", "replace")).strip()
                if status in AUTH_STATUSES:
                    raise JEVAuthError(f"{where}: HTTP {status}: {self._key_hint()}. Not retried.")
                if status not in RETRY_STATUSES:
                    raise JEVError(f"{where}: HTTP {status} (not retried): {excerpt[:160]}")
                last = f"HTTP {status}"
                wait_hint = _retry_after(resp.headers.get("Retry-After"))
            if attempt == self.attempts:
                break
            delay = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            reason = "backoff"
            if wait_hint is not None:
                delay, reason = max(delay, min(wait_hint, self.retry_after_max)), "Retry-After"
            self.counters["retries"] += 1
            count_usage(retries=1)
            log.info(
                "JEV request failed (%s); retry %d of %d in %.2f s (%s)",
                last,
                attempt,
                self.attempts - 1,
                delay,
                reason,
            )
            await asyncio.sleep(delay)
        failure = f"failed after {self.attempts} attempts; last error: {last}"
        if not connected:
            self._unreachable = (failure, time.monotonic())
            raise JEVUnreachable(f"{where}: {failure}; no attempt connected: the service cannot be reached")
        raise JEVError(f"{where}: {failure}")

    async def aclose(self):
        if self._http is not None:
            self._http.close()
            self._http = None
