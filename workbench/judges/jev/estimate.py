"""What a JEV run would cost, before spending: the questions run with an offline proxy judge,
and every round's JEV requests built and counted as our client would send them.

No request is sent and no key is read. For each round of the proxy's trajectory, the round's
candidates are planned into requests by the client's own rule (`plan_requests`, SPEC §3b; the
same token counter), their judgment keys looked up in a JEV cache read only (`ReadOnlyStore`),
and the judgments a live run would reuse subtracted the way `CachedJudge` reuses them (stateful:
a request reused only whole; inline: judgment by judgment, the rest planned anew). Input tokens
are the batching rule's count, what a run reports as `estimated_input_tokens`. The proxy decides
the trajectory (how many rounds, which candidates), so the estimate is exact for the proxy's
trajectory and approximate for JEV's; the interval is a bootstrap over questions.

>>> from workbench.judges.jev.estimate import estimate_cost, price_for
>>> est = estimate_cost(index, questions[:3], proxy="lexical", endpoint="openrouter", cache_dir="no-cache-here")
>>> est.totals()["requests"], est.totals()["judgments"] > 0, est.totals()["cached"]
(9, True, 0)
>>> price = price_for("typesafe/jev-1.13")
>>> print(est.table(price))                                     # doctest: +ELLIPSIS
JEV cost estimate for 3 questions: typesafe/jev-1.13 via openrouter, stateful payloads; nothing sent, no key read
...
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from workbench.engine import Run
from workbench.judges.cached import valid_entry
from workbench.judges.jev.cache import CACHE_FILE, DEFAULT_CACHE_DIR, check_cache_dir, check_format
from workbench.judges.jev.client import resolve_endpoint
from workbench.judges.jev.judge import JEVJudge
from workbench.judges.jev.payload import request_tokens
from workbench.judges.jev.readonly import ReadOnlyStore
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.protocols import close_judge
from workbench.safeio import InputError, parse_json
from workbench.trace import STOP_JUDGE_ERROR

DEFAULT_PROXY = "learned"  # the default judge's trajectories: rounds and candidates follow the answers
RESAMPLES = 2000  # bootstrap resamples over questions (a fixed seed: the same interval every time)
LEVEL = 0.95
COUNTS = ("requests", "judgments", "cached", "input_tokens")


# ---- prices --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens for one model, and where the figures come from."""

    model: str
    input_per_million: float
    output_per_million: float
    output_tokens_per_judgment: float
    date: str
    source: str
    assumption: str = ""  # why the figure is not a published price (empty: it is one)

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6

    def describe(self) -> str:
        head = (
            f"price {self.model}: ${self.input_per_million:g}/M input, ${self.output_per_million:g}/M output tokens, "
            f"{self.output_tokens_per_judgment:g} output token(s) per judgment; price table of {self.date}"
        )
        return head + (f"\n  ASSUMPTION: {self.assumption}" if self.assumption else "") + f"\n  source: {self.source}"


def _number(value, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {name} is {value!r}; give a number >= 0 (USD per million tokens, or a count)")
    return float(value)


def load_prices(path: str | Path | None = None) -> dict:
    """The price table: `path` (a JSON file of the shipped table's shape, `--price FILE`) or the
    shipped `prices.json`. Checked: every model's figures are numbers >= 0, with a date and source.

    >>> table = load_prices()
    >>> sorted(table["models"])[:2], "date" in table and "source" in table
    (['*', 'jev-latest'], True)
    """
    if path is None:
        text = resources.files("workbench.judges.jev").joinpath("prices.json").read_text(encoding="utf-8")
        where = "the shipped price table (workbench/judges/jev/prices.json)"
    else:
        where = f"--price {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{where}: not UTF-8 text; give a JSON price table (docs/jev.md)") from None
        except OSError as exc:
            raise InputError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    table = parse_json(text, where)
    if not isinstance(table, dict) or not isinstance(table.get("models"), dict) or not table["models"]:
        raise InputError(f'{where}: expected an object with "date", "source" and "models" {{name: prices}}')
    for name in ("date", "source"):
        if not isinstance(table.get(name), str) or not table[name].strip():
            raise InputError(f"{where}: {name!r} missing; say when and from where the prices were taken")
    for model, entry in table["models"].items():
        if not isinstance(entry, dict):
            raise InputError(f"{where}: models.{model} is not an object")
        for name in ("input_per_million", "output_per_million"):
            _number(entry.get(name), where, f"models.{model}.{name}")
        _number(entry.get("output_tokens_per_judgment", 1), where, f"models.{model}.output_tokens_per_judgment")
    return table


