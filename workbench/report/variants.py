"""The variants page: one question re-run over a grid of parameters and judges, every
variant's trajectory precomputed into one self-contained page that switches between them
instantly (`sag2wb report TRACE --db DB --vary L=5,10,20 --vary H=0,1,2 --judge lexical,learned`).

The grid is read and checked before any work: each `--vary NAME=V1,V2` names a field of
`workbench.params.Params` and every value must make a valid Params (the engine's own checks);
every judge is read by the judge registry (`JudgeSpec.parse`). A grid over `max_variants`
variants, or whose page is estimated over `max_bytes`, is refused with the counts.

The variants run as one `Experiment` over the trace's question, so they share one judgment
memo (and a JEV judge its disk cache): a judgment one variant asked is never asked again by
another with the same judge. What changed between two variants is `Results.changes()`'s
question change (first differing round, terms, seeds and gold gained or lost, rank moves in
words), kept for every pair one switch apart (and from the first variant shown to every
other), so the page can say it on each switch.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> trace = Run(index, questions[1], judge=LexicalJudge(index)).run()
>>> grid = read_grid(["L=5,20", "H=1"], ["lexical"], trace, index)
>>> [v.name for v in grid.variants()]
['L=5 · H=1 · lexical', 'L=20 · H=1 · lexical']
>>> read_grid(["H=1,3"], [], trace, index)
Traceback (most recent call last):
...
workbench.safeio.InputError: --vary H=1,3: H (expansion rounds) must be 0, 1 or 2, got 3
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, fields
from pathlib import PurePath

from workbench.index.units import Question
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.metrics import METRICS
from workbench.params import Params, ParamsError
from workbench.report.page import Page, plain, render
from workbench.report.trajectory import SCRIPTS as TRAJECTORY_SCRIPTS
from workbench.report.trajectory import check_index, public, trajectory_data
from workbench.runs.experiment import Experiment
from workbench.runs.options import RunOptions
from workbench.runs.policies import Config
from workbench.runs.results import Results
from workbench.safeio import InputError, atomic_write_text, check_output
from workbench.terms import TermWeightingError, get_term_weighting

SCRIPTS = (*TRAJECTORY_SCRIPTS, "variants.js")
MAX_VARIANTS = 36  # default --max-variants: a 3x3x2 grid twice over
MAX_MIB = 16.0  # default --max-mib: a page still fit to mail or attach
PAIR_BYTES = 1500  # the estimate's bytes per pair of variants the page holds (what changed, in words)
METRIC = "R@10"
PARAM_NAMES = tuple(f.name for f in fields(Params))
JUDGE_AXIS = "judge"


@dataclass(frozen=True)
class Variant:
    """One point of the grid: its name, its parameters, its judge and the grid's settings of it."""

    name: str
    params: Params
    judge: JudgeSpec
    settings: dict  # {"L": 5, "H": 0, "judge": "lexical"}: the axes' values


@dataclass(frozen=True)
class Grid:
    """The axes over the trace's parameters (`base`), and the judges."""

    base: Params
    axes: tuple[tuple[str, tuple], ...]  # (parameter name, values in the order given)
    judges: tuple[JudgeSpec, ...]

    @property
    def count(self) -> int:
        return math.prod(len(v) for _, v in self.axes) * len(self.judges)

    def variants(self) -> list[Variant]:
        out = []
        names = [name for name, _ in self.axes]
        for judge in self.judges:
            for values in itertools.product(*(v for _, v in self.axes)):
                changes = dict(zip(names, values))
                settings = {**{n: _text(v) for n, v in changes.items()}, JUDGE_AXIS: public(str(judge))}
                label = " · ".join(f"{n}={settings[n]}" for n in names)
                name = f"{label} · {settings[JUDGE_AXIS]}" if label else settings[JUDGE_AXIS]
                out.append(Variant(name, self.base.replace(**changes), judge, settings))
        return out


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    return str(value)


def read_axis(text: str, base: Params) -> tuple[str, tuple]:
    """`NAME=V1,V2,...` as (name, values), each value checked by Params itself; field_weights
    values are separated by `;` (each is three numbers: `2,2,1;1,1,1`)."""
    name, sep, raw = str(text).partition("=")
    name = name.strip()
    if not sep or not name:
        raise InputError(f"--vary {text!r}: expected NAME=V1,V2,... with NAME one of {', '.join(PARAM_NAMES)}")
    if name not in PARAM_NAMES:
        raise InputError(f"--vary {text}: unknown parameter {name!r}; parameters: {', '.join(PARAM_NAMES)}")
    pieces = [p.strip() for p in raw.split(";" if name == "field_weights" else ",")]
    if not any(pieces) or not all(pieces):
        raise InputError(f"--vary {text}: give one or more values, separated by {';' if ';' in raw else ','}")
    values = []
    for piece in pieces:
        try:
            read = base.with_assignments([f"{name}={piece}"]).to_dict()[name]  # Params checks the value
            value = tuple(read) if name == "field_weights" else read
            if name == "term_weighting":
                get_term_weighting(str(value))  # a name no registry or file holds: refused now, not mid-run
        except (ParamsError, TermWeightingError) as exc:
            message = str(exc).split(": ", 1)[-1] if str(exc).startswith("--param ") else str(exc)
            raise InputError(f"--vary {text}: {message}") from None
        if value not in values:
            values.append(value)
    return name, tuple(values)


