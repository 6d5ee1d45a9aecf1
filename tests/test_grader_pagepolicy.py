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
