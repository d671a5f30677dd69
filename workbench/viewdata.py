"""The view data of a trajectory: what each view of the dashboard and of the HTML page shows,
computed from the trace frames only (pure functions over pandas, no widgets, no HTML page).

widgets/ (the dashboard) and workbench/report/ (the self-contained page) both read these, so
the two show the same pool, seeds, term components, credited via-terms and score changes.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> frames = Run(index, questions[0], judge=LexicalJudge(index)).run().frames()
>>> pool_table(frames, round_no=1, show_gold=True)[["rank", "title", "origin", "gold"]].head(3)
   rank                         title     origin   gold
0     1  Onboarding for new engineers  protected  False
1     2                Single sign-on  protected  False
2     3                    Login flow  protected   True
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
else:
    from workbench.lazy import pandas as pd  # ~0.4 s of every command's start, imported on first use

from workbench.text import phrase, surface_form

POOL_VIEW_COLUMNS = [
    "rank",
    "title",
    "source",
    "origin",
    "retrieval_rank",
    "via_terms",
    "score",
    "previous_score",
    "explanation",
    "gold",
]
TERM_COMPONENTS = ["tf factor (1+ln tf)", "idf", "1 + query connection", "seed_weight"]


CREDIT_COLUMNS = ["round", "unit_id", "term", "display", "term_rank", "first", "seed", "seed_title"]


def term_label(term: str, display) -> str:
    """What a view writes for a term: its surface form, with the token form in brackets when
    the surface holds more than the term (a fragment such as 'ț' from 'Brațov').

    >>> term_label("é lodie marchetti", "Élodie Marchetti"), term_label("ț", "Brațov")
    ('Élodie Marchetti', 'Brațov (ț)')
    """
    if not isinstance(display, str) or not display or display == term:
        return str(term)
    return display if phrase(display) == term else f"{display} ({term})"


def _term_displays(trace, index) -> dict:
    """{(round, term): surface form} for every term row of the trace: a name's own surface
    when it gives the term, else the span of the seed's body that does (needs the index)."""
    out = {}
    for r in trace.rounds:
        for t in r.terms:
            texts = [t.surface] if t.kind == "name" and t.surface else []
            if index is not None:
                with contextlib.suppress(KeyError):  # a trace from another index: the token form stays
                    texts.append(index.unit(t.seed).body)
            shown = t.term
            for text in texts:
                shown = surface_form(t.term, text)
                if shown != t.term or phrase(text) == t.term:
                    break
            out[(r.round, t.term)] = shown
    return out


def _credits(trace, index, displays: dict) -> list[dict]:
    """Every selected term whose list holds a retrieved passage, not only the first one the
    engine's interleaving took it from. With the index: each selected term's unseen matches
    ranked by the round's BM25 expression, as the engine ranks them (engine.retrieve_expansion);
    without it, the term the trace records."""
    from workbench.engine import history

    rows = []
    for r in trace.rounds:
        if not r.candidates or r.round == 0:
            continue
        sel = sorted((t for t in r.terms if t.selected), key=lambda t: t.order)
        seeds = {t.term: t.seed for t in sel}
        lists: dict = {}
        if index is not None and all(t.resolved for t in sel):
            seen = history(trace.rounds[: r.round], trace.params).seen
            matched = {t.term: index.matches(t.resolved) - seen for t in sel}
            among = set().union(*matched.values()) if matched else set()
            bm25 = index.bm25_all(r.expression, trace.params.field_weights, among=among)
            for term, units in matched.items():
                ordered = sorted(units, key=lambda u: (bm25.get(u, math.inf), u))
                lists[term] = {u: i + 1 for i, u in enumerate(ordered)}
        for c in r.candidates:
            credited = [(c.via_term, c.term_rank)] if c.via_term else []
            credited += [(t.term, lists[t.term][c.unit_id]) for t in sel if c.unit_id in lists.get(t.term, {})]
            for term, rank in dict(credited).items():
                seed = seeds.get(term)
                rows.append(
                    {
                        "round": r.round,
                        "unit_id": c.unit_id,
                        "term": term,
                        "display": displays.get((r.round, term), term),
                        "term_rank": rank,
                        "first": term == c.via_term,
                        "seed": seed,
                        "seed_title": trace.units[seed].title if seed in trace.units else None,
                    }
                )
    return rows


