"use strict";
// sag2wb pages: the shared part. Every page reads its data block and draws with these helpers:
// DOM elements (text always as textContent, never parsed as HTML), sortable and filterable tables,
// and small SVG charts (no library, no request).
const SAG2 = (() => {
  const SVG_NS = "http://www.w3.org/2000/svg";

  let parsed = null; // the page's data block, parsed once for every script of the page
  function data() {
    if (parsed === null) parsed = JSON.parse(document.getElementById("sag2wb-data").textContent);
    return parsed;
  }

  // the page's lazily read data blocks (experiment pages: one per trajectory), parsed on first use
  let blocks = null;
  function block(name) {
    if (blocks === null) {
      blocks = new Map();
      for (const s of document.querySelectorAll("script[data-block]")) blocks.set(s.dataset.block, { node: s, value: undefined });
    }
    const b = blocks.get(name);
    if (!b) return null;
    if (b.value === undefined) b.value = unpack(JSON.parse(b.node.textContent));
    return b.value;
  }

  // packed tables ({__cols, __rows}, workbench/report/page.py `compact`) back to lists of objects
  function unpack(v) {
    if (Array.isArray(v)) return v.map(unpack);
    if (v === null || typeof v !== "object") return v;
    if (v.__cols && v.__rows) return v.__rows.map((row) => Object.fromEntries(v.__cols.map((k, i) => [k, unpack(row[i])])));
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = unpack(x);
    return out;
  }

  function put(node, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = String(v);
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(c);
    return node;
  }

  const el = (tag, attrs, ...children) => put(document.createElement(tag), attrs, children);
  const svg = (tag, attrs, ...children) => put(document.createElementNS(SVG_NS, tag), attrs, children);

  function fmt(v, integer) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v === "boolean") return v ? "yes" : "";
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return "";
      return integer || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(3);
    }
    return String(v);
  }

  function short(text, n) {
    text = String(text === null || text === undefined ? "" : text);
    return text.length <= n ? text : text.slice(0, n - 1) + "…";
  }

  function section(name, title, ...children) {
    return el("section", { class: `sag2wb-section sag2wb-${name}-section` }, el("h2", { text: title }), ...children);
  }

  // A table of `rows` (objects) with `columns` [{key, label, integer, text(row)}]: a click on a
  // header sorts by it (again: the other way), the filter box keeps rows whose shown cells hold
  // the text, a click on a row calls onRow(row).
  function table(opts) {
    const { name, columns, rows, onRow, rowClass, filter, caption } = opts;
    // the sort and the filter live in `state` when given, so a redrawn table (the next round) keeps them
    const state = opts.state || {};
    let sortKey = state.key && columns.some((c) => c.key === state.key) ? state.key : null;
    let descending = Boolean(state.descending);
    let query = state.query || "";
    const keep = () => Object.assign(state, { key: sortKey, descending, query });
    const shown = (row, c) => (c.text ? c.text(row) : fmt(row[c.key], c.integer));
    const head = el("tr", {});
    const body = el("tbody", {});
    const count = el("div", { class: "sag2wb-caption" });
    const box = el("div", { class: `sag2wb-table-box sag2wb-${name}-table` });
    const tbl = el("table", { class: "sag2wb-table", dataset: { name } }, el("thead", {}, head), body);
    box.append(tbl);
    function draw() {
      let list = rows.slice();
      if (query) {
        const q = query.toLowerCase();
        list = list.filter((r) => columns.some((c) => shown(r, c).toLowerCase().includes(q)));
      }
      if (sortKey !== null) {
        const c = columns.find((x) => x.key === sortKey);
        const value = (r) => (c.sort ? c.sort(r) : r[c.key]);
        list.sort((a, b) => {
          const x = value(a);
          const y = value(b);
          if (x === y) return 0;
          if (x === null || x === undefined) return 1; // empty cells last, either way
          if (y === null || y === undefined) return -1;
          const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return descending ? -order : order;
        });
      }
      body.replaceChildren(
        ...list.map((r) =>
          el(
            "tr",
            { class: rowClass ? rowClass(r) : null,
              dataset: opts.rowData ? opts.rowData(r) : r.unit_id !== undefined ? { unit: r.unit_id } : {},
              on: onRow ? { click: () => onRow(r) } : {} },
            ...columns.map((c) =>
              el("td", { class: c.integer || c.number ? "num" : null, text: shown(r, c), title: c.title ? c.title(r) : null })
            )
          )
        )
      );
      count.textContent = (caption ? caption + " · " : "") +
        (query ? `${list.length} of ${rows.length} rows match “${query}”` : `${rows.length} rows`);
      for (const th of head.children) {
        th.setAttribute("aria-sort", th.dataset.key === sortKey ? (descending ? "descending" : "ascending") : "none");
      }
    }
    for (const c of columns) {
      head.append(el("th", { text: c.label, dataset: { key: c.key }, title: "sort by " + c.label, on: { click: () => {
        descending = sortKey === c.key ? !descending : false;
        sortKey = c.key;
        keep();
        draw();
      } } }));
    }
    const parts = [];
    if (filter) {
      parts.push(el("input", { type: "search", class: `sag2wb-filter sag2wb-${name}-filter`, placeholder: "filter rows…",
        "aria-label": "filter the rows", value: query || null,
        on: { input: (e) => { query = e.target.value.trim(); keep(); draw(); } } }));
    }
    draw();
    return el("div", { class: `sag2wb-table-wrap` }, ...parts, count, box);
  }

  // Horizontal bars: groups [{label, title, bars: [{value, color, name}]}], x from 0 to `max`;
  // `facets` > 1 draws several bar columns sharing the labels (the term components).
  function hbars(opts) {
    const { groups, series, max, width, labelWidth, barHeight, title } = opts;
    const facets = series.length;
    const gap = 12;
    const top = 18;
    const plotW = (width - labelWidth - gap * facets) / facets;
    const rowH = barHeight + 6;
    const height = top + groups.length * rowH + 16;
    const chart = svg("svg", { class: "sag2wb-chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title || "" });
    groups.forEach((g, i) => {
      const y = top + i * rowH;
      chart.append(svg("text", { x: labelWidth - 6, y: y + rowH / 2 + 3, "text-anchor": "end", class: "label",
        "font-weight": g.strong ? 600 : null }, short(g.label, Math.floor(labelWidth / 6)), svg("title", { text: g.title || g.label })));
    });
    series.forEach((s, f) => {
      const x0 = labelWidth + f * (plotW + gap);
      const m = s.max || max || Math.max(1e-9, ...groups.map((g) => g.values[f] || 0).filter(Number.isFinite));
      chart.append(svg("text", { x: x0, y: 11, "font-weight": 600, text: s.name }));
      chart.append(svg("line", { class: "axis", x1: x0, x2: x0, y1: top - 2, y2: height - 14 }));
      chart.append(svg("text", { x: x0 + plotW, y: height - 3, "text-anchor": "end", class: "tick", text: fmt(m) }));
      groups.forEach((g, i) => {
        const v = g.values[f];
        if (v === null || v === undefined || !Number.isFinite(v)) return;
        const y = top + i * rowH + 3;
        const w = Math.max(0.5, (Math.max(0, v) / m) * plotW);
        chart.append(svg("rect", { x: x0, y, width: w, height: barHeight - 1, fill: s.color ? s.color(g) : g.color,
          class: "bar", dataset: { ...(g.dataset || {}), label: g.label, value: v, series: s.name, selected: g.selected ? "1" : "0" } },
          svg("title", { text: `${g.title || g.label}\n${s.name}: ${fmt(v)}` })));
      });
    });
    return chart;
  }

  function key(items) {
    return el("div", { class: "sag2wb-key" }, ...items.map((k) =>
      el("span", {}, el("span", { text: k.mark || "■", style: null, dataset: { color: k.color } }), " " + k.text)));
  }

  function colorKeys(root) {
    for (const s of root.querySelectorAll("[data-color]")) s.style.color = s.dataset.color;
  }

  return { data, block, unpack, el, svg, fmt, short, section, table, hbars, key, colorKeys };
})();
