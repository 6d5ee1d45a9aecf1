"""nbgrader configuration for cudacourse.

Masters (nbgrader "source") live in solutions/, learner copies (nbgrader "release") in
notebooks/: solutions/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb -> notebooks/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb.
"""

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.course_id = "cudacourse"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.nbgrader*"]

c.IncludeHeaderFooter.header = ""
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# Hidden tests are removed from the learner copy and put back at autograding time.
c.ClearHiddenTests.enforce_metadata = True


# The simulator runs ~4,400 GPU threads a second: a cell that launches a kernel and a
# checker needs far longer than nbgrader's 30 s default. A real GPU needs far less.
c.ExecutePreprocessor.timeout = 240
c.Execute.timeout = 240
