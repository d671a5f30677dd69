"""Results of experiments: per-question records of several configurations as tidy frames,
tables (one row per configuration, per question type or hop count), paired bootstrap
intervals, Markdown/HTML tables like the paper's B.1, plots (workbench/runs/plots.py), and
the `sag2wb ablate` report.

>>> from workbench.params import Params
>>> from workbench.runs import Config, Experiment, RunOptions
>>> configs = [Config("sag2", judge="lexical"),
...            Config("no_idf", Params(term_weighting="no_idf"), judge="lexical")]
>>> results = Experiment(index, questions, configs, RunOptions(progress=False)).run()
>>> results.summary()                      # one row per configuration
          R@5   R@10  AE@10  judgments  questions
config
sag2    67.59  90.74  77.78        350          9
no_idf  67.59  85.19  66.67        410          9
>>> results.compare("no_idf", "sag2")      # paired 95% interval of the R@10 difference
{'metric': 'R@10', 'a': 'no_idf', 'b': 'sag2', 'questions': 9, 'difference': -5.5556, 'low': -16.6667, 'high': 0.0}
>>> results.plot("R@10").data[0].x         # bars with intervals, like the paper's Figure 4
('sag2', 'no_idf')
>>> results.changes("sag2", "no_idf").counts()   # per question: workbench/runs/changes.py
{'wins': 0, 'losses': 1, 'ties': 8}
"""

from __future__ import annotations

import html
import os

from workbench.deprecation import deprecated
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.metrics import METRICS, compare_rows, is_missing, paired_bootstrap
from workbench.runs import changes as changes_
from workbench.runs import plots
from workbench.runs.records import ExperimentError
from workbench.runs.resume import RESULT_MARKER, RESULT_VERSION

ABLATION_ROWS = ("bm25", "H=0", "H=1", "H=2", "no-context", "matched-budget", "final-only")
FEEDBACK_ROWS = ("rm3", "rm3+final-only", "gar-bm25", "gar-bm25+final-only")  # B.3 (`paper_ablation(feedback=True)`)
REFERENCE_ROW = "H=2"
ROW_DEFINITIONS = {
    "bm25": "BM25 top 100 of the question expression (round 0's C0), lexical order, no judge.",
    "H=0": "BM25+judge without expansion: round 0 of the H=2 trajectories (C0 scored once, no context).",
    "H=1": "The H=2 trajectories stopped after the first expansion round (same judgments as their rounds 0-1).",
    "H=2": "SAG2 with the given parameters (default H=2): the trajectories the H=0/1 rows are read from.",
    "no-context": "SAG2 with the judge never shown context (Params(use_context=False)); same candidate policy.",
    "matched-budget": "One-shot BM25 pool of as many units as that question's H=2 judgment count, scored once "
    "with no context (Params(B=budget, H=0)); questions with fewer BM25 matches are noted.",
    "final-only": "BM25 order chooses the seeds, every seed weighs the same, the judge scores only the final "
    "pool (at most B units, once, no context); see experiments.final_only_trace.",
    "rm3": "RM3 (B.3): 10 feedback passages, 10 terms each and 10 in the model, original-query weight 0.5, "
    "tokens of 2-20 ASCII letters/digits, terms in > 10% of units dropped; weighted BM25 sums; no judge.",
    "rm3+final-only": "The RM3 ranking's first 100 units scored once by the judge, no context (final-only judging).",
    "gar-bm25": "GAR-BM25 (B.3): batches of 16 alternating between C0 and the frontier of an 8-neighbour BM25 "
    "corpus graph, frontier priorities from BM25, 100 units taken; ranked by BM25; no judge.",
    "gar-bm25+final-only": "The (at most 100) units GAR-BM25 took, scored once by the judge, no context.",
}


FRAME_COLUMNS = ["config", "question", "type", "hops", *METRICS, "judgments"]
EXTRA_COLUMNS = ["stop", "budget", "shortfall"]


