"""Our JEV client against jevcompat's reference mock, one injected fault at a time.

`jevcompat` (PyPI, MIT; the dev extra) ships `jevcompat.mock`: a spec-exact Jev server with a
deterministic fake model and 47 faults, each breaking one requirement of the Jev spec on purpose.
For every fault (the list is read from the installed package, so a new one fails
`test_every_fault_has_an_expected_outcome` instead of being skipped) the client judges a small
batch, and the run must end in one of:

- the same judgments as the fault-free mock gives for the same call (the fault concerns
  behaviour our client never meets), usage counted;
- the same judgments with usage reported as unknown (`usage_unknown`), never added up as 0;
- the judgments this server answered, where the fault is in the server's model itself (it reads
  the question id, the batch size or the position, which the spec says it must not): the answers
  are well-formed, so no client can tell; the client's part is to hand each candidate its own
  answer unchanged, which is checked against what the server sent;
- a named JEVError (JEVAuthError for keys): one line saying what broke, no API key in it, and
  nothing in the judgment cache.

The mock runs in this process on a free loopback port (a real HTTP server); the CLI test starts
it as its own process with `python -m jevcompat.cli mock`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from workbench.cli.main import main as cli_main
from workbench.engine import Run
from workbench.index.store import Index
from workbench.index.units import Unit
from workbench.judges import jev
from workbench.params import Params

mock = pytest.importorskip(
    "jevcompat.mock", reason="jevcompat is not installed: pip install --no-deps jevcompat==0.1.1 (the dev extra)"
)

EXPECTED_FAULT_COUNT = 47  # jevcompat 0.1.1; a release with more faults must be read and classified here
KEY = "sk-mock-SECRET-4242"  # the key the mock wants, when it wants one
WRONG_KEY = "sk-wrong-SECRET-9999"
QUESTION = "Where was the director of the harbour film born?"
CANDIDATES = [
    {"unit_id": 1, "title": "Alder", "text": "Alder is a town near Birchwood.", "document": "Alder"},
    {"unit_id": 2, "title": "Birchwood", "text": "The harbour film's director was born in Birchwood.", "document": "B"},
    {"unit_id": 3, "title": "Glass Harbour", "text": "Glass Harbour is a film by Ada Vale.", "document": "G"},
]
CONTEXT = [{"unit_id": 9, "title": "Ada Vale", "text": "Ada Vale directs films.", "previous_score": 0.123456789}]

# fault -> (outcome, what the error must say (a regex) or None, why). Outcomes:
#   error / auth-error  a named JEVError / JEVAuthError, nothing cached
#   same                the fault-free mock's judgments, usage counted
#   usage-unknown       the fault-free mock's judgments, the request counted in usage_unknown, no tokens added
#   as-served           the server's own (leaky) answers, each handed to its candidate unchanged
#   layout              "same" if the mock takes our request layout, else a named HTTP 422 error: these
#                       faults refuse valid requests that use a feature (structured instructions,
#                       one-sided criteria, ...); which outcome depends on the layout we send
OUTCOMES: dict[str, tuple[str, str | None, str]] = {
    # ---- transport and envelope
    "wrong-route": ("error", r"HTTP 404 \(not retried\).*No route /v1/systemone", "the route is missing: a 404"),
    "xssi-200": ("error", r"the answer is not JSON", "a 200 body that is not JSON"),
    "plain-content-type": ("error", r"Content-Type 'text/plain', not JSON", "a 200 that does not say it is JSON"),
    "text-errors": (
        "auth-error",
        r"HTTP 401.*refused",
        "error bodies in plain text (provoked with a wrong key): the client reads only the status of an error",
    ),
    "models-404": ("same", None, "no GET /v1/models: the client never asks for the model list"),
    "no-usage": ("usage-unknown", None, "usage omitted: the answers stand, their tokens are unknown"),
    "float-usage": ("usage-unknown", None, "token counts 604.0: not counts, so unknown, never summed"),
    "extra-answer": ("error", r"1 answer\(s\) for questions never asked \('__extra__'\)", "an answer nobody asked for"),
    "nan": ("error", r"not JSON \(NaN is not a JSON value\)", "NaN is not JSON (strict parsing, like any JSON parser)"),
    "unprefixed-extra": (
        "same",
        None,
        "a top-level latency_ms the spec says should be x_-prefixed: unknown fields carry nothing the client "
        "reads, and ignoring them is what keeps a client working with a newer server",
    ),
    # ---- keys
    "auth-rejects-header": ("auth-error", r"HTTP 401", "no key wanted, but a key sent (from $JEV_API_KEY) is refused"),
    "auth-x-api-key": ("auth-error", r"HTTP 403", "the key read from x-api-key: our Bearer key is not seen"),
    "auth-plain": ("auth-error", r"HTTP 401.*no key was sent", "no key sent, a plain-text 401 back"),
    "auth-invalid-403-text": ("auth-error", r"HTTP 401.*was refused", "a wrong key, a non-standard error body"),
    # ---- request validation the mock gets wrong
    "reject-jev-latest": (
        "error",
        r"HTTP 404.*Model not served: jev-latest",
        "the model alias we send (jev-latest) refused",
    ),
    "error-flat": (
        "error",
        r"HTTP 400.*Unknown model",
        "an unknown model (provoked with model jev-unknown) gets a non-standard error body: still not retried",
    ),
    "reject-array-state": ("layout", None, "refuses an array state: our state is a string or an object"),
    "strict-ids": ("layout", None, "refuses ids outside [A-Za-z0-9_]: ours are c1 / candidate_<unit id>"),
    "forbid-extra": ("layout", None, "refuses unknown top-level fields: we send only model, state and questions"),
    "string-only-text": ("layout", None, "refuses structured (object) instructions, which the reference sends"),
    "noul-two-sided": ("layout", None, "refuses one-sided noul criteria"),
    "noul-needs-instructions": ("layout", None, "refuses a noul without instructions: ours always have them"),
    "accept-boolean": ("same", None, "accepts question type 'boolean': we only send noul"),
    "validation-400": (
        "same",
        None,
        "validation errors as 400 {'error'}: the mock accepts our requests (see the fault-free run); an "
        "invalid one would get a not-retried JEVError with any status 400-499",
    ),
    "500-on-unknown-type": ("same", None, "a 500 for an unknown question type: we only send noul"),
    # ---- answers
    "first-question-only": ("error", r"2 of 3 questions unanswered", "only the first question answered"),
    "boolean-type": ("error", r"has type 'boolean', expected 'noul'", "noul answers typed 'boolean'"),
    "noul-range": ("error", r"not a probability in \[0, 1\]", "noul above 1"),
    # ---- choice and score questions: the workbench sends noul only, so these never reach it
    **{
        f: ("same", None, "breaks choice or score questions only: the workbench asks noul questions")
        for f in (
            "nfd-keys",
            "no-null-description",
            "cap-64",
            "cap-5-levels",
            "accept-map-score",
            "choice-no-confidence",
            "choice-key-case",
            "choice-sum",
            "choice-second",
            "score-no-legend",
            "legend-1-based",
            "score-keys-1-based",
            "score-sum",
            "score-argmax",
            "confidence-over",
            "confidence-margin",
        )
    },
    # ---- the model itself
    **{
        f: (
            "as-served",
            None,
            f"the server's model reads the question's {what}, which the spec forbids: the answers are well-formed "
            "probabilities, so no client can tell them from honest ones; correct here is each candidate getting "
            "exactly its own answer (checked against what the server sent), and the cache keying the whole "
            "batch and position (docs/jev.md, 'The cache')",
        )
        for f, what in (("id-leaks", "id"), ("batch-leaks", "batch size"), ("order-leaks", "position"))
    },
}

# what a fault needs to show itself: the key the mock wants, the key we send, the model we ask for
SETUPS = {
    "auth-rejects-header": {"client_key": KEY},
    "auth-x-api-key": {"mock_key": KEY, "client_key": KEY},
    "auth-plain": {"mock_key": KEY},
    "auth-invalid-403-text": {"mock_key": KEY, "client_key": WRONG_KEY},
    "text-errors": {"mock_key": KEY, "client_key": WRONG_KEY},
    "error-flat": {"model": "jev-unknown"},
}


class RecordingMock:
    """jevcompat's mock on a free loopback port, keeping (status, body) of every response it sends."""

    def __init__(self, faults=(), key: str | None = None, busy_every: int = 0):
        self.sent: list[tuple[int, object]] = []
        recorder = self

        class Handler(mock.Handler):
            cfg = mock.MockConfig(key=key, faults=frozenset(faults), busy_every=busy_every)

            def _send(self, status, payload, text=False):
                recorder.sent.append((status, payload))
                super()._send(status, payload, text)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        host, port = self.server.server_address[:2]
        self.url = f"http://{host}:{port}/v1/systemone"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def answered(self) -> list[dict]:
        return [body for status, body in self.sent if status == 200]


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    for name in (*jev.KEY_VARIABLES, "JEV_ENDPOINT", "JEV_MODEL", "SAG2WB_JEV_CACHE"):
        monkeypatch.delenv(name, raising=False)


