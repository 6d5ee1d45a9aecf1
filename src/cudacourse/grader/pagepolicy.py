"""A Content-Security-Policy for formgrader's pages, in the instructor's Jupyter server.

Formgrader shows submissions to an instructor who is logged in: a script that ran there
could use the session to rewrite every grade through formgrader's API. The notebook is
sanitized before it is shown (:mod:`untrusted`); this is the second line: every formgrader
page is served with a policy under which only the page's own scripts run.

nbgrader's templates have inline scripts of their own (configuration, MathJax), so the
policy is nonce-based: each response gets a fresh nonce, written into the ``<script>`` tags
of the page's ``<head>`` only -- where nbgrader puts its own, and where no submission
content is ever rendered (the notebook is in the ``<body>``). An inline script or event
handler (``onerror=``) anywhere else carries no nonce and is refused by the browser, and
nothing can be loaded from, sent to or framed by another site.

Loaded into ``cudacourse lab --instructor``'s server by path (``instructor_server_config``),
never by importing the ``cudacourse`` package (which would choose a device in the server).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

PREFIXES = ("/formgrader",)  # the pages of nbgrader's formgrader (and its API)

# nbconvert's pages load jQuery, require.js and MathJax from cdnjs by default
CDN = "https://cdnjs.cloudflare.com https://cdn.jsdelivr.net"


# nbgrader's own templates have exactly these inline handlers (show/hide student names);
# 'unsafe-hashes' lets these exact strings run, and no other handler: a page that carries one
# of them can only toggle names.
NBGRADER_HANDLERS = ("toggle_name(true);", "toggle_name(false);", "toggleAllNames()")


def _hash(source: str) -> str:
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def policy(nonce: str) -> str:
    handlers = " ".join(_hash(h) for h in NBGRADER_HANDLERS)
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' 'nonce-{nonce}' 'unsafe-hashes' {handlers} {CDN}",
        f"style-src 'self' 'unsafe-inline' {CDN}",  # styles cannot run code
        f"font-src 'self' data: {CDN}",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ])


_HEAD_END = re.compile(rb"</head\s*>", re.I)
_SCRIPT = re.compile(rb"<script\b", re.I)


def add_nonce(page: bytes, nonce: str) -> bytes:
    """``nonce`` on every ``<script`` before the first ``</head>``; the body untouched."""
    end = _HEAD_END.search(page)
    if end is None:
        return page  # no head: nothing of it may run inline
    head = _SCRIPT.sub(b'<script nonce="' + nonce.encode() + b'"', page[:end.start()])
    return head + page[end.start():]


def _transform_class() -> Any:
    from tornado.web import OutputTransform

    class FormgraderPolicy(OutputTransform):
        """Sets the policy on formgrader's responses and nonces their own scripts."""

        def __init__(self, request: Any) -> None:
            super().__init__(request)
            path = (request.path or "") + "/"
            self.applies = any(f"{p}/" in path for p in PREFIXES)

        def transform_first_chunk(self, status_code: int, headers: Any, chunk: bytes,
                                  finishing: bool) -> tuple[int, Any, bytes]:
            if not self.applies:
                return status_code, headers, chunk
            nonce = secrets.token_urlsafe(18)
            kind = headers.get("Content-Type", "")
            if kind.startswith("text/html"):
                chunk = add_nonce(chunk, nonce)
                if "Content-Length" in headers:
                    headers["Content-Length"] = str(len(chunk))
            headers["Content-Security-Policy"] = policy(nonce)
            headers["X-Content-Type-Options"] = "nosniff"
            headers["Referrer-Policy"] = "same-origin"
            return status_code, headers, chunk

    return FormgraderPolicy


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Jupyter server extension hook: the policy on every formgrader response."""
    # first in line: it must see the page before any transform compresses it
    serverapp.web_app.transforms.insert(0, _transform_class())
    serverapp.log.info("cudacourse: Content-Security-Policy on formgrader pages")


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


__all__ = ["policy", "add_nonce", "PREFIXES", "NBGRADER_HANDLERS"]
