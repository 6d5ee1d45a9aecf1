"""Concept questions: a bank kept as data, asked inline, graded by nbgrader.

The bank is ``quizzes/<lesson>.toml``. Answers are stored only as salted SHA-256 hashes, so
neither the bank nor a learner's notebook spells out the right choice. In a notebook::

    quiz.ask("gpu_vs_cpu.cores")        # widget with instant feedback (text fallback)
    answer_cores = "b"                  # the learner's choice, in an autograded answer cell
    quiz.grade("gpu_vs_cpu.cores", answer_cores)   # in the locked test cell

A bank entry::

    [[question]]
    id = "cores"
    prompt = "..."
    choices = { a = "...", b = "..." }
    answer = "<quiz.answer_hash('gpu_vs_cpu.cores', 'b')>"
    explain = "why the right answer is right (shown once answered correctly)"
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_SALT = "cudacourse-quiz-v1"


@dataclass(frozen=True)
class Question:
    qid: str  # "<lesson>.<id>"
    prompt: str
    choices: dict[str, str]
    answer_hash: str
    explain: str
    hint: str

    def is_right(self, choice: str) -> bool:
        return answer_hash(self.qid, choice) == self.answer_hash

    def text(self) -> str:
        lines = [self.prompt, ""]
        lines += [f"  ({k}) {v}" for k, v in self.choices.items()]
        return "\n".join(lines)


def answer_hash(qid: str, choice: str) -> str:
    """The hash stored in the bank for ``choice`` being the answer to ``qid``."""
    norm = str(choice).strip().lower().strip("()")
    return hashlib.sha256(f"{_SALT}:{qid}:{norm}".encode()).hexdigest()


@lru_cache(maxsize=None)
def bank(lesson: str) -> dict[str, Question]:
    """All questions of one lesson's bank, by full id."""
    try:
        raw = resources.files("cudacourse.quizzes").joinpath(f"{lesson}.toml").read_text()
    except FileNotFoundError:
        raise KeyError(f"no question bank for lesson {lesson!r}") from None
    data = tomllib.loads(raw)
    out: dict[str, Question] = {}
    for q in data.get("question", []):
        qid = f"{lesson}.{q['id']}"
        if qid in out:
            raise ValueError(f"duplicate question id {qid}")
        out[qid] = Question(qid, q["prompt"].strip(), dict(q["choices"]), q["answer"],
                            q.get("explain", "").strip(), q.get("hint", "").strip())
    return out


def lessons() -> list[str]:
    files = resources.files("cudacourse.quizzes").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".toml"))


def get(qid: str) -> Question:
    lesson = qid.split(".", 1)[0]
    questions = bank(lesson)
    try:
        return questions[qid]
    except KeyError:
        raise KeyError(f"no question {qid!r} in the {lesson!r} bank") from None


def feedback(qid: str, choice: str) -> tuple[bool, str]:
    """(right?, what to tell the learner)."""
    q = get(qid)
    key = str(choice).strip().lower().strip("()")
    if key not in q.choices:
        return False, f"{choice!r} is not one of the choices {', '.join(q.choices)}."
    if q.is_right(key):
        return True, "Right. " + q.explain
    return False, "Not quite. " + (q.hint or "Think about it again and try another choice.")


def answer(qid: str, choice: str) -> bool:
    """Plain-text instant feedback: print it and return whether the choice is right."""
    ok, text = feedback(qid, choice)
    print(text)
    return ok


def grade(qid: str, choice: object) -> None:
    """For nbgrader test cells: raise AssertionError unless ``choice`` is right."""
    q = get(qid)
    if not isinstance(choice, str):
        raise AssertionError(f"the answer to {qid} must be one of the letters "
                             f"{', '.join(map(repr, q.choices))}, got {choice!r}")
    key = choice.strip().lower().strip("()")
    if key not in q.choices:
        raise AssertionError(f"{choice!r} is not one of the choices {', '.join(q.choices)}")
    if not q.is_right(key):
        raise AssertionError(f"{choice!r} is not the right answer to {qid}")


def ask(qid: str) -> None:
    """Show the question; with ipywidgets, choices to click with instant feedback."""
    q = get(qid)
    from IPython.display import Markdown, display

    md = f"**Question ({qid})** {q.prompt}\n\n" + "\n".join(
        f"- **({k})** {v}" for k, v in q.choices.items())
    try:
        import ipywidgets as w
    except ImportError:
        display(Markdown(md + f"\n\nCheck a choice with `quiz.answer({qid!r}, 'a')`."))
        return
    display(Markdown(md))
    # The choices' text is in the Markdown above (readable anywhere, also where widgets do not
    # render); the buttons only carry the letters.
    pick = w.RadioButtons(options=[(f"({k})", k) for k in q.choices], value=None,
                          description="Your choice:", style={"description_width": "initial"})
    button = w.Button(description="Check", button_style="primary")
    out = w.HTML()

    def on_click(_: object) -> None:
        if pick.value is None:
            out.value = "<i>Pick a choice first.</i>"
            return
        ok, text = feedback(qid, pick.value)
        colour = "#1a7f37" if ok else "#b35900"
        out.value = f"<span style='color:{colour}'>{text}</span>"

    button.on_click(on_click)
    display(w.VBox([pick, button, out]))
