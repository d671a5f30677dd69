"""Reading an eval result file for `sag2wb compare`: every field compare reads is checked as
`sag2wb eval --out` writes it, and anything else is refused with one line naming the file, the
record and the field (`ChangesError`, exit 2) — never a traceback, never a silent default (a
missing R@10 read as "no gold", a repeated question id that stands for one of its records).

A record: `_id` (a string, unique in the file), `R@5`, `R@10`, `AE@10` (percentages from 0 to
100, or null for a question without gold), `judgments` (a count), `ranking` (titles), and
optionally `gold` (titles: metrics are null exactly when it is empty) and `rounds` (objects
with a `round` number and lists of titles or terms). `failures`: objects naming a question.

>>> records({"questions": [{"_id": "q1", "R@5": 50, "R@10": "50", "AE@10": 0, "judgments": 3,
...          "ranking": []}]}, "a.json")
Traceback (most recent call last):
...
workbench.runs.eval_records.ChangesError: a.json, record 1 ('q1'): R@10 is '50', not a number from 0 to 100 \
or null (no gold); compare files as `sag2wb eval --out` writes them
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from workbench import safeio
from workbench.metrics import METRICS
from workbench.runs.records import ExperimentError
from workbench.runs.resume import RESULT_MARKER


class ChangesError(ExperimentError):
    """Two runs that cannot be compared (a file that is not an eval result, traces that do
    not belong to it, no question in common), with the reason named."""


AS_WRITTEN = "compare files as `sag2wb eval --out` writes them"
ROUND_LISTS = ("terms", "seeds", "candidates", "pool")


def load(path) -> Any:
    """The parsed JSON of an eval result file, or a `ChangesError` naming what is wrong with it."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ChangesError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ChangesError(f"{path}: is a folder, not an eval result file") from None
    except OSError as exc:
        raise ChangesError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ChangesError(f"{path}: not UTF-8 text, so not an eval result file") from None
    if not text.strip():
        raise ChangesError(f"{path}: empty file; expected the --out file of `sag2wb eval`")
    try:
        return safeio.parse_json(text, str(path))
    except safeio.InputError as exc:
        raise ChangesError(
            f"{exc}; expected the --out file of `sag2wb eval`".replace("; give a file as sag2wb writes it", "")
        ) from None


