"""The experiment page's data: the metrics table (means with 95% bootstrap intervals, the
paired difference to the reference with its interval, randomization p with Holm and Bonferroni
corrections, judgments, requests, cost), the per-type breakdown, one row per question (its
values, the change from the reference: win/loss/tie, first differing round, terms and gold
gained or lost, rank moves in words) and, for questions whose traces are at hand, their
trajectories, each in its own lazily read block (`Page.blocks`), passage texts once per page.

Every statistic comes from where `sag2wb compare` and `ablate` compute it: `Results.table`,
`Results.interval`, `Results.by` (workbench/runs/results.py) and `Changes`
(workbench/runs/changes.py); an ablate result's rows are shown as the ablation wrote them.
The paper's published figures come from `paper_figures.json` (package data), which names the
table and row of every figure; the page shows them beside ours where the data set is the paper's.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from workbench.metrics import METRICS, is_missing
from workbench.params import Params
from workbench.report.page import Page, compact, plain
from workbench.report.results_input import ResultFile
from workbench.report.trajectory import check_index, public, trajectory_data
from workbench.runs.changes import TIE, Changes
from workbench.runs.results import REFERENCE_ROW, Results
from workbench.safeio import InputError

SCRIPTS = ("trajectory.js", "experiment.js")
COST_STATS = ("requests", "input_tokens", "output_tokens", "cost")
PAPER_DATASETS = ("2wiki", "hotpotqa", "musique")
# question ids of the paper's data sets as their files give them (auto-detection of --paper)
_ID_SHAPES = {
    "2wiki": re.compile(r"[0-9a-f]{32}"),
    "hotpotqa": re.compile(r"[0-9a-f]{24}"),
    "musique": re.compile(r"\d+hop\S*"),
}


def paper_figures() -> dict:
    """The package-data table of the paper's published figures (source table and row named)."""
    return json.loads(resources.files("workbench.report").joinpath("paper_figures.json").read_text(encoding="utf-8"))


def detect_dataset(question_ids, given: str = "auto") -> str | None:
    """The paper's data set these questions are from ("2wiki", "hotpotqa", "musique"), or None."""
    if given != "auto":
        return None if given == "none" else given
    ids = list(question_ids)
    for name, shape in _ID_SHAPES.items():
        if ids and all(shape.fullmatch(q) for q in ids):
            return name
    return None


def paper_row(result: ResultFile, config: str) -> str | None:
    """The paper's row name of one configuration: an ablate row by its name; an eval by its judge
    (bm25) and its rounds and context, when every other parameter is the paper's default."""
    if result.kind in ("ablate", "experiment"):
        return config
    cfg = _dict(result.data.get("config"))
    params = _dict(cfg.get("params"))
    if str(cfg.get("judge", "")).split(":")[0] == "bm25":
        return "bm25"
    defaults = Params().to_dict()
    other = {k: v for k, v in params.items() if k not in ("H", "use_context")}
    if any(json.dumps(plain(v)) != json.dumps(plain(defaults.get(k))) for k, v in other.items()):
        return None
    if params.get("use_context") is False:
        return "no-context" if params.get("H", 2) == 2 else None
    return f"H={params.get('H', defaults['H'])}"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _paper(results: list[ResultFile], configs: dict, dataset: str | None) -> dict | None:
    if dataset is None:
        return None
    table = paper_figures()
    rows = [r for r in table["rows"] if r["dataset"] == dataset]
    shown = {}
    for config, (result, name) in configs.items():
        row_name = paper_row(result, name)
        match = next((r for r in rows if r["row"] == row_name), None)
        if match is not None:
            shown[config] = match
    return {"dataset": dataset, "source": table["source"], "judge": table["judge"], "rows": shown}


def _records(result: ResultFile, config: str) -> list[dict]:
    """One configuration's records as `Results` takes them (question, type, hops, metrics, judgments)."""
    if result.kind in ("ablate", "experiment"):
        return [{**r, "config": config} for r in result.data["per_question"] if r["config"] == config]
    out = []
    for r in result.data["questions"]:
        row = {"config": config, "question": r["_id"], "type": r.get("type"), "hops": r.get("hops")}
        out.append({**row, **{m: r[m] for m in METRICS}, "judgments": r["judgments"]})
    return out


def _labels(results: list[ResultFile]) -> dict:
    """configuration label -> (its result, its name in that result)."""
    if results[0].kind in ("ablate", "experiment"):
        return {name: (results[0], name) for name in results[0].data["rows"]}
    names = [r.name for r in results]
    if len(set(names)) < len(names):
        names = [f"{tag} ({n})" for tag, n in zip("AB", names)]
    return {n: (r, n) for n, r in zip(names, results)}


