"""The learner's workspace: lessons are copied in once and never overwritten."""

from __future__ import annotations

import pytest

from cudacourse.workspace import sync

pytestmark = pytest.mark.lesson1


def _release(tmp_path, text):
    rel = tmp_path / "notebooks" / "01_x"
    rel.mkdir(parents=True, exist_ok=True)
    (rel / "01_x.ipynb").write_text(text)
    (rel / "data.csv").write_text("1,2\n")
    return tmp_path / "notebooks"


def test_new_lessons_are_copied_with_their_files(tmp_path):
    ws = sync(tmp_path / "ws", _release(tmp_path, "v1"))
    assert (ws / "01_x" / "01_x.ipynb").read_text() == "v1"
    assert (ws / "01_x" / "data.csv").exists()


def test_learner_work_is_never_overwritten(tmp_path):
    rel = _release(tmp_path, "v1")
    ws = sync(tmp_path / "ws", rel)
    (ws / "01_x" / "01_x.ipynb").write_text("my work")
    sync(ws, rel)  # same release: nothing to do
    assert (ws / "01_x" / "01_x.ipynb").read_text() == "my work"
    _release(tmp_path, "v2")  # the course publishes a new version
    sync(ws, rel)
    assert (ws / "01_x" / "01_x.ipynb").read_text() == "my work"
    assert (ws / "01_x" / "01_x.new.ipynb").read_text() == "v2"


def test_deleted_lesson_comes_back(tmp_path):
    rel = _release(tmp_path, "v1")
    ws = sync(tmp_path / "ws", rel)
    (ws / "01_x" / "01_x.ipynb").unlink()
    sync(ws, rel)
    assert (ws / "01_x" / "01_x.ipynb").read_text() == "v1"


def test_untouched_copy_is_updated_in_place(tmp_path):
    rel = _release(tmp_path, "v1")
    ws = sync(tmp_path / "ws", rel)
    _release(tmp_path, "v2")
    sync(ws, rel)
    assert (ws / "01_x" / "01_x.ipynb").read_text() == "v2"
    assert not (ws / "01_x" / "01_x.new.ipynb").exists()
