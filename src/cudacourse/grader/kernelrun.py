"""The feedback run's executor: runs a whole submission in one kernel, inside the sandbox.

Its outputs are for feedback only -- the points come from :mod:`verdict` -- so nothing here
needs to resist the learner; it needs to survive them. Per notebook it:

* on a cell that outlives the per-cell timeout and ignores the interrupt, or a kernel that
  dies (``os._exit``, a segfault), writes an error output into that cell naming the cause,
  kills the kernel, starts a new one, re-runs the cells before it (without the bad ones) and
  goes on, so the rest of the notebook still produces feedback;
* keeps at most ``output_cap`` characters of output per cell (long single lines included)
  and at most ``max_outputs`` outputs, dropping the rest as it arrives;
* runs ``audit`` inside the kernel before any learner code and around every graded
  cell, as a second line: tampering it sees is reported as an incident. A learner controls
  this process, so the report is a hint, never a score.

It was the course's nbgrader executor before grading moved into the sandbox; it imports
nothing from ``cudacourse`` (it runs from the package's files by path).
"""

from __future__ import annotations

import ast
import json
import signal
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbconvert.preprocessors.execute import NotebookClient
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

from . import audit
from .lang import T  # incidents in the language nbrun chose: the notebook's

AUDIT_PATH = Path(audit.__file__).resolve()
# Its text, for the learner's kernel: run there as text (its own name), never imported, so a
# learner cell that rebinds a course module cannot change what watches the modules.
AUDIT_SOURCE = AUDIT_PATH.read_text()
NOTE_ID = "cudacourse-grading-note"
LOG_PREFIX = "cudacourse-grading:"

compare_snapshots = audit.compare


class KernelTrouble(Exception):
    """A hidden (grader-side) execution timed out or found the kernel dead."""


def is_graded(cell: NotebookNode) -> bool:
    """An autograded test cell: nbgrader scores it by whether its output holds an error."""
    nb = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(nb.get("grade"))