def _usage(result: ResultFile) -> dict:
    stats = _dict(result.data.get("stats"))
    return {
        k: stats[k] for k in COST_STATS if isinstance(stats.get(k), (int, float)) and not isinstance(stats[k], bool)
    }


def _metrics(results: list[ResultFile], configs: dict, full: Results, reference: str, metric: str) -> dict:
    """The metrics table: one row per configuration."""
    table = full.table(reference if len(configs) > 1 else None, metric)
    rows = []
    for config, (result, name) in configs.items():
        row = {"config": config, "questions": int(table.loc[config, "questions"])}
        for m in METRICS:
            mean, low, high = full.interval(config, m)
            row[m] = round(mean, 2)
            row[f"{m} interval"] = [round(low, 2), round(high, 2)]
        row["judgments"] = int(table.loc[config, "judgments"])
        row.update(_usage(result) if result.kind == "eval" else {})
        if len(configs) > 1:
            for column, key in (("diff", "difference"), ("ci", "difference interval")):
                value = table.loc[config, f"{column}_{metric}_vs_{reference}"]
                row[key] = list(value) if isinstance(value, tuple) else value
            for p in ("p_randomization", "p_holm", "p_bonferroni"):
                row[p] = table.loc[config, f"{p}_{metric}_vs_{reference}"]
        if result.kind == "ablate":  # as the ablation wrote them: R@10's p-values
            written = result.data["rows"][name]
            row.update({k: written[k] for k in ("p_randomization", "p_holm", "p_bonferroni") if k in written})
        rows.append(row)
    return {"reference": reference if len(configs) > 1 else None, "metric": metric, "rows": plain(rows)}


def _by(full: Results, column: str, metric: str) -> dict | None:
    table = full.by(column, metric)
    if not len(table):
        return None
    rows = [{column: str(k), **{c: row[c] for c in table.columns}} for k, row in table.iterrows()]
    return {"column": column, "configs": [c for c in table.columns if c != "questions"], "rows": plain(rows)}


def _outcome(delta) -> str:
    return "no value" if delta is None else "win" if delta > TIE else "loss" if delta < -TIE else "tie"


def _trajectories(results, configs, shared, index, show_text) -> tuple[dict, list, dict]:
    """({(config, question): block name}, [(name, compacted data)], {unit_id: text})."""
    names: dict = {}
    blocks: list = []
    texts: dict = {}
    for config, (result, _) in configs.items():
        for q in shared:
            trace = result.trace(config, q)
            if trace is None:
                continue
            if index is not None:
                check_index(trace, index)
            data = trajectory_data(trace, index, None)
            for p in data["passages"]:
                if p["text"] is not None and show_text:
                    texts[str(p["unit_id"])] = p["text"]
                p["text"] = None
            name = f"t{len(blocks)}"
            names[(config, q)] = name
            blocks.append((name, {"kind": "trajectory", **compact(data)}))
    return names, blocks, texts


