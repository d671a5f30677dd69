"use strict";
// The variants page: one question re-run over a grid of parameters and judges. Every variant's
// trajectory is in the data (workbench/report/variants.py `variants_data`), so a switch only draws:
// the trajectory views come from trajectory.js (window.sag2wbTrajectory), and what changed between
// the variant switched from and the one switched to is Results.changes()'s text, computed in Python.
(() => {
  const D = SAG2.data();
  if (D.kind !== "variants") return;
  const { el, table } = SAG2;
  const root = document.getElementById("sag2wb-root");
  const axes = D.axes;
  const variants = D.variants;
  const keyOf = (settings) => axes.map((a) => String(settings[a.name])).join("\u0000");
  const byKey = new Map(variants.map((v, i) => [keyOf(v.settings), i]));

  document.head.append(el("style", { text: `
.sag2wb-variant-bar { position: sticky; top: 0; z-index: 3; background: #fff; border-bottom: 2px solid #1f77b4; padding: 6px 0; }
.sag2wb-axis { display: flex; flex-wrap: wrap; gap: 4px; align-items: center; margin: 2px 0; }
.sag2wb-axis b { min-width: 5em; }
.sag2wb-axis button { font: inherit; padding: 1px 10px; cursor: pointer; border: 1px solid #bbb; background: #f8f8f8; border-radius: 3px; }
.sag2wb-axis button[aria-pressed=true] { background: #1f77b4; color: #fff; border-color: #1f77b4; }
.sag2wb-change { margin: 6px 0; padding: 4px 8px; border-left: 3px solid #ff7f0e; background: #fff8f0; white-space: pre-wrap; font-size: 12px; }
.sag2wb-variants-table .sag2wb-table-box { max-height: 200px; }
.sag2wb-variant-view .sag2wb-stepper { top: var(--bar, 0px); }
` }));

  let current = null; // the shown variant's index
  let view = null; // its trajectory views
  const holder = el("div", { class: "sag2wb-variant-view" });
  const change = el("div", { class: "sag2wb-change", "aria-live": "polite" });
  const bar = el("div", { class: "sag2wb-variant-bar" });
  const buttons = axes.map((a) => a.values.map((value) => el("button", {
    type: "button", text: value, dataset: { axis: a.name, value },
    on: { click: () => switchTo(Object.assign({}, variants[current].settings, { [a.name]: value })) },
  })));
  axes.forEach((a, k) => bar.append(el("div", { class: "sag2wb-axis", dataset: { axis: a.name } },
    el("b", { text: a.name }), ...buttons[k])));

  const rows = variants.map((v, i) => ({ i, name: v.name, ...v.metrics }));
  const grid = el("details", { class: "sag2wb-variants-table" }, el("summary", { text: `every variant (${variants.length}): ${D.metric} and judgments; click one to show it` }),
    table({ name: "variants", rows, filter: true, onRow: (r) => switchTo(variants[r.i].settings),
      columns: [{ key: "name", label: "variant" }, { key: "R@5", label: "R@5", number: true },
        { key: "R@10", label: "R@10", number: true }, { key: "AE@10", label: "AE@10", number: true },
        { key: "judgments", label: "judgments", integer: true }] }));

  const count = variants.length;
  root.replaceChildren(
    el("h1", { text: "SAG2 variants" }),
    el("div", { class: "sag2wb-intro", text: `The same question re-run with ${count} variants of its settings. Pick a value on ` +
      "any row below: the trajectory redraws at once, and the orange box says what changed against the variant you " +
      `switched from (the first round where they part, terms and gold gained or lost, rank moves). ${D.judgments.asked} ` +
      `judgments were asked for all of them, and ${D.judgments.reused} more answered from their shared memo. ` +
      `Question ${D.question.id || ""}: ${D.question.text}` }),
    bar, change, grid, holder);

  function say(from, to) {
    if (from === null || from === to) {
      change.textContent = `Showing ${variants[to].name}. Switch a setting above to see what changes.`;
      return;
    }
    let c = D.changes[`${from}>${to}`];
    let head = `From ${variants[from].name} to ${variants[to].name}:`;
    if (c === undefined) { // a jump across several settings: told against the page's first variant
      c = D.changes[`${D.start}>${to}`];
      head = `From ${variants[D.start].name} (the first variant shown; ${variants[from].name} differs from ` +
        `${variants[to].name} in more than one setting) to ${variants[to].name}:`;
    }
    if (c === undefined) { change.textContent = `Showing ${variants[to].name} (the first variant shown).`; return; }
    change.textContent = `${head}\n${c.summary}`;
    change.dataset.firstRound = c.first_round === null ? "" : String(c.first_round);
  }

  function show(i) {
    const started = performance.now();
    const round = view ? view.round() : 0;
    if (view) view.destroy();
    const from = current;
    current = i;
    for (const [k, a] of axes.entries()) {
      for (const b of buttons[k]) b.setAttribute("aria-pressed", String(b.dataset.value === String(variants[i].settings[a.name])));
    }
    say(from, i);
    view = window.sag2wbTrajectory(holder, variants[i].data, { heading: false, texts: D.texts,
      onRound: (r) => { document.body.dataset.round = String(r); } });
    view.setRound(round); // the same round, where the new variant has it
    document.body.dataset.variant = String(i);
    holder.style.setProperty("--bar", `${bar.offsetHeight}px`);
    window.sag2wbSwitchMs = performance.now() - started;
  }

  function switchTo(settings) {
    let i = byKey.get(keyOf(settings));
    if (i === undefined) i = current; // cannot happen: the grid is complete
    if (i !== current) show(i);
  }

  show(D.start);
  document.body.dataset.drawn = "yes";
  window.sag2wbDrawnMs = performance.now();
})();