def judge_once(url: str, cache_dir, model: str | None = None, style: str = "stateful"):
    """(judgments or None, the JEVError or None, usage) of one call on a fresh judge."""
    judge = jev.make_jev_judge(
        endpoint=url, model=model, payload_style=style, cache_dir=cache_dir, backoff_base=0.01, timeout=10
    )
    try:
        return judge.judge(QUESTION, CANDIDATES, CONTEXT), None, judge.usage()
    except jev.JEVError as exc:
        return None, exc, judge.usage()
    finally:
        judge.close()


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The fault-free mock's judgments of the batch, per payload style."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for name in jev.KEY_VARIABLES:
            mp.delenv(name, raising=False)
        for style in jev.PAYLOAD_STYLES:
            with RecordingMock() as srv:
                got, error, usage = judge_once(srv.url, tmp_path_factory.mktemp("clean") / "cache", style=style)
            assert error is None, f"the fault-free mock refuses our {style} requests: {error}"
            assert len(srv.answered()) == 1 and usage["usage_unknown"] == 0
            out[style] = got
    return out


def test_every_fault_has_an_expected_outcome():
    assert len(mock.FAULTS) == EXPECTED_FAULT_COUNT, sorted(mock.FAULTS)
    assert set(OUTCOMES) == set(mock.FAULTS), {
        "unclassified": sorted(set(mock.FAULTS) - set(OUTCOMES)),
        "gone": sorted(set(OUTCOMES) - set(mock.FAULTS)),
    }
    assert set(SETUPS) <= set(OUTCOMES)


