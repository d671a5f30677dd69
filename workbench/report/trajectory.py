"""The trajectory page's data: every view of the dashboard, for every round, computed once
from the trace with `workbench.viewdata` (the functions the dashboard's views call), so
the page's script only draws.

With the index the trace was made on, the page also holds each passage's text (marked)
and every term in its surface form; without it, titles, scores and terms in their token
form (the passage view then says where the text is).

Nothing of the machine that made it goes in: the trace's file by name only, no absolute
path, no endpoint URL or cache folder of a judge, no environment value (page.py).

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> data = trajectory_data(Run(index, questions[1], judge=LexicalJudge(index)).run(), index)
>>> [r["round"] for r in data["rounds"]], data["rounds"][1]["selected"][8:11]
([0, 1, 2], ['保存', 'role_id', 'id'])
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import PurePath

from workbench import viewdata
from workbench.report.page import Page, plain
from workbench.safeio import InputError
from workbench.text import tokenize

SCRIPTS = ("trajectory.js",)
TERMS_SHOWN = 25  # the terms chart: the selected terms, then the best unselected up to this many
STATS_SHOWN = ("judgments", "memo_hits", "cache_hits", "requests", "input_tokens", "output_tokens", "cost")
_ABSOLUTE = re.compile(r"(?:[A-Za-z]:\\|~/|/)(?:[^\s:;,()'\"/\\]+[/\\])+([^\s:;,()'\"/\\]*)")
_URL = re.compile(r"\b(?:https?://|url:)\S+?(?=[)\s]|$)")


def public(text) -> str:
    """`text` without what belongs to the machine that made it: an absolute path becomes its
    file name, an endpoint (a URL, a JEV judge's `url:` family) "a custom endpoint".

    >>> public("learned:/home/ann/models/J.json (sha256 1a2b)"), public("jev (m via url:127.0.0.1/v1/systemone)")
    ('learned:J.json (sha256 1a2b)', 'jev (m via a custom endpoint)')
    """
    text = _URL.sub("a custom endpoint", str(text))
    return _ABSOLUTE.sub(lambda m: m.group(1), text)


def _rows(df, columns=None) -> list[dict]:
    cols = [c for c in (columns or df.columns) if c in df.columns]
    rows = plain(df[cols].to_dict("records"))  # numpy values as Python's, NaN as None
    for row in rows:
        if isinstance(row.get("source"), str):
            row["source"] = public(row["source"])
    return rows


def _gold(value, show: bool):
    return bool(value is True) if show else None


def _round_data(trace, frames, r: int, show_gold: bool) -> dict:
    rounds = frames["rounds"]
    row = rounds[rounds["round"] == r].iloc[0]
    terms = viewdata.term_components(frames, r, top=TERMS_SHOWN)
    chosen = terms[terms["selected"].astype(bool)].sort_values("order")
    pool = viewdata.pool_table(frames, r, show_gold)
    seeds = viewdata.seed_bars(frames, r)
    context = viewdata.context_table(frames, r, show_gold)
    return {
        "round": r,
        "summary": {k: int(row[k]) for k in ("candidates", "pool", "context", "seeds", "judgments")},
        "scored": bool(row["scored"]),
        "stop": row["stop"] if isinstance(row["stop"], str) else None,
        "selected": list(chosen["shown"]),
        "pool": _rows(pool, [*viewdata.POOL_VIEW_COLUMNS, "unit_id", "pinned", "in_context"]),
        "seeds": [{**s, "gold": _gold(s["gold"], show_gold)} for s in _rows(seeds)],
        "terms": _rows(
            terms,
            [
                "shown",
                "label",
                "term",
                "kind",
                "seed",
                "seed_title",
                "tf",
                "df",
                "idf",
                "query_connection",
                "1 + query connection",
                "tf factor (1+ln tf)",
                "seed_weight",
                "priority",
                "selected",
                "order",
                "resolved",
                "resolution",
            ],
        ),
        "context": _rows(context),
        "empty": {
            "seeds": "round 0 is plain BM25: it has no seeds"
            if r == 0
            else f"round {r} has no seeds (no passage of round {r - 1} qualified)",
            "terms": "round 0 is plain BM25: no expansion terms yet" if r == 0 else f"round {r}: no candidate terms",
            "context": "round 0 judges the question alone: no context yet"
            if r == 0
            else "context is off (use_context=false)"
            if not trace.params.use_context
            else f"round {r}: no passage of round {r - 1} was kept as context",
        },
    }


def _passage(d: dict, unit_id: int, index, question_tokens, show_gold: bool) -> dict:
    text = None
    if index is not None:
        with contextlib.suppress(KeyError):
            unit = index.unit(unit_id)
            text = "\n".join(x for x in (unit.heading if unit.heading != unit.title else "", unit.body) if x)
    return {
        "unit_id": unit_id,
        "title": d["title"],
        "source": public(d["source"]),
        "gold": d["gold"] if show_gold else None,
        "text": text,
        "marks": viewdata.mark_spans(text, question_tokens, d["terms"]) if text else [],
        "history": plain(d["history"]),
        "via": [
            {"round": r, "terms": [{"shown": s, "term": t, "rank": k, "seed": seed} for s, t, k, seed in terms]}
            for r, terms in d["via"]
        ],
    }


def check_index(trace, index, option: str = "--db") -> None:
    """The index must be the one the trace was made on: every unit the trace names has the
    trace's title there."""
    for u, info in trace.units.items():
        try:
            title = index.unit(u).title
        except KeyError:
            title = None
        if title != info.title:
            raise InputError(
                f"{option} {PurePath(str(index.path)).name}: not the index this trace was made on (unit {u} is "
                f"{info.title!r} in the trace, {title!r} there); give that index, or none (no passage text)"
            )


def trajectory_data(trace, index=None, source: str | None = None) -> dict:
    """The page's data block: the run, its opening sentences, one entry per round (summary,
    pool, seeds, terms with their components, context), the score changes, the Sankey, the
    final ranking and every passage of the trajectory. `source`: the trace file (its name
    only is kept)."""
    trace = dataclasses.replace(trace, judge=public(trace.judge))  # every sentence below names the judge
    frames = viewdata.view_frames(trace, index)
    show_gold = bool(trace.gold)
    p = trace.params
    question_tokens = tokenize(trace.question)
    sankey = viewdata.trajectory_links(frames)
    if not show_gold:
        sankey["labels"] = [label.replace("★ ", "") for label in sankey["labels"]]
    last = frames["rounds"].iloc[-1] if len(frames["rounds"]) else None
    units = frames["passages"].sort_values(["round", "rank"]).drop_duplicates("unit_id")
    details = viewdata.passage_details(frames)
    note = viewdata.expansion_note(frames, getattr(index, "N", 0) if index is not None else 0, tuple(trace.gold))
    return {
        "question": {"id": trace.question_id, "text": trace.question, "gold": list(trace.gold)},
        "judge": trace.judge,
        "params": {k: public(v) if isinstance(v, str) else v for k, v in p.to_dict().items()},
        "run_label": f"judge {trace.judge} · L={p.L} · H={p.H} · {len(trace.rounds) - 1} expansion round(s) run",
        "stats": {k: v for k, v in trace.stats.items() if k in STATS_SHOWN and isinstance(v, (int, float))},
        "source": PurePath(str(source)).name if source else None,
        "show_gold": show_gold,
        "with_text": index is not None,
        "opening": viewdata.opening_sentences(trace),
        "expansion_note": note,
        "stop": last["stop"] if last is not None and isinstance(last["stop"], str) else None,
        "last_round": int(last["round"]) if last is not None else 0,
        "rounds": [_round_data(trace, frames, int(r), show_gold) for r in frames["rounds"]["round"]],
        "slope": viewdata.slope_lines(frames),
        "sankey": {
            **sankey,
            "empty": None if sankey["labels"] else viewdata.no_trajectory_reason(frames, trace),
            "key": [
                {"color": c, "mark": mark, "text": text}
                for c, mark, text in (
                    ([(viewdata.GOLD_NODE, "■", "gold passage")] if show_gold else [])
                    + [
                        (viewdata.TOP_NODE, "■", "in the final top 10"),
                        (viewdata.OTHER_NODE, "■", "other passage"),
                        (viewdata.TERM_NODE, "■", "term (round)"),
                        ("#9467bd", "━", "to another chunk of the seed's file"),
                    ]
                )
            ],
        },
        "ranking": _rows(viewdata.ranking_compare(frames, show_gold)),
        "diversity": bool(p.diversity),
        "passages": [_passage(details[int(u)], int(u), index, question_tokens, show_gold) for u in units["unit_id"]],
        "first_passage": int(frames["ranking"]["unit_id"].iloc[0]) if len(frames["ranking"]) else None,
    }


def trajectory_page(trace, index=None, *, source: str | None = None, title: str | None = None) -> Page:
    """The trajectory page of `trace` (render it with `workbench.report.page.render`)."""
    if index is not None:
        check_index(trace, index)
    head = trace.question_id or "trajectory"
    return Page(
        "trajectory",
        title or f"SAG2 trajectory · {head} · {public(trace.judge)}",
        trajectory_data(trace, index, source),
        SCRIPTS,
    )
