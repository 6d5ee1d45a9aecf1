"""Graded answers' keys stay with the instructor (issue 19, class 3).

The attack: a script in the learner's environment tries every choice (and every letter
combination) and a range of numbers against whatever the package and the learner copy hold:
answer hashes, key tokens, the checking functions. On a graded assignment's learner copy and
the package it recovers nothing; on the master (instructor-side) the same script recovers every
answer, so the attack is a real one.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

from cudacourse.course import quiz
from cudacourse.course.authoring import ROOT, master_path, to_notebook
from cudacourse.grader.quiz_mode import QuizMode

PACKAGE = Path(quiz.__file__).parent
LESSON = "01_gpu_vs_cpu"
NUMBERS = range(-20_000, 20_001)  # the attacker's numeric range, in units of the tolerance


def _candidates(q: quiz.Question) -> list[object]:
    if q.kind == "number":
        return [k * q.tol for k in NUMBERS]
    keys = list(q.choices)
    sizes = [1] if q.kind == "choice" else range(1, len(keys) + 1)
    return [", ".join(c) for r in sizes for c in itertools.combinations(keys, r)]


def _attack(texts: list[str], lesson: str = LESSON) -> dict[str, object]:
    """What a learner recovers from ``texts``: qid -> the answer found."""
    blob = "\n".join(texts)
    hexes = set(re.findall(r"[0-9a-f]{64}", blob))
    tokens = re.findall(r'key=\\?"([\w-]+)\\?"', blob)
    found: dict[str, object] = {}
    for qid, q in quiz.bank(lesson).items():
        keyed = []
        for t in tokens:
            try:
                keyed.append(quiz.with_token(qid, t))
            except ValueError:
                pass
        try:  # the package's own checking function, as shipped
            q.is_right("a")
            keyed.append(q)
        except KeyError:
            pass
        for c in _candidates(q):
            if quiz.answer_hash(qid, str(c)) in hexes or any(k.is_right(c) for k in keyed):
                found[qid] = c
                break
    return found


def _package_texts() -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(PACKAGE.rglob("*"))
            if p.is_file() and p.suffix in (".py", ".toml", ".json", ".txt", ".md")]


def _master(lesson: str = LESSON) -> nbformat.NotebookNode:
    src = (ROOT / "lessons" / f"{lesson}.py").read_text()
    return quiz.embed_keys(to_notebook(src, lesson), ROOT)


def _learner_copy(graded: bool, lesson: str = LESSON) -> str:
    """The learner copy as ``nbgrader generate_assignment`` makes it (QuizMode first)."""
    nb = _master(lesson)
    res = {"nbgrader": {"assignment": lesson}}
    nb, res = QuizMode(graded=[lesson] if graded else []).preprocess(nb, res)
    nb, res = ClearSolutions().preprocess(nb, res)
    nb, res = ClearHiddenTests().preprocess(nb, res)
    return nbformat.writes(nb)


def test_the_attack_recovers_every_answer_from_the_master():
    found = _attack([nbformat.writes(_master())])
    assert set(found) == set(quiz.bank(LESSON))
    keyed = quiz.keyed(LESSON, ROOT)
    assert all(keyed[qid].is_right(v) for qid, v in found.items())


def test_a_graded_learner_copy_and_the_package_give_no_answer_away():
    assert _attack([_learner_copy(graded=True), *_package_texts()]) == {}


def test_a_formative_learner_copy_keeps_its_instant_feedback():
    assert set(_attack([_learner_copy(graded=False)])) == set(quiz.bank(LESSON))


def _token_payload(token: str) -> dict:
    import base64
    import json

    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


def _formative_tokens(lesson: str = LESSON) -> dict[str, str]:
    """qid -> the key token a formative learner copy's test cell carries."""
    return dict(re.findall(r'quiz\.grade\(\\?"([\w.]+)\\?", \w+, key=\\?"([\w-]+)\\?"\)',
                           _learner_copy(graded=False, lesson=lesson)))


@pytest.mark.parametrize("lesson", quiz.lessons())
def test_a_formative_copy_shows_no_answer_and_no_feedback_in_plain_sight(lesson):
    """Issue 32: a formative copy's token is salted hashes and sealed entries. Decoded, it
    holds no choice's why, no wrong value's feedback, no explanation and no answer; the
    explanation is in the master only."""
    keyed = quiz.keyed(lesson, ROOT)
    tokens = _formative_tokens(lesson)
    assert set(tokens) == set(keyed)
    for qid, t in tokens.items():
        payload = _token_payload(t)
        assert "r" not in payload and "r" in _token_payload(quiz.token(keyed[qid]))
        shown = _squeezed(json.dumps(payload, ensure_ascii=False))
        q = keyed[qid]
        texts = [q.explain, *q.why.values(), *(w for _, w in q.wrong)]
        texts += [x for t in q.translated.values() for x in (t.get("x"), *t.get("y", {}).values(),
                                                               *t.get("w", [])) if x]
        for text in texts:
            assert _squeezed(text) not in shown, f"{qid}: {text[:60]}"
        if q.kind == "number":  # a letter is in every word; a number's value is not
            plain = re.sub(r"[0-9a-f]{32,}|[\w-]{40,}", "", shown)
            assert not re.search(rf"(?<![\d.,]){re.escape(q.key_answer)}(?![\d.,])", plain), qid
        assert payload["h"] != quiz._option_hash(q.salt, qid, q.key_answer)


