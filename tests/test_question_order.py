"""Questions before their answers (issue 41): no question's answer is printed, plotted or
written just above it in the same section, and no question cites a section the learner has
not reached yet. Both editions: the Japanese cells are the English cells translated, in the
same order, and the Japanese question texts are searched for citations too."""

from __future__ import annotations

import re
import tomllib

import pytest

from cudacourse.course import authoring, prose
from cudacourse.i18n import translations as T

ROOT = authoring.ROOT
LESSONS = authoring.lessons()
IDS = [p.stem for p in LESSONS]
ASK = re.compile(r"""quiz\.ask\(\s*["'](?P<qid>[\w.]+)["']""")
HEADING = re.compile(r"(?m)^##\s+(?P<n>\d+)?\.?")
CITATION = re.compile(r"(?i)\bsections?\s+(\d+)|第\s*(\d+)\s*節")
# a citation of a section still ahead is fine when it says so ("which section 6 comes to
# later", "第 6 節で後ほど"); one that claims the learner read it is not
FORWARD = re.compile(r"(?i)\b(later|ahead|comes to|will)\b|後ほど|後で|先の")

# What gives a question's answer away besides its value or its choice's words: a phrase of a
# sentence or a call drawing the picture the question asks to predict. Each was found by a
# learner reading the answer just above its question (issue 41); a pattern is searched in the
# markdown and in the code (what a cell prints, shows or plots) above the question, within its
# section.
REVEALS = {
    # lesson 1, cell 32: "the copies cost about 504 times the kernel's time" (question 5)
    "01_gpu_vs_cpu.transfers": [r"copies cost about", r"the copies are .*x the kernel"],
    # lesson 2: the occupancy plot whose 64-register curve peaks at 50% (question 5)
    "02_threads_blocks_warps.occupancy_regs": [r"viz\.plot_occupancy\(",
                                               r"occupancy_curve\([^)]*64"],
}


def _bank(stem):
    bank = {q["id"]: q for q in tomllib.loads(
        (ROOT / "src/cudacourse/quizzes" / f"{stem}.toml").read_text())["question"]}
    keys = {k["id"]: k for k in tomllib.loads(
        (ROOT / "lessons/quizkeys" / f"{stem}.toml").read_text())["key"]}
    return bank, keys


def sections(lesson) -> list[tuple[int, list]]:
    """``(section number, cells)`` in order; 0 before the first numbered section. A heading
    ``## N.`` opens section N; an unnumbered ``##`` (Summary) opens the next one."""
    out, number = [(0, [])], 0
    for cell in authoring.parse(lesson.read_text(), str(lesson)):
        m = HEADING.search(cell.source) if cell.kind == "markdown" else None
        if m:
            number = int(m["n"]) if m["n"] else number + 1
            head, _, rest = cell.source.partition(m[0])
            out[-1][1].append(authoring.Cell(cell.kind, cell.attrs, head, cell.lineno))
            out.append((number, [authoring.Cell(cell.kind, cell.attrs, m[0] + rest,
                                                cell.lineno)]))
        else:
            out[-1][1].append(cell)
    return out


def _above(cells) -> str:
    """What the learner has read above: markdown (filled; the Japanese states the same
    figures, tests/test_figures.py) and the code cells' sources (what they print, show and
    plot)."""
    return "\n".join(prose.fill(c.source) if c.kind == "markdown" else c.source
                     for c in cells)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[`*_]", "", text)).strip().lower()


def _numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in
            re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.])", prose.PLACEHOLDER.sub(" ", text))}


def answer_shown_above(question: dict, key: dict, above: str) -> list[str]:
    """How ``above`` gives ``question``'s answer away: its value (a number question), the
    words of its right choice, or a known give-away."""
    found = []
    if question.get("kind") == "number":
        value, unit = float(key["answer"]), question.get("unit", "")
        if value in _numbers(question["prompt"]):
            return found
        if unit:  # the value with its unit ("16 ms", "1.2 GB")
            shown = any(float(n.replace(",", "")) == value for n in re.findall(
                rf"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*{re.escape(unit)}(?!\w)", above))
        else:  # a bare value, unless one every lesson uses (a warp's 32, 16 bytes)
            shown = value in _numbers(above) and not prose._allowed(str(key["answer"]), None)
        if shown:
            found.append(f"the value {key['answer']}")
    else:
        for letter in re.split(r"\s*,\s*", str(key["answer"])):
            choice = question["choices"][letter]
            if choice.strip().startswith("`"):
                continue  # a line of the code the question asks about: shown on purpose
            if len(choice.split()) >= 3 and _norm(choice) in _norm(above):
                found.append(f"choice ({letter}): {choice!r}")
            elif re.fullmatch(r"[\d.,]+\s*%?", choice.strip()) and re.search(
                    rf"(?<![\w.]){re.escape(choice.strip())}(?![\w.])", above):
                found.append(f"choice ({letter}): {choice!r}")
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_no_answer_is_shown_above_its_question(lesson):
    bank, keys = _bank(lesson.stem)
    problems = []
    for number, cells in sections(lesson):
        for i, cell in enumerate(cells):
            m = ASK.search(cell.source) if cell.kind != "markdown" else None
            if not m:
                continue
            qid = m["qid"].split(".", 1)[1]
            above = _above(cells[:i])
            q = bank[qid]
            found = answer_shown_above(q, keys[qid], above)
            for pattern in REVEALS.get(m["qid"], []):
                if re.search(pattern, above):
                    found.append(f"give-away {pattern!r}")
            if found:
                problems.append(f"{m['qid']} (section {number}): {found}")
    assert not problems, "answers shown above their question, in its section: " + str(problems)


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_no_question_cites_a_section_not_yet_read(lesson):
    """"Section 1's table says the opposite" in the feedback of a question asked before
    section 1 (lesson 1, question 1)."""
    bank, keys = _bank(lesson.stem)
    ja_texts = {**{k: m.string for k, m in T.entries(T.read(T.po_path(lesson.stem, "ja", ROOT))).items()},
                **{k: m.string for k, m in T.entries(T.read(T.key_po_path(lesson.stem, "ja", ROOT))).items()}}
    problems = []
    for number, cells in sections(lesson):
        for cell in cells:
            m = ASK.search(cell.source) if cell.kind != "markdown" else None
            if not m:
                continue
            qid = m["qid"].split(".", 1)[1]
            texts = [str(bank[qid]), str(keys[qid])] + [
                v for k, v in ja_texts.items() if k.startswith(f"q.{qid}.")]
            for text in texts:
                for ref in CITATION.finditer(text):
                    cited = int(ref[1] or ref[2])
                    if cited > number and not FORWARD.search(text, ref.start(),
                                                             ref.end() + 40):
                        problems.append(f"{m['qid']} (asked in section {number}) cites "
                                        f"section {cited}")
    assert not problems, problems


def test_the_checks_catch_the_cases_learners_met():
    """The issue's cases, as they stood: each is found."""
    bank, keys = _bank("01_gpu_vs_cpu")
    assert answer_shown_above(bank["bytes_moved"], keys["bytes_moved"],
                              "the kernel moves 1.2 GB") == ["the value 1.2"]
    assert answer_shown_above(bank["bytes_moved"], keys["bytes_moved"], "moves 3.2 GB") == []
    bank2, keys2 = _bank("02_threads_blocks_warps")
    assert answer_shown_above(bank2["occupancy_regs"], keys2["occupancy_regs"],
                              "the curve peaks at 50% for 64 registers")
    assert any(re.search(p, 'prose.show("the copies cost about {{x}} times")')
               for p in REVEALS["01_gpu_vs_cpu.transfers"])
