"""The files a run leaves: resume files (one JSON line per finished record, keyed by a
fingerprint of everything the record depends on), trace file names, and the marker that
says a result file is ours (safe to overwrite).

>>> a = record_fingerprint(Question("q1", "Who?", ("A",)), Params(), "lexical-v1", "ix1")
>>> a == record_fingerprint(Question("q1", "Who? ", ("A",)), Params(), "lexical-v1", "ix1")
False
>>> a == record_fingerprint(Question("q2", "Who?", ("A",)), Params(), "lexical-v1", "ix1")
False
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

from workbench import safeio
from workbench.index.units import Question
from workbench.params import Params
from workbench.terms import variant_fingerprint

RESULT_MARKER = "sag2wb"  # the field that marks a JSON file as a result we wrote (safe to overwrite)
RESULT_VERSION = 1


def record_fingerprint(question: Question, params: Params, judge_key: str, index_identity, extra=None) -> str:
    """The key of one resumable record: a hash of everything its result depends on or says —
    the question's id, text, gold, type and hops (a renamed question, or one whose type changed,
    is recomputed, so its record never carries the old id or type), the parameters (with the
    term-weighting variant's code), the judge key and the index identity (`extra`: anything
    else, e.g. an experiment configuration's key). A record is reused only under an equal
    fingerprint."""
    body = {
        "id": question.id,
        "type": question.type,
        "hops": question.hops,
        "question": question.question,
        "gold": list(question.gold),
        "params": params.to_dict(),
        "variant": variant_fingerprint(params.term_weighting),
        "judge": judge_key,
        "index": index_identity,
        "extra": extra,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def load_resume(path, key: str = "fingerprint") -> dict[str, dict]:
    """{fingerprint: line} of a resume file; lines cut by a crash or of an older format are skipped."""
    done: dict[str, dict] = {}
    path = Path(path)
    if not path.exists():
        return done
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
                done[rec[key]] = rec
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return done


class ResumeFile:
    """A resume file: `load()` its lines by fingerprint, `append(...)` one line per finished
    record (fsynced: a crash loses at most that line). `make_folder`: create the folder first."""

    def __init__(self, path, *, make_folder: bool = False):
        self.path, self.make_folder = Path(path), make_folder

    def load(self) -> dict[str, dict]:
        return load_resume(self.path)

    def append(self, fingerprint: str, head: dict, record: dict) -> None:
        """One line: {"fingerprint", **head (who the record is of), "record"}."""
        if self.make_folder:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"fingerprint": fingerprint, **head, "record": record}, ensure_ascii=False)
        with naming_path(self.path):
            safeio.append_line(self.path, line)


@contextlib.contextmanager
def naming_path(path):
    """Give an OSError raised inside the path it concerns (a write's ENOSPC carries none), so the
    CLI's one-line message can name it."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def trace_file_name(question_id: str) -> str:
    """A readable slug of the id plus a short hash of the id itself, so ids that slug alike
    (`q/1` and `q_1`) or share a long prefix never overwrite each other's trace.

    >>> trace_file_name("q/1"), trace_file_name("q_1")
    ('q_1-dd4810e7f3.json', 'q_1-688eed70a2.json')
    """
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in question_id)[:80].strip(".") or "q"
    return f"{slug}-{hashlib.sha256(question_id.encode('utf-8')).hexdigest()[:10]}.json"


def is_our_result(path, kind: str) -> bool:
    """True when `path` is a JSON result whose marker field names `kind` ("eval", "ablate"). What
    decides that sag2wb wrote it is provenance (`safeio.ours`: its folder's record holds its size
    and sha256); this test only tells one kind of our results from another, so an eval never
    replaces an ablation result."""
    try:
        if Path(path).stat().st_size > 2**30:
            return False
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    marker = data.get(RESULT_MARKER) if isinstance(data, dict) else None
    return isinstance(marker, dict) and marker.get("kind") == kind