def split_judges(texts) -> list[str]:
    """Every `--judge` value split at commas into judge texts; a piece `NAME=VALUE` (an option,
    as in `semantic:gamma=0.5,signals=model`) stays with the judge before it.

    >>> split_judges(["lexical,learned", "semantic:gamma=0.5,signals=model,oracle"])
    ['lexical', 'learned', 'semantic:gamma=0.5,signals=model', 'oracle']
    """
    out: list[str] = []
    for text in texts or ():
        for piece in str(text).split(","):
            piece = piece.strip()
            option = "=" in piece and (":" not in piece or piece.index("=") < piece.index(":"))
            if option and out:
                out[-1] += "," + piece
            elif piece:
                out.append(piece)
    return out


def trace_judge(trace) -> JudgeSpec:
    """The judge the trace was made with, when its name is one the registry reads."""
    try:
        return JudgeSpec.parse(trace.judge.split(" (")[0])
    except (JudgeError, InputError):
        raise InputError(
            f"INPUT: its judge {public(trace.judge)!r} is not one --judge can name; give --judge NAME[,NAME...]"
        ) from None


def read_grid(vary, judges, trace, index) -> Grid:
    """The grid of `--vary` and `--judge` over the trace's parameters, every part checked (an
    InputError naming the option and value); no `--judge`: the trace's own judge."""
    base = trace.params
    axes: dict[str, tuple] = {}
    for text in vary or ():
        name, values = read_axis(text, base)
        if name in axes:
            raise InputError(f"--vary {text}: {name} is varied twice; give its values in one --vary {name}=...")
        axes[name] = values
    specs = [JudgeSpec.parse(t).resolve(index) for t in split_judges(judges)] or [trace_judge(trace)]
    specs = list(dict.fromkeys(specs))
    for spec in specs:
        if spec.kind.needs_gold and not trace.gold:
            raise InputError(f"--judge {spec}: it needs the question's gold, and this trace has none")
    grid = Grid(base, tuple(axes.items()), tuple(specs))
    for v in grid.variants():  # each combination a valid Params (they are checked one by one above)
        try:
            Params.from_dict(v.params.to_dict())
        except ParamsError as exc:
            raise InputError(f"--vary: the variant {v.name}: {exc}") from None
    return grid


def estimate_bytes(grid: Grid, trace, index) -> int:
    """The page's size, estimated before any run from the trace's own page data: bytes per
    round, scaled by each variant's rounds (H + 1) and candidates (B), plus the passage texts
    once and the words of what changed for the pairs the page holds (`switch_pairs`)."""
    data = trajectory_data(trace, index)
    texts = sum(len(json.dumps(p.get("text") or "", ensure_ascii=False).encode()) for p in data["passages"])
    for p in data["passages"]:
        p["text"] = None
    per_round = len(json.dumps(data, ensure_ascii=False).encode()) / max(1, len(trace.rounds))
    base_b = max(1, trace.params.B)
    body = sum(per_round * (v.params.H + 1) * max(1.0, v.params.B / base_b) for v in grid.variants())
    pairs = grid.count * (sum(len(v) - 1 for _, v in grid.axes) + len(grid.judges) - 1 + 1)
    return int(body + texts * 2 + PAIR_BYTES * pairs)


def check_limits(grid: Grid, trace, index, max_variants: int = MAX_VARIANTS, max_mib: float = MAX_MIB) -> int:
    """Refuse (InputError, with the counts) a grid over the limits; returns the estimated bytes."""
    shape = " x ".join([*(str(len(v)) for _, v in grid.axes), f"{len(grid.judges)} judge(s)"])
    if grid.count > max_variants:
        raise InputError(
            f"--vary/--judge: {grid.count} variants ({shape}), over the limit of {max_variants}; "
            f"give fewer values, or raise it with --max-variants {grid.count}"
        )
    estimate = estimate_bytes(grid, trace, index)
    if estimate > max_mib * 2**20:
        raise InputError(
            f"--vary/--judge: {grid.count} variants ({shape}), a page of about {estimate / 2**20:.1f} MiB "
            f"(estimated), over the budget of {max_mib:g} MiB; give fewer values, or raise it with "
            f"--max-mib {math.ceil(estimate / 2**20)}"
        )
    return estimate


