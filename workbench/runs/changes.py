"""What a variant changed, question by question: the metric change (win, loss or tie), the
first round where the two trajectories part, the seeds and selected terms gained and lost,
the gold passages gained and lost in the top k, rank moves in words, and aggregates (the
terms most often gained or lost, and which changes went with wins).

Two sources: two `sag2wb eval` result files (`compare(A, B)`, `sag2wb compare A.json B.json`;
their records hold each round's terms, seeds and candidates), or two configurations of one
experiment (`Results.changes(base, variant, traces=experiment.traces)`). Which term brought a
passage in, and the terms as the seed text writes them, are only in the traces (`eval
--trace-dir`); without them those parts are named in `needs_traces`, never left silently empty.
"win" always means the variant (B) scored higher than the base (A) on the metric.

>>> a = {"sag2wb": {"kind": "eval"}, "questions": [
...     {"_id": "q1", "R@5": 50.0, "R@10": 50.0, "AE@10": 0.0, "judgments": 9, "gold": ["X", "Y"],
...      "ranking": ["X", "Z", "Y"],
...      "rounds": [{"round": 0, "terms": [], "seeds": [], "candidates": ["X", "Z"]},
...                 {"round": 1, "terms": ["zed"], "seeds": ["X"], "candidates": ["Y"]}]}]}
>>> b = {"sag2wb": {"kind": "eval"}, "questions": [
...     {"_id": "q1", "R@5": 100.0, "R@10": 100.0, "AE@10": 100.0, "judgments": 9, "gold": ["X", "Y"],
...      "ranking": ["Y", "X"],
...      "rounds": [{"round": 0, "terms": [], "seeds": [], "candidates": ["X", "Z"]},
...                 {"round": 1, "terms": ["why"], "seeds": ["X"], "candidates": ["Y"]}]}]}
>>> changes = compare(a, b)
>>> changes.counts()
{'wins': 1, 'losses': 0, 'ties': 0}
>>> q = changes.questions[0]
>>> q.first_round, q.terms_gained, q.terms_lost, q.moves
(1, ['why'], ['zed'], ['X fell 1 → 2', 'Y rose 3 → 1'])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from workbench import text as textlib
from workbench.metrics import METRICS, is_missing
from workbench.runs import eval_records
from workbench.runs.eval_records import ChangesError
from workbench.runs.resume import trace_file_name
from workbench.trace import Trace

COUNTED = ("terms_gained", "terms_lost", "gold_gained", "gold_lost")  # frame(): their lengths
TIE = 1e-9  # metric values are percentages rounded by nobody: equal within this are a tie
NEEDS_TRACES_ENTRY = "which term brought each passage in (the 'entered through' part of a rank move)"
NEEDS_TRACES_SURFACE = (
    "terms as the seed text writes them (shown instead as a title of that round's passages writes them, "
    "else in the token form)"
)
NEEDS_TRACES_ROUNDS = "first differing round, seeds and terms gained and lost"
NEEDS_TRACES_GOLD = "gold passages gained and lost (the records hold no gold)"


@dataclass
class QuestionRun:
    """One question of one side: what its record (and trace, when given) says."""

    id: str
    values: dict  # metric -> float | None
    judgments: int
    ranking: list  # unique documents of the final ranking, best first
    gold: tuple | None = None  # None: not known (an experiment row without its trace)
    rounds: list | None = None  # [{"round", "terms", "seeds", "candidates", ...}] (titles, token terms)
    trace: Trace | None = None


@dataclass
class Side:
    """One run: a name, its questions, its failures (question id -> error)."""

    name: str
    runs: dict
    failures: dict = field(default_factory=dict)
    missing_traces: list = field(default_factory=list)  # trace folder given, no trace of these


@dataclass
class QuestionChange:
    question: str
    metric: str
    base: float | None
    variant: float | None
    delta: float | None
    outcome: str  # "win", "loss", "tie", or "no value" (no gold: left out of the counts)
    first_round: int | None  # first round whose terms, seeds or candidates differ; None: the same
    identical: bool | None  # same rounds and the same final ranking (None: rounds unknown)
    seeds_gained: list = field(default_factory=list)
    seeds_lost: list = field(default_factory=list)
    terms_gained: list = field(default_factory=list)  # shown forms, in order of first selection
    terms_lost: list = field(default_factory=list)
    gold_gained: list = field(default_factory=list)  # gold documents in B's top k and not A's
    gold_lost: list = field(default_factory=list)
    moves: list = field(default_factory=list)  # sentences
    # gold documents some round's candidates held in B and in no round of A (and back); None: no traces
    gold_reached: list | None = None
    gold_unreached: list | None = None
    judgments: tuple = (0, 0)

    @property
    def terms_changed(self) -> bool:
        return bool(self.terms_gained or self.terms_lost)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["judgments"] = list(self.judgments)
        return d

    def summary(self) -> str:
        """One paragraph: the change, where the trajectories part, what was gained and lost."""
        how = f"{self.delta:+.2f}, {self.outcome}" if self.delta is not None else "no value: no gold"
        lines = [f"{self.question}: {self.metric} {_num(self.base)} → {_num(self.variant)} ({how})"]
        if self.identical:
            lines.append("  identical trajectories")
        elif self.first_round is not None:
            lines.append(f"  trajectories first differ at round {self.first_round}")
        for label, gained, lost in (
            ("seeds", self.seeds_gained, self.seeds_lost),
            ("terms", self.terms_gained, self.terms_lost),
            ("gold in top k", self.gold_gained, self.gold_lost),
        ):
            if gained or lost:
                lines.append(f"  {label}: +[{_list(gained)}]  −[{_list(lost)}]")
        lines += [f"  {m}" for m in self.moves]
        return "\n".join(lines)


def _num(v) -> str:
    return "–" if v is None or is_missing(v) else f"{v:.2f}"


def _list(items, n: int = 8) -> str:
    shown = ", ".join(repr(x) if isinstance(x, str) else str(x) for x in items[:n])
    return shown + (f", … {len(items) - n} more" if len(items) > n else "")


# ---- reading the two sides -----------------------------------------------------------------
def _check_trace_text(trace: Trace) -> None:
    """TypeError unless the texts compare reads of a trace (documents, titles, terms) are strings."""
    texts = [t for u in trace.units.values() for t in (u.document, u.title)]
    texts += [t.term for r in trace.rounds for t in r.terms]
    optional = [t.surface for r in trace.rounds for t in r.terms] + [
        c.via_term for r in trace.rounds for c in r.candidates
    ]
    if not all(isinstance(t, str) for t in texts) or not all(t is None or isinstance(t, str) for t in optional):
        raise TypeError("a document, title or term that is not a string")


def _trace_for(trace_dir: Path, qid: str) -> Trace | None:
    path = trace_dir / trace_file_name(qid)
    if not path.exists():
        return None
    data = eval_records.load(path)  # bad JSON, not UTF-8, nested too deep: named, not raised
    try:
        trace = Trace.from_dict(data)
        trace.summary()  # every round's passages by title: a damaged trace fails here, named
        _check_trace_text(trace)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ChangesError(f"{path}: not a trace file ({type(exc).__name__}: {str(exc)[:200]})") from None
    if trace.question_id not in (None, qid):
        raise ChangesError(f"{path}: the trace of question {trace.question_id!r}, not {qid!r}")
    return trace


def side_from_file(path_or_data, traces=None, name: str | None = None) -> Side:
    """A side from an eval result (a path or its parsed JSON) and optionally its trace folder
    (`eval --trace-dir`). A trace whose ranking is not the record's is refused: it belongs to
    another run."""
    label = name or (str(path_or_data) if isinstance(path_or_data, (str, Path)) else "result")
    data = eval_records.load(path_or_data) if isinstance(path_or_data, (str, Path)) else path_or_data
    recs, fails = eval_records.records(data, label)  # every field read below is checked there
    tdir = None
    recorded = (data.get("config") or {}).get("trace_dir")
    if traces is None and recorded and isinstance(path_or_data, (str, Path)):
        traces = Path(path_or_data).parent / recorded  # a trace folder the eval recorded (relative to its file)
    if traces is not None:
        tdir = Path(traces)
        if not tdir.is_dir():
            raise ChangesError(f"{traces}: no such trace folder (the --trace-dir of the eval that wrote {label})")
    runs, missing = {}, []
    for r in recs:
        qid = r["_id"]
        trace = _trace_for(tdir, qid) if tdir is not None else None
        ranking = list(r["ranking"])
        if tdir is not None and trace is not None and trace.documents()[: len(ranking)] != ranking:
            raise ChangesError(
                f"{tdir / trace_file_name(qid)}: its final ranking differs from {label}'s record of {qid!r}: "
                "the traces come from another run"
            )
        if tdir is not None and trace is None:
            missing.append(qid)
        gold = r.get("gold")
        runs[qid] = QuestionRun(
            qid,
            {m: r[m] for m in METRICS},
            r["judgments"],
            ranking,
            tuple(gold) if gold is not None else None,
            r.get("rounds"),
            trace,
        )
    return Side(label, runs, fails, missing)


def side_from_results(results, config: str, traces=None) -> Side:
    """A side from one configuration of `Results` (records: metrics and ranking) and, when
    given, its traces ({question id: Trace}, e.g. `experiment.traces[config]`)."""
    values = {m: results.values(config, m) for m in METRICS}
    rankings = results.rankings(config)
    traces = dict(traces or {})
    runs = {}
    judgments = {r["question"]: r.get("judgments", 0) for r in results.records if r["config"] == config}
    for qid in results.values(config):
        t = traces.get(qid)
        runs[qid] = QuestionRun(
            qid,
            {m: values[m][qid] for m in METRICS},
            int(judgments.get(qid) or 0),
            list(rankings.get(qid) or []),
            tuple(t.gold) if t is not None else None,
            t.summary()["rounds"] if t is not None else None,
            t,
        )
    missing = [q for q in runs if runs[q].trace is None]
    fails = {str(f.get("question")): f.get("error", "failed") for f in results.failures}
    return Side(config, runs, fails, missing if traces else [])


# ---- one question ------------------------------------------------------------------------
def _top_k(metric: str) -> int:
    return 5 if metric == "R@5" else 10


def _round_key(r: dict) -> tuple:
    return tuple(tuple(r.get(k) or ()) for k in ("terms", "seeds", "candidates", "pool"))


def _first_selected(rounds) -> dict:
    """term -> the first round that selected it (token form), in order of selection."""
    out: dict = {}
    for r in rounds:
        for t in r.get("terms") or ():
            out.setdefault(t, r["round"])
    return out


def _seeds(rounds) -> list:
    return list(dict.fromkeys(s for r in rounds for s in r.get("seeds") or ()))


def _surfaces(*traces) -> dict:
    """token form -> the form the seed text writes (names keep their case and accents)."""
    out: dict = {}
    for t in traces:
        if t is None:
            continue
        for r in t.rounds:
            for term in r.terms:
                if term.selected and term.surface:
                    out.setdefault(term.term, term.surface)
    return out


def _round_titles(*sides) -> dict:
    """round -> the titles of its seeds and candidates on either side (where a term's words are)."""
    out: dict = {}
    for rounds in sides:
        for r in rounds or ():
            out.setdefault(r["round"], []).extend([*(r.get("seeds") or ()), *(r.get("candidates") or ())])
    return {k: " · ".join(dict.fromkeys(v)) for k, v in out.items()}


def _shown(term: str, surfaces: dict, titles: dict) -> str:
    """A term as the text writes it: the seed text's form (names, from the trace), else as a
    title of the rounds writes it ('ad è le ferrand' -> 'Adèle Ferrand'), else the token form."""
    if surfaces.get(term, term) != term:
        return surfaces[term]
    find = getattr(textlib, "surface_form", None)  # display only; absent in older trees
    if find is None:
        return term
    for text in titles.values():
        shown = find(term, text)
        # a case change alone is no better for a single word ('son' -> 'Son' from a title); a
        # phrase is a name ('ruy telmo' -> 'Ruy Telmo')
        if shown != term and (" " in term or shown.lower() != term):
            return shown
    return term


def _entries(trace: Trace | None) -> dict:
    """document -> (round, term) of the first candidate that brought one of its passages in."""
    if trace is None:
        return {}
    out: dict = {}
    for r in trace.rounds:
        for c in r.candidates:
            doc = trace.units[c.unit_id].document
            out.setdefault(doc, (r.round, c.via_term))
    return out


def _rank(ranking: list, doc) -> int | None:
    return ranking.index(doc) + 1 if doc in ranking else None


def _move(doc, ra, rb, entry_a, entry_b, gained: set, lost: set, show) -> str | None:
    if ra == rb:
        return None
    if ra is None:
        what = f"entered the ranking at {rb}"
    elif rb is None:
        what = f"left the ranking (was {ra})"
    else:
        what = f"{'rose' if rb < ra else 'fell'} {ra} → {rb}"
    via = None
    if rb is not None and (ra is None or rb < ra) and entry_b and entry_b[1] and entry_b != entry_a:
        new = "new term " if entry_b[1] in gained else "term "
        via = f"entered through round {entry_b[0]}'s {new}'{show(entry_b[1])}'"
    elif (rb is None or (ra is not None and rb > ra)) and entry_a and entry_a[1] in lost and entry_a != entry_b:
        via = f"lost round {entry_a[0]}'s term '{show(entry_a[1])}' that brought it in"
    return f"{doc} {via} and {what}" if via else f"{doc} {what}"


def question_change(a: QuestionRun, b: QuestionRun, metric: str = "R@10", moves: int = 5) -> QuestionChange:
    """What changed for one question from `a` (base) to `b` (variant)."""
    va, vb = a.values.get(metric), b.values.get(metric)
    if va is None or vb is None or is_missing(va) or is_missing(vb):
        delta, outcome = None, "no value"
    else:
        delta = round(vb - va, 4)
        outcome = "win" if delta > TIE else "loss" if delta < -TIE else "tie"
    change = QuestionChange(a.id, metric, va, vb, delta, outcome, None, None, judgments=(a.judgments, b.judgments))
    surfaces = _surfaces(a.trace, b.trace)
    titles = _round_titles(a.rounds, b.rounds)

    def show(term):
        return _shown(term, surfaces, titles)

    gained_tokens: set = set()
    lost_tokens: set = set()
    if a.rounds is not None and b.rounds is not None:
        for i in range(max(len(a.rounds), len(b.rounds))):
            if i >= len(a.rounds) or i >= len(b.rounds) or _round_key(a.rounds[i]) != _round_key(b.rounds[i]):
                change.first_round = i
                break
        change.identical = change.first_round is None and a.ranking == b.ranking
        ta, tb = _first_selected(a.rounds), _first_selected(b.rounds)
        gained_tokens, lost_tokens = set(tb) - set(ta), set(ta) - set(tb)
        change.terms_gained = [show(t) for t in tb if t not in ta]
        change.terms_lost = [show(t) for t in ta if t not in tb]
        sa, sb = _seeds(a.rounds), _seeds(b.rounds)
        change.seeds_gained = [s for s in sb if s not in sa]
        change.seeds_lost = [s for s in sa if s not in sb]
    gold = a.gold if a.gold is not None else b.gold
    k = _top_k(metric)
    if gold is not None:
        top_a, top_b = a.ranking[:k], b.ranking[:k]
        change.gold_gained = [d for d in top_b if d in gold and d not in top_a]
        change.gold_lost = [d for d in top_a if d in gold and d not in top_b]
        watched = list(gold)
    else:  # without gold: the documents that entered or left the top k
        watched = [d for d in b.ranking[:k] if d not in a.ranking[:k]] + [
            d for d in a.ranking[:k] if d not in b.ranking[:k]
        ]
    ea, eb = _entries(a.trace), _entries(b.trace)
    if gold is not None and a.trace is not None and b.trace is not None:
        change.gold_reached = [d for d in gold if d in eb and d not in ea]
        change.gold_unreached = [d for d in gold if d in ea and d not in eb]
    sentences = []
    for doc in watched:
        s = _move(
            doc,
            _rank(a.ranking, doc),
            _rank(b.ranking, doc),
            ea.get(doc),
            eb.get(doc),
            gained_tokens,
            lost_tokens,
            show,
        )
        if s:
            sentences.append(s)
    change.moves = sentences[:moves]
    return change


# ---- many questions ----------------------------------------------------------------------
class Changes:
    """Per-question changes from `base` to `variant`, the questions left out and why, and
    the aggregates. `report()` is the text `sag2wb compare` prints; `to_dict()` its --json."""

    def __init__(self, base: Side, variant: Side, metric: str = "R@10", moves: int = 5):
        if metric not in METRICS:
            raise ChangesError(f"unknown metric {metric!r}; metrics: {', '.join(METRICS)}")
        self.base, self.variant, self.metric = base, variant, metric
        a, b = base.runs, variant.runs
        self.only_base = [q for q in a if q not in b and q not in variant.failures]
        self.only_variant = [q for q in b if q not in a and q not in base.failures]
        self.failed: dict = {}  # question -> which run it failed in, and why
        for side in (base, variant):
            for q, error in side.failures.items():
                if not (q in a and q in b):
                    self.failed.setdefault(q, f"failed in {side.name}: {error}")
        shared = [q for q in a if q in b]
        other = [q for q in shared if None not in (a[q].gold, b[q].gold) and set(a[q].gold) != set(b[q].gold)]
        if other:  # one id, two questions: a comparison of them would be of nothing
            q = other[0]
            raise ChangesError(
                f"question {q!r} has gold {list(a[q].gold)} in {base.name!r} but {list(b[q].gold)} in "
                f"{variant.name!r} ({len(other)} such question(s)): the runs are of different question files; "
                "compare runs of the same questions"
            )
        if not shared:
            raise ChangesError(
                f"nothing to compare: {base.name!r} ({len(a)} questions) and {variant.name!r} ({len(b)} questions) "
                "have no completed question in common"
            )
        self.questions = [question_change(a[q], b[q], metric, moves) for q in shared]
        self.no_value = [c.question for c in self.questions if c.outcome == "no value"]

    @property
    def compared(self) -> list:
        return [c for c in self.questions if c.outcome != "no value"]

    def counts(self, changes=None) -> dict:
        cs = self.compared if changes is None else changes
        got = Counter(c.outcome for c in cs)
        return {"wins": got["win"], "losses": got["loss"], "ties": got["tie"]}

    @property
    def needs_traces(self) -> list:
        """The parts of the comparison these inputs cannot give (empty when every question has traces)."""
        runs = [r for s in (self.base, self.variant) for r in s.runs.values()]
        out = []
        if any(r.rounds is None for r in runs):
            out.append(NEEDS_TRACES_ROUNDS)
        if any(r.gold is None for r in runs):
            out.append(NEEDS_TRACES_GOLD)
        if any(r.trace is None for r in runs):
            out += [NEEDS_TRACES_ENTRY, NEEDS_TRACES_SURFACE]
        return out

    @property
    def scope(self) -> str | None:
        """None when every question of both runs is compared; else a sentence saying what is left out."""
        left = []
        for n, what in (
            (self.only_base, f"only in {self.base.name}"),
            (self.only_variant, f"only in {self.variant.name}"),
            (list(self.failed), "failed in one run"),
            (self.no_value, f"without a {self.metric} value (no gold)"),
        ):
            if n:
                more = ", …" if len(n) > 5 else ""
                left.append(f"{len(n)} {what} ({', '.join(map(str, n[:5]))}{more})")
        if not left:
            return None
        total = len(set(self.base.runs) | set(self.variant.runs) | set(self.failed))
        return f"compared questions only: {len(self.compared)} of {total}; left out: {'; '.join(left)}"

    def term_counts(self, n: int = 10) -> dict:
        """The terms most often gained and lost: {"gained": [(term, questions)], "lost": [...]}."""
        out = {}
        for key in ("gained", "lost"):
            got = Counter(t for c in self.compared for t in dict.fromkeys(getattr(c, f"terms_{key}")))
            out[key] = sorted(got.items(), key=lambda x: (-x[1], x[0]))[:n]  # ties by term: the same every run
        return out

    def associations(self) -> list:
        """Which changes went with wins: (what, questions, wins, losses, ties) per group."""
        cs = self.compared
        groups = []
        if all(c.identical is not None for c in cs):
            groups += [
                ("selected terms changed", [c for c in cs if c.terms_changed]),
                ("selected terms the same", [c for c in cs if not c.terms_changed]),
                ("seeds changed", [c for c in cs if c.seeds_gained or c.seeds_lost]),
                ("seeds the same", [c for c in cs if not (c.seeds_gained or c.seeds_lost)]),
            ]
            for r in sorted({c.first_round for c in cs if c.first_round is not None}):
                groups.append((f"trajectories first differ at round {r}", [c for c in cs if c.first_round == r]))
            groups.append(("identical trajectories", [c for c in cs if c.identical]))
        if cs and all(c.gold_reached is not None for c in cs):
            groups += [
                ("a gold passage reached the candidates only in B", [c for c in cs if c.gold_reached]),
                ("a gold passage reached the candidates only in A", [c for c in cs if c.gold_unreached]),
                (
                    "the same gold passages reached the candidates",
                    [c for c in cs if not (c.gold_reached or c.gold_unreached)],
                ),
            ]
        groups.append(("top-k gold changed", [c for c in cs if c.gold_gained or c.gold_lost]))
        return [(label, len(g), *self.counts(g).values()) for label, g in groups if g]

    def sorted(self, by: str = "delta") -> list:
        """Questions by metric change, the largest gains first (no value last)."""
        return sorted(self.questions, key=lambda c: (c.delta is None, -(c.delta or 0.0), c.question))

    def frame(self):
        """One row per question: question, base, variant, delta, outcome, first_round, terms +/-, gold +/-."""
        import pandas as pd

        cols, counted = ["question", "base", "variant", "delta", "outcome", "first_round"], COUNTED
        rows = [[getattr(q, c) for c in cols] + [len(getattr(q, c)) for c in counted] for q in self.questions]
        return pd.DataFrame(rows, columns=[*cols, *counted])

    def to_dict(self) -> dict:
        deltas = [c.delta for c in self.compared]
        return {
            "base": self.base.name,
            "variant": self.variant.name,
            "metric": self.metric,
            **self.counts(),
            "mean_delta": round(sum(deltas) / len(deltas), 4) if deltas else None,
            "scope": self.scope,
            "left_out": {
                "only_base": self.only_base,
                "only_variant": self.only_variant,
                "failed": self.failed,
                "no_value": self.no_value,
            },
            "needs_traces": self.needs_traces,
            "missing_traces": {"base": self.base.missing_traces, "variant": self.variant.missing_traces},
            "terms": {k: [list(x) for x in v] for k, v in self.term_counts().items()},
            "associations": [
                dict(zip(("what", "questions", "wins", "losses", "ties"), a)) for a in self.associations()
            ],
            "questions": [c.to_dict() for c in self.questions],
        }

    def report(self, limit: int = 10) -> str:
        """The text of `sag2wb compare`: counts, scope, aggregates, then the `limit` questions
        that changed most (all when limit is 0)."""
        c = self.counts()
        deltas = [q.delta for q in self.compared]
        mean = sum(deltas) / len(deltas) if deltas else 0.0
        lines = [
            f"{self.variant.name} vs {self.base.name} on {self.metric}: {c['wins']} wins, {c['losses']} losses, "
            f"{c['ties']} ties over {len(self.compared)} questions (mean change {mean:+.2f})"
        ]
        if self.scope:
            lines.append(f"scope: {self.scope}")
        for side in (self.base, self.variant):
            if side.missing_traces:
                ids = side.missing_traces
                more = ", …" if len(ids) > 5 else ""
                lines.append(
                    f"traces missing for {len(ids)} of {len(side.runs)} questions of {side.name} "
                    f"({', '.join(ids[:5])}{more})"
                )
        for part in self.needs_traces:
            lines.append(f"needs traces (eval --trace-dir, then --traces-a/--traces-b): {part}")
        terms = self.term_counts()
        if terms["gained"] or terms["lost"]:
            for key in ("gained", "lost"):
                listed = ", ".join(f"'{t}' ({n})" for t, n in terms[key]) or "none"
                lines.append(f"terms most often {key} (questions): {listed}")
        lines.append("which changes went with wins:")
        for what, n, wins, losses, ties in self.associations():
            lines.append(f"  {what}: {n} questions — {wins} won, {losses} lost, {ties} tied")
        changed = [q for q in self.sorted() if q.outcome in ("win", "loss")]
        changed.sort(key=lambda q: (-abs(q.delta or 0.0), q.question))
        shown = changed if limit == 0 else changed[:limit]
        if shown:
            lines.append(f"questions whose {self.metric} changed ({len(shown)} of {len(changed)}, largest first):")
            lines += [q.summary() for q in shown]
        else:
            lines.append(f"no question's {self.metric} changed")
        return "\n".join(lines)


def compare(base, variant, metric: str = "R@10", *, traces_base=None, traces_variant=None, moves: int = 5) -> Changes:
    """The changes from eval result `base` (a path or parsed JSON) to `variant`, with their
    trace folders when given (`eval --trace-dir`)."""
    name_a = str(base) if isinstance(base, (str, Path)) else "A"
    name_b = str(variant) if isinstance(variant, (str, Path)) else "B"
    if name_a == name_b:
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    a = side_from_file(base, traces_base, name_a)
    b = side_from_file(variant, traces_variant, name_b)
    return Changes(a, b, metric, moves)
