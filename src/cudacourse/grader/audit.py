"""What the autograder records inside a learner's kernel to notice tampering.

The grading executor (``cudacourse.grader.autograde.ResilientExecute``) sends the *text* of this
module into the kernel and runs it there, in its own namespace, before any learner code
(the baseline) and again around every graded test cell. Each run describes, as plain
strings, the identity of everything a test cell relies on:

* the course modules, every function, class and constant in them (a function's code object
  too, so ``f.__code__ = ...`` shows), and the methods of the classes they define;
* NumPy's and ``numpy.testing``'s functions, ``hashlib`` (quiz answers are hashed), a few
  builtins;
* the names a test cell uses from the notebook (``cudacourse``, ``quiz``, ``np``): they must
  still be the real modules;
* the IPython machinery that turns a failing cell into an error (``run_cell``,
  ``showtraceback``, custom exception handlers, AST and input transformers) and Python's
  trace and monitoring hooks, which could skip the line that raises;
* the answer hashes of the quiz banks, in every language of the course: a bank is loaded
  per language (``quiz._bank(lesson, lang)``), and a Japanese notebook's setup cell turns
  the kernel Japanese after the baseline, so each language's bank is compared with its own
  baseline (comparing the English baseline with the Japanese bank flagged every honest
  Japanese-edition learner as tampering: issue 39).

The executor compares each description with the baseline *outside* the kernel
(:func:`compare`), so an answer cell cannot edit the verdict. This stops rebinding and
monkeypatching in all the forms listed above; it cannot stop code that edits interpreter
memory, and in the simulator a kernel body is Python that runs during the check. See
docs/instructors.md.

Only the standard library is used here: the text must run in any kernel.
"""

import json as _json
import sys as _sys

# Every module a master test cell's verdict depends on: the engine under the checkers
# (check/_child.py runs by path and is never imported; _numba_hooks only lists seams). The
# checker modules themselves are not listed: importing cudacourse.check imports every one the
# lesson registry names, and the snapshot watches every loaded cudacourse.check.* module.
# The verdict process is the first line of defence; this audit the second.
COURSE_MODULES = ("cudacourse", "cudacourse.check", "cudacourse.check._engine",
                  "cudacourse.check._observe", "cudacourse.check._observation",
                  "cudacourse.check._trace",
                  "cudacourse.check._failure", "cudacourse.check._origin",
                  "cudacourse.check._compile", "cudacourse.check._compileserver",
                  "cudacourse.check._variants",
                  "cudacourse.check._replay",
                  "cudacourse.check._source", "cudacourse.check._instrument",
                  "cudacourse.check._preflight", "cudacourse.check._spy",
                  "cudacourse.check._copies",
                  "cudacourse.check._buffers", "cudacourse.check._budget",
                  "cudacourse.check._cases", "cudacourse.check._diagnose", "cudacourse.check.kit",
                  "cudacourse.check.spec", "cudacourse.check._shared", "cudacourse.check._raised",
                  "cudacourse.course.quiz",
                  "cudacourse.runtime.device",
                  "cudacourse.runtime.arrays", "cudacourse.check._names",
                  "cudacourse.check._launches")
OTHER_MODULES = ("numpy", "numpy.testing", "hashlib")
# Notebook names a test cell uses, and the module each must be.
USER_NAMES = {"cudacourse": "cudacourse", "quiz": "cudacourse.course.quiz", "np": "numpy",
              "numpy": "numpy"}
BUILTINS = ("__import__", "isinstance", "issubclass", "getattr", "setattr", "hasattr", "len",
            "id", "type", "callable", "exec", "eval", "compile", "globals", "abs", "all",
            "any", "max", "min", "sum", "repr", "str", "float", "int", "bool", "range",
            "AssertionError", "Exception", "BaseException", "KeyboardInterrupt")
SHELL_NAMES = ("run_cell", "run_cell_async", "run_code", "run_ast_nodes", "should_run_async",
               "transform_cell", "transform_ast", "showtraceback", "_showtraceback",
               "showsyntaxerror", "showindentationerror", "CustomTB", "set_custom_exc",
               "compile", "InteractiveTB", "SyntaxTB", "displayhook", "display_pub")