def experiment_data(results: list[ResultFile], index=None, *, metric: str = "R@10", paper: str = "auto"):
    """(the page's data, its trajectory blocks) for one result, a result and the one it is
    compared with (`--compare`: the first is the reference), or an ablation."""
    if metric not in METRICS:
        raise InputError(f"--metric {metric!r}: one of {', '.join(METRICS)}")
    configs = _labels(results)
    names = list(configs)
    reference = REFERENCE_ROW if results[0].kind == "ablate" and REFERENCE_ROW in names else names[0]
    records = [r for c, (res, n) in configs.items() for r in _records(res, c)]
    ids = [set(r["question"] for r in records if r["config"] == c) for c in names]
    shared = [q for q in dict.fromkeys(r["question"] for r in records) if all(q in s for s in ids)]
    with_values = [
        q for q in shared if all(not is_missing(r[m]) for r in records if r["question"] == q for m in METRICS)
    ]
    if not with_values:
        raise InputError(
            f"{', '.join(r.name for r in results)}: no question has a value in every result (no gold, or no "
            "question in common); nothing to tabulate"
        )
    full = Results([r for r in records if r["question"] in set(with_values)], with_values)
    changes = None
    if results[0].kind == "experiment" and len(names) == 2:  # Results.changes, with the traces given
        changes = results[0].results.changes(names[0], names[1], metric, results[0].traces or None)
    if len(results) == 2:
        if any(r.kind != "eval" for r in results):
            raise InputError(
                "--compare: both results must be `sag2wb eval` results (an ablation compares its own rows)"
            )
        a, b = results[0].side, results[1].side
        assert a is not None and b is not None  # an eval result always has its side
        changes = Changes(a, b, metric)
    rows = []
    by_id = {c.question: c for c in changes.questions} if changes else {}
    values = {(r["config"], r["question"]): r for r in records}
    trace_names, blocks, texts = _trajectories(results, configs, shared, index, index is not None)
    for q in shared:
        base = values[(names[0], q)]
        trace = next((t for c, (res, _) in configs.items() if (t := res.trace(c, q)) is not None), None)
        row = {
            "question": q,
            "text": trace.question if trace is not None else None,
            "type": base.get("type"),
            "hops": base.get("hops"),
            "values": {c: values[(c, q)][metric] for c in names},
            "judgments": {c: values[(c, q)]["judgments"] for c in names},
            "open": {c: trace_names[(c, q)] for c in names if (c, q) in trace_names},
        }
        ref = row["values"][reference]
        row["delta"] = {
            c: None if is_missing(v) or is_missing(ref) else round(v - ref, 4)
            for c, v in row["values"].items()
            if c != reference
        }
        row["outcome"] = {c: _outcome(d) for c, d in row["delta"].items()}
        change = by_id.get(q)
        if change is not None:
            row["change"] = {
                "first_round": change.first_round,
                "identical": change.identical,
                "terms_gained": change.terms_gained,
                "terms_lost": change.terms_lost,
                "seeds_gained": change.seeds_gained,
                "seeds_lost": change.seeds_lost,
                "gold_gained": change.gold_gained,
                "gold_lost": change.gold_lost,
                "moves": change.moves,
            }
        rows.append(row)
    first = results[0]
    dataset = detect_dataset(shared, paper)
    if dataset is not None and dataset not in PAPER_DATASETS:
        raise InputError(f"--paper {dataset!r}: one of auto, none, {', '.join(PAPER_DATASETS)}")
    data = {
        "inputs": [_describe(r) for r in results],
        "configs": names,
        "reference": reference,
        "metric": metric,
        "metrics": _metrics(results, configs, full, reference, metric),
        "significance": _significance(first, full, reference, metric, len(names)),
        "by_type": _by(full, "type", metric),
        "by_hops": _by(full, "hops", metric),
        "questions": plain(rows),
        "counts": changes.counts() if changes else None,
        "scope": _scope(changes, shared, with_values, results),
        "needs_traces": changes.needs_traces if changes else [],
        "trajectories": len(blocks),
        "without_trajectories": _why_no_trajectories(results, blocks),
        "paper": _paper(results, configs, dataset),
        "texts": texts,
        "with_text": index is not None,
    }
    return data, blocks


def _describe(result: ResultFile) -> dict:
    data = result.data
    if result.kind in ("ablate", "experiment"):
        return {
            "name": result.name,
            "kind": result.kind,
            "judge": public(data.get("judge", "")),
            "questions": data.get("questions"),
            "traces": None,
        }
    cfg = _dict(data.get("config"))
    params = _dict(cfg.get("params"))
    return {
        "name": result.name,
        "kind": "eval",
        "judge": public(cfg.get("judge", "")),
        "params": {k: public(v) if isinstance(v, str) else v for k, v in params.items()},
        "questions": len(data["questions"]),
        "traces": result.trace_dir,
        "traces_found": len(result.traces),
    }


def _significance(first: ResultFile, full: Results, reference: str, metric: str, n: int) -> str:
    if n < 2:
        return "intervals: 95% percentile bootstrap of the mean over questions (2,000 resamples, seed 20261015)"
    sig = full.significance(reference, metric)
    return (
        f"difference to {reference} on {metric}: paired 95% percentile bootstrap ({sig['bootstrap']['resamples']:,} "
        f"question resamples, seed {sig['bootstrap']['seed']}); p: two-sided paired randomization test "
        f"({sig['randomization']['resamples']:,} sign flips, exact up to "
        f"{sig['randomization']['exact_up_to_questions']} questions), Holm and Bonferroni over the "
        f"{sig['comparisons']} comparison(s) with {reference}"
    )


def _scope(changes, shared, with_values, results) -> str | None:
    if changes is not None and changes.scope:
        return changes.scope
    total = len({q for r in results for q in r.question_ids})
    if len(with_values) < total:
        return f"figures over {len(with_values)} of {total} questions (the others lack a value or a result)"
    return None


def _why_no_trajectories(results, blocks) -> str | None:
    if blocks:
        return None
    if results[0].kind == "ablate":
        return "an ablation keeps no traces, so its questions open no trajectory"
    if results[0].kind == "experiment":
        return "no traces were given (Results.to_html(path, traces=experiment.traces))"
    return "the results kept no traces (`sag2wb eval --trace-dir DIR`), so the questions open no trajectory"


def experiment_page(results: list[ResultFile], index=None, *, metric="R@10", paper="auto", title=None) -> Page:
    """The experiment page of `results` (render it with `workbench.report.page.render`)."""
    data, blocks = experiment_data(results, index, metric=metric, paper=paper)
    head = " vs ".join(r.name for r in reversed(results)) if len(results) > 1 else results[0].name
    return Page("experiment", title or f"SAG2 experiment · {head}", data, SCRIPTS, tuple(blocks))
