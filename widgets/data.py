"""What each view shows, computed from the trace frames only (pure functions, no widgets).

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

import math

import pandas as pd

POOL_VIEW_COLUMNS = [
    "rank",
    "title",
    "source",
    "origin",
    "retrieval_rank",
    "via_term",
    "score",
    "previous_score",
    "explanation",
    "gold",
]
TERM_COMPONENTS = ["tf factor (1+ln tf)", "idf", "1 + query connection", "seed_weight"]


def short(text: str, n: int = 38) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def pool_table(frames: dict, round_no: int, show_gold: bool) -> pd.DataFrame:
    """The round's pool (or unscored candidates) by rank: origin, retrieval rank, via term,
    scores."""
    p = frames["passages"]
    p = p[p["round"] == round_no].copy()
    p["_order"] = p["rank"].fillna(p["retrieval_rank"]).fillna(1e9)
    p = p.sort_values(["_order", "unit_id"])
    cols = [c for c in POOL_VIEW_COLUMNS if (show_gold or c != "gold") and c in p.columns]
    if "explanation" in cols and p["explanation"].isna().all():
        cols.remove("explanation")  # a judge that does not explain itself: no empty column
    return p[cols + ["unit_id", "pinned", "in_context"]].reset_index(drop=True)


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
    t["label"] = [
        f"{term} → {res}" if isinstance(res, str) and res != term else str(term)
        for term, res in zip(t["term"], t["resolved"])
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
    out = {"other": ([], [], []), "entered by expansion": ([], [], []), "gold": ([], [], [])}
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


def trajectory_links(frames: dict, keep_top: int = 10) -> dict:
    """Sankey data passage → term → passage across rounds.

    Kept: the seeds, the selected terms, and the retrieved passages that matter (final top
    `keep_top`, gold, or later used as seeds); a term is kept only when it leads to one."""
    p, t = frames["passages"], frames["terms"]
    ranking = frames["ranking"]
    final_top = set(ranking["unit_id"].head(keep_top))
    gold_units = set(p.loc[p["gold"] == True, "unit_id"])  # noqa: E712
    seeds = set(t["seed"])
    retrieved = p.dropna(subset=["via_term"]).drop_duplicates(["round", "unit_id"])
    interesting = retrieved[retrieved["unit_id"].isin(final_top | gold_units | seeds)]
    if interesting.empty:
        # expansion ran but nothing it found mattered later: draw what it found (grey) rather
        # than an empty diagram that reads as "no expansion"
        interesting = retrieved.sort_values(["round", "retrieval_rank"]).head(30)
    sel = t[t["selected"]]
    nodes, index, colors, links = [], {}, [], {"source": [], "target": [], "value": [], "label": []}
    titles = dict(zip(p["unit_id"], p["title"]))
    for u, title in zip(t["seed"], t["seed_title"]):
        titles.setdefault(u, title)

    def node(key, label, color):
        if key not in index:
            index[key] = len(nodes)
            nodes.append(label)
            colors.append(color)
        return index[key]

    def passage_color(u):
        return "#2ca02c" if u in gold_units else "#1f77b4" if u in final_top else "#9e9e9e"

    for (r, term), g in interesting.groupby(["round", "via_term"], sort=True):
        winner = sel[(sel["round"] == r) & (sel["term"] == term)]
        if winner.empty:
            continue
        seed = int(winner["seed"].iloc[0])
        s = node(("p", seed), "★ " * (seed in gold_units) + short(titles.get(seed, seed)), passage_color(seed))
        tn = node(("t", r, term), f"“{term}” (r{r})", "#ff7f0e")
        links["source"].append(s)
        links["target"].append(tn)
        links["value"].append(len(g))
        links["label"].append(f"seed {short(titles.get(seed, seed))} → term {term}")
        for u in g["unit_id"]:
            u = int(u)
            pn = node(("p", u), "★ " * (u in gold_units) + short(titles.get(u, u)), passage_color(u))
            links["source"].append(tn)
            links["target"].append(pn)
            links["value"].append(1)
            links["label"].append(f"term {term} → {short(titles.get(u, u))} (round {r})")
    return {"labels": nodes, "colors": colors, **links}


def ranking_compare(frames: dict, show_gold: bool, top: int = 10) -> pd.DataFrame:
    """Final top `top` after diversity, with the rank each had before the reordering."""
    r = frames["ranking"].head(top).copy()
    r["move"] = r["rank_before_diversity"] - r["position"]
    r["source"] = r["unit_id"].map(dict(zip(frames["passages"]["unit_id"], frames["passages"]["source"])))
    cols = ["position", "rank_before_diversity", "move", "title", "source", "score"] + (["gold"] if show_gold else [])
    return r[cols + ["unit_id"]]


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


def passage_detail(frames: dict, unit_id: int) -> dict:
    """Everything the passage view shows about one unit, from the frames: its rounds and
    scores, the term (and seed) it came through, the judge's explanation when there is one.

    Returns {"title", "source", "history": DataFrame(round, rank, score, origin, via_term,
    explanation?), "via": [(round, term, seed title)], "terms": selected terms of the run}."""
    p = frames["passages"]
    rows = p[p["unit_id"] == unit_id].sort_values("round")
    if rows.empty:
        raise KeyError(f"unit {unit_id} is not in this trajectory")
    cols = [c for c in ("round", "rank", "score", "origin", "via_term", "explanation") if c in rows.columns]
    t = frames["terms"]
    via = []
    for r, term in zip(rows["round"], rows["via_term"]):
        if isinstance(term, str):
            win = t[(t["round"] == r) & (t["term"] == term) & t["selected"]]
            via.append((int(r), term, str(win["seed_title"].iloc[0]) if len(win) else ""))
    return {
        "title": rows["title"].iloc[0],
        "source": rows["source"].iloc[0],
        "history": rows[cols].reset_index(drop=True),
        "via": via,
        "terms": sorted(set(t.loc[t["selected"], "term"])),
        "gold": bool(rows["gold"].iloc[0] is True),
    }


def highlight(text: str, question_tokens, terms) -> str:
    """HTML of `text` with the question's tokens (<mark class=q>) and the selected terms
    (<mark class=t>) marked; case-insensitive, whole words for Latin script, plain
    substrings for CJK (no spaces between words).

    >>> highlight("Login issues a role_id", ["login"], ["role_id"])
    '<mark class="q">Login</mark> issues a <mark class="t">role_id</mark>'
    """
    import html as _html
    import re

    def pattern(word: str) -> str:
        w = re.escape(word)
        return w if re.search(r"[\u3000-\u9fff\uac00-\ud7af]", word) else rf"(?<![\w]){w}(?![\w])"

    marks = {}
    for cls, words in (("t", terms), ("q", question_tokens)):  # question marks win on overlap
        for word in sorted({w for w in words if w and w.strip()}, key=len, reverse=True):
            for mt in re.finditer(pattern(word), text, flags=re.IGNORECASE):
                for i in range(mt.start(), mt.end()):
                    marks[i] = cls
    out, i = [], 0
    while i < len(text):
        cls = marks.get(i)
        j = i
        while j < len(text) and marks.get(j) == cls:
            j += 1
        chunk = _html.escape(text[i:j])
        out.append(f'<mark class="{cls}">{chunk}</mark>' if cls else chunk)
        i = j
    return "".join(out)
