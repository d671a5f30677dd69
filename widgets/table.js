
const CSS = `
.sag2wb-dt{font-size:12px;width:100%;max-width:100%;min-width:0}
.sag2wb-dt input{font-size:12px;width:200px;margin:2px 0 4px 0;padding:1px 4px}
.sag2wb-dt .box{max-height:300px;overflow:auto;max-width:100%;width:100%}
.sag2wb-dt table{border-collapse:collapse;width:100%}
.sag2wb-dt th{background:#f2f2f2;text-align:left;padding:2px 5px;position:sticky;top:0;cursor:pointer;
  white-space:nowrap;user-select:none}
.sag2wb-dt td{padding:1px 5px;border-bottom:1px solid #eee;white-space:nowrap;overflow:hidden;
  text-overflow:ellipsis;max-width:220px}
.sag2wb-dt.compact td{max-width:110px}
.sag2wb-dt tr.row{cursor:pointer}
.sag2wb-dt tr.row:hover{background:#eef4fb}
.sag2wb-dt tr.sel{background:#dbe9f7}
.sag2wb-dt .sag2wb-gold{color:#2ca02c;font-weight:bold}
.sag2wb-dt .muted{color:#777}`;

function fmt(v, key, ints) {
  if (v === null || v === undefined || (typeof v === "number" && isNaN(v))) return "";
  if (typeof v === "boolean") return v ? "★" : "";
  if (typeof v === "number") return ints.includes(key) ? String(Math.round(v)) : (Number.isInteger(v) ? String(v) : v.toFixed(3));
  return String(v);
}

export default {
  render({ model, el }) {
    // never wider than the column it sits in: a wide table scrolls inside its box instead
    // of being cut off by the section
    el.style.width = "100%";
    el.style.minWidth = "0";
    el.style.maxWidth = "100%";
    const root = document.createElement("div");
    root.className = "sag2wb-dt";
    const style = document.createElement("style");
    style.textContent = CSS;
    const caption = document.createElement("div");
    caption.className = "muted";
    const filter = document.createElement("input");
    filter.placeholder = "filter rows…";
    filter.className = "sag2wb-dt-filter";
    const box = document.createElement("div");
    box.className = "box";
    root.append(style, caption, filter, box);
    el.appendChild(root);
    let sortKey = null, sortDir = 1;

    const draw = () => {
      root.classList.toggle("compact", !!model.get("compact"));
      const cols = model.get("columns"), ints = model.get("int_columns");
      caption.textContent = model.get("caption");
      const q = filter.value.trim().toLowerCase();
      let rows = model.get("rows").filter(r => !q || cols.some(([k]) => fmt(r[k], k, ints).toLowerCase().includes(q)));
      if (sortKey !== null) {
        rows = [...rows].sort((a, b) => {
          const x = a[sortKey], y = b[sortKey];
          const nx = x === null || x === undefined, ny = y === null || y === undefined;
          if (nx || ny) return nx === ny ? 0 : nx ? 1 : -1;  // empty cells last either way
          return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * sortDir;
        });
      }
      const table = document.createElement("table");
      const head = table.createTHead().insertRow();
      for (const [key, label] of cols) {
        const th = document.createElement("th");
        th.textContent = label + (sortKey === key ? (sortDir > 0 ? " ▲" : " ▼") : "");
        th.title = "sort by " + label;
        th.onclick = () => { sortDir = sortKey === key ? -sortDir : 1; sortKey = key; draw(); };
        head.appendChild(th);
      }
      const body = table.createTBody();
      const selected = model.get("selected");
      for (const r of rows) {
        const tr = body.insertRow();
        tr.className = "row " + (r._class || "") + (r.unit_id === selected ? " sel" : "");
        if (r.unit_id !== undefined) tr.dataset.unit = r.unit_id;
        for (const [key] of cols) {
          const td = tr.insertCell();
          td.textContent = fmt(r[key], key, ints);
          td.title = td.textContent;
        }
        tr.onclick = () => {
          if (r.unit_id === undefined) return;
          model.set("selected", r.unit_id);
          model.save_changes();
        };
      }
      box.replaceChildren(table);
    };
    filter.oninput = draw;
    model.on("change:rows", draw);
    model.on("change:columns", draw);
    model.on("change:selected", draw);
    model.on("change:caption", draw);
    draw();
    return () => {
      model.off("change:rows", draw);
      model.off("change:columns", draw);
      model.off("change:selected", draw);
      model.off("change:caption", draw);
    };
  },
};
