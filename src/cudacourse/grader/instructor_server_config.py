"""Jupyter server configuration of ``cudacourse lab --instructor`` (passed as ``--config``).

Runs in the instructor's server process: loads :mod:`pagepolicy` by path (no import of the
``cudacourse`` package, which would choose a device there) and enables it as a server
extension, so every formgrader page carries its Content-Security-Policy.
"""

import importlib.util
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

_NAME = "cudacourse_pagepolicy"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().with_name("pagepolicy.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
c.ServerApp.jpserver_extensions = {**dict(c.ServerApp.get("jpserver_extensions", {})),
                                   _NAME: True}
