"""Voilà fixes for the dashboard page, applied by widgets/voila_config/voila.py
(`python -m widgets.voila NOTEBOOK`).

1. Kernels that outlive their page. Voilà's front end shuts the kernel down on
   `beforeunload` with `navigator.sendBeacon(".../voila/api/shutdown/<id>", {_xsrf: <cookie>})`,
   reading the token from the `_xsrf` cookie. Voilà 0.5 streams the page and never touches
   `handler.xsrf_token` before its first flush, so tornado never sets that cookie, the POST
   carries an empty token and is refused (`403 ... '_xsrf' argument missing`): every closed
   page left its kernel running. Reading `xsrf_token` before the page streams sets the cookie.
2. A CDN request. The lab template links Font Awesome from cdn.jsdelivr.net although
   Voilà's own bundle already ships Font Awesome with local fonts; offline the request just
   fails (and leaks the page view to a CDN online). The links are dropped from the page.

>>> class FakeHandler:
...     xsrf_token = b"2|abc"
...     def write(self, chunk): self.out = chunk
>>> h = FakeHandler()
>>> prelaunch_hook(h, notebook=None, cwd=".")
>>> h.write('<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/@fortawesome/'
...         'fontawesome-free@^5/css/all.min.css" type="text/css" />x')
>>> h.out
'x'
"""

from __future__ import annotations

import re

CDN_LINK = re.compile(r'<link[^>]+href="https://cdn\.jsdelivr\.net/npm/@fortawesome/[^"]*"[^>]*/?>\s*')


def strip_cdn_links(chunk):
    if isinstance(chunk, bytes):
        return CDN_LINK.sub("", chunk.decode("utf-8")).encode("utf-8") if b"@fortawesome" in chunk else chunk
    if isinstance(chunk, str) and "@fortawesome" in chunk:
        return CDN_LINK.sub("", chunk)
    return chunk


def prelaunch_hook(req_handler, notebook=None, cwd=None):
    """`VoilaConfiguration.prelaunch_hook`: set the `_xsrf` cookie, drop CDN links. Returns
    None (the notebook is used unchanged)."""
    _ = req_handler.xsrf_token  # tornado sets the _xsrf cookie on first access
    write = req_handler.write

    def write_without_cdn(chunk, *args, **kwargs):
        return write(strip_cdn_links(chunk), *args, **kwargs)

    req_handler.write = write_without_cdn
    return None
