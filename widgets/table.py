"""A sortable, filterable table whose rows can be clicked: the pool, context, ranking and
term tables. Sorting and filtering happen in the browser (no kernel round trip); a click
sets `selected` (the row's `unit_id`), which the passage view follows.

>>> t = DataTable(columns=[("rank", "rank"), ("title", "title")], name="pool")
>>> t.set_rows([{"rank": 1, "title": "Login flow", "unit_id": 6, "_class": "sag2wb-gold"}],
...            caption="round 0")
>>> t.rows[0]["title"], t.caption
('Login flow', 'round 0')
>>> "Login flow" in t.value    # the same rows as HTML (tests, notebooks without a front end)
True
"""

from __future__ import annotations

import math

import anywidget
import traitlets

from . import assets

_TABLE_JS = assets.read("table.js")

INT_COLUMNS = ["rank", "retrieval_rank", "position", "rank_before_diversity", "previous_rank", "round"]


def _plain(v):
    """JSON-safe cell values: NaN/NA → None, numpy scalars → Python."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return v


class DataTable(anywidget.AnyWidget):
    """Rows as dicts; `columns` as (key, label) pairs; `_class` in a row styles it; a row
    with `unit_id` can be clicked (→ `selected`)."""

    _esm = traitlets.Unicode(_TABLE_JS).tag(sync=True)
    columns: traitlets.List = traitlets.List().tag(sync=True)
    rows: traitlets.List = traitlets.List().tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    int_columns = traitlets.List(INT_COLUMNS).tag(sync=True)
    name = traitlets.Unicode("table").tag(sync=True)
    compact = traitlets.Bool(False).tag(sync=True)  # narrower text cells, for half-width columns

    def __init__(self, columns=(), name: str = "table", **kwargs):
        super().__init__(columns=[list(c) for c in columns], name=name, **kwargs)
        self.layout.width = "100%"
        self.layout.min_width = "0"
        self.add_class(f"sag2wb-{name}")

    def set_rows(self, rows: list[dict], columns=None, caption: str | None = None):
        with self.hold_sync():
            if columns is not None:
                self.columns = [list(c) for c in columns]
            if caption is not None:
                self.caption = caption
            self.rows = [{k: _plain(v) for k, v in r.items()} for r in rows]

    @property
    def value(self) -> str:
        """The rows as an HTML table (what the browser shows, without sorting)."""
        import html as _html

        head = "".join(f"<th>{_html.escape(label)}</th>" for _, label in self.columns)
        body = []
        for r in self.rows:
            cells = []
            for key, _ in self.columns:
                v = r.get(key)
                text = (
                    ("★" if v else "")
                    if isinstance(v, bool)
                    else ""
                    if v is None
                    else (
                        str(int(v))
                        if key in self.int_columns and isinstance(v, (int, float))
                        else f"{v:.3f}"
                        if isinstance(v, float)
                        else str(v)
                    )
                )
                cells.append(f"<td>{_html.escape(text)}</td>")
            body.append(f"<tr class='{r.get('_class', '')}'>{''.join(cells)}</tr>")
        return (
            f"<div>{_html.escape(self.caption)}</div><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
        )
