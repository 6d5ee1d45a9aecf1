"""A course folder of the instructor's own, outside the checkout: ``cudacourse new-course``.

An instructor keeps a course per term (``~/courses/gpu-2027s``): its gradebook, the class's
submissions, feedback and grades, and the masters it grades with, apart from the checkout the
course is written in. :func:`create` makes one from the checkout (the folder with
``lessons/`` and ``nbgrader_config.py``):

* ``nbgrader_config.py`` (the course's, as is), with the exchange's root when one is given;
* ``solutions/NN_topic/``: the masters of one edition -- the English ones, or with
  ``lang="ja"`` the Japanese ones (``solutions/ja/NN_topic/`` of the checkout), as the
  course's own assignments: no ``ja`` folder beside them, which nbgrader would list as an
  assignment of its own;
* ``docs/benchmarks.json`` and ``docs/figures/``: the committed GPU figures the lessons read
  while they are graded (the sandbox binds them back, read-only; :mod:`sandbox`).

Nothing is overwritten: a folder that already holds a course is refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

RESOURCES = ("docs/benchmarks.json", "docs/figures")  # as sandbox.COURSE_RESOURCES


class CourseFolderError(ValueError):
    """A course folder that cannot be made as asked."""


def masters(checkout: Path, lang: str = "en") -> dict[str, Path]:
    """The master folders of one edition: ``{assignment: folder}``."""
    base = checkout / "solutions" / ("" if lang == "en" else lang)
    found = {d.name: d for d in sorted(base.glob("[0-9][0-9]_*")) if any(d.glob("*.ipynb"))}
    if not found:
        raise CourseFolderError(f"no masters of the {lang!r} edition in {base}: build them "
                                "first (./course build)")
    return found


def create(dest: str | Path, checkout: str | Path, *, lang: str = "en",
           assignments: list[str] | None = None, exchange: str | None = None) -> list[str]:
    """Make the course folder ``dest`` from ``checkout``; returns what was written (paths
    relative to ``dest``). ``assignments``: only these (``01`` or ``01_gpu_vs_cpu``)."""
    dest, checkout = Path(dest).resolve(), Path(checkout).resolve()
    if (dest / "nbgrader_config.py").exists() or (dest / "gradebook.db").exists():
        raise CourseFolderError(f"{dest} already holds a course (nbgrader_config.py or "
                                "gradebook.db): nothing was changed")
    if dest == checkout or checkout in dest.parents:
        raise CourseFolderError(f"{dest} is inside the checkout {checkout}: a course folder "
                                "lives outside it (its runs are not the course's source)")
    found = masters(checkout, lang)
    if assignments:
        chosen = {}
        for want in assignments:
            hits = [a for a in found if a == want or a.split("_", 1)[0] == want]
            if not hits:
                raise CourseFolderError(f"no assignment {want!r} in the {lang!r} edition; "
                                        f"there are: {', '.join(found)}")
            chosen.update({a: found[a] for a in hits})
        found = chosen
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    config = (checkout / "nbgrader_config.py").read_text(encoding="utf-8")
    if exchange:
        config += ("\n\n# The exchange (nbgrader release_assignment / collect), written by "
                   "cudacourse new-course\n"
                   f"c.Exchange.root = {str(Path(exchange).resolve())!r}\n")
    (dest / "nbgrader_config.py").write_text(config, encoding="utf-8")
    written.append("nbgrader_config.py")
    for name, folder in found.items():
        shutil.copytree(folder, dest / "solutions" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        written.append(f"solutions/{name}/")
    for rel in RESOURCES:
        src = checkout / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / rel)
            written.append(rel)
        elif src.is_dir():
            shutil.copytree(src, dest / rel)
            written.append(rel + "/")
    return written


__all__ = ["create", "masters", "CourseFolderError", "RESOURCES"]
