"""cudacourse.course.prose: figures in prose come from their sources; terms are defined at first use."""

from __future__ import annotations

import json
import re

import pytest

from cudacourse.course import authoring, prose
from cudacourse.runtime import hardware, occupancy
from cudacourse.course import lessons as registry

LESSONS = authoring.lessons()


def _markdown(lesson) -> list[str]:
    return [c.source for c in authoring.parse(lesson.read_text(), str(lesson))
            if c.kind == "markdown"]


# --- the resolver -------------------------------------------------------------------------

@pytest.fixture
def course(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.json").write_text(json.dumps({
        "mode": "gpu", "date": "2026-12-01T07:39:56+00:00",
        "environment": {"gpu": "NVIDIA H200", "sm_count": 132},
        "ceilings": {"copy_gb_s": 4219.489},
        "ratios": {"stencil_vs_copy": 0.7632},
        "measurements": {"copy": {"gb_s": 4219.489, "tflop_s": None}},
    }))
    (tmp_path / "docs" / "gpu_run.json").write_text(json.dumps({"tests": {"passed": 812}}))
    return tmp_path


def test_fill_takes_each_source_with_its_format(course):
    text = ("copy {{bench.copy.gb_s:,.0f}} GB/s = {{bench.ceiling.copy_gb_s / 1000:.2f}} TB/s, "
            "stencil {{bench.ratio.stencil_vs_copy:.2f}}, {{bench.gpu}} of {{bench.sm_count}} "
            "SMs on {{bench.date}}; {{gpu_run.tests.passed}} passed; "
            "{{const.occupancy.H200_SM.shared_memory/1024:.0f}} KiB")
    assert prose.fill(text, root=course) == (
        "copy 4,219 GB/s = 4.22 TB/s, stencil 0.76, NVIDIA H200 of 132 SMs on 2026-12-01; "
        f"812 passed; {occupancy.H200_SM.shared_memory // 1024} KiB")


def test_a_ratio_of_two_figures(course):
    assert prose.fill("{{const.hardware.H200.sms / bench.sm_count:.1f}}", root=course) == "1.0"
    assert prose.fill("{{bench.sm_count / bench.copy.gb_s * 1000:.2f}}", root=course) == "31.28"


def test_values_of_the_run_are_passed_by_name(course):
    assert prose.fill("Re = {{re:.0f}} here", {"re": 47.6}, root=course) == "Re = 48 here"


@pytest.mark.parametrize("key, said", [
    ("bench.copy.tflop_s", "no figure for bench.copy.tflop_s"),  # a null field
    ("bench.nothing.gb_s", "has no 'nothing.gb_s'"),
    ("bench.ratio.nothing", "no figure for bench.ratio.nothing"),
    ("gpu_run.tests.failed", "docs/gpu_run.json has no 'tests.failed'"),
    ("const.hardware.H300", "cudacourse.runtime.hardware has no 'H300'"),
    ("const.nomodule.X", "no module cudacourse.nomodule"),
    ("re", "not a figure of the run"),
])
def test_a_missing_figure_is_an_error_naming_it(course, key, said):
    with pytest.raises(prose.MissingFigure, match=re.escape(said)):
        prose.fill("{{" + key + "}}", root=course)


def test_a_simulator_benchmark_file_gives_no_figures(course):
    (course / "docs" / "benchmarks.json").write_text(json.dumps({"mode": "simulator"}))
    with pytest.raises(prose.MissingFigure, match="not a GPU run"):
        prose.fill("{{bench.copy.gb_s}}", root=course)


def test_the_build_fills_markdown_and_names_the_line_of_a_missing_figure(course):
    src = "# %% [markdown]\n# copy {{bench.copy.gb_s:.0f}} GB/s\n# %% [markdown]\n# {{bench.x.y}}\n"
    with pytest.raises(authoring.LessonSyntaxError, match=r"lesson.py:3: .*bench"):
        authoring.to_notebook(src, "lesson.py", root=course)
    nb = authoring.to_notebook(src.split("# %% [markdown]\n# {{")[0], "lesson.py", root=course)
    assert nb.cells[0].source == "copy 4219 GB/s"