def price_for(
    model: str,
    table: dict | None = None,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    table_path: str | Path | None = None,
) -> Price:
    """The price of `model`: its entry in the table, else the table's "*" entry (said so);
    `price_in`/`price_out` (USD per million tokens, `--price-in`/`--price-out`) override.

    >>> price_for("typesafe/jev-1.13", price_in=1.5).input_per_million
    1.5
    """
    table = load_prices(table_path) if table is None else table
    models = table["models"]
    entry = models.get(model)
    source, assumption = str(table["source"]), ""
    if entry is None:
        if "*" not in models:
            raise InputError(
                f"no price for model {model!r} in the price table ({', '.join(sorted(models))}); "
                f"add it to a --price FILE, or give --price-in and --price-out"
            )
        entry = models["*"]
        assumption = f"no entry for {model!r}: the table's default ('*')"
    source = str(entry.get("source", source))
    if entry.get("assumption"):
        assumption = "; ".join(filter(None, [assumption, str(entry["assumption"])]))
    pin, pout = float(entry["input_per_million"]), float(entry["output_per_million"])
    overridden = [name for name, v in (("--price-in", price_in), ("--price-out", price_out)) if v is not None]
    if price_in is not None:
        pin = _number(price_in, "--price-in", "the price")
    if price_out is not None:
        pout = _number(price_out, "--price-out", "the price")
    if overridden:
        source = f"{' and '.join(overridden)} given; the rest from: {source}"
        if len(overridden) == 2:
            source, assumption = "given on the command line (--price-in, --price-out)", ""
    return Price(
        model,
        pin,
        pout,
        float(entry.get("output_tokens_per_judgment", 1)),
        str(table["date"]),
        source,
        assumption,
    )


# ---- counting the requests of a trajectory -------------------------------------------------
class RequestCounter:
    """A proxy judge that also counts the JEV requests each call would take (nothing is sent).

    `planner`: a JEVJudge without a client (its endpoint family, model, style, instructions);
    `store`: the JEV cache read only, or None. `model_check`: a live run re-asks the first
    request holding a cached judgment (to learn the model answering now; docs/jev.md "The cache")."""

    def __init__(self, proxy, planner: JEVJudge, store=None, *, model_check: bool = True):
        self.proxy, self.planner, self.store = proxy, planner, store
        self.model_check = model_check and store is not None
        self.name = "proxy judge (counting JEV requests)"
        self.key = "estimate"  # the memo's judge key: one counter per run of questions
        self.counts = dict.fromkeys(COUNTS, 0)
        self.model_checked = False  # the model-check request has been counted

    @property
    def batch_dependent(self) -> bool:  # as the JEV judge: the memo keys whole stateful calls alike
        return self.planner.payload_style == "stateful"

    def judge(self, question: str, candidates: list[dict], context: list[dict]) -> list[float]:
        self.count(question, candidates, context)
        return self.proxy.judge(question, candidates, context)

    def take(self) -> dict:
        """The counts since the last take, reset."""
        out, self.counts = self.counts, dict.fromkeys(COUNTS, 0)
        return out

    def _cached(self, key: str) -> bool:
        return self.store is not None and valid_entry(self.store.get(key))

    def _send(self, body: dict, judgments: int) -> None:
        self.counts["requests"] += 1
        self.counts["judgments"] += judgments
        self.counts["input_tokens"] += request_tokens(body)

    def count(self, question: str, candidates: list[dict], context: list[dict]) -> None:
        """Count what `CachedJudge` over the JEV judge would send for this call."""
        if not candidates:
            return
        p = self.planner
        if p.payload_style == "stateful":  # a request is reused only whole, else sent whole, as planned
            for _, keys, body in p.cache_plan(question, candidates, context):
                cached = [self._cached(k) for k in keys]
                if any(cached) and self.model_check and not self.model_checked:
                    self.model_checked = True  # this request is asked again, whole
                    self._send(body, len(keys))
                elif all(cached):
                    self.counts["cached"] += len(keys)
                else:
                    self._send(body, len(keys))
            return
        keys = p.cache_keys(question, candidates, context)  # inline: judgment by judgment
        todo: dict[str, dict] = {}
        for k, c in zip(keys, candidates):
            if k in todo:  # the same judgment twice in one call: asked once
                continue
            if not self._cached(k):
                todo[k] = c
            elif self.model_check and not self.model_checked:  # this judgment is asked again, alone
                self.model_checked = True
                self._send(self._plan(question, [c], context)[0][1], 1)
            else:
                self.counts["cached"] += 1
        if todo:  # the rest planned anew, as a run plans the judgments it misses
            for idx, body in self._plan(question, list(todo.values()), context):
                self._send(body, len(idx))

    def _plan(self, question, candidates, context):
        return self.planner.request_plan(question, candidates, context)  # the requests the client would send

    def close(self) -> None:
        close_judge(self.proxy)


