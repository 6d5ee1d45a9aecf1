"""``cudacourse lesson new NN_topic``: a new lesson, as the five files an author writes.

The scaffold is a working lesson (it builds, checks and grades as written): one exercise,
``<topic>_offset``'s kernel ``out[i] = x[i] + c`` stated as an exercise spec, and one
question. An author replaces its teaching, its exercise and its question, keeping the form.
Everything else is generated from these five files: the README row and the pytest marker
(written here too, in a checkout that has them), the Japanese translation files
(``cudacourse i18n update``), the master and the learner copy (``cudacourse build NN``).
"""

from __future__ import annotations

import re
from pathlib import Path

from . import lessons as _lessons

PACKAGE = "src/cudacourse"
STEM = re.compile(r"^(?P<number>\d\d)_(?P<topic>[a-z][a-z0-9_]*)$")

# the five authored files, as docs/authoring.md's *Add a lesson: five files* lists them
AUTHORED = (
    "lessons/NN_topic.py",
    "src/cudacourse/kernels/<topic>.py",
    "src/cudacourse/check/<checker>.py",
    "src/cudacourse/quizzes/NN_topic.toml",
    "lessons/quizkeys/NN_topic.toml",
)


class ScaffoldError(ValueError):
    """The lesson cannot be scaffolded here (a bad name, a taken number, a file exists)."""


def paths(stem: str, topic: str | None = None) -> list[str]:
    """The five authored files of ``stem`` (``topic`` defaults to the stem's), relative to the
    course root, in :data:`AUTHORED`'s order."""
    topic = topic or STEM.match(stem).group("topic")
    return [p.replace("NN_topic", stem).replace("<topic>", topic).replace("<checker>", topic)
            for p in AUTHORED]


def _lesson(stem: str, number: int, topic: str, title: str, imp: dict[str, str]) -> str:
    return f'''\
# %% [markdown]
# # Lesson {number}: {title}
#
# One thread per element adds a constant to it: `out[i] = x[i] + c`. (Replace this
# teaching with the lesson's: define each new term in *italics* where it is first used.)

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
import cudacourse.check
{imp["setup"]}{topic}
import numpy as np
from numba import cuda

# %%
print({topic}.{topic}_offset(np.arange(4, dtype=np.float32), 0.5))

# %% [markdown]
# Write `{topic}_offset(x, c, out)`, one thread per element, guarded for the threads past the
# end of the array.

# %% [solution] id={topic}_offset
@cuda.jit
def {topic}_offset(x, c, out):
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + c
    ### END SOLUTION

# %% [tests] id=test_{topic}_offset points=2
cudacourse.check.check_{topic}_offset({topic}_offset)
### BEGIN HIDDEN TESTS
cudacourse.check.check_{topic}_offset({topic}_offset, hidden=cudacourse.check.Cases(
    seed={8000 + number * 7 + 3}, sizes=[(517, 64), (90, 96)]))
### END HIDDEN TESTS

# %%
quiz.ask("{stem}.spare")

# %% [solution] id=answer_spare
# Question 1: Threads past the end. Answer as: answer_spare = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_spare = "b"
### END SOLUTION

# %% [tests] id=test_answer_spare points=1
quiz.grade("{stem}.spare", answer_spare)
'''


def _imports(root: Path) -> dict[str, str]:
    """Where the topic module and what it imports sit: in the package itself, or, after the
    relayout (tools/codemods/relayout.py), in its layers ``kernels/`` and ``runtime/``."""
    if (root / PACKAGE / "kernels").is_dir():
        return {"up": "..", "runtime": "..runtime.", "kernels": "..kernels.",
                "setup": "from cudacourse.course import quiz\nfrom cudacourse.kernels import "}
    return {"up": ".", "runtime": ".", "kernels": "..", "setup": "from cudacourse import quiz, "}


def _topic(topic: str, number: int, imp: dict[str, str]) -> str:
    return f'''\
"""Lesson {number}'s topic: a constant added to every element, ``out[i] = x[i] + c``."""

from __future__ import annotations

from {imp["up"]} import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from typing import Any

import numpy as np
from numba import cuda

from {imp["runtime"]}arrays import check_array, is_device_array, output_array, return_like_input, to_device
from {imp["runtime"]}launch import blocks_for


def {topic}_offset_ref(x: Any, c: float, xp: Any = np) -> Any:
    """The reference: what every kernel of the exercise must produce."""
    return xp.add(x, c)


@cuda.jit
def _{topic}_offset(x, c, out):
    """A grid-stride loop: any grid covers any n (the exercise writes one element per thread)."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] + c


def {topic}_offset(x: Any, c: float, out: Any = None) -> Any:
    """``x + c`` on the device: host in, host out; device in, device out."""
    check_array(x, "x", ndim=1)
    dout = output_array(out, (x.shape[0],))
    _{topic}_offset[blocks_for(x.shape[0], 128), 128](to_device(x), np.float32(c), dout)
    return return_like_input(dout, out, not is_device_array(x))
'''