def test_hardware_figures_agree_with_the_occupancy_model():
    assert hardware.H200.cuda_cores == 132 * 128
    assert occupancy.H200_SM.max_shared_per_block // 1024 > hardware.STATIC_SHARED_KIB


# --- no typed figures in the lessons' markdown --------------------------------------------

@pytest.mark.parametrize("text, typed", [
    ("the copy ran at 4,220 GB/s", ["4,220"]),
    ("1.4x to 2.5x faster", ["1.4x", "2.5x"]),
    ("measured on 2026-11-30", ["2026"]),
    ("a warp of 32 lanes, 1024 threads, 4 bytes, 50% of it", ["50%"]),
    ("{{bench.copy.gb_s:.0f}} GB/s, `x[17]`, lesson 3, Question 4, sections 2 and 5", []),
    ("FlashAttention (2022) in float32 on an H200, D2Q9", []),
    ("## 7. Time\n1. first\n2. second", []),
    ("Re = 20 at tau = 0.8; tau > 0.5", ["20", "0.8"]),
])
def test_typed_figures_finds_the_numbers_a_source_should_give(text, typed):
    assert prose.typed_figures(text) == typed


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_markdown_has_no_typed_figures(lesson):
    found = {i: prose.typed_figures(md) for i, md in enumerate(_markdown(lesson))}
    found = {i: t for i, t in found.items() if t}
    assert not found, (f"{lesson.name}: figures typed into markdown (cell: numbers); take them "
                       f"from their source with a {{{{...}}}} placeholder (cudacourse.course.prose): "
                       f"{found}")


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_placeholder_of_a_lesson_resolves(lesson):
    for md in _markdown(lesson):
        prose.fill(md)  # raises MissingFigure naming the placeholder


# --- every term defined where it is first used --------------------------------------------

# Per lesson, the terms a newcomer does not know (the registry's ``terms``: the lesson's
# [lesson] table in its question bank). At its first use in the lesson's markdown a term is
# defined: set in bold or italics there, where the sentence explains it.
TERMS = {lesson.stem[:2]: list(lesson.terms) for lesson in registry.LESSONS}


def _defined_at(text: str, start: int, end: int) -> bool:
    """The match [start, end) lies in *emphasis* or **bold** (within its paragraph)."""
    top = text.rfind("\n\n", 0, start) + 1
    bottom = text.find("\n\n", end) % (len(text) + 1)
    for m in re.finditer(r"(\*\*|\*)(?![\s*])(.+?)(?<![\s*])\1", text[top:bottom], flags=re.S):
        if top + m.start(2) <= start and end <= top + m.end(2):
            return True
    return False


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_each_term_is_defined_at_its_first_use(lesson):
    # a heading announces a term; the definition follows it: headings are not first uses
    text = re.sub(r"(?m)^#+ .*$", lambda h: " " * len(h[0]), "\n\n".join(_markdown(lesson)))
    text = prose.PLACEHOLDER.sub(lambda p: " " * len(p[0]), text)  # names of sources
    undefined, unused = [], []
    for term in TERMS[lesson.stem[:2]]:
        pattern = term.replace(" ", r"\s+")  # a term may wrap onto the next line
        m = re.search(rf"(?<![\w-]){pattern}(?![\w-])", text, flags=re.I)
        if m is None:
            unused.append(term)
        elif not _defined_at(text, m.start(), m.end()):
            line = text[max(0, text.rfind("\n", 0, m.start())):text.find("\n", m.end())]
            undefined.append(f"{term!r} first used in: {line.strip()!r}")
    assert not unused, f"{lesson.name}: terms listed but never used: {unused}"
    assert not undefined, (f"{lesson.name}: terms used before they are defined (set the "
                           f"defining use in *italics* or **bold**):\n" + "\n".join(undefined))


def test_measured_gives_the_figure_or_says_it_was_not_measured():
    # a later GPU run adds a new kernel's ratio: until then a lesson says so, never a number
    assert prose.measured("bench.no_such_kernel.tflop_s", ".2f") == "not measured yet on a GPU"
    value = prose.value("bench.ceiling.copy_gb_s")
    assert prose.measured("bench.ceiling.copy_gb_s", ".1f") == format(value, ".1f")