SHELL_LISTS = ("ast_transformers", "input_transformers_cleanup", "input_transformers_post")
KERNEL_NAMES = ("do_execute", "execute_request", "send_response", "_publish_execute_input")
SIMPLE = (int, float, str, bytes, bool, type(None), tuple, frozenset)


def _fn(obj):
    """Identity of a callable, including what can be swapped inside a function object."""
    parts = [id(obj)]
    for attr in ("__code__", "__defaults__", "__kwdefaults__", "__func__"):
        inner = getattr(obj, attr, None) if not isinstance(obj, type) else None
        parts.append(id(inner) if inner is not None else 0)
    return "/".join(map(str, parts))


def _watched(value):
    return callable(value) or type(value).__name__ == "module" or isinstance(
        value, (staticmethod, classmethod, property))


def _describe_module(out, name, mod, course):
    out[f"mod:{name}"] = str(id(mod)) if mod is not None else "missing"
    if mod is None:
        return
    out[f"modtype:{name}"] = str(id(type(mod)))
    for key, value in list(vars(mod).items()):
        if key.startswith("__") and key != "__getattr__":
            continue
        if _watched(value):
            out[f"attr:{name}.{key}"] = _fn(value)
        elif course and isinstance(value, SIMPLE):
            out[f"val:{name}.{key}"] = repr(value)[:200]
        if course and isinstance(value, type) and getattr(value, "__module__", "") == name:
            for ckey, cval in list(vars(value).items()):
                if _watched(cval):
                    out[f"cls:{name}.{key}.{ckey}"] = _fn(cval)


def _mro_lookup(cls, name):
    for klass in getattr(cls, "__mro__", ()):
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _describe_shell(out):
    try:
        shell = _sys.modules["IPython"].get_ipython()
    except Exception:  # noqa: BLE001 - not running under IPython
        shell = None
    if shell is None:
        out["ipy:shell"] = "none"
        return
    out["ipy:type"] = str(id(type(shell)))
    inst = vars(shell)
    for name in SHELL_NAMES:
        out[f"ipy:inst.{name}"] = _fn(inst[name]) if name in inst else "absent"
        found = _mro_lookup(type(shell), name)
        out[f"ipy:cls.{name}"] = _fn(found) if found is not None else "absent"
    for name in SHELL_LISTS:
        items = getattr(shell, name, None)
        out[f"ipy:list.{name}"] = ",".join(str(id(x)) for x in (items or ()))
    mgr = getattr(shell, "input_transformer_manager", None)
    for name in ("cleanup_transforms", "line_transforms", "token_transformers"):
        out[f"ipy:itm.{name}"] = ",".join(str(id(x)) for x in (getattr(mgr, name, None) or ()))
    out["ipy:custom_exceptions"] = repr(getattr(shell, "custom_exceptions", ()))
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        for name in KERNEL_NAMES:
            kinst = vars(kernel)
            out[f"kernel:inst.{name}"] = _fn(kinst[name]) if name in kinst else "absent"
            found = _mro_lookup(type(kernel), name)
            out[f"kernel:cls.{name}"] = _fn(found) if found is not None else "absent"
        session = getattr(kernel, "session", None)
        if session is not None:
            out["kernel:session.send"] = (_fn(vars(session)["send"]) if "send" in vars(session)
                                          else _fn(_mro_lookup(type(session), "send")))


def _describe_hooks(out):
    out["sys:trace"] = str(id(_sys.gettrace())) if _sys.gettrace() is not None else "none"
    out["sys:profile"] = str(id(_sys.getprofile())) if _sys.getprofile() is not None else "none"
    threading = _sys.modules.get("threading")
    if threading is not None and hasattr(threading, "gettrace"):
        t = threading.gettrace()
        out["sys:threading.trace"] = str(id(t)) if t is not None else "none"
    monitoring = getattr(_sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):
            out[f"sys:monitoring.{tool}"] = repr(monitoring.get_tool(tool))


def _describe_quizzes(out):
    quiz = _sys.modules.get("cudacourse.course.quiz")
    if quiz is None:
        return
    i18n = _sys.modules.get("cudacourse.i18n")
    languages = tuple(getattr(i18n, "LANGUAGES", None) or ("en",))
    by_language = getattr(quiz, "_bank", None)
    try:
        for lesson in quiz.lessons():
            for lang in languages:  # every edition's bank, each against its own baseline
                bank = by_language(lesson, lang) if by_language else quiz.bank(lesson)
                for qid, question in bank.items():
                    out[f"quiz:{lang}:{qid}"] = (
                        f"{getattr(question, 'answer_hash', '?')}@{id(question)}")
    except Exception as exc:  # noqa: BLE001 - a broken bank is reported, not fatal
        out["quiz:error"] = f"{type(exc).__name__}: {exc}"[:200]


