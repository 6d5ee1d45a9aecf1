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


# --- what the learner's JupyterLab shows ---------------------------------------------------
# Instructor tools that nbgrader installs for everyone: the Create Assignment sidebar, the
# formgrader and the course list. JupyterLab's news pop-up would cover the first output.
LEARNER_DISABLED_EXTENSIONS = (
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:course-list",
    "@jupyterlab/apputils-extension:announcements",
)
LEARNER_DISABLED_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)
# Set by the `cudacourse` command for its own process only (no device line); a kernel that
# inherited it would hide the device line.
CLI_ONLY_VARIABLES = ("CUDACOURSE_QUIET",)


def learner_config_dir(workspace: Path) -> Path:
    """Write the workspace's own Jupyter configuration (learner view); return its folder.

    It is added to ``JUPYTER_CONFIG_PATH`` by ``lab_environment``, so the learner's own
    ``~/.jupyter`` settings still apply on top of it and nothing outside the workspace
    changes.
    """
    config = Path(workspace) / ".cudacourse" / "jupyter"
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    page = {"disabledExtensions": {name: True for name in LEARNER_DISABLED_EXTENSIONS}}
    (config / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1) + "\n")
    server = {"ServerApp": {"jpserver_extensions": {
        name: False for name in LEARNER_DISABLED_SERVER_EXTENSIONS}}}
    (config / "jupyter_server_config.json").write_text(json.dumps(server, indent=1) + "\n")
    return config


def lab_environment(env: dict[str, str], config_dir: Path | None = None) -> dict[str, str]:
    """The environment JupyterLab (and so every kernel it starts) runs with.

    Drops the variables the ``cudacourse`` command sets for itself; with ``config_dir``
    (the learner view), puts it first on ``JUPYTER_CONFIG_PATH``.
    """
    out = {k: v for k, v in env.items() if k not in CLI_ONLY_VARIABLES}
    if config_dir is not None:
        rest = out.get("JUPYTER_CONFIG_PATH", "")
        out["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (str(config_dir), rest) if p)
    return out