def view_frames(trace, index=None) -> dict:
    """`trace.frames()` plus what the views show about terms and passages (display only):
    terms["display"], the term as the seed text writes it; passages["via_terms"], every
    selected term that retrieved the passage (surface forms, the engine's first one first);
    passages["label"], the title, with the lines when another chunk of the same file is in
    the trajectory; and frames["credits"], one row per (round, passage, retrieving term).

    >>> from workbench.engine import Run
    >>> from workbench.judges import LexicalJudge
    >>> f = view_frames(Run(index, questions[1], judge=LexicalJudge(index)).run(), index)
    >>> p = f["passages"].query("round == 1 and source.str.startswith('zh/roles.md')")
    >>> p[["via_term", "via_terms"]].to_dict("records")
    [{'via_term': '保存', 'via_terms': '保存, role_id, id'}]
    """
    frames = trace.frames()
    displays = _term_displays(trace, index)
    t = frames["terms"]
    t["display"] = [displays.get((r, term), term) for r, term in zip(t["round"], t["term"])]
    credits = pd.DataFrame(_credits(trace, index, displays), columns=CREDIT_COLUMNS)
    credits = credits.sort_values(["round", "unit_id", "first", "term_rank"], ascending=[True, True, False, True])
    frames["credits"] = credits.reset_index(drop=True)
    joined = {
        k: ", ".join(map(term_label, g["term"], g["display"]))
        for k, g in credits.groupby(["round", "unit_id"], sort=False)
    }
    p = frames["passages"]
    p["via_terms"] = [joined.get((r, u)) for r, u in zip(p["round"], p["unit_id"])]
    per_document: dict = {}
    for u, info in trace.units.items():
        per_document.setdefault(info.document, []).append(u)
    p["label"] = [
        f"{title} ({trace.units[u].location})" if len(per_document.get(trace.units[u].document, ())) > 1 else title
        for u, title in zip(p["unit_id"], p["title"])
    ]
    return frames


def short(text: str, n: int = 38) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def short_label(label: str, n: int = 38) -> str:
    """`short`, keeping a chunk's "(lines …)" at the end: it is what tells two chunks apart.

    >>> short_label("Onboarding for new engineers (lines 1-11)", 28)
    'Onboarding for… (lines 1-11)'
    """
    label = str(label)
    head, sep, tail = label.rpartition(" (")
    if not sep or len(label) <= n or not tail.startswith(("line", "doc")):
        return short(label, n)
    return short(head, max(8, n - len(tail) - 2)) + " (" + tail


def pool_table(frames: dict, round_no: int, show_gold: bool) -> pd.DataFrame:
    """The round's pool (or unscored candidates) by rank: origin, retrieval rank, the terms
    that retrieved it, scores."""
    p = frames["passages"]
    p = p[p["round"] == round_no].copy()
    if "via_terms" not in p.columns:  # plain trace frames: the one term the engine records
        p["via_terms"] = p["via_term"]
    p["_order"] = p["rank"].fillna(p["retrieval_rank"]).fillna(1e9)
    p = p.sort_values(["_order", "unit_id"])
    cols = [c for c in POOL_VIEW_COLUMNS if (show_gold or c != "gold") and c in p.columns]
    if "explanation" in cols and p["explanation"].isna().all():
        cols.remove("explanation")  # a judge that does not explain itself: no empty column
    return p[[*cols, "unit_id", "pinned", "in_context"]].reset_index(drop=True)


