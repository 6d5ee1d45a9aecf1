"""Jupyter server configuration of ``cudacourse lab --instructor`` (passed as ``--config``).

Runs in the instructor's server process: enables :mod:`cudacourse.grader.pagepolicy` as a
server extension (imported by its name: importing ``cudacourse`` chooses no device), so every
formgrader page carries its Content-Security-Policy.
"""

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

c.ServerApp.jpserver_extensions = {**dict(c.ServerApp.get("jpserver_extensions", {})),
                                   "cudacourse.grader.pagepolicy": True}