def test_only_the_option_given_opens_its_feedback():
    """Each option's entry opens with that option only: the token of `blocks` gives (b)'s why
    to an answer "b" and to nothing else, and a wrong number's entry only to values near it."""
    keyed = quiz.keyed(LESSON, ROOT)
    tokens = _formative_tokens()
    q = quiz.with_token(f"{LESSON}.blocks", tokens[f"{LESSON}.blocks"])
    opened = {c: quiz._opened(q, c) for c in q.choices}
    assert {c: e["ok"] for c, e in opened.items()} == {"a": False, "b": False, "c": True,
                                                      "d": False}
    assert opened["b"]["y"]["en"] == keyed[q.qid].why["b"]
    assert quiz._opened(q, "e") is None
    with pytest.raises(UnicodeDecodeError):  # (a)'s entry read with (b)'s key: noise
        quiz._unseal(q.salt, q.qid, "b", q.sealed[quiz._option_hash(q.salt, q.qid, "a")])
    ok, text = quiz.feedback(q.qid, "b", tokens[q.qid])
    assert not ok and keyed[q.qid].why["b"] in text and keyed[q.qid].why["c"] not in text
    n = quiz.with_token(f"{LESSON}.bytes_moved", tokens[f"{LESSON}.bytes_moved"])
    assert n.explain == ""  # a learner copy: the explanation is the master's
    ok, text = quiz.feedback(n.qid, 0.8, tokens[n.qid])
    assert not ok and "forgets the write" in text
    ok, text = quiz.feedback(n.qid, 1.21, tokens[n.qid])  # the right entry holds the explanation
    assert ok and "memory-bound" in text


def test_a_wrong_answer_traceback_prints_no_key(capsys):
    """In IPython (JupyterLab, nbgrader) a wrong answer's traceback shows the test cell with its
    key token blanked: the why is there, the token is not (issue 32)."""
    from IPython.core.interactiveshell import InteractiveShell

    token = quiz.token(quiz.keyed(LESSON, ROOT)[f"{LESSON}.blocks"])
    shell = InteractiveShell.instance()
    try:
        shell.run_cell(f'from cudacourse import quiz\nanswer_blocks = "b"\n'
                       f'quiz.grade("{LESSON}.blocks", answer_blocks, key="{token}")')
        out = capsys.readouterr()
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.out + out.err)
    finally:
        InteractiveShell.clear_instance()
    assert "AssertionError" in text and "1000 // 256" in text
    assert 'key="…"' in text and token[:16] not in text, text


def test_a_traceback_formatted_by_the_traceback_module_prints_no_key():
    """Tracebacks formatted in Python (the grader's verdict records, pytest) read source lines
    through linecache too: blanked there."""
    import linecache
    import traceback

    token = quiz.token(quiz.keyed(LESSON, ROOT)[f"{LESSON}.blocks"])
    src = f'quiz.grade("{LESSON}.blocks", "b", key="{token}")\n'
    linecache.cache["<test cell>"] = (len(src), None, [src], "<test cell>")  # as IPython does
    text = ""
    try:
        exec(compile(src, "<test cell>", "exec"), {"quiz": quiz})  # noqa: S102 - our own line
    except AssertionError:
        text = traceback.format_exc()
    assert "1000 // 256" in text and 'key="…"' in text and token[:16] not in text, text