def context_table(frames: dict, round_no: int, show_gold: bool) -> pd.DataFrame:
    c = frames["context"]
    c = c[c["round"] == round_no].copy()
    c["source"] = c["unit_id"].map(dict(zip(frames["passages"]["unit_id"], frames["passages"]["source"])))
    if show_gold:
        gold_units = set(
            frames["passages"].loc[
                frames["passages"]["gold"] == True,  # noqa: E712
                "unit_id",
            ]
        )
        c["gold"] = c["unit_id"].isin(gold_units)
    return c.reset_index(drop=True)


def seeds_by_round(frames: dict) -> dict:
    """{round r: [unit ids of S_(r-1)]}, the seeds whose terms retrieved round r."""
    seeds = frames["seeds"].sort_values(["round", "rank"])
    return {int(r): [int(u) for u in g["unit_id"]] for r, g in seeds.groupby("round")}


def seed_bars(frames: dict, round_no: int) -> pd.DataFrame:
    """Seeds whose terms retrieved this round (S_(r-1)), in seed order, with their score, the
    seed weight the term-weighting rule gave them, and how many selected terms they won."""
    cols = ["unit_id", "title", "previous_rank", "seed_score", "seed_weight", "gold", "terms_selected"]
    s = frames["seeds"]
    s = s[s["round"] == round_no].sort_values("rank")
    if s.empty:
        return pd.DataFrame(columns=cols)
    p = frames["passages"]
    prev = p[p["round"] == round_no - 1].set_index("unit_id")
    t = frames["terms"]
    selected = t[(t["round"] == round_no) & t["selected"]].groupby("seed").size()
    out = pd.DataFrame(
        {
            "unit_id": s["unit_id"].astype(int).to_numpy(),
            "title": s["title"].to_numpy(),
            "seed_score": s["score"].to_numpy(),
            "seed_weight": s["weight"].to_numpy(),
            "gold": s["gold"].to_numpy(),
        }
    )
    if "label" in p.columns:  # two chunks of one file: their lines tell them apart
        out["title"] = out["unit_id"].map(dict(zip(p["unit_id"], p["label"]))).fillna(out["title"])
    out["previous_rank"] = out["unit_id"].map(prev["rank"])
    out["terms_selected"] = out["unit_id"].map(selected).fillna(0).astype(int)
    return out[cols]


def term_components(frames: dict, round_no: int, top: int = 25) -> pd.DataFrame:
    """The round's terms by priority (selected first, then the best unselected up to `top`),
    with the four factors of priority = (1+ln tf)·idf·(1+c)·w and the resolved form."""
    t = frames["terms"]
    t = t[t["round"] == round_no].sort_values(["priority", "term"], ascending=[False, True]).head(top).copy()
    t["tf factor (1+ln tf)"] = [1 + math.log(x) if x and x > 0 else 0.0 for x in t["tf"]]
    t["1 + query connection"] = 1 + t["query_connection"]
    t["product"] = t["tf factor (1+ln tf)"] * t["idf"] * t["1 + query connection"] * t["seed_weight"]
    shown = t["display"] if "display" in t.columns else t["term"]
    t["shown"] = [term_label(term, d) for term, d in zip(t["term"], shown)]
    t["label"] = [
        f"{lab} → {res}" if isinstance(res, str) and res != term else lab
        for lab, term, res in zip(t["shown"], t["term"], t["resolved"])
    ]
    return t.reset_index(drop=True)


def slope_lines(frames: dict) -> dict:
    """Score of every scored unit across rounds, split into gold / entered by expansion / other.

    Returns {category: (x, y, text)} with None separating units, so each category is one
    plotly trace (hundreds of units stay fast)."""
    p = frames["passages"].dropna(subset=["score"])
    first = frames["passages"].sort_values("round").drop_duplicates("unit_id")
    via_expansion = set(first.loc[first["via_term"].notna(), "unit_id"])
    gold = set(p.loc[p["gold"] == True, "unit_id"])  # noqa: E712
    out: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in ("other", "entered by expansion", "gold")}
    for unit_id, g in p.sort_values("round").groupby("unit_id", sort=True):
        cat = "gold" if unit_id in gold else "entered by expansion" if unit_id in via_expansion else "other"
        x, y, text = out[cat]
        title = g["title"].iloc[0]
        for r, s, v in zip(g["round"], g["score"], g["via_term"]):
            x.append(int(r))
            y.append(float(s))
            text.append(f"{title}" + (f" (via “{v}”)" if isinstance(v, str) else ""))
        x.append(None)
        y.append(None)
        text.append(None)
    return out


