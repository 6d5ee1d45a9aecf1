"""Jupyter server configuration of ``cudacourse lab --instructor`` (passed as ``--config``).

Runs in the instructor's server process: loads :mod:`pagepolicy` (the Content-Security-Policy
on every formgrader page) and :mod:`latelist` (late work marked in formgrader's lists) by path
(no import of the ``cudacourse`` package, which would choose a device there) and enables them
as server extensions, with ``jupyter_server_mathjax`` (MathJax from this server, no CDN).
"""

import importlib.util
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

_extensions = {"jupyter_server_mathjax": True}
for _file, _name in (("pagepolicy.py", "cudacourse_pagepolicy"),
                     ("latelist.py", "cudacourse_latelist")):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            _name, Path(__file__).resolve().with_name(_file))
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _module
        _spec.loader.exec_module(_module)
    _extensions[_name] = True
c.ServerApp.jpserver_extensions = {**dict(c.ServerApp.get("jpserver_extensions", {})),
                                   **_extensions}
