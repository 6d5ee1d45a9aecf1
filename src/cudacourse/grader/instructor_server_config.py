"""Jupyter server configuration of ``cudacourse lab --instructor`` (passed as ``--config``).

Runs in the instructor's server process: enables :mod:`cudacourse.grader.pagepolicy` (the
Content-Security-Policy on every formgrader page), :mod:`cudacourse.grader.latelist` (late
work marked in formgrader's lists) and ``jupyter_server_mathjax`` (MathJax from this server,
no CDN) as server extensions, imported by their names (importing ``cudacourse`` chooses no
device).
"""

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

c.ServerApp.jpserver_extensions = {**dict(c.ServerApp.get("jpserver_extensions", {})),
                                   "jupyter_server_mathjax": True,
                                   "cudacourse.grader.pagepolicy": True,
                                   "cudacourse.grader.latelist": True}