def test_the_clean_mock_answers_our_requests_in_both_styles(clean):
    assert all(len(got) == len(CANDIDATES) and all(0.0 <= p <= 1.0 for p in got) for got in clean.values())
    assert clean["inline"] != clean["stateful"]  # two layouts, two requests: the mock's model reads them


@pytest.mark.slow
@pytest.mark.parametrize("style", jev.PAYLOAD_STYLES)
@pytest.mark.parametrize("fault", list(mock.FAULTS))
def test_each_mock_fault_ends_in_a_correct_judgment_or_a_named_error(fault, style, clean, tmp_path, monkeypatch):
    outcome, message, why = OUTCOMES[fault]
    setup = SETUPS.get(fault, {})
    if "client_key" in setup:
        monkeypatch.setenv("JEV_API_KEY", setup["client_key"])
    cache_dir = tmp_path / "cache"
    with RecordingMock([fault], key=setup.get("mock_key")) as srv:
        got, error, usage = judge_once(srv.url, cache_dir, model=setup.get("model"), style=style)
    statuses = [status for status, _ in srv.sent]
    if outcome == "layout":
        outcome, message = ("error", r"HTTP 422 \(not retried\)") if 422 in statuses else ("same", None)
    stored = jev.cache_stats(cache_dir)["judgments"]

    if outcome in ("error", "auth-error"):
        assert error is not None, f"{fault} ({why}): expected a named error, got judgments {got}"
        assert isinstance(error, jev.JEVAuthError) == (outcome == "auth-error"), repr(error)
        text = str(error)
        assert message is not None and re.search(message, text), f"{fault}: {text}"
        assert text.startswith(f"JEV {srv.url}") and "\n" not in text and "Traceback" not in text
        assert KEY not in text and WRONG_KEY not in text and KEY not in repr(error) and WRONG_KEY not in repr(error)
        assert stored == 0, f"{fault}: a failed call left {stored} judgments in the cache"
        assert usage["judgments_sent"] == 0 and usage["input_tokens"] == 0 and usage["usage_unknown"] == 0
        return

    assert error is None, f"{fault} ({why}): {error}"
    [answer] = srv.answered()  # one request for the batch
    served = [a["noul"] for a in answer["answers"].values()]  # in the order of the questions sent
    assert got == served, f"{fault}: the client's judgments are not the ones the server sent"
    if outcome == "as-served":
        assert got != clean[style]  # the leak is real: these are this server's answers, not the honest model's
    else:
        assert got == clean[style], f"{fault} ({why}): judgments differ from the fault-free mock's"
    assert stored == len(CANDIDATES)
    assert usage["judgments_sent"] == len(CANDIDATES) and usage["requests"] == 1
    if outcome == "usage-unknown":
        assert usage["usage_unknown"] == 1 and usage["input_tokens"] == 0 and usage["output_tokens"] == 0
    else:
        assert usage["usage_unknown"] == 0
        assert (usage["input_tokens"], usage["output_tokens"]) == (
            answer["usage"]["input_tokens"],
            answer["usage"]["output_tokens"],
        )