GOLD_NODE, TOP_NODE, OTHER_NODE, TERM_NODE = "#2ca02c", "#1f77b4", "#9e9e9e", "#ff7f0e"
TERM_LINK, SAME_FILE_LINK = "rgba(255,127,14,0.25)", "rgba(148,103,189,0.45)"


def _credit_rows(frames: dict) -> pd.DataFrame:
    """(round, unit_id, term, display, term_rank, first): the view frames' credits, or the one
    term plain trace frames record."""
    if "credits" in frames:
        return frames["credits"]
    p = frames["passages"].dropna(subset=["via_term"]).drop_duplicates(["round", "unit_id"])
    return pd.DataFrame(
        {
            "round": p["round"],
            "unit_id": p["unit_id"],
            "term": p["via_term"],
            "display": p["via_term"],
            "term_rank": p["term_rank"],
            "first": True,
        }
    )


def trajectory_links(frames: dict, keep_top: int = 10) -> dict:
    """Sankey data passage → term → passage across rounds, every retrieving term credited.

    Kept: the seeds, the selected terms, and the retrieved passages that matter (final top
    `keep_top`, gold, or later used as seeds); a term is kept only when it leads to one.
    A passage from the seed's own file (another chunk) gets a link of its own colour and its
    lines in the label, so it does not read as a passage expanding into itself."""
    p, t = frames["passages"], frames["terms"]
    ranking = frames["ranking"]
    final_top = set(ranking["unit_id"].head(keep_top))
    gold_units = set(p.loc[p["gold"] == True, "unit_id"])  # noqa: E712
    seeds = set(t["seed"])
    credits = _credit_rows(frames)
    out: dict = {"labels": [], "colors": [], "hover": [], "source": [], "target": [], "value": [], "label": []}
    out["link_colors"] = []
    if credits.empty:
        return out
    interesting = credits[credits["unit_id"].isin(final_top | gold_units | seeds)]
    if interesting.empty:
        # expansion ran but nothing it found mattered later: draw what it found (grey) rather
        # than an empty diagram that reads as "no expansion"
        firsts = credits[credits["first"]].merge(p[["round", "unit_id", "retrieval_rank"]], on=["round", "unit_id"])
        keep = firsts.sort_values(["round", "retrieval_rank"]).head(30)[["round", "unit_id"]]
        interesting = credits.merge(keep, on=["round", "unit_id"])
    sel = t[t["selected"].astype(bool)]
    index: dict = {}
    labels = dict(zip(p["unit_id"], p["label"] if "label" in p.columns else p["title"]))
    documents = dict(zip(p["unit_id"], p["document"]))
    for u, title in zip(t["seed"], t["seed_title"]):
        labels.setdefault(u, title)

    def node(key, label, color, hover):
        if key not in index:
            index[key] = len(out["labels"])
            out["labels"].append(label)
            out["colors"].append(color)
            out["hover"].append(hover)
        return index[key]

    def passage(u):
        u = int(u)
        color = GOLD_NODE if u in gold_units else TOP_NODE if u in final_top else OTHER_NODE
        name = str(labels.get(u, u))
        return node(
            ("p", u), "★ " * (u in gold_units) + short_label(name, 44), color, f"{name}<br>{documents.get(u, '')}"
        )

    def link(a, b, value, label, color):
        out["source"].append(a)
        out["target"].append(b)
        out["value"].append(value)
        out["label"].append(label)
        out["link_colors"].append(color)

    for (r, term), g in interesting.groupby(["round", "term"], sort=True):
        winner = sel[(sel["round"] == r) & (sel["term"] == term)]
        if winner.empty:
            continue
        seed = int(winner["seed"].iloc[0])
        shown = term_label(term, g["display"].iloc[0])
        s = passage(seed)
        tn = node(("t", r, term), f"“{short(shown, 30)}” (r{r})", TERM_NODE, f"term “{shown}”<br>token form: {term}")
        link(s, tn, len(g), f"seed {short(labels.get(seed, seed))} → term {shown}", TERM_LINK)
        for u, rank in zip(g["unit_id"], g["term_rank"]):
            same = documents.get(int(u)) == documents.get(seed)
            what = f"term {shown} → {short(labels.get(int(u), u))} (round {r}, #{int(rank)} for this term)"
            if same:
                what += f"; another chunk of the seed's own file {documents.get(seed)}"
            link(tn, passage(u), 1, what, SAME_FILE_LINK if same else TERM_LINK)
    return out