def paired_interval(a, b, metric: str = "R@10", names=("a", "b")) -> dict:
    """Paired 95% percentile bootstrap of mean(a - b) (2,000 resamples, seed 20261015).

    `a`, `b`: per-question values as pandas Series indexed by question id (or dicts). The
    question sets must be equal — otherwise the comparison is refused, naming the difference.

    >>> paired_interval({"q1": 100.0, "q2": 50.0}, {"q1": 50.0, "q2": 50.0})["difference"]
    25.0
    """
    a, b = dict(a), dict(b)
    only_a, only_b = [q for q in a if q not in b], [q for q in b if q not in a]
    if only_a or only_b:
        parts = []
        if only_a:
            more = ", ..." if len(only_a) > 5 else ""
            parts.append(f"{len(only_a)} only in {names[0]!r} ({', '.join(map(str, only_a[:5]))}{more})")
        if only_b:
            more = ", ..." if len(only_b) > 5 else ""
            parts.append(f"{len(only_b)} only in {names[1]!r} ({', '.join(map(str, only_b[:5]))}{more})")
        raise ExperimentError(
            f"refusing to compare {names[0]!r} ({len(a)} questions) with {names[1]!r} ({len(b)} questions): "
            f"the question sets differ — {'; '.join(parts)}"
        )
    if not a:
        raise ExperimentError(f"nothing to compare: {names[0]!r} and {names[1]!r} have no questions")
    order = list(a)
    missing = [q for q in order if is_missing(a[q]) or is_missing(b[q])]
    if missing:
        raise ExperimentError(
            f"cannot compare {names[0]!r} with {names[1]!r} on {metric}: {len(missing)} question(s) have no value "
            f"(no gold labels?): {', '.join(map(str, missing[:5]))}{', ...' if len(missing) > 5 else ''}"
        )
    diff, lo, hi = paired_bootstrap([a[q] for q in order], [b[q] for q in order])
    return {
        "metric": metric,
        "a": names[0],
        "b": names[1],
        "questions": len(order),
        "difference": round(diff, 4),
        "low": round(lo, 4),
        "high": round(hi, 4),
    }


