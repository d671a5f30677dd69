"""`sag2wb eval --judge jev ... --estimate` (issue 34, item 6): JEV's requests, tokens and cost
predicted offline, checked against real runs through a local judge server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from workbench.index.store import Index
from workbench.judges.jev.estimate import Estimate, load_prices, price_for
from workbench.judges.jev.server import JudgeServer, make_server_judge

from .conftest import REPO
from .reliability_world import one_line_error, sag2wb, write_questions

ENCYCLOPEDIA = REPO / "sample_corpora" / "encyclopedia"
ROWS = {
    "requests": "requests",
    "judgments sent": "judgments",
    "judgments cached": "cached",
    "input tokens": "input_tokens",
    "output tokens": "output_tokens",
    "cost (USD)": "cost",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """The encyclopedia's index and its first 4 questions; a lexical judge served on 127.0.0.1
    over the same index, so the estimate's proxy (lexical) follows the served judge's trajectory."""
    root = tmp_path_factory.mktemp("estimate")
    db = root / "enc.sqlite"
    Index.build(ENCYCLOPEDIA / "corpus.json", db)
    questions = [json.loads(line) for line in (ENCYCLOPEDIA / "questions.jsonl").read_text().splitlines()[:4]]
    write_questions(root / "q.jsonl", questions)
    with JudgeServer(make_server_judge("lexical", str(db))) as server:
        yield {"root": root, "db": db, "q": root / "q.jsonl", "server": server}


def eval_cmd(world, out, *extra) -> tuple:
    return ("eval", "--db", world["db"], "--questions", world["q"], "--judge", "jev", "--out", out, "--quiet", *extra)


def totals(stdout: str) -> dict:
    """The total column of the printed estimate."""
    out = {}
    for label, name in ROWS.items():
        m = re.search(rf"^{re.escape(label)}\s+([\d,.]+)\s", stdout, re.M)
        assert m, stdout
        out[name] = float(m.group(1).replace(",", ""))
    return out


def digest(folder: Path) -> dict:
    """Every file's sha256, but SQLite's -wal/-shm companions (a read-only reader of a WAL database
    may create them empty; the judgments are in cache.db)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


@pytest.mark.slow
@pytest.mark.parametrize("style", ["stateful", "inline"])
def test_estimate_equals_real_runs_on_the_same_trajectory(world, tmp_path, style):
    """Cold cache, then a warm cache with another L: the estimate's requests, judgments sent and
    input tokens are the real runs' counters exactly (one thread: the model-check request is the
    same one); the estimate sends nothing, writes no cache and leaves --out alone."""
    server, cache = world["server"], tmp_path / "cache"
    url = ["--jev-endpoint", server.url, "--cache-dir", cache, "--payload-style", style]
    user_file = tmp_path / "notes.json"  # --out names a file that is not ours: an estimate leaves it alone
    user_file.write_text("my notes")
    for params in ([], ["--param", "L=10"]):  # the second over the first's cache: cached judgments subtracted
        before_requests, before_cache = server.requests, digest(cache) if cache.exists() else None
        est = sag2wb(*eval_cmd(world, user_file, *url, *params, "--estimate", "--estimate-proxy", "lexical"))
        assert est.returncode == 0, est.stderr
        assert server.requests == before_requests  # nothing sent
        assert (digest(cache) if cache.exists() else None) == before_cache  # the cache read only, not created
        assert user_file.read_text() == "my notes" and not list(tmp_path.glob("notes.json.*"))
        run = sag2wb(*eval_cmd(world, tmp_path / "run.json", *url, *params, "--concurrency", "1"))
        assert run.returncode == 0, run.stderr
        stats = json.loads((tmp_path / "run.json").read_text())["stats"]
        got = totals(est.stdout)
        assert (got["requests"], got["judgments"], got["input_tokens"]) == (
            stats["requests"],
            stats["judgments_sent"],
            stats["estimated_input_tokens"],
        )
        assert got["output_tokens"] == stats["output_tokens"]  # the local server: one per judgment, as the table
        if params:
            assert got["cached"] > 0 and got["judgments"] + got["cached"] == stats["judgments"]
            assert "model-check request" in est.stdout
        else:
            assert got["cached"] == 0 and "none at" in est.stdout


@pytest.mark.slow
def test_needs_no_key_and_prints_its_price_and_interval(world, tmp_path, monkeypatch):
    for name in ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY", "JEV_ENDPOINT", "JEV_MODEL"):
        monkeypatch.delenv(name, raising=False)
    est = sag2wb(
        *eval_cmd(
            world, tmp_path / "o.json", "--estimate", "--estimate-proxy", "lexical", "--cache-dir", tmp_path / "c"
        ),
        process=True,
    )
    assert est.returncode == 0, est.stderr
    assert "typesafe/jev-1.13 via openrouter" in est.stdout and "no key read" in est.stdout
    table = load_prices()
    assert f"table of {table['date']}" in est.stdout and "ASSUMPTION" in est.stdout
    assert "bootstrap over the questions" in est.stdout
    got = totals(est.stdout)
    price = price_for("typesafe/jev-1.13")
    assert got["cost"] == pytest.approx(price.cost(got["input_tokens"], got["output_tokens"]), abs=1e-4)
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "c").exists()