def sankey_legend(show_gold: bool) -> str:
    """The Sankey's colour key, as one line of plotly annotation text."""
    items = [(GOLD_NODE, "■", "gold passage")] if show_gold else []
    items += [
        (TOP_NODE, "■", "in the final top 10"),
        (OTHER_NODE, "■", "other passage"),
        (TERM_NODE, "■", "term (round)"),
        ("#9467bd", "━", "to another chunk of the seed's file"),
    ]
    return "   ".join(f"<span style='color:{c}'>{mark}</span> {text}" for c, mark, text in items)


def ranking_compare(frames: dict, show_gold: bool, top: int = 10) -> pd.DataFrame:
    """Final top `top` after diversity, with the rank each had before the reordering."""
    r = frames["ranking"].head(top).copy()
    r["move"] = r["rank_before_diversity"] - r["position"]
    r["source"] = r["unit_id"].map(dict(zip(frames["passages"]["unit_id"], frames["passages"]["source"])))
    cols = ["position", "rank_before_diversity", "move", "title", "source", "score"] + (["gold"] if show_gold else [])
    return r[[*cols, "unit_id"]]


def diff_runs(reference: dict | None, current: dict, top: int = 10) -> dict:
    """What entered the top `top`, what left it, and rank moves, between two runs' frames."""
    if reference is None:
        return {"entered": [], "left": [], "moved": [], "same": True, "reference": [], "current": []}
    a = reference["ranking"].head(top)
    b = current["ranking"].head(top)
    ra = dict(zip(a["unit_id"], a["position"]))
    rb = dict(zip(b["unit_id"], b["position"]))
    titles = {**dict(zip(a["unit_id"], a["title"])), **dict(zip(b["unit_id"], b["title"]))}
    entered = [(titles[u], rb[u]) for u in b["unit_id"] if u not in ra]
    left = [(titles[u], ra[u]) for u in a["unit_id"] if u not in rb]
    moved = [(titles[u], ra[u], rb[u]) for u in b["unit_id"] if u in ra and ra[u] != rb[u]]
    return {
        "entered": entered,
        "left": left,
        "moved": moved,
        "same": not (entered or left or moved),
        "reference": list(a["title"]),
        "current": list(b["title"]),
    }


def no_trajectory_reason(frames: dict, trace) -> str:
    """Why the passage → term → passage diagram is empty, in the run's own terms."""
    rounds = frames["rounds"]
    last = rounds.iloc[-1]
    stop = last["stop"] if isinstance(last["stop"], str) else ""
    if trace.params.H == 0:
        return "no expansion: H=0 (round 0 only)"
    if len(rounds) == 1:
        return f"no expansion: stopped after round 0 ({stop or 'early stop'})"
    t = frames["terms"]
    selected = int(t["selected"].sum()) if len(t) else 0
    if selected == 0:
        return f"expansion ran {len(rounds) - 1} round(s) but selected no terms"
    return f"expansion ran {len(rounds) - 1} round(s) with {selected} selected terms, but they retrieved no new passage"


