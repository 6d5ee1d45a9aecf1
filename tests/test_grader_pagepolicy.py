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
    assert head.count(b'nonce="N0nce"') == 2
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
    assert len(hashes) == len(pagepolicy.NBGRADER_HANDLERS)
    assert "'sha256-oGUA7LtyEKDvlMppna1zdKjVAxPLpRV7YpX8dvx6PJo='" in hashes  # toggle_name(true);
    for directive in ("object-src 'none'", "base-uri 'none'", "connect-src 'self'",
                      "frame-ancestors 'self'", "form-action 'self'"):
        assert directive in p
