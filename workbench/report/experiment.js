"use strict";
// The experiment page: the metrics table, the per-type breakdown, the per-question change plot and
// table, and each question's trajectory drawn in the page (trajectory.js) when its trace is at hand.
// Every number comes from the data block (workbench/report/experiment.py); this only draws.
(() => {
  const D = SAG2.data();
  if (D.kind !== "experiment") return;
  const { el, svg, fmt, short, section, table, hbars } = SAG2;
  const COLORS = { win: "#2ca02c", loss: "#d62728", tie: "#b0b0b0", "no value": "#dddddd" };
  const SERIES = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728", "#aec7e8"];
  const M = D.metric, ref = D.reference, variants = D.configs.filter((c) => c !== ref);
  const root = document.getElementById("sag2wb-root");
  // metrics are percentages: two decimals, as out.json and the paper print them
  const f2 = (v) => (typeof v === "number" && Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : fmt(v));
  const range = (v) => (v ? `[${f2(v[0])}, ${f2(v[1])}]` : "");
  const p = (v) => (v === null || v === undefined ? "" : v < 0.001 ? "< 0.001" : v.toFixed(3));
  let variant = variants[0] || null;
  let outcome = "all";
  const state = { questions: {} };

  const facts = D.inputs.map((x, i) => {
    const bits = [`judge ${x.judge}`, `${x.questions} questions`];
    if (x.params) bits.push(`L=${x.params.L}`, `H=${x.params.H}`);
    if (x.kind === "eval") bits.push(x.traces ? `traces: ${x.traces} (${x.traces_found})` : "no traces kept");
    return el("div", {}, el("b", { text: `${D.inputs.length > 1 ? "AB"[i] + ": " : ""}${x.name}` }),
      el("span", { class: "sag2wb-muted", text: ` (${x.kind}) · ${bits.join(" · ")}` }));
  });
  const notes = [D.scope, D.without_trajectories, ...D.needs_traces.map((n) => `needs traces: ${n}`)].filter(Boolean);
  root.replaceChildren(...[
    el("h1", { text: `SAG2 experiment: ${D.inputs.map((x) => x.name).join(" vs ")}` }),
    el("div", { class: "sag2wb-facts" }, ...facts),
    D.counts ? el("div", { class: "sag2wb-opening sag2wb-counts", text: `${D.configs[1]} against ${ref} on ${M}: ` +
      `${D.counts.wins} wins, ${D.counts.losses} losses, ${D.counts.ties} ties` }) : null,
    ...notes.map((n) => el("div", { class: "sag2wb-muted sag2wb-note", text: n })),
  ].filter(Boolean));

  // ---- the metrics table --------------------------------------------------------------------
  const paper = D.paper;
  const metricCols = ["R@5", "R@10", "AE@10"].map((m) => ({ key: m, label: m, number: true,
    text: (r) => `${f2(r[m])} ${range(r[`${m} interval`])}`, title: () => `${m}: mean, 95% bootstrap interval` }));
  const cols = [{ key: "config", label: "configuration" }, { key: "questions", label: "questions", integer: true }, ...metricCols];
  if (D.metrics.reference) {
    cols.push({ key: "difference", label: `Δ ${M} vs ${ref}`, number: true,
      text: (r) => (r.config === ref ? "" : `${f2(r.difference)} ${range(r["difference interval"])}`) },
    { key: "p_randomization", label: "p", number: true, text: (r) => (r.config === ref ? "" : p(r.p_randomization)) },
    { key: "p_holm", label: "p (Holm)", number: true, text: (r) => (r.config === ref ? "" : p(r.p_holm)) },
    { key: "p_bonferroni", label: "p (Bonferroni)", number: true, text: (r) => (r.config === ref ? "" : p(r.p_bonferroni)) });
  }
  cols.push({ key: "judgments", label: "judgments", integer: true });
  for (const [k, label] of [["requests", "requests"], ["input_tokens", "input tokens"], ["output_tokens", "output tokens"], ["cost", "cost (USD)"]]) {
    if (D.metrics.rows.some((r) => r[k] !== undefined)) cols.push({ key: k, label, number: true });
  }
  if (paper && Object.keys(paper.rows).length) {
    const pr = (r) => paper.rows[r.config];
    cols.push({ key: "paper", label: `paper ${M}`, number: true, sort: (r) => (pr(r) ? pr(r)[M] : null),
      text: (r) => (pr(r) && pr(r)[M] !== undefined ? f2(pr(r)[M]) : ""),
      title: (r) => (pr(r) ? `${pr(r).label}: ${pr(r).table}${pr(r).derived ? " (derived: " + pr(r).derived + ")" : ""}` : "") },
    { key: "paper_source", label: "paper row", text: (r) => (pr(r) ? `${pr(r).table}: ${pr(r).label}` : "") });
  }
  const metricsTable = table({ name: "metrics", columns: cols, rows: D.metrics.rows,
    rowData: (r) => ({ config: r.config }), caption: "intervals: 95%" });
  const grid = el("div", { class: "sag2wb-grid" });
  const wide = (s) => { s.classList.add("sag2wb-wide"); return s; };
  grid.append(wide(section("metrics", "Metrics", metricsTable, el("div", { class: "sag2wb-caption", text: D.significance }),
    paper && Object.keys(paper.rows).length ? el("div", { class: "sag2wb-caption sag2wb-paper-source",
      text: `paper: ${paper.source}; ${paper.judge}. Our judge differs unless it is JEV: the paper's figure is a reference point.` }) : null)));

  // ---- per-type breakdown ---------------------------------------------------------------------
  for (const [name, by, label] of [["types", D.by_type, "type"], ["hops", D.by_hops, "hops"]]) {
    if (!by) continue;
    const columns = [{ key: by.column, label }, { key: "questions", label: "questions", integer: true },
      ...by.configs.map((c) => ({ key: c, label: c, number: true, text: (r) => f2(r[c]) }))];
    const groups = by.rows.map((r) => ({ label: `${r[by.column]} (${r.questions})`, values: by.configs.map((c) => r[c]) }));
    const chart = hbars({ groups: groups.flatMap((g) => by.configs.map((c, i) => ({ label: i ? "" : g.label,
      title: `${g.label} · ${c}: ${fmt(g.values[i])}`, values: [g.values[i]], color: SERIES[i % SERIES.length] }))),
    series: [{ name: `mean ${M}`, max: 100 }], width: 600, labelWidth: 170, barHeight: 9, title: `${M} by ${label}` });
    grid.append(section(name, `${M} by question ${label}`, table({ name, columns, rows: by.rows }), chart,
      SAG2.key(by.configs.map((c, i) => ({ color: SERIES[i % SERIES.length], text: c })))));
  }

  // ---- the per-question plot and table -------------------------------------------------------
  const plotBody = el("div", { class: "sag2wb-delta" });
  const picker = variants.length > 1 ? el("select", { class: "sag2wb-variant-picker", "aria-label": "variant",
    on: { change: (e) => { variant = e.target.value; drawQuestions(); } } },
  ...variants.map((v) => el("option", { value: v, text: `${v} vs ${ref}` }))) : null;
  const outcomes = variant ? el("select", { class: "sag2wb-outcome-filter", "aria-label": "outcome",
    on: { change: (e) => { outcome = e.target.value; drawQuestions(); } } },
  ...["all", "win", "loss", "tie"].map((o) => el("option", { value: o, text: o === "all" ? "all outcomes" : `${o}s only` }))) : null;
  const tableBody = el("div", {});
  grid.append(section("delta", variant ? `Per-question change of ${M}` : `${M} per question`, plotBody));
  grid.append(wide(section("questions", "Questions (click one to open its trajectory)",
    el("div", { class: "sag2wb-controls" }, picker, outcomes), tableBody)));
  const opened = el("div", { class: "sag2wb-opened-body" });
  grid.append(wide(section("opened", "Trajectory of the question", opened)));
  root.append(grid);
  opened.replaceChildren(el("div", { class: "sag2wb-empty", text: D.trajectories
    ? "Click a question in the table (▶: its trajectory is in this page)." : D.without_trajectories }));

  const list = (v) => (v && v.length ? v.join(", ") : "");
  function drawPlot(rows) {
    const W = 620, H = 220, L = 52, R = 8, T = 10, B = 24;
    const values = rows.map((r) => (variant ? r.delta[variant] : r.values[ref]));
    const shown = rows.map((r, i) => [r, values[i]]).filter(([, v]) => v !== null && v !== undefined)
      .sort((a, b) => b[1] - a[1] || (a[0].question < b[0].question ? -1 : 1));
    const m = Math.max(1, ...shown.map((x) => Math.abs(x[1]))); // a change: symmetric around 0
    const lo = variant ? -m : 0, hi = variant ? m : 100;
    const y = (v) => T + ((hi - v) / (hi - lo)) * (H - T - B);
    const bw = (W - L - R) / Math.max(1, shown.length);
    const chart = svg("svg", { class: "sag2wb-chart sag2wb-delta-plot", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "per-question change" });
    for (const v of variant ? [lo, 0, hi] : [0, 50, 100]) {
      chart.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v), "stroke-dasharray": v ? "2 3" : null }),
        svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end", text: f2(v) }));
    }
    shown.forEach(([r, v], i) => {
      const color = variant ? COLORS[r.outcome[variant]] : "#1f77b4";
      chart.append(svg("rect", { x: L + i * bw, y: Math.min(y(v), y(0)), width: Math.max(0.6, bw - 0.6),
        height: Math.max(0.5, Math.abs(y(v) - y(0))), fill: color, class: "bar", dataset: { question: r.question, value: v },
        on: { click: () => openQuestion(r.question) } }, svg("title", { text: `${r.question}: ${fmt(v)}` })));
    });
    chart.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle",
      text: `${shown.length} questions, ${variant ? `largest gain of ${variant} over ${ref} first` : `highest ${M} first`}` }));
    plotBody.replaceChildren(chart, variant ? SAG2.key(["win", "loss", "tie"].map((o) => ({ color: COLORS[o], text: o }))) : "");
    SAG2.colorKeys(plotBody);
  }

  function drawQuestions() {
    const rows = D.questions.filter((r) => outcome === "all" || !variant || r.outcome[variant] === outcome);
    const change = (k) => (r) => (r.change && variant === D.configs[1] ? list(r.change[k]) : "");
    const columns = [{ key: "question", label: "question" }, { key: "text", label: "text", text: (r) => short(r.text || "", 70), title: (r) => r.text || "" },
      { key: "type", label: "type" }, { key: "hops", label: "hops", integer: true },
      { key: "ref", label: `${M} ${ref}`, number: true, sort: (r) => r.values[ref], text: (r) => f2(r.values[ref]) }];
    if (variant) {
      columns.push({ key: "var", label: `${M} ${variant}`, number: true, sort: (r) => r.values[variant], text: (r) => f2(r.values[variant]) },
        { key: "delta", label: "Δ", number: true, sort: (r) => r.delta[variant], text: (r) => f2(r.delta[variant]) },
        { key: "outcome", label: "outcome", sort: (r) => r.outcome[variant], text: (r) => r.outcome[variant] });
      if (D.questions.some((r) => r.change)) {
        columns.push({ key: "first_round", label: "first differing round", integer: true, sort: (r) => (r.change ? r.change.first_round : null),
          text: (r) => (r.change && variant === D.configs[1] ? (r.change.identical ? "identical" : fmt(r.change.first_round)) : "") },
        { key: "terms_gained", label: "terms gained", text: change("terms_gained") },
        { key: "terms_lost", label: "terms lost", text: change("terms_lost") },
        { key: "gold_gained", label: "gold gained", text: change("gold_gained") },
        { key: "gold_lost", label: "gold lost", text: change("gold_lost") },
        { key: "moves", label: "rank moves", text: (r) => (r.change && variant === D.configs[1] ? r.change.moves.join("; ") : "") });
      }
    }
    columns.push({ key: "open", label: "trajectory", text: (r) => (Object.keys(r.open).length ? "▶ " + Object.keys(r.open).join(", ") : "") });
    tableBody.replaceChildren(table({ name: "questions", columns, rows, filter: true, state: state.questions,
      rowData: (r) => ({ question: r.question }), onRow: (r) => openQuestion(r.question),
      rowClass: (r) => (r.question === current ? "picked" : null), caption: `${rows.length} of ${D.questions.length} questions` }));
    drawPlot(rows);
  }

  // ---- a question's trajectory, in the page ----------------------------------------------------
  let view = null, current = null;
  function openQuestion(q, config) {
    const row = D.questions.find((r) => r.question === q);
    if (!row) return;
    current = q;
    for (const tr of tableBody.querySelectorAll("tr[data-question]")) tr.classList.toggle("picked", tr.dataset.question === q);
    const sides = Object.keys(row.open);
    if (view) { view.destroy(); view = null; }
    const head = el("div", { class: "sag2wb-opened-head" }, el("b", { text: q }),
      el("span", { class: "sag2wb-muted", text: row.text ? ` ${row.text}` : "" }));
    if (!sides.length) {
      opened.replaceChildren(head, el("div", { class: "sag2wb-empty", text: D.without_trajectories ||
        `no trace of ${q} is in this page (the result's trace folder has none for it)` }));
      return;
    }
    const which = config && row.open[config] ? config : sides[0];
    const buttons = sides.map((c) => el("button", { type: "button", class: "sag2wb-open-side" + (c === which ? " picked" : ""),
      dataset: { config: c }, text: `${c}: ${M} ${f2(row.values[c])}`, on: { click: () => openQuestion(q, c) } }));
    const container = el("div", { class: "sag2wb-opened-view", dataset: { question: q, config: which } });
    opened.replaceChildren(head, el("div", { class: "sag2wb-sides" }, ...buttons), container);
    view = window.sag2wbTrajectory(container, SAG2.block(row.open[which]), { heading: false, texts: D.texts });
    document.body.dataset.opened = `${q} ${which}`;
  }

  drawQuestions();
  SAG2.colorKeys(root);
  document.body.dataset.drawn = "yes";
  window.sag2wbDrawnMs = performance.now();
})();