def open_cache_read_only(cache_dir: str | Path):
    """The JEV cache at `cache_dir` opened for reading only, or None when there is none (nothing
    is created); a damaged or old-format cache is a JEVCacheError naming it."""
    path = Path(cache_dir)
    check_cache_dir(path)
    if not (path / CACHE_FILE).is_file():
        return None
    store = ReadOnlyStore(path)
    try:
        check_format(store, path, write=False)
    except BaseException:
        store.close()
        raise
    return store


# ---- the estimate --------------------------------------------------------------------------
@dataclass
class Estimate:
    """Per-question counts of the JEV requests a run would send, and how they were predicted."""

    questions: list[str]
    per_question: list[dict]
    proxy: str
    model: str
    family: str
    payload_style: str
    cache: str  # what was read: "DIR (read only)" or "none at DIR"
    model_check: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict:
        return {k: sum(q[k] for q in self.per_question) for k in COUNTS}

    def values(self, price: Price) -> dict[str, list[float]]:
        """Per question: requests, judgments, cached, input and output tokens, cost (USD)."""
        out: dict[str, list[float]] = {k: [float(q[k]) for q in self.per_question] for k in COUNTS}
        out["output_tokens"] = [q["judgments"] * price.output_tokens_per_judgment for q in self.per_question]
        out["cost"] = [price.cost(i, o) for i, o in zip(out["input_tokens"], out["output_tokens"])]
        return out

    def intervals(self, price: Price, resamples: int = RESAMPLES, level: float = LEVEL) -> dict:
        """{name: (low, high)} of each total: a percentile bootstrap over questions (the same
        resamples for every row; seed 0), or None for fewer than 2 questions."""
        values = self.values(price)
        n = len(self.per_question)
        if n < 2:
            return dict.fromkeys(values)
        rng = random.Random(0)
        draws = [[rng.randrange(n) for _ in range(n)] for _ in range(resamples)]
        lo_at, hi_at = int((1 - level) / 2 * resamples), math.ceil((1 + level) / 2 * resamples) - 1
        out = {}
        for name, v in values.items():
            totals = sorted(sum(v[i] for i in d) for d in draws)
            out[name] = (totals[lo_at], totals[hi_at])
        return out

    def summary(self, price: Price) -> dict:
        """Totals, intervals, per-question means and the price: a JSON-ready dict."""
        values, intervals = self.values(price), self.intervals(price)
        n = max(1, len(self.per_question))
        return {
            "questions": len(self.per_question),
            "totals": {k: sum(v) for k, v in values.items()},
            "intervals": intervals,
            "per_question_mean": {k: sum(v) / n for k, v in values.items()},
            "price": price.__dict__,
        }

    def table(self, price: Price) -> str:
        """The printed estimate: one row per count, its total, interval and per-question range."""
        values, intervals = self.values(price), self.intervals(price)
        n = len(self.per_question)
        rows = [
            ("requests", "requests", "{:,.0f}"),
            ("judgments sent", "judgments", "{:,.0f}"),
            ("judgments cached", "cached", "{:,.0f}"),
            ("input tokens", "input_tokens", "{:,.0f}"),
            ("output tokens", "output_tokens", "{:,.0f}"),
            ("cost (USD)", "cost", "{:,.4f}"),
        ]
        lines = [
            f"JEV cost estimate for {n} questions: {self.model} via {self.family}, {self.payload_style} payloads; "
            f"nothing sent, no key read",
            f"{'':18}{'total':>14}  {f'{LEVEL:.0%} interval':>27}  {'per question: mean (min-max)':>32}",
        ]
        for label, name, form in rows:
            v = values[name]
            iv = intervals[name]
            shown = "-" if iv is None else f"[{form.format(iv[0])}, {form.format(iv[1])}]"
            mean = sum(v) / n if n else 0.0
            mean_form = "{:,.5f}" if name == "cost" else "{:,.1f}"
            spread = f"{mean_form.format(mean)} ({form.format(min(v, default=0))}-{form.format(max(v, default=0))})"
            lines.append(f"{label:18}{form.format(sum(v)):>14}  {shown:>27}  {spread:>32}")
        lines.append(price.describe())
        lines.append(
            f"trajectories: the proxy judge {self.proxy} (JEV's own answers decide its rounds and candidates); "
            f"input tokens: the batching rule's o200k count (a run's estimated_input_tokens)"
        )
        cache = f"cache: {self.cache}"
        if self.model_check:
            cache += "; includes the one model-check request a live run re-asks when it finds cached judgments"
        lines.append(cache)
        lines.append(
            f"interval: bootstrap over the questions ({RESAMPLES:,} resamples): the spread of per-question counts; "
            f"it does not cover JEV's trajectories differing from the proxy's, nor the price (docs/jev.md)"
        )
        lines.extend(self.notes)
        return "\n".join(lines)


