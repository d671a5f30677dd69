"""What a JEV client process loads and encodes (issue 33): httpx without its command-line client,
no CA certificates where no TLS is made, and request JSON made from pieces that equal encoding
the body whole."""

from __future__ import annotations

import importlib.util
import json
import ssl
import subprocess
import sys

import pytest

from workbench.judges.jev import cache, payload
from workbench.judges.jev.client import _HTTPThreads, tls_unused


@pytest.mark.skipif(importlib.util.find_spec("rich") is None, reason="httpx's CLI needs rich: nothing to skip here")
def test_httpx_is_imported_without_its_command_line_client():
    """rich, click and pygments (~0.1 s of CPU) are not imported by the client, and an explicit
    import of httpx's CLI afterwards still works."""
    code = (
        "import sys\n"
        "from workbench.judges.jev.client import _HTTPThreads\n"
        "_HTTPThreads(1, 5.0, 'http://127.0.0.1:9/v1/systemone').close()\n"
        "import httpx\n"
        "print(sorted(m for m in ('rich', 'click', 'pygments', 'httpx._main') if m in sys.modules))\n"
        "httpx.Client().close()\n"
        "import httpx._main\n"
        "print(httpx._main.__name__, 'rich' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "httpx._main True"


def test_tls_is_skipped_only_where_none_is_made(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert tls_unused("http://127.0.0.1:8765/v1/systemone")
    assert not tls_unused("https://openrouter.ai/api/alpha/decisions")
    plain = _HTTPThreads(1, 5.0, "http://127.0.0.1:9/v1/systemone")
    secure = _HTTPThreads(1, 5.0, "https://openrouter.ai/api/alpha/decisions")
    try:
        assert plain.http._transport._pool._ssl_context.verify_mode == ssl.CERT_NONE  # no certificates loaded
        assert secure.http._transport._pool._ssl_context.verify_mode == ssl.CERT_REQUIRED
    finally:
        plain.close()
        secure.close()
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")  # a proxy may be reached over TLS
    assert not tls_unused("http://127.0.0.1:8765/v1/systemone")


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


TEXTS = ["Glass Harbour", 'a "quoted" \\ back\\slash', "tab\tnew\nline \x00\x1f\x7f", "北京 😀 e\u0301 \u2028", ""]


@pytest.mark.parametrize("title", TEXTS, ids=repr)
def test_passage_pieces_equal_encoding_them_whole(title):
    """A passage's state entry, its escaped form and its key item, each made from its title and text
    encoded once as JSON strings, equal json.dumps of the whole."""
    for text in TEXTS:
        entry, escaped = payload._entry_pieces(title, text)
        assert entry == dumps({"1": {"title": title, "passage": text}})[3:-1]
        assert escaped == dumps(entry)[1:-1]
        assert payload.item_json(title, text) == dumps([title, text])


def test_stateful_questions_json_equals_encoding_them_whole():
    cs = [{"unit_id": uid, "title": "T", "text": f"text {uid}"} for uid in (7, 1000, 3, 12)]
    (_, body), *_ = payload.plan_requests("m", "Q?", cs, [], "stateful")
    assert body.questions_json == dumps(body["questions"])
    assert payload.encode_request(body)[0] == dumps(dict(body)).encode()
    assert list(json.loads(body.questions_json)) == ["candidate_7", "candidate_1000", "candidate_3", "candidate_12"]


def test_a_title_that_is_no_string_is_encoded_as_before():
    """Units have str titles and texts; anything else still goes through json.dumps, as before."""
    assert payload.item_json(None, "x") == '[null,"x"]'
    assert payload._entry_pieces(12, "x")[0] == '":{"title":12,"passage":"x"}'
    keys = cache.request_keys("f", "m", None, "stateful", "Q?", [], [{"title": None, "text": "x"}])
    assert len(keys) == 1 and keys[0].startswith(cache.CACHE_KEY_PREFIX)
