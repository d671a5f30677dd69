"use strict";
// The trajectory views: the dashboard's views without a kernel. Every number comes from the data
// (workbench/report/trajectory.py `trajectory_data`, computed with workbench.viewdata); this only draws.
//
// window.sag2wbTrajectory(root, data, options) draws one trajectory into the element `root` and
// returns {setRound(r), round(), destroy()}. Several may live on one page (everything is found
// inside `root`, no id is used); the arrow keys go to the visible one last clicked or created.
// options: heading (default true: the page's h1), texts ({unit_id: text}, passage texts kept once
// per page when a passage's own text is absent), onRound(r) (called after each step).
(() => {
  const { el, svg, fmt, short, section, table, hbars } = SAG2;
  const C = { gold: "#2ca02c", expansion: "#ff7f0e", other: "#b0b0b0", selected: "#1f77b4", unselected: "#c6d4e1" };
  const live = []; // the drawn trajectories, the one to get the keys first
  const visible = (v) => v.root.isConnected && v.root.getClientRects().length > 0;

  document.addEventListener("keydown", (e) => {
    const tag = e.target && e.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const v = live.find(visible);
    if (!v) return;
    v.setRound(v.round() + (e.key === "ArrowRight" ? 1 : -1));
    e.preventDefault();
  });

  function front(v) {
    const i = live.indexOf(v);
    if (i >= 0) live.splice(i, 1);
    live.unshift(v);
  }

function draw(root, D, options) {
  const opts = options || {};
  const INTRO = "Round 0 is a plain BM25 search for the question. In every later round the best passages so far " +
    "(the seeds) give terms, often names and identifiers the question never mentions; each term is searched on " +
    "its own and brings new passages, which the judge scores. Step through the rounds (buttons, slider or the " +
    "arrow keys) to see which term brought which passage" + (D.show_gold ? "; ★ marks gold evidence." : ".");
  const last = D.rounds.length - 1;
  const passages = new Map(D.passages.map((p) => [p.unit_id, p]));
  const textOf = (x) => (x.text !== null && x.text !== undefined ? x.text
    : opts.texts && opts.texts[x.unit_id] !== undefined ? opts.texts[x.unit_id] : null);
  const star = (gold) => (D.show_gold && gold ? "★ " : "");
  const tables = { pool: {}, context: {} }; // each table's sort and filter, kept across rounds
  let round = 0;
  let picked = D.first_passage;

  const p = D.params;
  const facts = [`judge ${D.judge}`, `L=${p.L}`, `H=${p.H}`, `${last} expansion round(s) run`,
    `stopped after round ${D.last_round}: ${D.stop || "(no stop reason)"}`];
  if (D.show_gold) facts.push(`gold documents: ${D.question.gold.join(", ")}`);
  if (D.source) facts.push(`from ${D.source}`);
  root.replaceChildren(...[
    opts.heading === false ? null : el("h1", { text: "SAG2 trajectory: seed → term → passage" }),
    el("div", { class: "sag2wb-intro", text: INTRO }),
    el("div", { class: "sag2wb-question" }, el("b", { text: D.question.text }),
      D.question.id ? el("span", { class: "sag2wb-muted", text: ` (${D.question.id})` }) : null),
    el("div", { class: "sag2wb-muted sag2wb-facts", text: facts.join(" · ") }),
    D.opening.length ? el("div", { class: "sag2wb-opening" }, ...D.opening.map((s) => el("div", { text: s }))) : null,
    D.expansion_note ? el("div", { class: "sag2wb-expansion-note sag2wb-muted", text: D.expansion_note }) : null,
  ].filter(Boolean));

  // ---- the stepper --------------------------------------------------------------------------
  const slider = el("input", { type: "range", min: 0, max: last, step: 1, value: 0, class: "sag2wb-round-slider",
    "aria-label": "round", on: { input: (e) => setRound(Number(e.target.value)) } });
  const prev = el("button", { type: "button", class: "sag2wb-prev", text: "◀ prev", on: { click: () => setRound(round - 1) } });
  const next = el("button", { type: "button", class: "sag2wb-next", text: "next ▶", on: { click: () => setRound(round + 1) } });
  const summary = el("div", { class: "sag2wb-round-summary" });
  root.append(el("div", { class: "sag2wb-stepper" }, el("span", { text: "Round" }), slider, prev, next, summary));

  const body = {};
  for (const name of ["seeds", "context", "terms", "pool", "passage", "slope", "ranking", "trajectory"]) {
    body[name] = el("div", { class: `sag2wb-${name}` });
  }
  const wide = (s) => { s.classList.add("sag2wb-wide"); return s; };
  root.append(el("div", { class: "sag2wb-grid" },
    section("seeds", "Seeds of the round and their weights", body.seeds),
    section("context", "Context the judge saw (with previous scores)", body.context),
    wide(section("terms", "Term priorities = (1+ln tf) · idf · (1+c) · w", body.terms)),
    section("pool", "Candidate pool of the round (click a row to read the passage)", body.pool),
    section("passage", "Passage", body.passage),
    section("slope", "Score changes across rounds", body.slope),
    section("ranking", "Final top 10: after diversity, with the rank before it", body.ranking),
    wide(section("trajectory", "Trajectory: seed passage → term → retrieved passage", body.trajectory))
  ));

  const empty = (text) => el("div", { class: "sag2wb-empty", text });

  function drawSummary(r) {
    const s = r.summary;
    const terms = r.selected.length
      ? ` · terms: ${r.selected.slice(0, 12).join(", ")}${r.selected.length > 12 ? " …" : ""}` : "";
    summary.replaceChildren(
      el("div", {}, el("span", { text: "Round " }), el("b", { class: "sag2wb-round-number", text: r.round }),
        el("span", { text: ` of ${last}: ${s.candidates} candidates, pool ${s.pool}, context ${s.context}, ` +
          `${s.seeds} seeds, ${s.judgments} judgments` }), el("i", { class: "sag2wb-round-terms", text: terms })));
  }

  function drawSeeds(r) {
    if (!r.seeds.length) return body.seeds.replaceChildren(empty(r.empty.seeds));
    const groups = r.seeds.map((s) => ({
      label: `${star(s.gold)}${s.previous_rank === null ? "?" : s.previous_rank}. ${s.title}`,
      dataset: { unit: s.unit_id },
      title: `${s.title}: seed score ${fmt(s.seed_score)}, weight ${fmt(s.seed_weight)}, ${s.terms_selected} term(s) won`,
      values: [s.seed_score, s.seed_weight],
    }));
    const series = [{ name: "seed score", max: 1.05, color: () => C.selected },
      { name: "seed weight w(d)", max: 1.05, color: () => C.expansion }];
    body.seeds.replaceChildren(el("div", { class: "sag2wb-caption", text: `round ${r.round}: seeds (ranked in round ${r.round - 1})` }),
      hbars({ groups, series, width: 620, labelWidth: 230, barHeight: 14, title: "seeds" }));
  }

  function drawTerms(r) {
    if (!r.terms.length) return body.terms.replaceChildren(empty(r.empty.terms));
    const chosen = r.terms.filter((t) => t.selected).length;
    const groups = r.terms.map((t) => ({
      label: t.label, strong: t.selected, selected: t.selected, color: t.selected ? C.selected : C.unselected,
      dataset: { term: t.term },
      title: `${t.shown} (token form “${t.term}”; seed: ${t.seed_title}; ${t.resolution || "not searched"})`,
      values: [t["tf factor (1+ln tf)"], t.idf, t["1 + query connection"], t.seed_weight, t.priority],
    }));
    const series = ["1+ln tf (count)", "idf (rarity)", "1+c (question link)", "w (seed weight)", "priority"].map((name) => ({ name }));
    const columns = [
      { key: "shown", label: "term" }, { key: "term", label: "token form" }, { key: "seed_title", label: "seed" },
      { key: "tf", label: "tf", integer: true }, { key: "idf", label: "idf", number: true },
      { key: "seed_weight", label: "w", number: true }, { key: "query_connection", label: "c", number: true },
      { key: "1 + query connection", label: "1+c", number: true }, { key: "priority", label: "priority", number: true },
      { key: "selected", label: "selected", text: (t) => (t.selected ? `#${t.order}` : "") },
      { key: "resolved", label: "searched as" },
    ];
    body.terms.replaceChildren(
      el("div", { class: "sag2wb-caption sag2wb-terms-title", text: `round ${r.round}: ${chosen} selected (dark bars); the top ${r.terms.length} terms by priority` }),
      el("div", { class: "sag2wb-caption", text: "tf: times the seed uses the term · idf: how rare it is in the corpus · " +
        "w: seed weight = 0.5 + 0.5 · seed score / best seed score · c: query connection = idf summed over the question's " +
        "words in the seed sentence that holds the term; 1+c so a term whose sentence shares none still counts" }),
      hbars({ groups, series, width: 1240, labelWidth: 250, barHeight: 12, title: "term priorities" }),
      el("details", { class: "sag2wb-components" }, el("summary", { text: "the components as numbers (tf, idf, w, c, 1+c)" }),
        table({ name: "terms", columns, rows: r.terms }))
    );
  }

  const goldCol = D.show_gold ? [{ key: "gold", label: "gold", text: (x) => (x.gold ? "★" : "") }] : [];
  const rowClass = (x) => [D.show_gold && x.gold ? "gold" : "", x.unit_id === picked ? "picked" : ""].join(" ").trim() || null;
  const titleCol = { key: "title", label: "title", text: (x) => `${star(x.gold)}${x.pinned ? "(pinned) " : ""}${x.title}` };

  function drawPool(r) {
    const columns = [{ key: "rank", label: "rank", integer: true }, titleCol, { key: "source", label: "source" },
      { key: "origin", label: "origin" }, { key: "retrieval_rank", label: "ret. rank", integer: true },
      { key: "via_terms", label: "via terms" }, { key: "score", label: "score", number: true },
      { key: "previous_score", label: "prev. score", number: true }];
    if (r.pool.some((x) => x.explanation)) columns.push({ key: "explanation", label: "judge's reason" });
    body.pool.replaceChildren(table({ name: "pool", columns: [...columns, ...goldCol], rows: r.pool, filter: true,
      state: tables.pool, onRow: (x) => pick(x.unit_id), rowClass, caption: `round ${r.round}: ${r.pool.length} units` }));
  }

  function drawContext(r) {
    if (!r.context.length) return body.context.replaceChildren(empty(r.empty.context));
    const columns = [{ key: "position", label: "#", integer: true }, titleCol, { key: "source", label: "source" },
      { key: "previous_score", label: "prev. score", number: true }, ...goldCol];
    body.context.replaceChildren(table({ name: "context", columns, rows: r.context, state: tables.context,
      onRow: (x) => pick(x.unit_id), rowClass, caption: `round ${r.round}: ${r.context.length} passages of round ${r.round - 1}` }));
  }

  function drawRanking() {
    const move = (v) => (v === null ? "" : (v > 0 ? "↑" : v < 0 ? "↓" : "=") + (v ? Math.abs(v) : ""));
    const columns = [{ key: "position", label: "#", integer: true }, { key: "rank_before_diversity", label: "before", integer: true },
      { key: "move", label: "move", text: (x) => move(x.move) }, titleCol, { key: "source", label: "source" },
      { key: "score", label: "score", number: true }, ...goldCol];
    body.ranking.replaceChildren(table({ name: "ranking", columns, rows: D.ranking, onRow: (x) => pick(x.unit_id), rowClass,
      caption: D.diversity ? "" : "diversity is off" }));
  }

  // ---- score changes: one line per passage across rounds, gold and expansion entries highlighted
  function drawSlope(r) {
    const W = 620, H = 250, L = 40, R = 12, T = 12, B = 36;
    const xmax = Math.max(1, last);
    const x = (v) => L + (v / xmax) * (W - L - R);
    const y = (v) => T + (1 - v) * (H - T - B);
    const chart = svg("svg", { class: "sag2wb-chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "score changes" });
    for (const v of [0, 0.5, 1]) {
      chart.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v), "stroke-dasharray": v ? "2 3" : null }),
        svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end", text: v }));
    }
    for (let k = 0; k <= xmax; k++) chart.append(svg("text", { x: x(k), y: H - B + 14, "text-anchor": "middle", text: k }));
    chart.append(svg("text", { x: (L + W - R) / 2, y: H - B + 28, "text-anchor": "middle", text: "round" }));
    const styles = [["other", C.other, 1], ["entered by expansion", C.expansion, 2], ["gold", C.gold, 3]];
    for (const [name, color, width] of styles) {
      if (name === "gold" && !D.show_gold) continue;
      const line = D.slope[name];
      let pts = [];
      const flush = () => {
        if (!pts.length) return;
        const g = svg("g", { class: "sag2wb-slope-line", dataset: { category: name } }, svg("title", { text: pts[0][2] }));
        g.append(svg("polyline", { points: pts.map(([a, b]) => `${x(a)},${y(b)}`).join(" "), fill: "none", stroke: color,
          "stroke-width": width, "stroke-opacity": name === "other" ? 0.7 : 1 }));
        for (const [a, b, t] of pts) g.append(svg("circle", { cx: x(a), cy: y(b), r: 1.5 + width, fill: color },
          svg("title", { text: `${t}\nround ${a}: ${fmt(b)}` })));
        chart.append(g);
        pts = [];
      };
      line[0].forEach((a, i) => (a === null ? flush() : pts.push([a, line[1][i], line[2][i]])));
      flush();
    }
    chart.append(svg("line", { class: "sag2wb-round-marker", x1: x(r.round), x2: x(r.round), y1: T, y2: H - B,
      stroke: "#444", "stroke-dasharray": "3 3", dataset: { round: r.round } }));
    const items = styles.filter(([n]) => n !== "gold" || D.show_gold).map(([n, c]) => ({ color: c, mark: "━", text: n }));
    body.slope.replaceChildren(el("div", { class: "sag2wb-caption", text: `scores by round; dotted line: round ${r.round}` }),
      chart, SAG2.key(items));
    SAG2.colorKeys(body.slope);
  }

  // ---- the Sankey: columns by depth (seed → term → passage → term → ...), bands sized by count
  function drawSankey() {
    const d = D.sankey;
    if (!d.labels.length) return body.trajectory.replaceChildren(empty(d.empty));
    const n = d.labels.length;
    const depth = new Array(n).fill(0);
    for (let it = 0; it < n; it++) {
      let changed = false;
      d.source.forEach((s, i) => {
        const t = d.target[i];
        if (depth[t] < depth[s] + 1 && depth[s] + 1 < n) { depth[t] = depth[s] + 1; changed = true; }
      });
      if (!changed) break;
    }
    const inV = new Array(n).fill(0), outV = new Array(n).fill(0);
    d.source.forEach((s, i) => { outV[s] += d.value[i]; inV[d.target[i]] += d.value[i]; });
    const val = inV.map((v, i) => Math.max(v, outV[i], 1));
    const ncol = Math.max(...depth) + 1;
    const cols = Array.from({ length: ncol }, () => []);
    depth.forEach((c, i) => cols[c].push(i));
    const W = 1240, nodeW = 10, pad = 4, T = 4;
    const H = Math.max(240, Math.min(1600, Math.max(...cols.map((c) => c.length)) * 18 + 10));
    const ky = Math.min(...cols.map((c) => (H - 2 * T - pad * (c.length - 1)) / c.reduce((a, i) => a + val[i], 0)));
    const gapX = ncol > 1 ? (W - nodeW) / (ncol - 1) : 0;
    const y0 = new Array(n).fill(0), mid = (i) => y0[i] + (val[i] * ky) / 2;
    cols.forEach((c, k) => {
      if (k > 0) {
        const order = (i) => {
          const from = d.source.filter((_, j) => d.target[j] === i);
          return from.length ? from.reduce((a, s) => a + mid(s), 0) / from.length : 0;
        };
        c.sort((a, b) => order(a) - order(b));
      }
      let at = T;
      for (const i of c) { y0[i] = at; at += val[i] * ky + pad; }
    });
    const nx = (i) => depth[i] * gapX;
    const chart = svg("svg", { class: "sag2wb-chart sag2wb-sankey", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "trajectory" });
    const outAt = y0.slice(), inAt = y0.slice();
    const links = d.source.map((s, i) => i).sort((a, b) => mid(d.target[a]) - mid(d.target[b]) || mid(d.source[a]) - mid(d.source[b]));
    for (const i of links) {
      const s = d.source[i], t = d.target[i], w = d.value[i] * ky;
      const ya = outAt[s] + w / 2, yb = inAt[t] + w / 2;
      outAt[s] += w; inAt[t] += w;
      const xa = nx(s) + nodeW, xb = nx(t), xm = (xa + xb) / 2;
      chart.append(svg("path", { d: `M${xa},${ya} C${xm},${ya} ${xm},${yb} ${xb},${yb}`, fill: "none", stroke: d.link_colors[i],
        "stroke-width": Math.max(1, w), class: "sag2wb-link" }, svg("title", { text: d.label[i] })));
    }
    const chars = Math.max(10, Math.floor((gapX - nodeW - 8) / 6));
    for (let i = 0; i < n; i++) {
      const lastCol = depth[i] === ncol - 1 && ncol > 1;
      const hover = String(d.hover[i]).replaceAll("<br>", "\n");
      chart.append(svg("g", { class: "sag2wb-node", dataset: { label: d.labels[i] } },
        svg("rect", { x: nx(i), y: y0[i], width: nodeW, height: Math.max(1, val[i] * ky), fill: d.colors[i] }, svg("title", { text: hover })),
        svg("text", { x: lastCol ? nx(i) - 4 : nx(i) + nodeW + 4, y: mid(i) + 3.5, "text-anchor": lastCol ? "end" : "start",
          text: short(d.labels[i], chars) }, svg("title", { text: hover }))));
    }
    body.trajectory.replaceChildren(el("div", { class: "sag2wb-caption", text: D.run_label }), chart, SAG2.key(d.key));
    SAG2.colorKeys(body.trajectory);
  }

  // ---- the passage view ----------------------------------------------------------------------
  const picker = el("select", { class: "sag2wb-passage-picker", "aria-label": "passage", on: { change: (e) => pick(Number(e.target.value)) } },
    ...D.passages.map((x) => el("option", { value: x.unit_id, text: `${star(x.gold)}${short(x.title, 50)} · ${x.source}` })));
  const detail = el("div", { class: "sag2wb-passage-detail" });
  body.passage.replaceChildren(picker, detail);

  function credit(t) {
    const extra = [t.rank ? `#${t.rank} in its list` : "", t.shown !== t.term ? `token form “${t.term}”` : "",
      t.seed ? `a term of seed ${t.seed}` : ""].filter(Boolean).join("; ");
    return `“${t.shown}”` + (extra ? ` (${extra})` : "");
  }

  function marked(text, marks) {
    const out = el("div", { class: "text" });
    let at = 0;
    for (const [a, b, cls] of marks) {
      if (a > at) out.append(text.slice(at, a));
      out.append(el("mark", { class: cls, text: text.slice(a, b) }));
      at = b;
    }
    out.append(text.slice(at));
    return out;
  }

  function pick(unit) {
    if (!passages.has(unit)) return;
    picked = unit;
    picker.value = String(unit);
    const x = passages.get(unit);
    const via = x.via.map((v) => `round ${v.round}: through ${credit(v.terms[0])}` +
      (v.terms.length > 1 ? ", also " + v.terms.slice(1).map(credit).join(", ") : "")).join("; ") ||
      "retrieved by the question itself (BM25), not through a term";
    const history = table({ name: "history", rows: x.history, columns: [{ key: "round", label: "round", integer: true },
      { key: "rank", label: "rank", integer: true }, { key: "score", label: "score", number: true }, { key: "origin", label: "origin" },
      { key: "via_term", label: "via term" }, ...(x.history.some((h) => h.explanation) ? [{ key: "explanation", label: "judge's reason" }] : [])] });
    detail.replaceChildren(
      el("div", { class: "sag2wb-passage-shown", dataset: { unit } }, el("b", { class: "sag2wb-passage-title", text: x.title }),
        D.show_gold && x.gold ? el("span", { class: "sag2wb-star", text: " ★ gold" }) : null, " · ", el("code", { text: x.source }),
        el("div", { class: "sag2wb-via", text: `came in: ${via}` }),
        el("div", { class: "sag2wb-muted" }, "marked: ", el("mark", { class: "q", text: "question tokens" }), " ",
          el("mark", { class: "t", text: "terms selected in this run" })),
        textOf(x) !== null ? marked(textOf(x), x.marks)
          : empty("The passage text is not in this page: make it with --db, the index the trace was made on."),
        history));
    for (const tr of root.querySelectorAll("tr[data-unit]")) tr.classList.toggle("picked", Number(tr.dataset.unit) === unit);
  }

  function setRound(r) {
    r = Math.max(0, Math.min(last, r));
    round = r;
    const data = D.rounds[r];
    slider.value = String(r);
    prev.disabled = r === 0;
    next.disabled = r === last;
    drawSummary(data);
    drawSeeds(data);
    drawContext(data);
    drawTerms(data);
    drawPool(data);
    drawSlope(data);
    root.dataset.round = String(r);
    if (opts.onRound) opts.onRound(r);
  }

  const view = { root, setRound, round: () => round, destroy };
  const claim = () => front(view);
  function destroy() {
    const i = live.indexOf(view);
    if (i >= 0) live.splice(i, 1);
    root.removeEventListener("pointerdown", claim);
    root.replaceChildren();
    delete root.dataset.round;
  }
  root.addEventListener("pointerdown", claim);
  front(view);
  drawRanking();
  drawSankey();
  setRound(0);
  if (picked !== null) pick(picked);
  return view;
}

  window.sag2wbTrajectory = draw;

  // the trajectory page itself: its data block is one trajectory
  const D = SAG2.data();
  if (D.kind === "trajectory") {
    draw(document.getElementById("sag2wb-root"), D, { onRound: (r) => { document.body.dataset.round = String(r); } });
    document.body.dataset.drawn = "yes";
    window.sag2wbDrawnMs = performance.now();
  }
})();