def expansion_note(frames: dict, corpus_units: int, gold: tuple = ()) -> str | None:
    """A sentence when expansion has nothing to do for this question: round 0 (plain BM25)
    already retrieves most of the corpus, or every gold document; None otherwise.

    >>> import pandas as pd
    >>> p = pd.DataFrame({"round": [0, 0, 0], "document": ["a", "b", "c"], "unit_id": [1, 2, 3]})
    >>> expansion_note({"passages": p}, corpus_units=3).split(":")[1]
    ' expansion has little or nothing left to find here.'
    """
    p = frames["passages"]
    first = p[p["round"] == 0]
    n = int(first["unit_id"].nunique())
    if corpus_units and n >= 0.8 * corpus_units:
        return (
            f"BM25 alone (round 0) already retrieves {n} of the corpus’s {corpus_units} passages: "
            "expansion has little or nothing left to find here."
        )
    if gold and set(gold) <= set(first["document"]):
        return (
            f"BM25 alone (round 0) already retrieves all {len(set(gold))} gold documents: "
            "expansion has nothing to add to recall here (it can only reorder)."
        )
    return None


def passage_detail(frames: dict, unit_id: int) -> dict:
    """Everything the passage view shows about one unit, from the frames: its rounds and
    scores, the term (and seed) it came through, the judge's explanation when there is one.

    Returns {"title", "source", "history": DataFrame(round, rank, score, origin, via_term,
    explanation?), "via": [(round, [(shown term, token form, rank in its list, seed title)])]
    with every term that retrieved it, the engine's first one first, "terms": the run's
    selected terms (token and surface forms, for marking the text)}."""
    found = passage_details(frames, [unit_id])
    if unit_id not in found:
        raise KeyError(f"unit {unit_id} is not in this trajectory")
    detail = found[unit_id]
    return {**detail, "history": pd.DataFrame(detail["history"], columns=detail["columns"])}


def passage_details(frames: dict, unit_ids=None) -> dict:
    """{unit_id: `passage_detail`} for the given units (all when None), in one pass over the
    frames (a page holds every passage of the trajectory); "history" is a list of row dicts
    here, its columns in "columns"."""
    p = frames["passages"]
    if unit_ids is not None:
        p = p[p["unit_id"].isin(list(unit_ids))]
    cols = [c for c in ("round", "rank", "score", "origin", "via_term", "explanation") if c in p.columns]
    t = frames["terms"]
    selected = t[t["selected"].astype(bool)]
    seed_of: dict = {}
    for r, term, seed in zip(selected["round"], selected["term"], selected["seed_title"]):
        seed_of.setdefault((r, term), str(seed))
    credits = _credit_rows(frames)
    via: dict = {}
    for (u, r), g in credits[credits["unit_id"].isin(set(p["unit_id"]))].groupby(["unit_id", "round"], sort=True):
        terms = [
            (term_label(term, shown), term, None if rank != rank else int(rank), seed_of.get((r, term), ""))
            for term, shown, rank in zip(g["term"], g["display"], g["term_rank"])
        ]
        via.setdefault(int(u), []).append((int(r), terms))
    shown = selected["display"] if "display" in selected.columns else selected["term"]
    marked = sorted(set(selected["term"]) | {x for x in shown if isinstance(x, str)})
    out: dict = {}
    ordered = p.sort_values("round", kind="stable")
    extra = ["unit_id", "title", "source", "gold"]
    for rec in ordered[[*extra, *cols]].to_dict("records"):
        u = int(rec["unit_id"])
        if u not in out:
            gold = rec["gold"]  # True, numpy's True (a column of bools), False, or None without gold
            out[u] = {
                "title": rec["title"],
                "source": rec["source"],
                "history": [],
                "columns": cols,
                "via": via.get(u, []),
                "terms": marked,
                "gold": bool(gold) if gold is not None and gold == gold else False,
            }
        out[u]["history"].append({c: rec[c] for c in cols})
    return out