def proxy_spec(proxy: str | JudgeSpec | None) -> JudgeSpec:
    """The proxy judge as a spec: any offline judge that scores (not bm25, not jev)."""
    spec = JudgeSpec.parse(proxy or DEFAULT_PROXY)
    if spec.name == "jev":
        raise JudgeError("--estimate-proxy jev: the proxy runs offline; give an offline judge (default learned)")
    if spec.name == "bm25":
        raise JudgeError(
            "--estimate-proxy bm25: BM25 alone judges nothing, so it has no rounds to count; give a judge that "
            "scores (learned, semantic, lexical)"
        )
    return spec


def estimate_cost(
    index,
    questions: list,
    *,
    params=None,
    proxy: str | JudgeSpec | None = None,
    endpoint: str | None = None,
    model: str | None = None,
    payload_style: str = "stateful",
    instructions=None,
    cache_dir: str | Path | None = None,
    cache_only: bool = False,
    progress: bool = False,
) -> Estimate:
    """Run `questions` with the proxy judge and count each round's JEV requests (module doc).
    `cache_dir` (default $SAG2WB_JEV_CACHE or .sag2wb/jev-cache) is read, never written or
    created; a missing one subtracts nothing."""
    import os
    import time

    from tqdm.auto import tqdm

    started = time.perf_counter()
    spec = proxy_spec(proxy)
    url, model, family, _ = resolve_endpoint(endpoint, model)  # names only: no key, no request
    planner = JEVJudge(
        None, url=url, model=model, family=family, payload_style=payload_style or "stateful", instructions=instructions
    )
    if cache_dir is None:
        cache_dir = os.environ.get("SAG2WB_JEV_CACHE") or DEFAULT_CACHE_DIR
    store = open_cache_read_only(cache_dir)
    counter = RequestCounter(None, planner, store, model_check=not cache_only)
    counts: list[dict] = []
    try:
        if not spec.kind.needs_gold:
            counter.proxy = spec.build(index)  # one judge for every question (the oracle: per question)
        for q in tqdm(questions, desc=f"estimate ({spec})", disable=not progress, file=sys.stderr, leave=False):
            if spec.kind.needs_gold:
                counter.proxy = spec.build(index, q.gold)
            trace = Run(index, q, params, counter, explain=False).run()
            failed = next((r for r in trace.rounds if r.stop == STOP_JUDGE_ERROR), None)
            if failed is not None:
                raise JudgeError(f"--estimate: question {q.id}, round {failed.round}: {failed.error}")
            counts.append(counter.take())
    finally:
        counter.close()
        if store is not None:
            store.close()
    where = f"{cache_dir} (read only)" if store is not None else f"none at {cache_dir} (nothing subtracted)"
    return Estimate(
        questions=[q.id for q in questions],
        per_question=counts,
        proxy=str(spec),
        model=model,
        family=family,
        payload_style=planner.payload_style,
        cache=where,
        model_check=counter.model_checked,
        seconds=time.perf_counter() - started,
    )