class Results:
    """Per-question records of several configurations; tables, intervals and plots."""

    def __init__(
        self,
        records: list[dict],
        question_ids: list[str] | None = None,
        configs=None,
        stats=None,
        failures=None,
        total: int | None = None,
    ):
        self.records = list(records)
        self.configs = list(configs or [])
        self.stats = dict(stats or {})
        self.failures = list(failures or [])  # {config, question, round, error, kind}: left out of every row
        names = []
        for r in self.records:
            if r["config"] not in names:
                names.append(r["config"])
        self.names = names
        self.question_ids = (
            list(question_ids) if question_ids is not None else list(dict.fromkeys(r["question"] for r in self.records))
        )
        self.total = total if total is not None else len(self.question_ids) + len(self.failures)

    @property
    def scope(self) -> str | None:
        """None when every question completed; else a sentence saying what the figures cover."""
        if not self.failures:
            return None
        return (
            f"completed questions only: {len(self.question_ids)} of {self.total} "
            f"({len(self.failures)} failed and are left out of every configuration)"
        )

    def __repr__(self) -> str:
        return (
            f"Results({len(self.names)} configurations × {len(self.question_ids)} questions: {', '.join(self.names)})"
        )

    def combine(self, other: Results) -> Results:
        """Rows of both (configuration names must not clash); comparisons still need equal question sets."""
        clash = sorted(set(self.names) & set(other.names))
        if clash:
            raise ExperimentError(f"cannot combine results: configuration names {clash} appear in both")
        ids = list(dict.fromkeys(self.question_ids + other.question_ids))
        return Results(
            self.records + other.records,
            ids,
            self.configs + other.configs,
            {"combined": [self.stats, other.stats]},
            failures=self.failures + other.failures,
        )

    # ---- frames -----------------------------------------------------------------------------
    def frame(self, extras: bool = False):
        """Tidy DataFrame: config, question, type, hops, R@5, R@10, AE@10, judgments
        (`extras=True` adds stop, budget, shortfall)."""
        import pandas as pd  # heavy (~0.4 s): loaded when a table is asked for, not with the run layer

        cols = FRAME_COLUMNS + (EXTRA_COLUMNS if extras else [])
        df = pd.DataFrame([{c: r.get(c) for c in cols} for r in self.records], columns=cols)
        return df.astype({m: float for m in METRICS})  # no gold: None -> NaN, left out of means

    def values(self, config: str, metric: str = "R@10") -> dict:
        """{question id: value} of one configuration, in question order."""
        if config not in self.names:
            raise ExperimentError(f"no configuration {config!r}; configurations: {', '.join(self.names)}")
        return {r["question"]: r[metric] for r in self.records if r["config"] == config}

    def rankings(self, config: str) -> dict:
        """{question id: unique documents of the final ranking (first 100)}."""
        self.values(config)
        return {r["question"]: r.get("ranking") for r in self.records if r["config"] == config}

    def summary(self):
        """One row per configuration: mean R@5, R@10, AE@10, total judgments, questions."""
        df = self.frame()
        g = df.groupby("config", sort=False)
        out = g[list(METRICS)].mean().round(2)
        out["judgments"] = g["judgments"].sum()
        out["questions"] = g.size()
        return out.loc[self.names]

    def by(self, column: str = "type", metric: str = "R@10"):
        """Mean `metric` per question type (or hop count): rows = type, columns = configurations."""
        df = self.frame()
        if column not in ("type", "hops"):
            raise ExperimentError(f"group by 'type' or 'hops', not {column!r}")
        if metric not in METRICS and metric != "judgments":
            raise ExperimentError(f"unknown metric {metric!r}; metrics: {', '.join(METRICS)}, judgments")
        if df[column].isna().all():
            return df.iloc[0:0]
        table = df.pivot_table(index=column, columns="config", values=metric, aggfunc="mean", sort=True).round(2)
        table = table[[n for n in self.names if n in table.columns]]
        table["questions"] = df[df["config"] == self.names[0]].groupby(column).size()
        return table

    # ---- intervals --------------------------------------------------------------------------
    def compare(self, a: str, b: str, metric: str = "R@10") -> dict:
        """mean(a - b) of `metric` over the shared questions, with its paired 95% interval."""
        return paired_interval(self.values(a, metric), self.values(b, metric), metric, (a, b))

    def changes(self, base: str, variant: str, metric: str = "R@10", traces: dict | None = None, moves: int = 5):
        """What configuration `variant` changed against `base`, question by question
        (`changes_.Changes`: wins/losses/ties, terms, seeds, gold, rank moves). The records hold
        metrics and rankings only: pass `traces=experiment.traces` (run with keep_traces=True)
        for rounds, terms, seeds and gold; without them `.needs_traces` names what is missing."""
        traces = traces or {}
        return changes_.Changes(
            changes_.side_from_results(self, base, traces.get(base)),
            changes_.side_from_results(self, variant, traces.get(variant)),
            metric,
            moves,
        )

    def significance(self, reference: str = REFERENCE_ROW, metric: str = "R@10", test: str = "randomization") -> dict:
        """Every configuration against `reference`, per question: mean difference and the
        standardised paired effect d_z with 95% bootstrap intervals, the paired randomization
        (sign-flip) and bootstrap p-values, and their Holm and Bonferroni corrections across
        the comparisons — `reference`'s own row is not one and stays out of the correction.
        Seeds and resample counts are in the result (`metrics.compare_rows`).

        >>> recs = [{"config": c, "question": q, "R@5": v, "R@10": v, "AE@10": v, "judgments": 0}
        ...         for c, vals in (("base", [100.0, 50.0, 0.0]), ("other", [50.0, 50.0, 0.0]))
        ...         for q, v in zip("abc", vals)]
        >>> sig = Results(recs).significance("base")   # one question differs: every sign flip ties it
        >>> other = sig["rows"]["other"]
        >>> sig["comparisons"], other["difference"], other["p_holm"], sig["rows"]["base"]["p"]
        (1, -16.6667, 1.0, None)
        """
        key = (reference, metric, test)
        cached = getattr(self, "_significance", {})
        if key not in cached:
            order = list(self.values(reference, metric))
            rows = {}
            for name in self.names:
                self.compare(name, reference, metric)  # refuses, naming why, unequal or missing questions
                values = self.values(name, metric)
                rows[name] = [values[q] for q in order]
            cached[key] = compare_rows(rows, reference, test=test)
            self._significance = cached
        return cached[key]

    def interval(self, config: str, metric: str = "R@10") -> tuple[float, float, float]:
        """Mean of one configuration and its 95% percentile bootstrap interval (same resamples)."""
        vals = list(self.values(config, metric).values())
        return paired_bootstrap(vals, [0.0] * len(vals))

    def table(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10"):
        """Like the paper's B.1: R@5, R@10, AE@10, judgments, and the paired interval of the
        `metric` difference against `reference` for every row."""
        out = self.summary()
        if reference is not None and reference in self.names:
            diffs, ci = [], []
            for n in self.names:
                c = self.compare(n, reference, metric)
                diffs.append(c["difference"])
                ci.append((c["low"], c["high"]))
            out[f"diff_{metric}_vs_{reference}"] = [round(d, 2) for d in diffs]
            out[f"ci_{metric}_vs_{reference}"] = [(round(lo, 2), round(hi, 2)) for lo, hi in ci]
            sig = self.significance(reference, metric)["rows"]
            for p in ("p_holm", "p_bonferroni", "p_randomization"):
                out[f"{p}_{metric}_vs_{reference}"] = [sig[n][p] for n in self.names]
        return out

    def to_markdown(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10", definitions=None) -> str:
        return _markdown_table(self.table(reference, metric), reference, metric, definitions)

    def to_html_table(self, reference: str | None = REFERENCE_ROW, metric: str = "R@10", definitions=None) -> str:
        """The B.1-like table as an HTML fragment (what a notebook displays)."""
        return _html_table(self.table(reference, metric), reference, metric, definitions)

    def to_html(self, path=None, *old, traces=None, index=None, metric: str = "R@10", force: bool = False, **old_kw):
        """Write the experiment page (docs/reports.md) to `path` (a Path, or a name ending in .html)
        and return its Path; `traces`: {config: {question id: Trace}} (`experiment.traces`), the
        trajectories its questions open; `index` adds passage texts.

        Called as before (`to_html()`, `to_html(reference, metric, definitions)`), it returns the
        table fragment with a DeprecationWarning: that is `to_html_table` now."""
        page = isinstance(path, os.PathLike) or (isinstance(path, str) and path.lower().endswith((".html", ".htm")))
        if not page or old or old_kw:
            deprecated(
                "Results.to_html(reference, metric) returning a table fragment is deprecated: use "
                "Results.to_html_table(...); Results.to_html(path) writes the experiment page"
            )
            reference = old_kw.pop("reference", REFERENCE_ROW if path is None else path)
            return self.to_html_table(reference, *(old or (metric,)), **old_kw)
        # the one import up the layers from here, declared in pyproject.toml's layer contract
        from workbench.report import write_results_page

        return write_results_page(self, path, traces=traces, index=index, metric=metric, force=force)

    def _repr_html_(self) -> str:
        ref = REFERENCE_ROW if REFERENCE_ROW in self.names else None
        return self.to_html_table(ref)

    # ---- plots ------------------------------------------------------------------------------

    # ---- plots ------------------------------------------------------------------------------
    def plot(self, metric: str = "R@10", reference: str | None = None, title: str | None = None):
        """Plotly bars with 95% bootstrap intervals (like the paper's Figure 4): `plots.interval_bars`."""
        return plots.interval_bars(self, metric, reference, title)


def _fmt(v, digits=2) -> str:
    if is_missing(v):
        return "–"
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return f"{v:,}"
    return f"{v:.{digits}f}"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _rows(table, reference, metric):
    head = ["Method", "R@5", "R@10", "AE@10", "Judgments"]
    dcol, ccol = f"diff_{metric}_vs_{reference}", f"ci_{metric}_vs_{reference}"
    has_ci = reference is not None and ccol in table.columns
    if has_ci:
        head.append(f"Δ{metric} vs {reference} [95% CI]")
    pcol = f"p_holm_{metric}_vs_{reference}"
    has_p = has_ci and pcol in table.columns
    if has_p:
        head.append("p (Holm)")
    rows = []
    for name, row in table.iterrows():
        cells = [str(name), _fmt(row["R@5"]), _fmt(row["R@10"]), _fmt(row["AE@10"]), _fmt(int(row["judgments"]))]
        if has_ci:
            lo, hi = row[ccol]
            cells.append("–" if name == reference else f"{row[dcol]:+.2f} [{lo:.2f}, {hi:.2f}]")
        if has_p:
            cells.append("–" if is_missing(row[pcol]) else _p(row[pcol]))
        rows.append(cells)
    return head, rows


def _markdown_table(table, reference, metric, definitions=None) -> str:
    head, rows = _rows(table, reference, metric)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if definitions:
        lines.append("")
        lines += [f"- **{k}**: {v}" for k, v in definitions.items() if k in table.index]
    return "\n".join(lines) + "\n"


def _html_table(table, reference, metric, definitions=None) -> str:
    head, rows = _rows(table, reference, metric)
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    right = ' style="text-align:right"'
    body = "".join(
        "<tr>" + "".join(f"<td{'' if i == 0 else right}>{html.escape(c)}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    out = f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    if definitions:
        out += (
            "<ul>"
            + "".join(
                f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>"
                for k, v in definitions.items()
                if k in table.index
            )
            + "</ul>"
        )
    return out


# ---- sag2wb ablate ---------------------------------------------------------------------------
def _needs_gold(judge) -> bool:
    try:
        return JudgeSpec.parse(judge).kind.needs_gold
    except JudgeError:  # a label, not a judge's text
        return False


def ablation_report(results: Results, judge) -> dict:
    """The ablate command's JSON body: rows (R@5, R@10, AE@10, judgments, ci_R@10_vs_H=2),
    matched-budget notes (short questions, the exactly matched subset), per-type R@10."""
    table = results.table(REFERENCE_ROW, "R@10")
    rows = {}
    for name in results.names:
        row = table.loc[name]
        lo, hi = row[f"ci_R@10_vs_{REFERENCE_ROW}"]
        rows[name] = {
            "R@5": float(row["R@5"]),
            "R@10": float(row["R@10"]),
            "AE@10": float(row["AE@10"]),
            "judgments": int(row["judgments"]),
            "questions": int(row["questions"]),
            f"diff_R@10_vs_{REFERENCE_ROW}": float(row[f"diff_R@10_vs_{REFERENCE_ROW}"]),
            f"ci_R@10_vs_{REFERENCE_ROW}": [float(lo), float(hi)],
        }
    sig = results.significance(REFERENCE_ROW, "R@10")
    for name, row in rows.items():
        s = sig["rows"][name]
        row.update({k: s[k] for k in ("p_randomization", "p_bootstrap", "p_holm", "p_bonferroni", "d_z")})
        row["d_z_ci"] = None if s["d_z_low"] is None else [s["d_z_low"], s["d_z_high"]]
    report = {
        RESULT_MARKER: {"kind": "ablate", "version": RESULT_VERSION},
        "judge": str(judge),
        "questions": len(results.question_ids),
        "rows": rows,
        "definitions": {k: v for k, v in ROW_DEFINITIONS.items() if k in rows},
        "significance": {k: v for k, v in sig.items() if k != "rows"},
    }
    models = set((results.stats.get("judge_sha256") or {}).values())
    if len(models) == 1:  # the judged rows' one model (learned): which model answered
        report["judge_sha256"] = models.pop()
    if results.failures:
        report["scope"] = results.scope
        report["failures"] = results.failures
    if _needs_gold(judge):
        report["note"] = "oracle judge (gold labels): these rows are the candidate policy's ceiling, not a model result"
    if "matched-budget" in results.names:
        mb = [r for r in results.records if r["config"] == "matched-budget"]
        short = [r for r in mb if r.get("shortfall", 0) > 0]
        exact = [r["question"] for r in mb if r.get("shortfall", 0) == 0]
        note = {
            "questions_with_too_few_matches": len(short),
            "ids": [r["question"] for r in short],
            "missing_judgments": int(sum(r["shortfall"] for r in short)),
        }
        if exact and REFERENCE_ROW in results.names:
            a = {q: v for q, v in results.values("matched-budget").items() if q in set(exact)}
            b = {q: v for q, v in results.values(REFERENCE_ROW).items() if q in set(exact)}
            c = paired_interval(a, b, "R@10", ("matched-budget", REFERENCE_ROW))
            note["exactly_matched"] = {
                "questions": len(exact),
                "R@10": round(sum(a.values()) / len(a), 2),
                f"{REFERENCE_ROW} R@10": round(sum(b.values()) / len(b), 2),
                f"diff_R@10_vs_{REFERENCE_ROW}": c["difference"],
                f"ci_R@10_vs_{REFERENCE_ROW}": [c["low"], c["high"]],
            }
        report["matched_budget"] = note
    by_type = results.by("type", "R@10")
    if len(by_type):
        report["by_type_R@10"] = {
            str(t): {k: (float(v) if k != "questions" else int(v)) for k, v in row.items()}
            for t, row in by_type.iterrows()
        }
    by_hops = results.by("hops", "R@10")
    if len(by_hops):
        report["by_hops_R@10"] = {
            str(t): {k: (float(v) if k != "questions" else int(v)) for k, v in row.items()}
            for t, row in by_hops.iterrows()
        }
    return report


def ablation_markdown(results: Results, report: dict, title: str = "SAG2 ablation") -> str:
    """The B.1-like Markdown table, the matched-budget note and per-type R@10."""
    md = [
        f"# {title}",
        "",
        f"Judge: `{report['judge']}`; {report['questions']} questions. "
        f"Δ and intervals: paired 95% percentile bootstrap of the R@10 difference to {REFERENCE_ROW} "
        "(2,000 question resamples, seed 20261015). p (Holm): two-sided paired randomization test of the "
        f"R@10 difference to {REFERENCE_ROW} (sign flips: exact up to 16 questions, else 10,000 seeded "
        f"permutations), Holm-corrected across the {max(len(results.names) - 1, 0)} rows compared with "
        f"{REFERENCE_ROW} ({REFERENCE_ROW} itself is no comparison); Bonferroni, d_z and its interval: OUT.json.",
        "",
    ]
    if report.get("note"):
        md += [f"**Note:** {report['note']}.", ""]
    if report.get("scope"):
        md += [f"**Figures over {report['scope']}.**", ""]
    md.append(results.to_markdown(REFERENCE_ROW, "R@10", ROW_DEFINITIONS))
    mb = report.get("matched_budget")
    if mb:
        ids = mb["ids"]
        listed = f": {', '.join(ids[:20])}" + (f" and {len(ids) - 20} more" if len(ids) > 20 else "") if ids else ""
        md.append(
            f"Matched budget: {mb['questions_with_too_few_matches']} question(s) have fewer BM25 matches than "
            f"their H=2 judgment count ({mb['missing_judgments']:,} judgments short){listed}."
        )
        ex = mb.get("exactly_matched")
        if ex:
            lo, hi = ex[f"ci_R@10_vs_{REFERENCE_ROW}"]
            md.append(
                f"On the {ex['questions']} exactly matched questions: matched-budget R@10 {ex['R@10']:.2f}, "
                f"{REFERENCE_ROW} {ex[f'{REFERENCE_ROW} R@10']:.2f}, difference "
                f"{ex[f'diff_R@10_vs_{REFERENCE_ROW}']:+.2f} [{lo:.2f}, {hi:.2f}]."
            )
        md.append("")
    for key, label in (("by_type_R@10", "question type"), ("by_hops_R@10", "hop count")):
        block = report.get(key)
        if not block:
            continue
        cols = results.names
        md += [
            f"R@10 by {label}:",
            "",
            "| " + " | ".join([label, *cols, "questions"]) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(cols) + 1)) + "|",
        ]
        for t, row in block.items():
            md.append("| " + " | ".join([t, *(_fmt(row.get(c)) for c in cols), str(row.get("questions", ""))]) + " |")
        md.append("")
    return "\n".join(md)
