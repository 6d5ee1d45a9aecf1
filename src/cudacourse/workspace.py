"""The learner's workspace: their own copies of the lesson notebooks.

``notebooks/`` is generated and may be regenerated at any time, so learners never work in
it. ``cudacourse lab`` copies each lesson into the workspace once; a lesson already there is
never overwritten. When the course publishes a newer version of a lesson the learner has
started, the new version is put beside it as ``NN_topic.new.ipynb``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .authoring import ROOT

STATE = ".cudacourse-workspace.json"


def default_workspace() -> Path:
    return Path(os.environ.get("CUDACOURSE_WORKSPACE", ROOT / "workspace"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sync(workspace: Path | None = None, releases: Path | None = None) -> Path:
    """Bring new lessons into ``workspace`` without touching any learner file."""
    ws = Path(workspace or default_workspace())
    rel = Path(releases or ROOT / "notebooks")
    ws.mkdir(parents=True, exist_ok=True)
    state_file = ws / STATE
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    for src in sorted(rel.glob("*/*.ipynb")):
        key = f"{src.parent.name}/{src.name}"
        dst = ws / key
        new = _digest(src)
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            # Supporting files of the lesson (data, images), also never overwritten.
            for extra in src.parent.iterdir():
                if extra.is_file() and extra != src and not (dst.parent / extra.name).exists():
                    shutil.copy2(extra, dst.parent / extra.name)
            state[key] = new
            print(f"cudacourse: added {key}")
        elif state.get(key) != new and _digest(dst) != new:
            if state.get(key) == _digest(dst):  # never touched by the learner: just update
                shutil.copy2(src, dst)
                state[key] = new
                print(f"cudacourse: updated {key}")
                continue
            side = dst.with_suffix(".new.ipynb")
            shutil.copy2(src, side)
            state[key] = new
            print(f"cudacourse: {key} has a newer version; yours is untouched, the new one is "
                  f"{side.name}")
    state_file.write_text(json.dumps(state, indent=1, sort_keys=True))
    return ws
