"""What the experiment page reads: an `eval` or `ablate` result file (out.json), and for an eval
result its recorded trace folder, found as `sag2wb compare` finds it (`config.trace_dir`,
relative to the result file: workbench/runs/changes.py `side_from_file`). Every bad input is
one named line (exit 2), never a traceback.

Traces (`trajectories`): "auto" reads the recorded folder when the result names one (a named
folder that is gone is an error: the page would silently lack what it was made with); "all"
also requires a trace for every question (for a page whose every question opens); "none"
reads no trace (the page then has no trajectories, and the per-question changes are those the
records give).

>>> _ = open("trace-like.json", "w").write('{"sag2wb": {"kind": "fit-judge"}}')
>>> read_result("trace-like.json")
Traceback (most recent call last):
...
workbench.safeio.InputError: INPUT trace-like.json: not an `sag2wb eval` or `sag2wb ablate` result file (a 'fit-judge' \
result); give one of those out.json files, or a trace file
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from workbench.metrics import METRICS
from workbench.report.inputs import read_trace
from workbench.runs import eval_records
from workbench.runs.changes import Side, side_from_file
from workbench.runs.eval_records import ChangesError
from workbench.runs.resume import RESULT_MARKER
from workbench.safeio import InputError, read_json

TRAJECTORIES = ("auto", "all", "none")
TRACES_HINT = "run `sag2wb eval ... --trace-dir DIR` to keep them"


@dataclass
class ResultFile:
    """One result: its file name (never the path), kind ("eval" or "ablate"), parsed JSON, and
    for an eval its records and traces as `sag2wb compare` reads them (`side`)."""

    name: str
    kind: str
    data: dict
    side: Side | None = None
    traces: dict = field(default_factory=dict)  # question id -> Trace ("experiment": config -> that)
    trace_dir: str | None = None  # the recorded folder's name, as the result records it
    results: Any = None  # "experiment": the in-memory `Results` (Results.to_html)

    def trace(self, config: str, question: str):
        """The trace of one question of one configuration, or None."""
        if self.kind == "experiment":
            return (self.traces.get(config) or {}).get(question)
        return self.traces.get(question)

    @property
    def question_ids(self) -> list[str]:
        if self.side is not None:
            return list(self.side.runs)
        return list(dict.fromkeys(r["question"] for r in self.data["per_question"]))


def from_results(results, traces=None, judge: str = "") -> ResultFile:
    """A `Results` (an experiment in memory) as the experiment page reads a result: its
    configurations are the rows, `traces` ({config: {question id: Trace}}, e.g.
    `experiment.traces`) the trajectories its questions open."""
    if not results.records:
        raise InputError("Results: no record (no question finished); nothing to show")
    rows: dict = {name: {} for name in results.names}
    data = {"rows": rows, "per_question": list(results.records), "judge": judge, "questions": len(results.question_ids)}
    return ResultFile("Results", "experiment", data, None, dict(traces or {}), None, results)


def _check_ablate(data: dict, label: str) -> None:
    rows, per_question = data.get("rows"), data.get("per_question")
    if not isinstance(rows, dict) or not rows:
        raise InputError(f"{label}: an ablate result without rows; make it again with `sag2wb ablate`")
    if not isinstance(per_question, list):
        raise InputError(
            f"{label}: an ablate result without its per-question records (an older sag2wb?); "
            "make it again with `sag2wb ablate`"
        )
    for n, r in enumerate(per_question, 1):
        ok = isinstance(r, dict) and isinstance(r.get("config"), str) and isinstance(r.get("question"), str)
        for m in METRICS:
            v = r.get(m) if isinstance(r, dict) else None
            ok = ok and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)))
        if not ok:
            raise InputError(
                f"{label}, per_question record {n}: not as `sag2wb ablate` writes it (config, question, "
                f"{', '.join(METRICS)}); make it again with `sag2wb ablate`"
            )
    for name, row in rows.items():
        if not isinstance(row, dict) or not all(isinstance(row.get(m), (int, float)) for m in METRICS):
            raise InputError(f"{label}: its row {name!r} is not as `sag2wb ablate` writes it; make it again")


def _sniff(path):
    """The parsed JSON of `path` when it is a readable JSON file, else None (the reader names why)."""
    try:
        if not Path(path).is_file():
            return None
        return read_json(path, str(path))
    except InputError:
        return None


def is_result_file(path) -> bool:
    """Whether `path` holds a sag2wb result (an out.json marked `"sag2wb": {...}`), not a trace."""
    data = _sniff(path)
    return isinstance(data, dict) and RESULT_MARKER in data


def recorded_traces(path) -> list[Path]:
    """The trace files in the folder an eval result at `path` records (none when there is none)."""
    data = _sniff(path) if path is not None else None
    config = data.get("config") if isinstance(data, dict) and RESULT_MARKER in data else None
    folder = config.get("trace_dir") if isinstance(config, dict) else None
    if not isinstance(folder, str) or not folder or not (Path(path).parent / folder).is_dir():
        return []
    return sorted((Path(path).parent / folder).glob("*.json"))


def _name_bad_trace(message: str) -> None:
    """When compare's error is about one trace file, read that file as `sag2wb report` reads a
    trace: its error says "another format version" or "damaged", naming the file."""
    head = message.split(": ", 1)[0]
    if head.endswith(".json") and Path(head).is_file():
        read_trace(head, "trace")


def read_result(path, option: str = "INPUT", trajectories: str = "auto") -> ResultFile:
    """The result file `path` (an eval or ablate out.json) and, for an eval, its traces."""
    if trajectories not in TRAJECTORIES:
        raise InputError(f"--trajectories {trajectories!r}: one of {', '.join(TRAJECTORIES)}")
    label = f"{option} {PurePath(str(path)).name}"
    try:
        data = eval_records.load(path)
    except ChangesError as exc:
        raise InputError(f"{option} {exc}".replace("`sag2wb eval`", "`sag2wb eval` or `sag2wb ablate`")) from None
    marker = data.get(RESULT_MARKER) if isinstance(data, dict) else None
    kind = marker.get("kind") if isinstance(marker, dict) else None
    if kind not in ("eval", "ablate"):
        raise InputError(
            f"{label}: not an `sag2wb eval` or `sag2wb ablate` result file"
            + (f" (a {kind!r} result)" if isinstance(kind, str) else "")
            + "; give one of those out.json files, or a trace file"
        )
    name = PurePath(str(path)).name
    if kind == "ablate":
        _check_ablate(data, label)
        if not data["per_question"]:
            raise InputError(f"{label}: an empty result (no question finished); nothing to show")
        if trajectories == "all":
            raise InputError(
                f"{label}: an ablate result keeps no traces, so its questions cannot open a trajectory; "
                "leave out --trajectories all, or make the page of `sag2wb eval --trace-dir` results"
            )
        return ResultFile(name, kind, data)
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    recorded = config.get("trace_dir") if isinstance(config.get("trace_dir"), str) else None
    try:
        if trajectories == "none" or not recorded:
            side = side_from_file(data, None, label)  # records only: no trace folder is looked for
        else:
            folder = Path(path).parent / recorded
            if not folder.is_dir():
                raise InputError(
                    f"{label}: its trace folder {PurePath(recorded).name} (the eval's --trace-dir) is missing; "
                    "put it back beside the result, or pass --trajectories none for a page without trajectories"
                )
            side = side_from_file(path, None, label)
    except ChangesError as exc:
        _name_bad_trace(str(exc))  # a trace of another format version is named as such
        raise InputError(str(exc)) from None
    if not side.runs:
        raise InputError(f"{label}: an empty result (no question finished); nothing to show")
    traces = {q: r.trace for q, r in side.runs.items() if r.trace is not None}
    if trajectories == "all":
        if not recorded:
            raise InputError(f"{label}: the eval kept no traces, and --trajectories all needs them; {TRACES_HINT}")
        if side.missing_traces:
            ids = side.missing_traces
            raise InputError(
                f"{label}: no trace for {len(ids)} of {len(side.runs)} questions ({', '.join(ids[:5])}"
                f"{', …' if len(ids) > 5 else ''}) in its trace folder; --trajectories all needs every one"
            )
    return ResultFile(name, kind, data, side, traces, PurePath(recorded).name if recorded else None)