def _every_package_file() -> str:
    """Every file of the installed package as text, whatever its kind (a translation file's
    entries parsed too, so a text split over quoted lines is found whole)."""
    from cudacourse.i18n import translations

    parts = []
    for p in sorted(PACKAGE.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        parts.append(p.read_bytes().decode("utf-8", errors="ignore"))
        if p.suffix == ".po":
            parts += [f"{m.id}\n{m.string}" for m in translations.read(p) if m.id]
    return _squeezed(" ".join(parts))


def _squeezed(text: str) -> str:
    """``text`` without any whitespace: a line break inside a Japanese sentence (where words
    have no spaces between them) or a rewrapped English one hides nothing."""
    return "".join(text.split())


def _key_texts(lesson: str) -> list[tuple[str, str]]:
    """(where, text) for every explanation, why, wrong-value feedback and hint of ``lesson``,
    in English and in every translation (instructor-side)."""
    out = []
    for q in quiz.keyed(lesson, ROOT).values():
        out += [(q.qid, t) for t in (q.explain, q.hint, *q.why.values(), *(w for _, w in q.wrong))]
        for lang, t in q.translated.items():
            out += [(f"{q.qid} ({lang})", x) for x in (
                t.get("x"), t.get("n"), *t.get("y", {}).values(), *t.get("w", [])) if x]
    return out


@pytest.mark.parametrize("lesson", quiz.lessons())
def test_no_explanation_or_why_is_in_the_package_or_a_graded_copy(lesson):
    """No file of the installed package (Python, question files, translation files, compiled
    catalogues, anything) and no graded learner copy holds an explanation, why, wrong-value
    feedback or hint of any question, in any language (issue 19)."""
    if not (ROOT / "lessons" / f"{lesson}.py").exists():
        pytest.skip(f"no lesson source for {lesson} yet")
    shipped = _every_package_file() + " " + _squeezed(_learner_copy(True, lesson))
    texts = _key_texts(lesson)
    assert any("(ja)" in where for where, _t in texts), "no Japanese key text to look for"
    for where, text in texts:
        assert _squeezed(text) not in shipped, f"{where}: {text[:60]}"


def test_a_key_text_in_a_package_translation_file_is_found_and_never_read(monkeypatch, tmp_path):
    """The search above finds a key's translation where it used to be (a package .po, its
    text over several quoted lines), and the package's texts never include one."""
    from cudacourse.i18n import translations

    q = quiz.keyed(LESSON, ROOT)[f"{LESSON}.blocks"]
    cat = translations.read(translations.po_path(LESSON, "ja", ROOT))
    x = q.translated["ja"]["x"].replace("。", "。\n")  # written over several quoted lines
    cat.add(q.explain, x, context="q.blocks.explain",
            auto_comments=[translations.HASH_PREFIX + translations.english_hash(q.explain)])
    po = tmp_path / "locale" / "ja" / "lessons" / f"{LESSON}.po"
    translations.write(po, cat)
    assert '。\\n"\n"' in po.read_text()
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert _squeezed(q.translated["ja"]["x"]) in _every_package_file()
    monkeypatch.setattr(translations, "PACKAGE_DIR", tmp_path)
    assert "q.blocks.explain" in translations._texts_of(po)
    assert "q.blocks.prompt" in translations.question_texts(LESSON, "ja")
    assert not [k for k in translations.question_texts(LESSON, "ja")
                if translations.is_key_unit(k)]


def test_the_japanese_master_shows_the_japanese_explanation(monkeypatch):
    """The ja edition's quiz cells carry the Japanese key texts in their tokens: after an
    answer (instant feedback, or the reveal of graded feedback) the learner reads Japanese."""
    from cudacourse import i18n

    nb = nbformat.read(master_path(Path(f"{LESSON}.py"), lang="ja"), as_version=4)
    tokens = dict(re.findall(r'^quiz\.grade\("([\w.]+)", \w+, key="([\w-]+)"\)$',
                             "\n".join(c.source for c in nb.cells), re.M))
    qid = f"{LESSON}.blocks"
    ja = quiz.keyed(LESSON, ROOT)[qid].translated["ja"]
    monkeypatch.setattr(i18n, "_chosen", "ja")
    ok, text = quiz.feedback(qid, "b", tokens[qid])
    assert not ok and ja["y"]["b"] in text
    with pytest.raises(AssertionError) as err:
        quiz.grade(qid, "a", reveal=True, key=tokens[qid])
    assert " ".join(ja["x"].split()) in " ".join(str(err.value).split())
    monkeypatch.setattr(i18n, "_chosen", "en")
    ok, text = quiz.feedback(qid, "b", tokens[qid])
    assert not ok and ja["y"]["b"] not in text and "1000 // 256" in text


def test_package_question_files_hold_no_key_field():
    import tomllib

    for f in sorted((PACKAGE / "quizzes").glob("*.toml")):
        for q in tomllib.loads(f.read_text())["question"]:
            assert not set(q) & set(quiz.KEY_FIELDS), f"{f.name}: {q['id']}"


@pytest.mark.parametrize("lesson", [p.stem for p in sorted((ROOT / "lessons").glob("[0-9]*.py"))])
def test_every_committed_master_carries_its_keys(lesson):
    """The grader runs the master's test cells: their tokens are the instructor's keys (a
    stale master, built before a key changed, fails here: run `cudacourse build NN`)."""
    nb = nbformat.read(master_path(Path(f"{lesson}.py")), as_version=4)
    keyed = quiz.keyed(lesson, ROOT)
    graded = 0
    for cell in nb.cells:
        m = re.search(r'^quiz\.grade\("([\w.]+)", (\w+), key="([\w-]+)"\)$', cell.source, re.M)
        if m:
            qid, token = m[1], m[3]
            assert token == quiz.token(keyed[qid]), f"{qid}: stale key in the master"
            graded += 1
    assert graded == len(keyed)


def test_a_question_file_with_a_key_is_refused(monkeypatch, tmp_path):
    (tmp_path / "99_x.toml").write_text(
        '[[question]]\nid = "q"\nprompt = "?"\nchoices = { a = "1", b = "2" }\nanswer = "a"\n')
    monkeypatch.setattr(quiz.resources, "files", lambda _: tmp_path)
    quiz._bank.cache_clear()
    try:
        with pytest.raises(ValueError, match="answer belong in lessons/quizkeys/99_x.toml"):
            quiz.bank("99_x")
    finally:
        quiz._bank.cache_clear()


def test_keys_must_match_the_questions(tmp_path):
    keys = tmp_path / quiz.KEY_DIR
    keys.mkdir(parents=True)
    with pytest.raises(KeyError, match="01_gpu_vs_cpu.toml is missing"):
        quiz.keyed(LESSON, tmp_path)
    real = (ROOT / quiz.KEY_DIR / f"{LESSON}.toml").read_text()
    (keys / f"{LESSON}.toml").write_text(real.replace('id = "blocks"', 'id = "blokcs"'))
    with pytest.raises(ValueError, match="'blokcs' has no question"):
        quiz.keyed(LESSON, tmp_path)
    (keys / f"{LESSON}.toml").write_text(real.replace('answer = "c"', 'answer = "q"', 1))
    with pytest.raises(ValueError, match="not one of the choices"):
        quiz.keyed(LESSON, tmp_path)


def test_a_cell_without_a_key_or_with_a_foreign_key_says_so():
    keyed = quiz.keyed(LESSON, ROOT)
    with pytest.raises(ValueError, match="carries no answer key"):
        quiz.grade(f"{LESSON}.blocks", "c")
    other = quiz.token(keyed[f"{LESSON}.throughput"])
    with pytest.raises(ValueError, match="key of '01_gpu_vs_cpu.throughput'"):
        quiz.grade(f"{LESSON}.blocks", "c", key=other)
    with pytest.raises(ValueError, match="not valid"):
        quiz.grade(f"{LESSON}.blocks", "c", key="bm90IGEgdG9rZW4")
    with pytest.raises(KeyError, match="no answer key here"):
        quiz.get(f"{LESSON}.blocks").is_right("c")


def test_graded_mode_refuses_a_key_outside_hidden_tests():
    nb = _master()
    nb.cells.append(nbformat.v4.new_code_cell(
        f'quiz.answer("{LESSON}.blocks", "c", key="{quiz.token(quiz.keyed(LESSON, ROOT)[f"{LESSON}.blocks"])}")'))
    with pytest.raises(ValueError, match="key token would reach the learner copy"):
        QuizMode(graded=[LESSON]).preprocess(nb, {"nbgrader": {"assignment": LESSON}})


@pytest.mark.grading
def test_a_graded_class_scores_right_answers_right_through_the_verdicts(tmp_path):
    """A graded learner copy, filled in, graded as `cudacourse grade` does (the master's test
    cells, which carry the keys, in the sandbox): right answers pass however they are written,
    wrong ones fail."""
    from cudacourse.grader import prepare

    master = nbformat.read(master_path(Path(f"{LESSON}.py")), as_version=4)
    # only the question cells and their context (the kernel exercise is tested elsewhere)
    keep = [c for c in master.cells if c.cell_type == "code" and (
        "import" in c.source or "answer_" in c.source or "quiz." in c.source)
        and "vector_add" not in c.source]
    master.cells = keep
    learner = nbformat.reads(_learner_copy(graded=True), as_version=4)
    answers = {"answer_throughput": '"(A)"', "answer_blocks": '"b"',
               "answer_spare_threads": '"24"', "answer_global_index": "677.2",
               "answer_transfers": '"a"', "answer_bytes_moved": "1.2"}
    staged = nbformat.v4.new_notebook()
    for c in learner.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = f"{gid} = {answers[gid]}\n"
        if c in keep or any(c.get("id") == k.get("id") for k in keep):
            staged.cells.append(c)
    result = prepare.prepare(staged, master, course_root=str(tmp_path),
                             options={"timeout": 300, "feedback_run": False})
    status = {g: v["status"] for g, v in result["cells"].items() if g.startswith("test_answer")}
    assert status == {
        "test_answer_throughput": "pass", "test_answer_blocks": "fail",
        "test_answer_spare_threads": "pass", "test_answer_global_index": "pass",
        "test_answer_transfers": "fail", "test_answer_bytes_moved": "pass"}, status