def mark_spans(text: str, question_tokens, terms) -> list[tuple[int, int, str]]:
    """Where the passage view marks `text`: (start, end, "q") for the question's tokens and
    (start, end, "t") for the selected terms, in order; case-insensitive, whole words for
    Latin script, plain substrings for CJK (no spaces between words); question marks win
    on overlap.

    >>> mark_spans("Login issues a role_id", ["login"], ["role_id"])
    [(0, 5, 'q'), (15, 22, 't')]
    >>> mark_spans("Glass Harbour harbour", ["harbour"], ["glass harbour"])  # a question token wins inside a term
    [(0, 6, 't'), (6, 13, 'q'), (14, 21, 'q')]
    """
    import re

    def pattern(word: str) -> str:
        w = re.escape(word)
        return w if re.search(r"[\u3000-\u9fff\uac00-\ud7af]", word) else rf"(?<![\w]){w}(?![\w])"

    # one byte per character (0 none, 1 term, 2 question), painted in order, later marks winning;
    # the runs are then found by a bytes regex, not a Python loop over every character
    marks = bytearray(len(text))
    for code, words in ((1, terms), (2, question_tokens)):
        for word in sorted({w for w in words if w and w.strip()}, key=len, reverse=True):
            for mt in re.finditer(pattern(word), text, flags=re.IGNORECASE):
                marks[mt.start() : mt.end()] = bytes((code,)) * (mt.end() - mt.start())
    return [(m.start(), m.end(), "t" if m.group()[0] == 1 else "q") for m in re.finditer(rb"\x01+|\x02+", marks)]


def highlight(text: str, question_tokens, terms) -> str:
    """HTML of `text` with the `mark_spans` marked: <mark class=q> question tokens, <mark
    class=t> selected terms.

    >>> highlight("Login issues a role_id", ["login"], ["role_id"])
    '<mark class="q">Login</mark> issues a <mark class="t">role_id</mark>'
    """
    import html as _html

    out: list[str] = []
    at = 0
    for start, end, mark in mark_spans(text, question_tokens, terms):
        out.append(_html.escape(text[at:start]))
        out.append(f'<mark class="{mark}">{_html.escape(text[start:end])}</mark>')
        at = end
    out.append(_html.escape(text[at:]))
    return "".join(out)


def opening_sentences(trace) -> list[str]:
    """What expansion did for this trace's question, in words, from the trace alone: gold in
    the top 10 of BM25 (round 0's lexical order, the BM25 baseline's ranking) and of SAG2,
    and each gold passage BM25 missed that a term brought in; [] without gold. The dashboard's
    opening note says the same of a fresh run (workbench/runs/examples.py: `examine`).

    >>> from workbench.engine import Run
    >>> from workbench.judges import LexicalJudge
    >>> print("\\n".join(opening_sentences(Run(index, questions[1], judge=LexicalJudge(index)).run())))
    In the top 10 for docs-02: BM25 alone finds 1 of 3 gold passages, SAG2 with the lexical judge 3 of 3.
    Round 1: the seed ...
    """
    from workbench.runs.examples import TOP, _bridge

    gold = list(dict.fromkeys(trace.gold))
    if not gold:
        return []
    first = trace.rounds[0].candidates if trace.rounds else ()
    bm25 = trace.documents([c.unit_id for c in sorted(first, key=lambda c: c.retrieval_rank)])[:TOP]
    sag2 = trace.documents()[:TOP]
    gained = [g for g in gold if g in sag2 and g not in bm25]
    bridges = [b for b in (_bridge(trace, g, sag2.index(g) + 1) for g in gained) if b is not None]
    lines = [
        f"In the top {TOP} for {trace.question_id or 'this question'}: BM25 alone finds "
        f"{sum(g in bm25 for g in gold)} of {len(gold)} gold passages, SAG2 with the {trace.judge} judge "
        f"{sum(g in sag2 for g in gold)} of {len(gold)}."
    ]
    lines += [b.sentence()[0].upper() + b.sentence()[1:] + "." for b in bridges]
    if not bridges:
        lines.append("No gold passage here came in through an expansion term.")
    return lines