def _checker(topic: str, number: int, imp: dict[str, str]) -> str:
    return f'''\
"""Checker for lesson {number}'s exercise, ``{topic}_offset(x, c, out)``: an exercise spec."""

from __future__ import annotations

from . import kit as K
from {imp["kernels"]}{topic} import {topic}_offset_ref

check_{topic}_offset = K.exercise(
    "{topic}_offset",
    params=("x", "c", "out"),
    inputs={{"x": K.Random(), "c": K.Scalar(2.5)}},
    outputs={{"out": K.Output("float32")}},
    reference={topic}_offset_ref,
    formula="x[i] + c",
    cases=[(1000, 128), (33, 32)],  # (n, threads per block): not block multiples
    seed={number * 1000 + 1},
    alternatives={{"x[i]": lambda x, c: x, "x[i] - c": lambda x, c: x - c}},
    observe=("spread",),  # each element written once, by its own thread
    points=2,
)
'''


def _bank(number: int, topic: str, title: str) -> str:
    return f'''\
[lesson]
number = {number}
title = "{title}"
summary = "one thread per element, a constant added"
you_write = "`{topic}_offset`"
topics = ["{topic}"]
checker = "{topic}"
plots = []
marker = "{title.lower()}"
terms = []

[[question]]
id = "spare"
title = "Threads past the end"
predict = true
prompt = "n = 1000 elements, 4 blocks of 256 threads. What must the threads with i >= n do?"
choices = {{ a = "Write out[i] anyway", b = "Nothing: the guard skips them", c = "Wait for the others", d = "Write out[i - n]" }}
'''


KEY = '''\
[[key]]
id = "spare"
answer = "b"
why.a = "out has 1000 elements: out[i] for i >= 1000 is past its end"
why.b = "the guard if i < n leaves them idle"
why.c = "nothing waits: the spare threads simply do no work"
why.d = "that would overwrite elements other threads wrote"
explain = "A grid covers n in whole blocks, so the last block has spare threads; the guard keeps them from writing."
hint = "What does the bounds guard do?"
'''


def new(root: Path, stem: str, title: str | None = None) -> list[Path]:
    """Write the five files of lesson ``stem`` (``NN_topic``) under the course ``root``, then
    its README row and pytest marker where the checkout has them; returns the files written.
    Refuses a taken number, a name that is not ``NN_topic`` and any existing file (no
    author's work is overwritten)."""
    root = Path(root)
    m = STEM.match(stem)
    if not m:
        raise ScaffoldError(f"{stem!r}: a lesson is named NN_topic (two digits, an underscore, "
                            "a lower-case topic), e.g. 07_tensor_cores")
    number, topic = int(m.group("number")), m.group("topic")
    banks = root / PACKAGE / "quizzes"
    if not banks.is_dir():
        raise ScaffoldError(f"{root} holds no {PACKAGE}/quizzes: run this in the course "
                            "checkout (the package's source, not an installed copy)")
    taken = sorted(p.stem for p in banks.glob("[0-9][0-9]_*.toml"))
    want = len(taken) + 1
    if number != want:
        raise ScaffoldError(f"lesson numbers run 1, 2, ... without gaps: the next lesson is "
                            f"{want:02d} (lessons {', '.join(taken)} exist), not {number:02d}")
    title = title or topic.replace("_", " ").capitalize()
    imp = _imports(root)
    texts = [_lesson(stem, number, topic, title, imp), _topic(topic, number, imp),
             _checker(topic, number, imp), _bank(number, topic, title), KEY]
    targets = [root / rel for rel in paths(stem, topic)]
    existing = [p for p in targets if p.exists()]
    if existing:
        raise ScaffoldError("these files exist already (nothing was written): "
                            + ", ".join(str(p.relative_to(root)) for p in existing))
    for path, text in zip(targets, texts):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _register(root, banks / f"{stem}.toml")
    return targets


def _register(root: Path, bank: Path) -> None:
    """The generated lines: the README's lessons row and the pytest marker, after the last
    lesson's (only where the checkout has both lists)."""
    lesson = _lessons._entry(bank)
    readme, pyproject = root / "README.md", root / "pyproject.toml"
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        rows = list(re.finditer(r"^\| \d+ \| \[.*$", text, re.M))
        if rows and lesson.readme_row() not in text:
            end = rows[-1].end()
            readme.write_text(text[:end] + "\n" + lesson.readme_row() + text[end:],
                              encoding="utf-8")
    if pyproject.exists():
        text = pyproject.read_text(encoding="utf-8")
        marks = list(re.finditer(r'^    "lesson\d+: .*",$', text, re.M))
        if marks and lesson.marker_line() not in text:
            end = marks[-1].end()
            pyproject.write_text(text[:end] + f'\n    "{lesson.marker_line()}",' + text[end:],
                                 encoding="utf-8")