@dataclass
class GridRun:
    """The grid's traces ({variant name: Trace}), its Results and the memo they shared."""

    grid: Grid
    variants: list
    traces: dict
    results: Results
    memo: JudgmentMemo
    question_id: str

    def metrics(self, name: str) -> dict:
        """The variant's R@5, R@10, AE@10 (None without gold) and judgments on the question."""
        record = next(r for r in self.results.records if r["config"] == name)
        return {k: plain(record.get(k)) for k in (*METRICS, "judgments")}

    def change(self, a: str, b: str) -> dict:
        """What `Results.changes(a, b)` computes for the question from variant `a` to `b`, as
        plain data, with its paragraph (`QuestionChange.summary`)."""
        traces = {name: {self.question_id: self.traces[name]} for name in (a, b)}
        question = self.results.changes(a, b, METRIC, traces=traces).questions[0]
        return {**question.to_dict(), "summary": question.summary()}


def question_of(trace) -> Question:
    return Question(trace.question_id or "question", trace.question, tuple(trace.gold))


def run_grid(grid: Grid, trace, index, *, memo: JudgmentMemo | None = None, progress: bool = False) -> GridRun:
    """Every variant on the trace's question: one Experiment, one shared judgment memo."""
    variants = grid.variants()
    configs = [Config(v.name, v.params, v.judge) for v in variants]
    memo = memo if memo is not None else JudgmentMemo()
    options = RunOptions(progress=progress, keep_traces=True, memo=memo, label="variants")
    question = question_of(trace)
    experiment = Experiment(index, [question], configs, options)
    results = experiment.run()
    traces = {v.name: experiment.traces[v.name][question.id] for v in variants}
    return GridRun(grid, variants, traces, results, memo, question.id)


def start_variant(run: GridRun, trace) -> int:
    """The variant the page opens on: the trace's own parameters and judge when the grid has
    them, else the first."""
    try:
        own = trace_judge(trace)
    except InputError:
        return 0
    return next((i for i, v in enumerate(run.variants) if v.params == trace.params and v.judge == own), 0)


def switch_pairs(variants, start: int) -> list[tuple[int, int]]:
    """The ordered pairs whose change the page holds: every pair one button apart (the variants
    differ in one setting), and the first variant shown against every other (the base a jump
    across several settings is told against). All pairs would be n(n-1): 306 for 18 variants."""
    out = []
    for (i, a), (j, b) in itertools.permutations(enumerate(variants), 2):
        apart = sum(a.settings[k] != b.settings[k] for k in a.settings)
        if apart == 1 or i == start:
            out.append((i, j))
    return out


def variants_data(run: GridRun, trace, index, source: str | None = None) -> dict:
    """The page's data: the axes, each variant's trajectory data (passage texts kept once, in
    `texts`), and what changed for the pairs of `switch_pairs` (`changes["i>j"]`)."""
    texts: dict[str, str] = {}
    variants = []
    for v in run.variants:
        data = trajectory_data(run.traces[v.name], index, source)
        for p in data["passages"]:
            if p.get("text") is not None:
                texts[str(p["unit_id"])] = p["text"]
                p["text"] = None
        variants.append({"name": v.name, "settings": v.settings, "metrics": run.metrics(v.name), "data": data})
    start = start_variant(run, trace)
    names = [v.name for v in run.variants]
    changes = {f"{i}>{j}": run.change(names[i], names[j]) for i, j in switch_pairs(run.variants, start)}
    axes = [{"name": n, "values": [_text(x) for x in values]} for n, values in run.grid.axes]
    axes.append({"name": JUDGE_AXIS, "values": [public(str(j)) for j in run.grid.judges]})
    return {
        "question": {"id": trace.question_id, "text": trace.question},
        "axes": axes,
        "variants": variants,
        "texts": texts,
        "changes": changes,
        "metric": METRIC,
        "start": start,
        "source": PurePath(str(source)).name if source else None,
        "judgments": {"asked": run.memo.misses, "reused": run.memo.hits},
    }


def variants_page(run: GridRun, trace, index, *, source: str | None = None) -> Page:
    check_index(trace, index)
    head = trace.question_id or "question"
    title = f"SAG2 variants · {head} · {len(run.variants)} variants"
    return Page("variants", title, variants_data(run, trace, index, source), SCRIPTS)


def write_variants_page(
    run: GridRun, trace, index, path, *, force: bool = False, source: str | None = None, record: str = "report --out"
):
    """Write the variants page atomically; an existing file sag2wb did not write is refused
    (OutputError) unless `force`. Returns (path, bytes)."""
    out = check_output(path, force=force, what="page")
    text = render(variants_page(run, trace, index, source=source))
    atomic_write_text(out, text, record=record)
    return out, len(text.encode("utf-8"))