def snapshot(user_ns, load=False):
    """Describe everything a test cell relies on; ``load`` imports the modules first."""
    out = {}
    if load:
        import importlib

        for name in COURSE_MODULES + OTHER_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - recorded as missing below
                pass
        try:  # the device the kernel chose, for the instructor's log
            device = _sys.modules["cudacourse.runtime.device"].current()
            out["info:device"] = device.notice()
        except Exception as exc:  # noqa: BLE001
            out["info:device"] = f"unknown ({type(exc).__name__}: {exc})"
        import os

        out["info:python"] = _sys.executable
        out["info:env"] = " ".join(f"{k}={os.environ.get(k)}" for k in (
            "CUDACOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM", "CUDA_VISIBLE_DEVICES"))
    checks = sorted(n for n in _sys.modules if n.startswith("cudacourse.check."))
    for name in sorted(set(COURSE_MODULES + tuple(checks))):
        _describe_module(out, name, _sys.modules.get(name), course=True)
    for name in OTHER_MODULES:
        _describe_module(out, name, _sys.modules.get(name), course=False)
    builtins = _sys.modules.get("builtins")
    out["mod:builtins"] = str(id(builtins))
    for name in BUILTINS:
        out[f"builtin:{name}"] = _fn(getattr(builtins, name, None))
    for name in USER_NAMES:
        if name in user_ns:
            out[f"ns:{name}"] = str(id(user_ns[name]))
    out["ns:__builtins__"] = str(id(user_ns.get("__builtins__")))
    _describe_shell(out)
    _describe_hooks(out)
    _describe_quizzes(out)
    return out


def _label(key, T):
    kind, _, rest = key.partition(":")
    if kind == "quiz":  # quiz:<lang>:<lesson>.<id>
        rest = rest.partition(":")[2] or rest
    names = {"attr": rest, "val": rest, "cls": rest,
             "mod": T("the module {name}", name=rest),
             "modtype": T("the type of module {name}", name=rest),
             "builtin": T("builtins.{name}", name=rest),
             "ns": T("the notebook name {name}", name=rest),
             "quiz": T("the answer to {question}", question=rest),
             "ipy": T("IPython's {name}", name=rest),
             "kernel": T("the kernel's {name}", name=rest),
             "sys": T("the Python hook {name}", name=rest)}
    return names.get(kind, key)


def _english(template, **values):
    return template.format(**values)


def compare(baseline, now, T=None):
    """What changed since the baseline, in words; empty when nothing did.

    Runs in the grader, outside the kernel. Keys present in the baseline must hold the same
    identity now (new keys are fine: modules gain attributes when submodules load). A
    notebook name like ``cudacourse`` or ``np`` must be the module of that name. ``T``: the
    catalogue's ``T`` of the notebook's language (``cudacourse.grader.lang.T``); English
    without it (this text also runs inside the kernel, where only the standard library is).
    """
    T = T or _english
    problems = []
    for key, want in baseline.items():
        if key.startswith("info:") or key.startswith("ns:") and key != "ns:__builtins__":
            continue
        got = now.get(key, "removed")
        if got != want:
            what = _label(key, T)
            if key.startswith("val:"):
                problems.append(T("{what} was changed from {old} to {new}", what=what,
                                  old=want, new=got))
            elif got == "removed":
                problems.append(T("{what} was removed", what=what))
            else:
                problems.append(T("{what} was replaced", what=what))
    for name, module in USER_NAMES.items():
        key = f"ns:{name}"
        if key in now and now[key] != baseline.get(f"mod:{module}"):
            problems.append(T("the notebook name {name} no longer refers to the module "
                              "{module}", name=name, module=module))
    return problems


if "_cudacourse_user_ns" in globals():  # run by the grader inside a kernel
    _cudacourse_user_ns["__cudacourse_audit__"] = _json.dumps(  # noqa: F821
        snapshot(_cudacourse_user_ns, load=_cudacourse_load))  # noqa: F821