def test_a_keyed_mock_takes_the_right_key_and_refuses_others_without_showing_them(clean, tmp_path, monkeypatch):
    with RecordingMock(key=KEY) as srv:
        monkeypatch.setenv("JEV_API_KEY", KEY)
        got, error, _ = judge_once(srv.url, tmp_path / "right")
        assert error is None and got == clean["stateful"]
        monkeypatch.setenv("JEV_API_KEY", WRONG_KEY)
        got, error, _ = judge_once(srv.url, tmp_path / "wrong")
        assert isinstance(error, jev.JEVAuthError) and "$JEV_API_KEY was refused" in str(error)
        assert WRONG_KEY not in str(error) and jev.cache_stats(tmp_path / "wrong")["judgments"] == 0
        monkeypatch.delenv("JEV_API_KEY")
        got, error, _ = judge_once(srv.url, tmp_path / "none")
        assert isinstance(error, jev.JEVAuthError) and "no key was sent" in str(error)
    assert [status for status, _ in srv.sent] == [200, 401, 403]  # each refusal after one request: never retried


@pytest.mark.parametrize("busy_every, fails", [(2, False), (1, True)])
def test_a_busy_mock_is_retried_after_its_retry_after(busy_every, fails, clean, tmp_path):
    """The mock's 429 with Retry-After: 0 on every Nth request: retried; every one busy: a named error."""
    with RecordingMock(busy_every=busy_every) as srv:
        judge = jev.make_jev_judge(endpoint=srv.url, cache_dir=tmp_path / "cache", backoff_base=0.01, timeout=10)
        try:
            if fails:
                with pytest.raises(jev.JEVError, match=r"failed after 4 attempts; last error: HTTP 429"):
                    judge.judge(QUESTION, CANDIDATES, CONTEXT)
                assert jev.cache_stats(tmp_path / "cache")["judgments"] == 0
            else:
                assert judge.judge(QUESTION, CANDIDATES[:1], CONTEXT)  # request 1
                assert judge.judge(QUESTION, CANDIDATES, CONTEXT) == clean["stateful"]  # request 2: 429, then 3
            usage = judge.usage()
        finally:
            judge.close()
    assert usage["retries"] == (3 if fails else 1) and usage["http_requests"] == (4 if fails else 3)


