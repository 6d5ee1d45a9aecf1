"""Imported first by each module of the package that needs ``numba.cuda`` at its top.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is imported, so the device must
be chosen before: ``cudacourse.setup()`` chose it already in a lesson's notebook; anywhere
else (a script, a test, a grading process that loads a checker) this chooses it, as
``setup()`` would with its defaults.
"""

from .runtime import device

device.ensure()
