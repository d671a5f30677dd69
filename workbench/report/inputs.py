"""What `sag2wb report` reads: a kept trace (`eval --trace-dir`, the dashboard's trace JSON
export, `Trace.to_json`), checked so that every bad file is one named line, never a traceback.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> _ = open("t.json", "w").write(Run(index, questions[0], judge=LexicalJudge(index)).run().to_json())
>>> read_trace("t.json").question_id
'docs-01'
>>> _ = open("x.json", "w").write('{"rows": []}')
>>> read_trace("x.json")
Traceback (most recent call last):
...
workbench.safeio.InputError: x.json: not a trace (no 'question', 'rounds', 'units'); give a trace file: ...
"""

from __future__ import annotations

from pathlib import Path

from workbench.params import ParamsError
from workbench.runs.resume import RESULT_MARKER
from workbench.safeio import InputError, read_json
from workbench.trace import Trace

TRACE_KEYS = ("question", "params", "judge", "rounds", "final_ranking", "units")
WHERE = "an `eval --trace-dir` file, the dashboard's trace JSON export, or Trace.to_json()"


def read_trace(path, option: str = "INPUT") -> Trace:
    """The trace in the file `path`, or an InputError naming the file and what it is instead."""
    shown = str(path)
    if not Path(path).exists():
        raise InputError(f"{option} {shown}: no such file; give a trace file ({WHERE})")
    if Path(path).is_dir():
        raise InputError(f"{option} {shown} is a folder; give one trace file of it ({WHERE})")
    data = read_json(path, shown)  # bad JSON, not UTF-8, too deep: an InputError already
    if isinstance(data, dict) and RESULT_MARKER in data:
        kind = data[RESULT_MARKER].get("kind") if isinstance(data[RESULT_MARKER], dict) else None
        raise InputError(
            f"{shown}: an `sag2wb {kind or 'eval'}` result, not a trace; `sag2wb report` makes its experiment "
            "page (workbench.report.read_result reads it)"
        )
    if not isinstance(data, dict):
        raise InputError(f"{shown}: not a trace (a JSON {type(data).__name__}); give a trace file: {WHERE}")
    if not any(k in data for k in TRACE_KEYS):
        raise InputError(f"{shown}: not a trace (no 'question', 'rounds', 'units'); give a trace file: {WHERE}")
    missing = [k for k in TRACE_KEYS if k not in data]
    if missing:
        raise InputError(
            f"{shown}: a trace of another format version (no {', '.join(map(repr, missing))}); "
            "make it again with this sag2wb (eval --trace-dir)"
        )
    try:
        trace = Trace.from_dict(data)
        trace.frames()  # every unit named, every field of the right kind: a damaged trace fails here
    except ParamsError as exc:
        raise InputError(
            f"{shown}: a trace of another format version ({exc}); make it again with this sag2wb (eval --trace-dir)"
        ) from None
    except TypeError as exc:
        if "argument" not in str(exc):  # a value of the wrong kind, not a field this version does not know
            raise InputError(f"{shown}: a damaged trace (TypeError: {str(exc)[:160]})") from None
        raise InputError(
            f"{shown}: a trace of another format version ({str(exc)[:160]}); make it again with this sag2wb "
            "(eval --trace-dir)"
        ) from None
    except (ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        raise InputError(f"{shown}: a damaged trace ({type(exc).__name__}: {str(exc)[:160]})") from None
    if not trace.rounds:
        raise InputError(f"{shown}: a trace with no rounds; nothing to show")
    return trace