def cell_label(cell: NotebookNode, index: int) -> str:
    """How messages name a cell: its grade_id, else its position and id."""
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"'{gid}'" if gid else f"#{index} (id {cell.get('id', '?')})"


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An error output, the kind nbgrader scores 0."""
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


class KernelExecute(Execute):
    """nbgrader's Execute, made to survive hostile or broken submissions (see module doc)."""

    timeout = Integer(240, allow_none=True, help=(
        "Seconds a cell may run during autograding before it is interrupted (and, if it "
        "ignores the interrupt, its kernel restarted). The simulator is slow: keep it "
        "generous there; a GPU needs far less.")).tag(config=True)
    iopub_timeout = Integer(5, allow_none=False, help=(
        "Seconds to wait for a cell's outputs after its reply; a kernel still silent then "
        "is treated as hung.")).tag(config=True)
    max_restarts = Integer(4, help=(
        "Kernel restarts allowed per notebook; after that the remaining graded cells are "
        "marked not run (0 points).")).tag(config=True)
    audit = Bool(True, help="Check before and after each graded cell that nothing a test "
                             "cell relies on was rebound or monkeypatched.").tag(config=True)
    audit_timeout = Integer(60, help="Seconds allowed for one integrity check.").tag(
        config=True)
    output_cap = Integer(20_000, help="Characters of output kept per cell.").tag(config=True)
    max_outputs = Integer(50, help="Outputs kept per cell.").tag(config=True)
    stderr_fails = Bool(False, help=(
        "nbgrader's own rule: a graded cell that wrote to stderr gets 0. Off by default: "
        "course checkers raise on failure, and a correct GPU kernel can trigger "
        "warnings.")).tag(config=True)

    # --- the notebook loop -----------------------------------------------------------------

    def preprocess(self, nb: NotebookNode, resources: Any = None,
                   km: Any = None) -> tuple[NotebookNode, dict]:
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._incidents: list[dict[str, str]] = []
        self._bad: set[int] = set()
        self._restarts = 0
        self._tampered: str | None = None
        self._gave_up: str | None = None
        self._baseline: dict[str, str] | None = None
        self._timed_out = False
        self._used: dict[int, list] = {}

        started = monotonic()
        with self.setup_kernel():
            assert self.kc is not None
            info_msg = self.wait_for_reply(self.kc.kernel_info())
            assert info_msg
            self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
            self._bootstrap()
            for index, cell in enumerate(self.nb.cells):
                if self._gave_up:
                    if is_graded(cell):
                        cell.outputs = [error_output("NotGraded", self._gave_up)]
                    continue
                self._run_cell(cell, index)
        self.set_widgets_metadata()
        self._report()
        self.log.info("%s %s: executed in %.1f s, %d restart(s), %d incident(s)", LOG_PREFIX,
                      self._who(), monotonic() - started, self._restarts, len(self._incidents))
        return self.nb, self.resources

    def _run_cell(self, cell: NotebookNode, index: int) -> None:
        if cell.cell_type != "code" or not cell.source.strip():
            return
        graded = is_graded(cell)
        if graded:
            self._check_integrity(cell, index, "before")
        self._timed_out = False
        self._current = index
        try:
            self.execute_cell(cell, index, store_history=True)
            if self._timed_out:  # interrupted at the timeout; the kernel recovered
                self._incident(cell, index, "timeout",
                               f"did not finish within {self.timeout} s and was interrupted")
        except CellTimeoutError:  # still busy after the interrupt: swallowed it, or stuck in C
            self._lost_kernel(cell, index, "CellTimeoutError", "timeout",
                              f"did not finish within {self.timeout} s and ignored the "
                              "interrupt; the grader restarted the Python kernel and re-ran "
                              "the cells before it")
        except DeadKernelError:
            self._lost_kernel(cell, index, "DeadKernelError", "crash",
                              f"killed the Python kernel ({self._exit_status()}); the grader "
                              "started a new kernel and re-ran the cells before it")
        if graded:
            if index not in self._bad and not self._gave_up:
                self._check_integrity(cell, index, "after")
            if self._tampered:
                cell.outputs.append(error_output("CheckerTampered", self._tampered))
            if not self.stderr_fails:
                for out in cell.outputs:
                    if out.get("output_type") == "stream" and out.get("name") == "stderr":
                        out["name"] = "stdout"
                        out["text"] = "(stderr) " + out.get("text", "")

    # --- output caps, applied as messages arrive (a 100 MB print never piles up) ----------

    def output(self, outs, msg, display_id, cell_index):
        used = self._used.setdefault(cell_index, [0, 0, False])
        content = msg.get("content", {})
        if msg["msg_type"] == "stream":
            text = content.get("text", "")
            room = self.output_cap - used[0]
            if room <= 0:
                self._cut(outs, used)
                return None
            if len(text) > room:
                content["text"] = text[:room]
                used[0] = self.output_cap
                out = super().output(outs, msg, display_id, cell_index)
                self._cut(outs, used)
                return out
            used[0] += len(text)
        elif msg["msg_type"] in ("display_data", "execute_result", "update_display_data"):
            size = sum(len(str(v)) for v in content.get("data", {}).values())
            if used[1] >= self.max_outputs or used[0] + size > 50 * self.output_cap:
                self._cut(outs, used)
                return None
            used[0] += min(size, self.output_cap)
        used[1] += 1
        return super().output(outs, msg, display_id, cell_index)

    def _cut(self, outs, used) -> None:
        if not used[2]:
            used[2] = True
            outs.append(NotebookNode(output_type="stream", name="stdout", text=(
                f"\n[... output cut by the grader: at most {self.output_cap} characters and "
                f"{self.max_outputs} outputs per cell]\n")))

    # --- timeouts: name the cell in the error nbclient records -----------------------------

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None):
        self._timed_out = True
        label = cell_label(cell, getattr(self, "_current", -1)) if cell is not None else "?"
        self.error_on_timeout = {
            "ename": "CellTimeoutError",
            "evalue": f"cell {label} did not finish within {timeout} s: the grader interrupted it",
            "traceback": [f"\x1b[0;31mCellTimeoutError\x1b[0m: cell {label} did not finish "
                          f"within {timeout} s: the grader interrupted it"],
        }
        return await super()._async_handle_timeout(timeout, cell)

    # --- restarting after a hang or a crash ------------------------------------------------

    def _exit_status(self) -> str:
        try:
            proc = self.km.provisioner.process  # type: ignore[union-attr]
            code = proc.poll()
        except Exception:  # noqa: BLE001 - best effort, for the message only
            code = None
        if code is None:
            return "it stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exit status {code}"

    async def _async_restart(self) -> None:
        km, kc = self.km, self.kc
        self.km = self.kc = None
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:  # noqa: BLE001 - the old kernel is being discarded anyway
                pass
        if km is not None:
            try:
                await ensure_async(km.shutdown_kernel(now=True))
            except Exception:  # noqa: BLE001
                pass
            try:
                await ensure_async(km.cleanup_resources())
            except Exception:  # noqa: BLE001
                pass
        self.km = self.create_kernel_manager()
        await self.async_start_new_kernel()
        await self.async_start_new_kernel_client()

    _restart = run_sync(_async_restart)

    def _lost_kernel(self, cell: NotebookNode, index: int, error: str, kind: str,
                     why: str) -> None:
        """The Python kernel is gone (stuck past the interrupt, or dead): say so in the cell's
        outputs and the incidents, then bring up a new kernel with the cells before it."""
        cell.outputs.append(error_output(error, f"cell {cell_label(cell, index)} {why}"))
        self._incident(cell, index, kind, why)
        self._recover(index)

    def _recover(self, index: int) -> None:
        """Restart the kernel and rebuild the state of the cells before ``index``."""
        self._bad.add(index)
        while True:
            if self._restarts >= self.max_restarts:
                self._gave_up = (f"not graded: the kernel hung or crashed {self._restarts + 1} "
                                 "times in this notebook")
                self.log.error("%s %s: giving up on the rest of the notebook: %s", LOG_PREFIX,
                               self._who(), self._gave_up)
                self._incidents.append({"cell": "-", "kind": "gave up", "what": self._gave_up})
                return
            self._restarts += 1
            self._restart()
            self._bootstrap()
            failed = self._replay(index)
            if failed is None:
                return
            cell = self.nb.cells[failed]
            self._bad.add(failed)
            self._incident(cell, failed, "replay",
                           "hung or crashed again when re-run after a restart; skipped")

    def _replay(self, upto: int) -> int | None:
        for i, cell in enumerate(self.nb.cells[:upto]):
            if cell.cell_type != "code" or not cell.source.strip() or i in self._bad:
                continue
            try:
                self._hidden(cell.source, self.timeout, silent=False)
            except KernelTrouble:
                return i
        return None

    # --- hidden executions (grader code in the learner's kernel) ---------------------------

    async def _async_hidden(self, code: str, timeout: float | None, silent: bool = True,
                            user_expressions: dict | None = None) -> dict:
        assert self.kc is not None
        msg_id = self.kc.execute(code, silent=silent, store_history=False,
                                 user_expressions=user_expressions or {}, stop_on_error=False)
        deadline = monotonic() + timeout if timeout else None
        while True:
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - monotonic()))
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=wait))
            except Empty:
                if not await ensure_async(self.kc.is_alive()):
                    raise KernelTrouble(f"the kernel died ({self._exit_status()})") from None
                if deadline is not None and monotonic() >= deadline:
                    try:
                        await ensure_async(self.km.interrupt_kernel())
                    except Exception:  # noqa: BLE001
                        pass
                    raise KernelTrouble(f"no reply within {timeout} s") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    _hidden = run_sync(_async_hidden)

    def _snapshot(self, load: bool) -> dict[str, str]:
        # A user expression, not code: IPython's input and AST transformers (which a learner
        # can install) rewrite code, but expressions are evaluated as they are.
        expr = (f"exec(compile({AUDIT_SOURCE!r}, '<cudacourse-grading-audit>', 'exec'), "
                f"{{'__name__': '_cudacourse_audit', '_cudacourse_user_ns': globals(), "
                f"'_cudacourse_load': {load!r}}}) or globals().pop('__cudacourse_audit__', None)")
        reply = self._hidden("", self.audit_timeout, silent=True, user_expressions={"r": expr})
        content = reply["content"]
        if content.get("status") != "ok":
            raise KernelTrouble(f"{content.get('ename')}: {content.get('evalue')}")
        expr = content.get("user_expressions", {}).get("r", {})
        if expr.get("status") != "ok":
            raise KernelTrouble(f"{expr.get('ename')}: {expr.get('evalue')}")
        text = ast.literal_eval(expr["data"]["text/plain"])
        if not isinstance(text, str):
            raise KernelTrouble("the integrity check returned nothing")
        return json.loads(text)

    def _bootstrap(self) -> None:
        """Record the baseline in a fresh kernel, before any learner code runs."""
        if not self.audit:
            return
        try:
            self._baseline = self._snapshot(load=True)
        except KernelTrouble as exc:
            self._baseline = None
            self.log.error("%s %s: could not record the baseline (%s); integrity checks are "
                           "off for this notebook", LOG_PREFIX, self._who(), exc)
            return
        self.log.info("%s %s: kernel %s; %s; %s", LOG_PREFIX, self._who(),
                      self._baseline.get("info:python"), self._baseline.get("info:env"),
                      self._baseline.get("info:device"))

    def _check_integrity(self, cell: NotebookNode, index: int, when: str) -> None:
        if not self.audit or self._tampered or self._baseline is None:
            return
        try:
            problems = compare_snapshots(self._baseline, self._snapshot(load=False), T)
        except (KernelTrouble, ValueError, SyntaxError) as exc:
            problems = [f"the integrity check could not run ({exc})"]
        if problems:
            shown = "; ".join(problems[:12]) + (f"; and {len(problems) - 12} more"
                                                 if len(problems) > 12 else "")
            self._tampered = (f"checker tampered with ({when} test cell "
                              f"{cell_label(cell, index)}): {shown}. This and every later "
                              "graded cell get no points.")
            self._incident(cell, index, "tampering", shown)

    # --- telling the instructor ------------------------------------------------------------

    def _who(self) -> str:
        info = (self.resources or {}).get("nbgrader", {})
        return "/".join(str(info.get(k, "?")) for k in ("student", "assignment", "notebook"))

    def _incident(self, cell: NotebookNode, index: int, kind: str, what: str) -> None:
        label = cell_label(cell, index)
        self._incidents.append({"cell": label, "kind": kind, "what": what})
        self.log.error("%s %s: cell %s %s: %s", LOG_PREFIX, self._who(), label, kind, what)

    def _report(self) -> None:
        if not self._incidents:
            return
        lines = ["**Grading note (cudacourse autograder).** Something in this notebook "
                 "needed the grader's attention:", ""]
        lines += [f"- cell {i['cell']}: {i['kind']}: {i['what']}" for i in self._incidents]
        note = nbformat.v4.new_markdown_cell("\n".join(lines))
        if self.nb.get("nbformat", 4) == 4 and self.nb.get("nbformat_minor", 5) >= 5:
            note["id"] = NOTE_ID
        else:
            note.pop("id", None)
        self.nb.cells.insert(0, note)
        info = (self.resources or {}).get("nbgrader", {})
        name = info.get("notebook", "notebook")
        payload = {"student": info.get("student"), "assignment": info.get("assignment"),
                   "notebook": name, "restarts": self._restarts, "incidents": self._incidents}
        if isinstance(self.resources, dict):
            self.resources.setdefault("outputs", {})[f"{name}.grading.json"] = (
                json.dumps(payload, indent=1).encode())


__all__ = ["KernelExecute", "compare_snapshots", "AUDIT_SOURCE", "LOG_PREFIX"]
