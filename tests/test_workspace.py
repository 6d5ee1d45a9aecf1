"""The learner's workspace: lessons are copied in once and never overwritten."""

from __future__ import annotations

import os

from cudacourse.course.workspace import sync


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


def test_learner_config_hides_instructor_tools_and_the_news(tmp_path):
    import json

    from cudacourse.course.workspace import learner_config_dir

    config = learner_config_dir(tmp_path / "ws")
    assert config.is_relative_to(tmp_path / "ws")  # workspace-local, nothing global changes
    page = json.loads((config / "labconfig" / "page_config.json").read_text())
    disabled = {k for k, v in page["disabledExtensions"].items() if v}
    assert {"@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
            "@jupyterlab/apputils-extension:announcements"} <= disabled
    assert "@jupyter/nbgrader:assignment-list" not in disabled  # learners fetch and submit
    server = json.loads((config / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"][
        "nbgrader.server_extensions.formgrader"] is False


def test_lab_environment_drops_the_cli_variables_and_adds_the_config(tmp_path):
    from cudacourse.course.workspace import lab_environment

    env = {"CUDACOURSE_QUIET": "1", "CUDACOURSE_DEVICE": "sim",
           "JUPYTER_CONFIG_PATH": "/elsewhere", "PATH": "/bin"}
    out = lab_environment(env, tmp_path)
    assert "CUDACOURSE_QUIET" not in out
    assert out["CUDACOURSE_DEVICE"] == "sim" and out["PATH"] == "/bin"
    assert out["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    assert "JUPYTER_CONFIG_PATH" not in lab_environment({"CUDACOURSE_QUIET": "1"})
    assert env["CUDACOURSE_QUIET"] == "1"  # the caller's dict is left alone
