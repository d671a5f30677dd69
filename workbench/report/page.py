"""The skeleton of every self-contained page: a title, one JSON object of data and the views
that draw it, in one HTML file with its CSS and JavaScript inline (no CDN, no request).

A page is `Page(kind, title, data, scripts)`: `render(page)` writes the data into a
`<script type="application/json">` block (escaped so that `</script>` or `<!--` in a
passage cannot end it), then the shared `common.js` and the page's own scripts, which
read the block and draw every view. A Content-Security-Policy allows exactly those
scripts (by hash) and no connection of any kind, so the page cannot fetch anything.

>>> page = Page("trajectory", "a </script> title", {"text": "</script><!-- x"}, ())
>>> html = render(page)
>>> "</script><!--" in html, html.count("</script>")
(False, 2)
>>> read_data(html)["text"]
'</script><!-- x'
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
from dataclasses import dataclass
from importlib import resources

PAGE_SCHEMA = 1  # the data block's layout; a reader of pages checks it
DATA_ID = "sag2wb-data"
COMMON_SCRIPT = "common.js"
STYLE = "page.css"
# environment variables whose values never reach a page, whatever the data holds
SECRET_NAMES = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """One page: `kind` ("trajectory"; part 2 adds more) names its views, `data` is plain
    JSON-able data, `scripts` the asset files (workbench/report/*.js) that draw it."""

    kind: str
    title: str
    data: dict
    scripts: tuple[str, ...]
    # more data, each parsed only when a view asks for it (SAG2.block(name)): the experiment page's
    # trajectories, so that a page of 200 of them opens as fast as one
    blocks: tuple[tuple[str, dict], ...] = ()


def asset(name: str) -> str:
    """The text of a file shipped in workbench/report/ (package data)."""
    return resources.files("workbench.report").joinpath(name).read_text(encoding="utf-8")


def plain(value):
    """`value` with numpy scalars as Python numbers and nan/inf as None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def script_json(data) -> str:
    """JSON safe inside `<script type="application/json">`: `<`, `>` and `&` as \\u escapes
    (no `</script>`, `<!--` or `]]>` can appear), and U+2028/2029 escaped too.

    >>> script_json({"a": "</script><!--"})
    '{"a":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = json.dumps(plain(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028")):
        text = text.replace(raw, escaped)
    return text.replace("\u2029", "\\u2029")


def compact(value, digits: int = 5):
    """`value` made smaller for a page that holds many trajectories: floats rounded to `digits`
    decimals (the views show 3), and every list of dicts with the same keys packed as
    `{"__cols": keys, "__rows": [[values]]}` (common.js `SAG2.unpack` restores it).

    >>> compact([{"a": 1, "b": 0.1234567}, {"a": 2, "b": None}])
    {'__cols': ['a', 'b'], '__rows': [[1, 0.12346], [2, None]]}
    """
    return _compact(plain(value), digits)  # made plain once, not again at every level below


def _compact(value, digits: int):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _compact(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > 1 and all(isinstance(x, dict) for x in value):
            keys = list(value[0])
            if all(list(x) == keys for x in value) and "__cols" not in keys:
                return {"__cols": keys, "__rows": [[_compact(x[k], digits) for k in keys] for x in value]}
        return [_compact(x, digits) for x in value]
    return value


def without_secrets(text: str, environ=None) -> str:
    """`text` with the value of every key-like environment variable (API keys, tokens) cut out:
    a page is made to be shared, and a key must not ride along in a passage or a judge name."""
    environ = os.environ if environ is None else environ
    for name, value in environ.items():
        if SECRET_NAMES.search(name) and len(value.strip()) >= 8:
            text = text.replace(value.strip(), "[removed]")
    return text


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


def render(page: Page) -> str:
    """The whole HTML page as text."""
    data = without_secrets(script_json({"schema": PAGE_SCHEMA, "kind": page.kind, **page.data}))
    script = "\n".join(asset(name) for name in (COMMON_SCRIPT, *page.scripts))
    style = asset(STYLE)
    policy = (
        "default-src 'none'; connect-src 'none'; img-src data:; font-src data:; "
        f"style-src 'unsafe-inline'; script-src {_hash(script)}; base-uri 'none'; form-action 'none'"
    )
    blocks = "".join(
        f"<script type='application/json' data-block='{html.escape(name, quote=True)}'>"
        f"{without_secrets(script_json(block))}</script>\n"
        for name, block in page.blocks
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        f"<meta name='generator' content='sag2wb report ({page.kind})'>\n"
        f"<title>{html.escape(without_secrets(page.title))}</title>\n<style>\n{style}\n</style>\n</head>\n"
        f"<body class='sag2wb-page sag2wb-{page.kind}'>\n<div id='sag2wb-root'>"
        "<noscript>This page draws its views with JavaScript; allow scripts for this file.</noscript></div>\n"
        f"<script type='application/json' id='{DATA_ID}'>{data}</script>\n{blocks}"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


def read_data(text: str) -> dict:
    """The data block of a rendered page (tests and part 2's readers of pages).

    >>> read_data(render(Page("trajectory", "t", {"x": 1}, ())))["x"]
    1
    """
    m = re.search(rf"<script type='application/json' id='{DATA_ID}'>(.*?)</script>", text, flags=re.DOTALL)
    if not m:
        raise ValueError("not a sag2wb page: no data block")
    return json.loads(m.group(1))


def read_blocks(text: str) -> dict:
    """{name: data} of a rendered page's lazily read blocks (`Page.blocks`), as stored (packed)."""
    found = re.findall(r"<script type='application/json' data-block='([^']*)'>(.*?)</script>", text, flags=re.DOTALL)
    return {html.unescape(name): json.loads(body) for name, body in found}


def unpack(value):
    """The inverse of `compact`'s packing (floats stay rounded): what the page's views read."""
    if isinstance(value, dict):
        if set(value) == {"__cols", "__rows"}:
            return [dict(zip(value["__cols"], map(unpack, row))) for row in value["__rows"]]
        return {k: unpack(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unpack(v) for v in value]
    return value