# ---- usage: unknown is never a number ------------------------------------------------------
ANSWER = '{"model": "m", "answers": {"c1": {"type": "noul", "noul": 0.5}}%s}'


@pytest.mark.parametrize(
    "usage, expected",
    [
        ('{"input_tokens": 10, "output_tokens": 2}', {"input_tokens": 10, "output_tokens": 2}),
        (
            '{"input_tokens": 10, "output_tokens": 2, "cost": 0.003}',
            {"input_tokens": 10, "output_tokens": 2, "cost": 0.003},
        ),
        (None, {"input_tokens": None, "output_tokens": None}),  # missing
        ("null", {"input_tokens": None, "output_tokens": None}),
        ("[10, 2]", {"input_tokens": None, "output_tokens": None}),
        ('{"input_tokens": 10.0, "output_tokens": 2}', {"input_tokens": None, "output_tokens": 2}),  # a float
        ('{"input_tokens": 10.5, "output_tokens": 2}', {"input_tokens": None, "output_tokens": 2}),  # fractional
        ('{"input_tokens": -1, "output_tokens": 2}', {"input_tokens": None, "output_tokens": 2}),  # negative
        ('{"input_tokens": "10", "output_tokens": true}', {"input_tokens": None, "output_tokens": None}),
        ('{"input_tokens": 1e400, "output_tokens": 2}', {"input_tokens": None, "output_tokens": 2}),  # inf
        (
            '{"input_tokens": 10, "output_tokens": 2, "cost": -0.1}',
            {"input_tokens": 10, "output_tokens": 2, "cost": None},
        ),
        (
            '{"input_tokens": 10, "output_tokens": 2, "cost": "0.1"}',
            {"input_tokens": 10, "output_tokens": 2, "cost": None},
        ),
    ],
)
def test_usage_that_is_not_a_count_is_unknown(usage, expected):
    raw = ANSWER % ("" if usage is None else f', "usage": {usage}')
    assert jev.parse_answer(raw.encode(), ["c1"], "test") == ([0.5], expected, "m")


@pytest.mark.parametrize(
    "raw, message",
    [
        ('{"answers": {"c1": {"type": "noul", "noul": NaN}}}', r"not JSON \(NaN is not a JSON value\)"),
        ('{"answers": {"c1": {"type": "noul", "noul": Infinity}}}', r"not JSON \(Infinity is not a JSON value\)"),
        ('{"answers": {"c1": {"type": "noul", "noul": 0.5}}, "x_t": -Infinity}', r"-Infinity is not a JSON value"),
        (
            '{"answers": {"c1": {"type": "noul", "noul": 0.5}, "c1": {"type": "noul", "noul": 0.9}}}',
            r"'c1' appears twice",
        ),
        (
            '{"answers": {"c1": {"type": "noul", "noul": 0.5}, "c2": {"type": "noul", "noul": 0.5}}}',
            r"never asked \('c2'\)",
        ),
        ('{"answers": {"c1": {"type": "noul", "noul": "0.5"}}}', r"'c1' is '0.5', not a probability"),
        ('{"answers": {"c1": {"type": "noul", "noul": true}}}', r"'c1' is True, not a probability"),
        ('{"answers": {"c1": {"type": "noul", "noul": -0.1}}}', r"'c1' is -0.1, not a probability"),
        ('{"answers": {"c1": {"type": "noul", "noul": 1e400}}}', r"'c1' is inf, not a probability"),
        ('{"answers": {"c1": {"type": "noul"}}}', r"'c1' is None, not a probability"),
        ('{"answers": {"c1": 0.5}}', r"'c1' has type 'float', expected 'noul'"),
        ('{"answers": [0.5]}', r'no "answers" object'),
        ("[" * 100_000, r"not JSON \(nested too deeply\)"),
    ],
)
def test_answers_that_are_not_probabilities_or_not_json_are_errors(raw, message):
    with pytest.raises(jev.JEVError, match=message):
        jev.parse_answer(raw.encode(), ["c1"], "test", scrub=lambda s: s)


