"""The course root: the folder that holds ``lessons/`` and ``nbgrader_config.py``.

Below ``authoring`` and ``quiz`` (both need it; neither imports the other for it).
"""

from __future__ import annotations

import os
from pathlib import Path


class CourseRootNotFound(FileNotFoundError):
    pass


def find_root(start: str | Path | None = None) -> Path:
    """The course root: ``start`` (default: the current directory) or the nearest folder
    above it that holds ``lessons/`` and ``nbgrader_config.py``."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "lessons").is_dir() and (folder / "nbgrader_config.py").is_file():
            return folder
    raise CourseRootNotFound(
        f"no course here: neither {here} nor a folder above it holds lessons/ and "
        "nbgrader_config.py. Run this from the course checkout, or pass its path.")
