"""A Content-Security-Policy for formgrader's pages, in the instructor's Jupyter server.

Formgrader shows submissions to an instructor who is logged in: a script that ran there
could use the session to rewrite every grade through formgrader's API. The notebook is
sanitized before it is shown (:mod:`untrusted`); this is the second line: every formgrader
page is served with a policy under which only the page's own scripts run.

nbgrader's templates have inline scripts of their own (``var base_url = ...``, each page's
``url_prefix``, the MathJax configuration), so the policy is nonce-based: each response gets
a fresh nonce, written into the ``<script>`` tags of the page's ``<head>`` only -- where
nbgrader puts its own, and where no submission content is ever rendered (the notebook is in
the ``<body>``). An inline script anywhere else carries no nonce and is refused by the
browser. nbgrader's few inline event handlers (show/hide names, "Add new assignment...",
"Add new student...") run by their exact hashes (``'unsafe-hashes'``), and no other handler
(``onerror=``) does; nor does any inline script of the body but nbgrader's own, fixed ones
(the name tooltips), by their hashes (:func:`nbgrader_scripts`). Nothing is loaded from, sent to or framed by another site: MathJax comes
from this server (the ``jupyter_server_mathjax`` extension; the course's templates point
there, see ``nbgrader_config.py``), and :mod:`latelist`'s script, added to each page's head,
from formgrader's own path.

A nonce is fresh on every response, so a page that carries one is never revalidated: Tornado
computes a page's ETag before this transform adds the nonce, and a revisit would get
``304 Not Modified`` with a new nonce in the header while the browser shows the cached body,
which holds the old one (every inline script refused: formgrader's lists stay on "Loading,
please wait..."). A formgrader request's ``If-None-Match`` is therefore dropped before its
handler runs, and a page with a nonce leaves without an ``ETag``, marked
``Cache-Control: no-store``.

Loaded into ``cudacourse lab --instructor``'s server by path (``instructor_server_config``),
never by importing the ``cudacourse`` package (which would choose a device in the server).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

PREFIXES = ("/formgrader",)  # the pages of nbgrader's formgrader (and its API)

# nbgrader's own templates have exactly these inline handlers (show/hide student names, open
# the "new assignment" and "new student" forms); 'unsafe-hashes' lets these exact strings run,
# and no other handler: a page that carries one of them can only do what its button does.
NBGRADER_HANDLERS = ("toggle_name(true);", "toggle_name(false);", "toggleAllNames()",
                     "createAssignmentModal();", "createStudentModal();")

# MathJax as the course's templates load it (templates/*/mathjax.html.j2), from the server's
# root; under a base URL (JupyterHub's /user/NAME/) the page's head gets that prefix.
MATHJAX = b'src="/static/jupyter_server_mathjax/'
LATE_SCRIPT = "/formgrader/cudacourse/late.js"  # latelist's script, on every formgrader page


def _hash(source: str) -> str:
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


_INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S | re.I)


def nbgrader_scripts(templates: str | None = None) -> tuple[str, ...]:
    """The inline scripts of nbgrader's formgrader templates that hold no template code (the
    same text on every page): formgrade's name tooltips, which sit in the page's body, where
    no nonce goes. Read from the installed nbgrader, so its hashes follow its version."""
    import importlib.util
    from pathlib import Path

    if templates is None:
        spec = importlib.util.find_spec("nbgrader")  # finds it, imports nothing
        if spec is None or spec.origin is None:
            return ()
        templates = str(Path(spec.origin).parent / "server_extensions" / "formgrader" /
                        "templates")
    found = []
    for path in sorted(Path(templates).rglob("*")):
        if path.suffix not in (".tpl", ".j2") or not path.is_file():
            continue
        for m in _INLINE.finditer(path.read_text(encoding="utf-8")):
            body = m.group(1)
            if body.strip() and "{{" not in body and "{%" not in body and body not in found:
                found.append(body)
    return tuple(found)


_SCRIPT_HASHES: list[str] = []


def policy(nonce: str) -> str:
    if not _SCRIPT_HASHES:
        _SCRIPT_HASHES.extend(_hash(s) for s in nbgrader_scripts())
    handlers = " ".join(_hash(h) for h in NBGRADER_HANDLERS)
    scripts = " ".join(_SCRIPT_HASHES)
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' 'nonce-{nonce}' {scripts} 'unsafe-hashes' {handlers}",
        "style-src 'self' 'unsafe-inline'",  # styles cannot run code
        "font-src 'self' data:",
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


def add_nonce(page: bytes, nonce: str, base: str = "") -> bytes:
    """``nonce`` on every ``<script`` before the first ``</head>``, :data:`LATE_SCRIPT` added
    there and MathJax's path given the server's ``base`` URL; the body untouched."""
    end = _HEAD_END.search(page)
    if end is None:
        return page  # no head: nothing of it may run inline
    head = page[:end.start()] + b'<script src="' + (base + LATE_SCRIPT).encode() + b'"></script>'
    head = _SCRIPT.sub(b'<script nonce="' + nonce.encode() + b'"', head)
    if base:
        head = head.replace(MATHJAX, MATHJAX[:5] + base.encode() + MATHJAX[5:])
    return head + page[end.start():]


def base_of(path: str) -> str:
    """The server's base URL from a formgrader request's path ('' at the root)."""
    for p in PREFIXES:
        at = (path + "/").find(p + "/")
        if at > 0:
            return path[:at]
    return ""


def _transform_class() -> Any:
    from tornado.web import OutputTransform

    class FormgraderPolicy(OutputTransform):
        """Sets the policy on formgrader's responses and nonces their own scripts."""

        def __init__(self, request: Any) -> None:
            super().__init__(request)
            path = (request.path or "") + "/"
            self.applies = any(f"{p}/" in path for p in PREFIXES)
            self.base = base_of(request.path or "")
            if self.applies:  # no 304 for a page whose body holds a nonce (module docstring)
                request.headers.pop("If-None-Match", None)

        def transform_first_chunk(self, status_code: int, headers: Any, chunk: bytes,
                                  finishing: bool) -> tuple[int, Any, bytes]:
            if not self.applies:
                return status_code, headers, chunk
            nonce = secrets.token_urlsafe(18)
            kind = headers.get("Content-Type", "")
            if kind.startswith("text/html"):
                chunk = add_nonce(chunk, nonce, self.base)
                if "Content-Length" in headers:
                    headers["Content-Length"] = str(len(chunk))
                headers.pop("Etag", None)  # computed before the nonce: it names no body sent
                headers["Cache-Control"] = "no-store"
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


__all__ = ["policy", "add_nonce", "base_of", "nbgrader_scripts", "PREFIXES", "NBGRADER_HANDLERS", "LATE_SCRIPT"]