def _shown(value) -> str:
    """A value as the JSON file writes it (null, true, NaN), shortened; containers by kind."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity (or a number too large, such as 1e400)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _titles(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _check_round(r, where: str, n: int) -> None:
    at = f"{where}: rounds[{n}]"
    if not isinstance(r, dict):
        raise ChangesError(f"{at} is {_shown(r)}, not an object; {AS_WRITTEN}")
    number = r.get("round")
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise ChangesError(f"{at}: 'round' is {_shown(number)}, not a round number (0, 1, ...); {AS_WRITTEN}")
    for key in ROUND_LISTS:
        if r.get(key) is not None and not _titles(r[key]):
            raise ChangesError(f"{at}: {key!r} is {_shown(r[key])}, not a list of strings; {AS_WRITTEN}")


def check_record(r, label: str, n: int) -> None:
    """Refuse record `n` (1-based) of `label` unless it is as eval writes it (the module's doc)."""
    if not isinstance(r, dict):
        raise ChangesError(f"{label}, record {n}: {_shown(r)}, not an object; {AS_WRITTEN}")
    qid = r.get("_id")
    if not isinstance(qid, str) or not qid:
        raise ChangesError(f"{label}, record {n}: '_id' is {_shown(qid)}, not a question id (a string); {AS_WRITTEN}")
    where = f"{label}, record {n} ({qid!r})"
    gold = r.get("gold")
    if gold is not None and not _titles(gold):
        raise ChangesError(f"{where}: 'gold' is {_shown(gold)}, not a list of titles; {AS_WRITTEN}")
    for m in METRICS:
        if m not in r:
            raise ChangesError(f"{where}: no {m} (null when the question has no gold); {AS_WRITTEN}")
        v = r[m]
        if v is None:
            if gold:
                raise ChangesError(f"{where}: {m} is null but the question has gold {gold[:3]}; {AS_WRITTEN}")
            continue
        if not _number(v) or not math.isfinite(v) or not 0 <= v <= 100:
            raise ChangesError(
                f"{where}: {m} is {_shown(v)}, not a number from 0 to 100 or null (no gold); {AS_WRITTEN}"
            )
        if gold is not None and not gold:
            raise ChangesError(f"{where}: {m} is {v} but the question has no gold (it must be null); {AS_WRITTEN}")
    judgments = r.get("judgments")
    if not isinstance(judgments, int) or isinstance(judgments, bool) or judgments < 0:
        raise ChangesError(f"{where}: 'judgments' is {_shown(judgments)}, not a count (0 or more); {AS_WRITTEN}")
    if not _titles(r.get("ranking")):
        raise ChangesError(f"{where}: 'ranking' is {_shown(r.get('ranking'))}, not a list of titles; {AS_WRITTEN}")
    rounds = r.get("rounds")
    if rounds is not None:
        if not isinstance(rounds, list):
            raise ChangesError(f"{where}: 'rounds' is {_shown(rounds)}, not a list of rounds; {AS_WRITTEN}")
        for i, one in enumerate(rounds):
            _check_round(one, where, i)


def records(data, label: str) -> tuple[list, dict]:
    """(the checked records, {question id: error} of the failures) of an eval result's JSON."""
    if not isinstance(data, dict):
        raise ChangesError(
            f"{label}: {_shown(data)} at the top, not an eval result (a JSON object with a 'questions' list)"
        )
    if RESULT_MARKER in data:
        marker = data[RESULT_MARKER]
        kind = marker.get("kind") if isinstance(marker, dict) else None
        if not isinstance(kind, str):
            raise ChangesError(f"{label}: its {RESULT_MARKER!r} field is {_shown(marker)}, not a sag2wb result marker")
        if kind != "eval":
            raise ChangesError(
                f"{label}: a sag2wb {kind!r} result, which holds no per-question records; "
                "compare two `sag2wb eval` files"
            )
    recs = data.get("questions")
    if not isinstance(recs, list):
        raise ChangesError(f"{label}: not an eval result: its 'questions' is {_shown(recs)}, not a list of records")
    seen: dict[str, int] = {}
    for n, r in enumerate(recs, 1):
        check_record(r, label, n)
        if r["_id"] in seen:
            raise ChangesError(
                f"{label}: question {r['_id']!r} appears twice (records {seen[r['_id']]} and {n}): "
                "which one to compare is not known; give a file as one `sag2wb eval` run wrote it"
            )
        seen[r["_id"]] = n
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise ChangesError(f"{label}: its 'config' is {_shown(config)}, not an object; {AS_WRITTEN}")
    trace_dir = (config or {}).get("trace_dir")
    if trace_dir is not None and not isinstance(trace_dir, str):
        raise ChangesError(f"{label}: its config's 'trace_dir' is {_shown(trace_dir)}, not a folder name; {AS_WRITTEN}")
    failures = data.get("failures")
    if failures is None:
        failures = []
    if not isinstance(failures, list):
        raise ChangesError(f"{label}: its 'failures' is {_shown(failures)}, not a list; {AS_WRITTEN}")
    fails: dict[str, str] = {}
    for n, f in enumerate(failures, 1):
        qid = f.get("question") if isinstance(f, dict) else None
        error = f.get("error", "failed") if isinstance(f, dict) else None
        if not isinstance(qid, str) or not isinstance(error, str):
            raise ChangesError(
                f"{label}, failure {n}: {_shown(f)} does not name a question and its error (strings); {AS_WRITTEN}"
            )
        if qid in seen:
            raise ChangesError(f"{label}: question {qid!r} is both a record and a failure; {AS_WRITTEN}")
        fails[qid] = error
    return recs, fails
