"""Formgrader's Content-Security-Policy: only the page's own head scripts get the nonce."""

from __future__ import annotations

import re

from cudacourse.grader import pagepolicy


def test_only_head_scripts_get_the_nonce():
    page = (b"<html><head><script src='/formgrader/static/x.js'></script>"
            b"<SCRIPT>var base_url = '';</SCRIPT></head><body>"
            b"<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
            b"</body></html>")
    out = pagepolicy.add_nonce(page, "N0nce")
    head, body = out.split(b"</head>")
    assert head.count(b'nonce="N0nce"') == 3  # nbgrader's two and the late-work script
    assert pagepolicy.LATE_SCRIPT.encode() in head
    assert b"nonce" not in body  # the submission's markup (were any left) stays refused


def test_a_page_without_head_gets_no_nonce():
    page = b"<script>alert(1)</script>"
    assert pagepolicy.add_nonce(page, "n") == page


def test_the_policy_refuses_inline_code_and_other_sites():
    p = pagepolicy.policy("abc")
    script = re.search(r"script-src ([^;]*)", p).group(1)
    assert "'nonce-abc'" in script and "'unsafe-inline'" not in script
    assert "'unsafe-eval'" not in script
    # only nbgrader's own name toggles may run as handlers, by their exact hashes
    hashes = re.findall(r"'sha256-[^']+'", script)
    assert len(hashes) == len(pagepolicy.NBGRADER_HANDLERS) + len(pagepolicy.nbgrader_scripts())
    assert "'sha256-oGUA7LtyEKDvlMppna1zdKjVAxPLpRV7YpX8dvx6PJo='" in hashes  # toggle_name(true);
    for directive in ("object-src 'none'", "base-uri 'none'", "connect-src 'self'",
                      "frame-ancestors 'self'", "form-action 'self'"):
        assert directive in p


def test_mathjax_and_the_late_script_follow_the_base_url():
    page = (b'<head><script src="/static/jupyter_server_mathjax/MathJax.js"></script></head>'
            b'<body><img src="/static/jupyter_server_mathjax/x"></body>')
    assert pagepolicy.base_of("/user/ann/formgrader/manage_students") == "/user/ann"
    assert pagepolicy.base_of("/formgrader") == ""
    out = pagepolicy.add_nonce(page, "n", "/user/ann")
    head, body = out.split(b"</head>")
    assert b'src="/user/ann/static/jupyter_server_mathjax/MathJax.js"' in head
    assert b'src="/user/ann/formgrader/cudacourse/late.js"' in head
    assert body == b'<body><img src="/static/jupyter_server_mathjax/x"></body>'  # untouched


def test_no_source_but_the_server():
    p = pagepolicy.policy("abc")
    for directive in p.split("; "):
        sources = directive.split()[1:]
        assert all(s.startswith("'") or s in ("data:",) for s in sources), directive


def test_nbgrader_body_scripts_are_allowed_by_hash_and_templated_ones_are_not(tmp_path):
    (tmp_path / "a.tpl").write_text(
        '<script>\n  fixed();\n</script><script>var u = "{{ url }}";</script>'
        '<script src="x.js"></script>')
    assert pagepolicy.nbgrader_scripts(str(tmp_path)) == ("\n  fixed();\n",)
    tooltips = [s for s in pagepolicy.nbgrader_scripts() if "tooltip" in s]
    assert tooltips, "formgrade's name tooltips script was not found in nbgrader's templates"
    assert pagepolicy._hash(tooltips[0]) in pagepolicy.policy("n")


def _serve_twice(path: str) -> tuple:
    """A Tornado app with formgrader's transform, asked for ``path`` twice, the second time
    with the first answer's ETag (what a browser sends on a revisit)."""
    import asyncio

    from tornado.httpclient import AsyncHTTPClient, HTTPClientError
    from tornado.httpserver import HTTPServer
    from tornado.testing import bind_unused_port
    from tornado.web import Application, RequestHandler

    class Page(RequestHandler):
        def get(self) -> None:
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish("<html><head><script>var base_url = '';</script></head>"
                        "<body>list</body></html>")

    async def go() -> tuple:
        app = Application([(r"/.*", Page)], transforms=[pagepolicy._transform_class()])
        sock, port = bind_unused_port()
        server = HTTPServer(app)
        server.add_sockets([sock])
        client = AsyncHTTPClient()
        url = f"http://127.0.0.1:{port}{path}"
        try:
            first = await client.fetch(url)
            tag = first.headers.get("Etag") or '"anything"'
            try:
                second = await client.fetch(url, headers={"If-None-Match": tag})
            except HTTPClientError as e:  # a 304 is raised by Tornado's client
                second = e.response
        finally:
            server.stop()
        return first, second

    return asyncio.run(go())


def _nonce(response) -> tuple[str, str]:
    header = re.search(r"'nonce-([^']+)'", response.headers["Content-Security-Policy"])
    body = re.search(rb'<script nonce="([^"]+)">var base_url', response.body)
    return header.group(1), body.group(1).decode()


def test_a_revisited_page_is_sent_again_with_the_nonce_of_its_header():
    """A nonce page is never revalidated: a revisit with the first visit's ETag gets the
    whole page again, and the nonce in its body is the one in its policy (issue 39: a 304
    paired the cached body's old nonce with a fresh header, and formgrader's lists blanked)."""
    first, second = _serve_twice("/formgrader/manage_assignments")
    assert second.code == 200, second.code
    for r in (first, second):
        assert "Etag" not in r.headers
        assert r.headers["Cache-Control"] == "no-store"
        header, body = _nonce(r)
        assert header == body
    assert _nonce(first)[0] != _nonce(second)[0]  # fresh on every response


def test_pages_outside_formgrader_keep_their_validators():
    first, second = _serve_twice("/lab/tree")
    assert "Etag" in first.headers and "Content-Security-Policy" not in first.headers
    assert second.code == 304  # the control: the same server revalidates other pages