def test_an_extra_answer_named_with_the_key_is_scrubbed(monkeypatch):
    monkeypatch.setenv("JEV_API_KEY", KEY)
    client = jev.JEVClient("http://127.0.0.1:9/v1/systemone")
    # the id spelled with a JSON escape: the key's bytes are not in the body, only in what it decodes to
    raw = '{"answers": {"c1": {"type": "noul", "noul": 0.5}, "\\u0073' + KEY[1:] + '": {}}}'
    assert KEY not in raw and json.loads(raw)["answers"].keys() == {"c1", KEY}
    with pytest.raises(jev.JEVError) as info:
        jev.parse_answer(raw.encode(), ["c1"], "test", scrub=client.scrub)
    assert "never asked ('***')" in str(info.value) and KEY not in str(info.value)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    names = ["Alder", "Birchwood", "Cedarholm", "Dunmore", "Elmstead", "Fernvale"]
    units = [
        Unit(
            n,
            "",
            f"{n} is a town near {names[(i + 1) % 6]}. The harbour film director was born here.",
            n,
            "inline",
            str(i),
        )
        for i, n in enumerate(names)
    ]
    return Index.build(units, tmp_path_factory.mktemp("idx") / "towns.sqlite")


def test_trace_stats_report_unknown_usage_and_add_no_tokens(index, tmp_path):
    with RecordingMock(["no-usage"]) as srv:
        judge = jev.make_jev_judge(endpoint=srv.url, cache_dir=tmp_path / "cache", timeout=10)
        try:
            trace = Run(index, QUESTION, Params(B=4, s=2, L=3, p=1, context_size=2), judge).run()
        finally:
            judge.close()
    assert trace.stats["requests"] >= 1 and trace.stats["usage_unknown"] == trace.stats["requests"]
    assert trace.stats["input_tokens"] == 0 and trace.stats["output_tokens"] == 0 and trace.stats["cost"] == 0


# ---- the CLI against the mock as its own process ---------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the mock exited ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the mock did not listen on port {port} within {seconds:g} s")


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["extra-answer", "plain-content-type"])
def test_cli_search_against_a_faulty_mock_exits_1_with_one_line(fault, index, tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in (*jev.KEY_VARIABLES, "JEV_ENDPOINT", "JEV_MODEL")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jevcompat.cli", "mock", "--host", "127.0.0.1", "--port", str(port), "--fault", fault],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_for_port(port, server)
        cache_dir = tmp_path / "cli-cache"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "workbench.cli",
                "search",
                "--db",
                str(index.path),
                QUESTION,
                "--judge",
                "jev",
                "--jev-endpoint",
                f"http://127.0.0.1:{port}/v1/systemone",
                "--cache-dir",
                str(cache_dir),
                "--rounds",
                "1",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert run.returncode == 1, (run.stdout, run.stderr)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    expected = "never asked ('__extra__')" if fault == "extra-answer" else "Content-Type 'text/plain', not JSON"
    assert expected in lines[0] and lines[0].startswith("stopped at round"), lines[0]
    assert jev.cache_stats(cache_dir)["judgments"] == 0


def test_cli_eval_prints_unknown_usage_as_unknown(index, tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"_id": "q1", "type": "bridge", "question": QUESTION, "supporting_titles": ["Alder", "Dunmore"]})
        + "\n"
    )
    out = tmp_path / "out.json"
    with RecordingMock(["float-usage"]) as srv:
        code = cli_main(
            [
                "eval",
                "--db",
                str(index.path),
                "--questions",
                str(questions),
                "--judge",
                "jev",
                "--jev-endpoint",
                srv.url,
                "--cache-dir",
                str(tmp_path / "cache"),
                "--out",
                str(out),
                "--quiet",
                "--param",
                "L=2",
            ]
        )
    assert code == 0
    stats = json.loads(out.read_text())["stats"]
    assert stats["requests"] >= 1 and stats["usage_unknown"] == stats["requests"] and stats["input_tokens"] == 0
    line = capsys.readouterr().out
    assert f"+ unknown ({stats['usage_unknown']} answered requests reported no valid usage)" in line, line