def test_prices_overridden_on_the_command_line_and_by_a_file(world, tmp_path):
    table = {
        "date": "2026-01-01",
        "source": "my invoice",
        "models": {
            "jev-latest": {"input_per_million": 2.0, "output_per_million": 10.0, "output_tokens_per_judgment": 3}
        },
    }
    (tmp_path / "p.json").write_text(json.dumps(table))
    base = eval_cmd(world, tmp_path / "o.json", "--estimate", "--estimate-proxy", "lexical", "--cache-dir", tmp_path)
    local = ["--jev-endpoint", "http://127.0.0.1:9/v1/systemone"]  # model jev-latest; never contacted
    by_file = sag2wb(*base, *local, "--price", tmp_path / "p.json")
    assert by_file.returncode == 0, by_file.stderr
    got = totals(by_file.stdout)
    assert got["output_tokens"] == 3 * got["judgments"]
    assert got["cost"] == pytest.approx((got["input_tokens"] * 2 + got["output_tokens"] * 10) / 1e6, abs=1e-4)
    assert "my invoice" in by_file.stdout and "2026-01-01" in by_file.stdout and "ASSUMPTION" not in by_file.stdout
    by_flags = sag2wb(*base, *local, "--price-in", "1000", "--price-out", "0")
    got = totals(by_flags.stdout)
    assert got["cost"] == pytest.approx(got["input_tokens"] * 1000 / 1e6, abs=1e-4)
    assert "given on the command line" in by_flags.stdout


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--judge", "learned", "--estimate"], "--judge jev"),
        (["--estimate", "--estimate-proxy", "jev"], "--estimate-proxy jev"),
        (["--estimate", "--estimate-proxy", "bm25"], "--estimate-proxy bm25"),
        (["--estimate", "--estimate-proxy", "nosuch"], "nosuch"),
        (["--estimate", "--trace-dir", "TMP/traces"], "--trace-dir"),
        (["--estimate", "--run", "TMP/r.trec"], "--run"),
        (["--estimate", "--price-in", "-1"], "--price-in"),
        (["--estimate-proxy", "lexical"], "--estimate-proxy: only used with --estimate"),
        (["--price-out", "2"], "--price-out: only used with --estimate"),
    ],
)
def test_bad_estimate_options_are_one_line_refusals(world, tmp_path, extra, needle):
    extra = [str(a).replace("TMP", str(tmp_path)) for a in extra]
    args = [str(a) for a in eval_cmd(world, tmp_path / "o.json", "--cache-dir", tmp_path / "c")]
    if "--judge" in extra:
        at = args.index("--judge")
        del args[at : at + 2]
    proc = sag2wb(*args, *extra)
    assert proc.returncode == 2
    one_line_error(proc, needle)
    assert not (tmp_path / "traces").exists() and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"source": "s", "models": {"*": {"input_per_million": 1, "output_per_million": 1}}}), "'date'"),
        (
            json.dumps(
                {"date": "d", "source": "s", "models": {"*": {"input_per_million": -1, "output_per_million": 1}}}
            ),
            "models.*.input_per_million",
        ),
        (
            json.dumps(
                {"date": "d", "source": "s", "models": {"other": {"input_per_million": 1, "output_per_million": 1}}}
            ),
            "no price for model",
        ),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_a_bad_price_table_is_named(world, tmp_path, content, needle):
    (tmp_path / "p.json").write_text(content)
    proc = sag2wb(*eval_cmd(world, tmp_path / "o.json", "--estimate", "--price", tmp_path / "p.json"))
    assert proc.returncode == 2
    one_line_error(proc, needle)


def test_a_damaged_cache_is_named_not_read(world, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cache.db").write_bytes(b"not a database" * 100)
    proc = sag2wb(
        *eval_cmd(
            world, tmp_path / "o.json", "--estimate", "--estimate-proxy", "lexical", "--cache-dir", tmp_path / "c"
        )
    )
    assert proc.returncode == 2
    one_line_error(proc, "cache.db")


def test_the_interval_is_a_bootstrap_over_questions():
    price = price_for(
        "*", {"date": "d", "source": "s", "models": {"*": {"input_per_million": 1e6, "output_per_million": 0}}}
    )
    same = Estimate(
        ["a", "b", "c"],
        [dict(requests=3, judgments=90, cached=0, input_tokens=1000)] * 3,
        "lexical",
        "m",
        "f",
        "stateful",
        "none",
    )
    assert same.intervals(price)["requests"] == (9, 9)  # no spread, no interval
    spread = Estimate(
        [str(i) for i in range(20)],
        [dict(requests=1 + i % 3, judgments=10 * i, cached=0, input_tokens=100 * i) for i in range(20)],
        "lexical",
        "m",
        "f",
        "stateful",
        "none",
    )
    low, high = spread.intervals(price)["input_tokens"]
    total = sum(100 * i for i in range(20))
    assert low < total < high and spread.intervals(price) == spread.intervals(price)  # seeded: the same each time
    assert spread.intervals(price)["cost"] == (low, high)  # $1 per input token: the cost follows the tokens
    one = Estimate(
        ["a"], [dict(requests=3, judgments=90, cached=0, input_tokens=1000)], "lexical", "m", "f", "stateful", "none"
    )
    assert one.intervals(price)["requests"] is None and "-" in one.table(price).splitlines()[2]
