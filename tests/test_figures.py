"""One source for every figure (issue 41): every number the course states, in both editions,
comes from docs/benchmarks.json, docs/gpu_run.json, a package constant or the run itself, and
no sentence compares two figures the other way round from the data.

Where: the lessons' markdown (English sources, Japanese translations), the sentences code cells
show (``prose.show`` templates), the questions and their keys (prompts, choices, whys,
explanations, hints, in both languages) and the README. Cheap: text only, nothing executed.
"""

from __future__ import annotations

import ast
import re
import tomllib

import pytest

from cudacourse.course import authoring, prose
from cudacourse.i18n import translations as T

ROOT = authoring.ROOT
LESSONS = authoring.lessons()
IDS = [p.stem for p in LESSONS]


def _ja(path) -> dict[str, str]:
    """``{context: translation}`` of a translation file (non-empty entries)."""
    if not path.is_file():
        return {}
    return {k: m.string for k, m in T.entries(T.read(path)).items() if m.string}


def _markdown(lesson) -> list[str]:
    return [c.source for c in authoring.parse(lesson.read_text(), str(lesson))
            if c.kind == "markdown"]


def show_templates(source: str) -> list[str]:
    """The first argument of every ``prose.show`` / ``prose.shown`` call: string literals
    only (a template assembled at run time could not be checked or translated)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("show", "shown")
                and getattr(node.func.value, "id", "") == "prose"):
            arg = node.args[0] if node.args else None
            assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), (
                f"line {node.lineno}: prose.{node.func.attr} takes one literal template "
                "(whole sentences, translated as written); choose between literals instead")
            out.append(arg.value)
    return out


def _code(lesson) -> str:
    return "\n".join(c.source for c in authoring.parse(lesson.read_text(), str(lesson))
                     if c.kind != "markdown")


# --- the checks themselves catch the cases --------------------------------------------

@pytest.mark.parametrize("text", [
    "Lesson 6's LBM step runs 27x faster than CuPy",          # a README ratio typed in
    "The course launcher costs 17 us (CuPy's add: 9 us).",     # small numbers with a unit
    "the model uses 40 us per launch",
])
def test_a_typed_measurement_is_found(text):
    assert prose.untraced_figures(text)


def test_a_stale_inline_figure_is_found():
    doc = "runs <!-- {{bench.ratio.lbm_vs_cupy:.1f}} -->27.0<!-- / -->x faster"
    (placeholder, shown, want), = prose.stale_figures(doc)
    assert shown == "27.0" and want != shown
    assert prose.stale_figures(prose.refresh(doc)) == []


@pytest.mark.parametrize("text, said", [
    # SDPA's bf16 speed-up quoted over two shapes where the table shows the others too
    ("{{bench.ratio.attention_sdpa_bf16_vs_sdpa_f32_d128_causal:.1f}}x to "
     "{{bench.ratio.attention_sdpa_bf16_vs_sdpa_f32_d128:.1f}}x faster", "ratio_min"),
    ("{{bench.ratio.attention_fused_vs_sdpa_f32:.2f}}x faster than SDPA", "not more than 1"),
    ("{{bench.ratio.lbm_vs_cupy:.1f}}x to {{bench.ratio.lbm_vs_copy:.1f}}x", "backwards"),
])
def test_a_comparison_the_data_contradicts_is_found(text, said):
    assert any(said in c for c in prose.contradictions(text))


def test_a_range_over_a_whole_family_is_right():
    assert prose.contradictions("{{bench.ratio_min.attention_sdpa_bf16_vs_sdpa_f32:.1f}}x to "
                                "{{bench.ratio_max.attention_sdpa_bf16_vs_sdpa_f32:.1f}}x") == []


# --- the README ------------------------------------------------------------------------------

def test_every_figure_of_the_readme_has_its_source_and_shows_it():
    readme = (ROOT / "README.md").read_text()
    assert prose.untraced_figures(readme) == [], (
        "README.md states figures without a source: write each as "
        "<!-- {{source.key:fmt}} -->value<!-- / --> (cudacourse.course.prose)")
    assert prose.stale_figures(readme) == [], (
        "README.md's figures differ from their sources: run "
        "`python -m cudacourse.course.prose refresh README.md`")
    assert prose.contradictions(readme) == []


# --- the lessons, both editions ------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_the_sentences_code_cells_show_have_no_typed_figure(lesson):
    for template in show_templates(_code(lesson)):
        assert prose.typed_figures(template) == [], template
        assert prose.contradictions(template) == [], template


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_no_sentence_of_a_lesson_contradicts_its_figures(lesson):
    for md in _markdown(lesson):
        assert prose.contradictions(md) == [], md[:200]


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_the_japanese_edition_takes_its_figures_from_the_same_sources(lesson):
    ja = _ja(T.po_path(lesson.stem, "ja", ROOT))
    found = {k: prose.typed_figures(v) for k, v in ja.items() if k.startswith("md.")}
    assert not {k: v for k, v in found.items() if v}, (
        f"{lesson.stem}: figures typed into the Japanese markdown: use the English's "
        f"placeholders: {found}")
    for k, v in ja.items():
        assert prose.contradictions(v) == [], k


# --- questions and their keys, both languages --------------------------------------------------

def _measured(text: str) -> list[str]:
    """The measurements a question text states (a time, a rate, a ratio), outside its
    placeholders, code and formulas."""
    for pattern in prose._NOT_FIGURES[:5]:
        text = pattern.sub(" ", text)
    return [m.group(1) for m in prose._NUMBER.finditer(text)
            if m.group(2) in ("x", "×")
            or (m.group(2) is None and prose._MEASURED_UNIT.match(text, m.end()))]


def _numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_a_question_states_no_measurement_but_its_own_data(lesson):
    """A prompt may give the problem's data ("a link moves 25 GB/s"); its key may state the
    answer in any unit; any other time, rate or ratio in a question comes from a source."""
    bank = tomllib.loads((ROOT / "src/cudacourse/quizzes" / f"{lesson.stem}.toml").read_text())
    keys = {k["id"]: k for k in tomllib.loads(
        (ROOT / "lessons/quizkeys" / f"{lesson.stem}.toml").read_text()).get("key", [])}
    ja = {**_ja(T.po_path(lesson.stem, "ja", ROOT)),
          **_ja(T.key_po_path(lesson.stem, "ja", ROOT))}
    for q in bank["question"]:
        data = _numbers(q.get("prompt", ""))
        key = keys[q["id"]]
        try:
            a = float(key["answer"])
            data |= {a, a / 1000, a * 1000}
        except ValueError:
            pass
        texts = {f"q.{q['id']}": str(q), f"key.{q['id']}": str(key)}
        texts.update({k: v for k, v in ja.items() if k.startswith(f"q.{q['id']}.")})
        for where, text in texts.items():
            typed = [n for n in _measured(text) if float(n.replace(",", "")) not in data]
            assert typed == [], (f"{lesson.stem} {where}: measurements typed into a question "
                                 f"or its feedback: {typed} (use a {{{{...}}}} placeholder)")
            assert prose.contradictions(text) == [], where


def test_every_figure_a_key_names_resolves():
    for path in sorted((ROOT / "lessons/quizkeys").glob("*.toml")):
        prose.fill(path.read_text())  # raises MissingFigure naming the placeholder


VAGUE_RATE = re.compile(r"(?i)\b(tens|hundreds|thousands|several|a few|dozens) (of )?"
                        r"([GT]B/s|TFLOP/s|gigabytes per second|terabytes per second)")


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_feedback_gives_a_measured_rate_as_its_figure(lesson):
    """"The bytes cross a link of tens of GB/s" where the lesson's cell shows 6.8 GB/s: a rate
    the course measured is stated as its figure, not as a magnitude a learner cannot check."""
    text = (ROOT / "lessons/quizkeys" / f"{lesson.stem}.toml").read_text()
    assert VAGUE_RATE.findall(text) == []


def test_a_vague_rate_is_found():
    assert VAGUE_RATE.search("The bytes cross a link of tens of GB/s (tens of milliseconds)")
    assert VAGUE_RATE.search("streams 1.2 GB through GPU memory at several TB/s")
