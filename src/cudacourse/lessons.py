"""The one registry of lessons: everything a lesson is made of, listed in one place.

Each ``Lesson`` names its source stem (``lessons/<stem>.py``, built into ``solutions/<stem>/``
and ``notebooks/<stem>/``), its title and summary (the README's lessons table), what the
learner writes, its topic modules, checkers, question bank, plots and pytest marker.

The README table and the pytest markers in ``pyproject.toml`` come from here::

    python -m cudacourse.lessons readme     # the README's lessons table
    python -m cudacourse.lessons markers    # the lesson lines of [tool.pytest.ini_options]

and ``tests/test_lessons.py`` fails when either disagrees with the registry, or when a file
named here is missing. Adding a lesson: write ``lessons/NN_topic.py``, add its entry below,
paste the two outputs above, and run ``cudacourse build NN``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    number: int
    stem: str  # lessons/<stem>.py; also the nbgrader assignment name
    title: str
    summary: str  # after the title in the README table
    you_write: str  # the README table's last column (Markdown)
    topics: tuple[str, ...]  # modules under cudacourse/ that the lesson teaches with
    checkers: tuple[str, ...]  # functions of cudacourse.check the exercises are graded by
    plots: tuple[str, ...]  # modules whose plots the lesson draws
    marker_text: str  # what ``pytest --markers`` says about the marker

    @property
    def marker(self) -> str:
        return f"lesson{self.number}"

    # Where its files are, relative to the course root (the question bank: cudacourse/quizzes)
    source = property(lambda self: f"lessons/{self.stem}.py")
    master = property(lambda self: f"solutions/{self.stem}/{self.stem}.ipynb")
    release = property(lambda self: f"notebooks/{self.stem}/{self.stem}.ipynb")
    questions = property(lambda self: f"{self.stem}.toml")

    def readme_row(self) -> str:
        return (f"| {self.number} | [{self.title}]({self.release}): {self.summary} | "
                f"{self.you_write} |")

    def marker_line(self) -> str:
        return f"{self.marker}: lesson {self.number}, {self.marker_text}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(1, "01_gpu_vs_cpu", "GPU vs CPU",
           "throughput vs latency, CUDA's model, your first kernel, timing CPU against GPU",
           "`vector_add`",
           topics=("vector", "cpu_vs_gpu"), checkers=("check_vector_add",),
           plots=("cpu_vs_gpu",), marker_text="GPU vs CPU"),
    Lesson(2, "02_threads_blocks_warps", "Threads, blocks, warps",
           "1D/2D grids, grid-stride loops, SIMT, divergence, occupancy, warp shuffles",
           "2D kernel, grid-stride loop, warp sum",
           topics=("indexing", "warps", "occupancy", "simwarp"),
           checkers=("check_mirror", "check_saxpy", "check_warp_sum"),
           plots=("viz.threads",), marker_text="threads, blocks and warps"),
    Lesson(3, "03_memory", "Host and device memory",
           "the allocation/copy/launch/free lifecycle, pinned memory, streams, launch cost, "
           "when offloading pays",
           "full lifecycle, data kept on the device across steps, stream pipeline",
           topics=("transfer", "launch_cost"),
           checkers=("check_gpu_scale", "check_smooth_on_device", "check_pipelined_scale"),
           plots=("viz.memory",), marker_text="host and device memory"),
    Lesson(4, "04_shared_memory", "Shared memory and tiling",
           "`syncthreads`, tiled and register-blocked matmul, reductions, transpose and bank "
           "conflicts",
           "tiled matmul, block reduction",
           topics=("matmul", "reduce", "transpose"),
           checkers=("check_tiled_matmul", "check_block_sum"),
           plots=("viz.tiling",), marker_text="shared memory and tiling"),
    Lesson(5, "05_fused_attention", "Fused attention",
           "why unfused attention is memory-bound, online softmax, a FlashAttention-style kernel",
           "online softmax update, the fused kernel's inner loop",
           topics=("softmax", "attention"),
           checkers=("check_online_update", "check_flash_rows"),
           plots=("viz.attention",), marker_text="fused attention"),
    Lesson(6, "06_stencils_lbm", "Scientific computing",
           "a 2D heat stencil with shared-memory tiles and halos, double buffering, why "
           "stencils are memory-bound; the lattice Boltzmann method (D2Q9, pull streaming, "
           "bounce-back, SoA) for the flow past a cylinder and a NACA 0012 wing",
           "tiled heat step with halo, double-buffered time loop, fused LBM step",
           topics=("stencil", "lbm"),
           checkers=("check_heat_step", "check_diffuse", "check_lbm_step"),
           plots=("viz.flow",), marker_text="stencils and the lattice Boltzmann method"),
)

BY_STEM = {lesson.stem: lesson for lesson in LESSONS}
BY_MARKER = {lesson.marker: lesson for lesson in LESSONS}

README_HEADER = "| # | lesson | you write |\n|---|---|---|"


def readme_table() -> str:
    """The README's lessons table, header included."""
    return README_HEADER + "\n" + "\n".join(lesson.readme_row() for lesson in LESSONS)


def marker_lines() -> list[str]:
    """The ``markers`` entries of the lessons, as ``pyproject.toml`` lists them."""
    return [lesson.marker_line() for lesson in LESSONS]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["readme"]:
        print(readme_table())
    elif args == ["markers"]:
        print("\n".join(f'    "{line}",' for line in marker_lines()))
    else:
        print("usage: python -m cudacourse.lessons readme|markers", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
