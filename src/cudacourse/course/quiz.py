"""Concept questions: a bank kept as data, asked inline, graded by nbgrader.

A bank has two halves. The questions (``quizzes/<lesson>.toml``, in the package every learner
installs) hold only what a learner may see: title, prompt, choices, unit. The keys (answer,
``why`` of every choice, explanation, hint, common wrong values) are instructor-side, in
``lessons/quizkeys/<lesson>.toml`` beside the lesson sources, and reach a notebook only as a
*key token* that ``cudacourse build`` writes into the master's question cells (``embed_keys``).
A token carries the answer as a salted SHA-256 hash, never in plain text, and each option's
feedback sealed under a key derived from that option, so that only the option a learner gives
opens its own why, in every language (their translations are instructor-side too:
``lessons/quizkeys/<lang>/``); the explanation travels in the master only (see ``token``). In a
lesson source::

    quiz.ask("01_gpu_vs_cpu.blocks")      # "Question 2: Blocks for 1,000 elements", a widget
    answer_blocks = "b"                   # the learner's answer, in an autograded answer cell
    quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks)   # in the locked test cell

and in the master, ``quiz.ask("01_gpu_vs_cpu.blocks", key="<token>")`` and ``quiz.grade(...,
key="<token>")``. A formative learner copy keeps the tokens (instant feedback); a graded one has
none: ``cudacourse.grader.quiz_mode`` moves the keyed check into hidden tests, which nbgrader strips
from the learner copy and puts back at autograding, so the verdict reads the key from the
master (issue 19, class 3: a script in the learner's environment has nothing to try answers
against).

Three kinds of question (``kind`` in the bank):

* ``choice`` (the default): one right letter, ``answer_x = "b"``;
* ``multi``: every letter that applies ("pick the lines that race"), ``answer_x = "a, c"``;
* ``number``: a number within ``tol`` of the right value, ``answer_x = 4.2``.

A question (package) and its key (instructor-side)::

    [[question]]                              # src/cudacourse/quizzes/01_gpu_vs_cpu.toml
    id = "blocks"
    title = "Blocks for 1,000 elements"       # the header, after "Question N:"
    predict = true                            # it asks to predict or compute
    prompt = "..."
    choices = { a = "...", b = "...", c = "...", d = "..." }

    [[key]]                                   # lessons/quizkeys/01_gpu_vs_cpu.toml
    id = "blocks"
    answer = "b"                              # "a, c" for multi, a number for number
    why = { a = "the misconception behind (a)", b = "one line: why (b) is right", ... }
    explain = "the full explanation: after a right answer, and in graded feedback"
    hint = "a nudge after a wrong answer (optional)"

A ``number`` question has ``unit`` and ``tol`` instead of ``choices``, and its key ``wrong =
[{ value = ..., why = "..." }]`` (the values that common mistakes give) instead of ``why``.

Modes (chosen per assignment by the instructor, see ``cudacourse.grader.quiz_mode``): *formative*
questions give instant right/wrong feedback and carry no points; *graded* ones record the
answer (``record``) and are graded only at autograding, with the explanation in the feedback.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import linecache
import math
import os
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .. import i18n
from ..i18n import N_, _

_SALT = "cudacourse-quiz-v1"
KINDS = ("choice", "multi", "number")
KEY_DIR = "lessons/quizkeys"  # the keys, relative to the course root: instructor-side only
# What a key holds; none of it may sit in the package's question files.
KEY_FIELDS = ("answer", "why", "explain", "hint", "wrong")


def _digest(qid: str, key: str, salt: str) -> str:
    return hashlib.sha256(f"{_SALT}:{salt}:{qid}:{key}".encode()).hexdigest()


def _letters(answer: str) -> list[str]:
    """ "(B), d " -> ["b", "d"]: forgiving about case, spaces, parentheses and separators."""
    parts = re.split(r"[\s,;]+", str(answer).strip().lower().replace("(", " ").replace(")", " "))
    return sorted({p for p in parts if p})


@dataclass(frozen=True)
class Question:
    qid: str  # "<lesson>.<id>"
    prompt: str
    choices: dict[str, str]
    answer_hash: str  # "" until a key is applied (``keyed``, ``with_token``)
    explain: str
    hint: str
    title: str = ""
    kind: str = "choice"
    number: int = 0  # position in the lesson, from 1
    why: dict[str, str] = field(default_factory=dict)
    predict: bool = False
    unit: str = ""
    tol: float = 0.0
    wrong: tuple[tuple[float, str], ...] = ()
    # The key's texts in other languages, {lang: {"x": explain, "n": hint, "y": {letter: why},
    # "w": [why of wrong value i]}}: instructor-side like the English (issue 19), carried in
    # the key token; only what is translated and current.
    translated: dict[str, dict] = field(default_factory=dict)
    salt: str = ""  # the question's salt: every hash of its key is salted with it
    # Read from a key token: option hash -> sealed entry (see ``token``); only the option a
    # learner gives opens its own entry. Empty for a question keyed from the key file.
    sealed: dict[str, str] = field(default_factory=dict)
    key_answer: str = ""  # the answer itself: only in a question keyed from the key file

    @property
    def var(self) -> str:
        """The learner's answer variable: ``answer_<id>``."""
        return "answer_" + self.qid.split(".", 1)[1]

    @property
    def header(self) -> str:
        if self.title:
            return _("Question {number}: {title}").format(number=self.number, title=self.title)
        return _("Question {number}").format(number=self.number)

    def answer_format(self) -> str:
        """How to write the answer, e.g. ``answer_blocks = "<letter>"``, one of a, b, c, d."""
        letters = ", ".join(self.choices)
        if self.kind == "choice":
            return _('{var} = "<letter>", one of {letters}').format(var=self.var, letters=letters)
        if self.kind == "multi":
            return _('{var} = "<letters>", every one of {letters} that applies, '
                     'separated by commas').format(var=self.var, letters=letters)
        if self.unit:
            return _("{var} = <a number of {unit}>, within {tol}").format(
                var=self.var, unit=self.unit, tol=f"{self.tol:g}")
        return _("{var} = <a number>, within {tol}").format(var=self.var, tol=f"{self.tol:g}")

    @property
    def has_key(self) -> bool:
        return bool(self.answer_hash)

    # --- checking -----------------------------------------------------------------------
    def is_right(self, answer: object) -> bool:
        if not self.has_key:
            raise KeyError(f"{self.qid}: no answer key here (keys are instructor-side)")
        if self.kind == "number":
            x = _as_number(answer)
            if x is None:
                return False
            k = x / self.tol
            return any(_digest(self.qid, str(int(b)), self.salt) == self.answer_hash
                       for b in {math.floor(k), math.ceil(k)})
        if not isinstance(answer, str):
            return False
        return _digest(self.qid, ",".join(_letters(answer)), self.salt) == self.answer_hash

    def right_choices(self) -> list[str]:
        """The key, recovered by trying every possible answer (choice and multi only)."""
        if not self.has_key:
            raise KeyError(f"{self.qid}: no answer key here (keys are instructor-side)")
        keys = list(self.choices)
        sizes = [1] if self.kind == "choice" else range(1, len(keys) + 1)
        for r in sizes:
            for combo in itertools.combinations(keys, r):
                if _digest(self.qid, ",".join(sorted(combo)), self.salt) == self.answer_hash:
                    return list(combo)
        raise ValueError(f"{self.qid}: no choice matches the stored answer hash")

    def format_problem(self, answer: object) -> str | None:
        """Why ``answer`` is not even a well-formed answer, or None."""
        if self.kind == "number":
            if isinstance(answer, bool) or _as_number(answer) is None:
                return _("{var} must be a number, e.g. {var} = 12.5; got {answer}").format(
                    var=self.var, answer=repr(answer))
            return None
        if not isinstance(answer, str):
            return _("{var} must be a letter in quotes: {format}; got {answer}").format(
                var=self.var, format=self.answer_format(), answer=repr(answer))
        picked = _letters(answer)
        bad = [p for p in picked if p not in self.choices]
        if bad or not picked:
            return _("{answer} is not one of the choices {letters}: {format}").format(
                answer=repr(answer), letters=", ".join(self.choices),
                format=self.answer_format())
        if self.kind == "choice" and len(picked) > 1:
            return _("pick one letter only: {format}").format(format=self.answer_format())
        return None

    def text(self) -> str:
        lines = [self.header, "", self.prompt, ""]
        lines += [f"  ({k}) {v}" for k, v in self.choices.items()]
        lines += ["", _("Answer in the cell below: {format}").format(format=self.answer_format())]
        return "\n".join(lines)


def _as_number(answer: object) -> float | None:
    """A number from an int, a float or a string ("1,024", "1_024", "1.2", "1,2" = 1.2)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, str):
        s = answer.strip().replace("_", "")
        if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", s):
            s = s.replace(",", "")  # thousands separators
        elif re.fullmatch(r"[-+]?\d*,\d+", s):
            s = s.replace(",", ".")  # a decimal comma
        answer = s
    try:
        x = float(answer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --- the bank ----------------------------------------------------------------------------
def bank(lesson: str) -> dict[str, Question]:
    """All questions of one lesson's bank, by full id, in the order the lesson asks them,
    their texts in the course's language (``cudacourse.i18n``; English where untranslated).
    No keys: those are instructor-side (``keyed``). Ids and kinds never depend on the language."""
    return _bank(lesson, i18n.language())


@lru_cache(maxsize=None)
def _bank(lesson: str, lang: str) -> dict[str, Question]:
    tr = _texts(lesson, lang)
    try:
        raw = resources.files("cudacourse.quizzes").joinpath(f"{lesson}.toml").read_text()
    except FileNotFoundError:
        raise KeyError(f"no question bank for lesson {lesson!r}") from None
    data = tomllib.loads(raw)
    out: dict[str, Question] = {}
    for n, q in enumerate(data.get("question", []), 1):
        qid = f"{lesson}.{q['id']}"
        if qid in out:
            raise ValueError(f"duplicate question id {qid}")
        leaked = [k for k in KEY_FIELDS if k in q]
        if leaked:  # the package ships to every learner: a key there is a key in their hands
            raise ValueError(f"{qid}: {', '.join(leaked)} belong in {KEY_DIR}/{lesson}.toml "
                             "(instructor-side), not in the package's question file")
        kind = q.get("kind", "choice")
        if kind not in KINDS:
            raise ValueError(f"{qid}: kind must be one of {KINDS}, got {kind!r}")
        if kind == "number" and not q.get("tol", 0) > 0:
            raise ValueError(f"{qid}: a number question needs tol > 0")
        key = f"q.{q['id']}"
        out[qid] = Question(
            qid, tr(f"{key}.prompt", q["prompt"].strip()),
            {k: tr(f"{key}.choice.{k}", v) for k, v in q.get("choices", {}).items()}, "", "", "",
            title=tr(f"{key}.title", q.get("title", "").strip()), kind=kind, number=n,
            predict=bool(q.get("predict", False)),
            unit=tr(f"{key}.unit", q.get("unit", "").strip()),
            tol=float(q.get("tol", 0.0)))
    return out


def _texts(lesson: str, lang: str):
    """``(key, english) -> text`` for one lesson's question texts in ``lang``."""
    if lang == i18n.DEFAULT:
        return lambda key, english: english
    from ..i18n import translations

    texts = translations.question_texts(lesson, lang)
    return lambda key, english: translations.pick(texts, key, english) if english else english


def key_file(lesson: str, root: str | Path) -> Path:
    return Path(root) / KEY_DIR / f"{lesson}.toml"


def keyed(lesson: str, root: str | Path) -> dict[str, Question]:
    """The lesson's questions with their keys, read from the course's instructor-side key file.

    Every question needs exactly one key, and every key a question.
    """
    path = key_file(lesson, root)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise KeyError(f"no answer keys for lesson {lesson!r}: {path} is missing") from None
    questions = bank(lesson)
    out: dict[str, Question] = {}
    for k in data.get("key", []):
        qid = f"{lesson}.{k.get('id')}"
        if qid not in questions:
            raise ValueError(f"{path}: key {k.get('id')!r} has no question in the bank")
        if qid in out:
            raise ValueError(f"{path}: two keys for {k['id']!r}")
        if "answer" not in k:
            raise ValueError(f"{path}: key {k['id']!r} has no answer")
        q = questions[qid]
        if q.format_problem(k["answer"]):
            raise ValueError(f"{path}: {k['id']!r}: {q.format_problem(k['answer'])}")
        explain, hint = k.get("explain", "").strip(), k.get("hint", "").strip()
        salt = _salt_of(qid, str(k["answer"]), explain, hint)
        q = dataclasses.replace(
            q, answer_hash=answer_hash(qid, str(k["answer"]), salt), salt=salt,
            key_answer=str(k["answer"]), explain=explain, hint=hint,
            why={c: v.strip() for c, v in k.get("why", {}).items()},
            wrong=tuple((float(w["value"]), w["why"].strip()) for w in k.get("wrong", [])))
        out[qid] = _filled(dataclasses.replace(
            q, translated=_key_translations(q, lesson, root)), root)
    missing = [qid for qid in questions if qid not in out]
    if missing:
        raise ValueError(f"{path}: no key for {', '.join(missing)}")
    return out


def _filled(q: Question, root: str | Path) -> Question:
    """``q`` with the figures of its key texts rendered from their one source
    (``{{bench.*}}`` from docs/benchmarks.json, ``{{const.*}}``: ``cudacourse.course.prose``), in
    every language; the translations were matched against the English as written."""
    from . import prose

    def fill(text: str) -> str:
        return prose.fill(text, root=root) if "{{" in text else text

    def fill_all(v):  # noqa: ANN001, ANN202 - a text, a list or a table of them
        if isinstance(v, str):
            return fill(v)
        if isinstance(v, list):
            return [fill_all(x) for x in v]
        if isinstance(v, dict):
            return {k: fill_all(x) for k, x in v.items()}
        return v

    return dataclasses.replace(
        q, explain=fill(q.explain), hint=fill(q.hint),
        why={c: fill(v) for c, v in q.why.items()},
        wrong=tuple((v, fill(w)) for v, w in q.wrong), translated=fill_all(q.translated))


def _key_translations(q: Question, lesson: str, root: str | Path) -> dict[str, dict]:
    """``q``'s key texts in every other language, from the instructor-side translation files
    (``lessons/quizkeys/<lang>/<lesson>.po``): the package has none to offer (issue 19)."""
    from ..i18n import translations

    out: dict[str, dict] = {}
    base = f"q.{q.qid.split('.', 1)[1]}"
    for lang in i18n.LANGUAGES:
        if lang == i18n.DEFAULT:
            continue
        texts = translations.key_texts(lesson, lang, Path(root))

        def tr(key: str, english: str) -> str | None:
            got = translations.pick(texts, f"{base}.{key}", english) if english else english
            return got if got != english else None

        t: dict = {}
        if tr("explain", q.explain):
            t["x"] = tr("explain", q.explain)
        if tr("hint", q.hint):
            t["n"] = tr("hint", q.hint)
        why = {c: tr(f"why.{c}", v) for c, v in q.why.items()}
        if any(why.values()):
            t["y"] = {c: v for c, v in why.items() if v}
        wrong = [tr(f"wrong.{i}", w) for i, (_v, w) in enumerate(q.wrong)]
        if any(wrong):
            t["w"] = wrong
        if t:
            out[lang] = t
    return out


# --- key tokens: a key as it travels inside a notebook cell --------------------------------
# 3: sealed (issue 32). Base64url of JSON holding the question's salt, the salted hash of the
# right answer, the hint, and one *sealed entry* per option (every letter; for a number
# question, every value the key names, the right one included), filed under a salted hash of
# the option and encrypted with a keystream derived from the option itself. Reading the token
# shows how many options there are, never which is right or what any feedback says: only
# the option a learner gives opens its own entry. The explanation (it gives the answer away)
# sits beside them in the master only ("r"): `cudacourse.grader.quiz_mode` takes it out of
# every learner copy, and the grader reads it from the master's cells. Deterministic (the
# salt comes from the key, the JSON is canonical), so a master is the same bytes on every
# machine (an earlier zlib form was not: the H200's Python 3.12 compressed to other bytes).
_TOKEN_V = 3


def _salt_of(qid: str, answer: str, explain: str, hint: str) -> str:
    """A per-question salt, derived from its key: a rebuild gives the same token."""
    return hashlib.sha256(f"{_SALT}:salt:{qid}:{answer}:{explain}:{hint}".encode()
                          ).hexdigest()[:32]


def _option_hash(salt: str, qid: str, option: str) -> str:
    """The name of an option's sealed entry. Another domain than the answer's hash, so the
    right entry is not the one whose name equals ``h``."""
    return hashlib.sha256(f"{_SALT}:entry:{salt}:{qid}:{option}".encode()).hexdigest()


def _keystream(salt: str, qid: str, option: str, n: int) -> bytes:
    seed = hashlib.sha256(f"{_SALT}:seal:{salt}:{qid}:{option}".encode()).digest()
    return b"".join(hashlib.sha256(seed + i.to_bytes(4, "big")).digest()
                    for i in range(n // 32 + 1))[:n]


def _canonical(data: object) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _seal(salt: str, qid: str, option: str, plain: dict) -> str:
    raw = _canonical(plain)
    sealed = bytes(a ^ b for a, b in zip(raw, _keystream(salt, qid, option, len(raw))))
    return base64.urlsafe_b64encode(sealed).decode().rstrip("=")


def _unseal(salt: str, qid: str, option: str, sealed: str) -> dict:
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    plain = bytes(a ^ b for a, b in zip(raw, _keystream(salt, qid, option, len(raw))))
    out = json.loads(plain.decode())
    if not isinstance(out, dict):
        raise ValueError("a sealed entry that is not a table")
    return out


def _by_lang(q: Question, english: str, code: str, sub: str | int | None = None
             ) -> dict[str, str]:
    """{lang: text} of one key text: the English and its current translations."""
    out = {i18n.DEFAULT: english} if english else {}
    for lang, t in sorted(q.translated.items()):
        got = t.get(code)
        if isinstance(sub, str):
            got = got.get(sub) if isinstance(got, dict) else None
        elif isinstance(sub, int):
            got = got[sub] if isinstance(got, list) and sub < len(got) else None
        if got:
            out[lang] = got
    return out


def _in_language(texts: object) -> str:
    """The text of ``{lang: text}`` in the course's language, else the English."""
    if not isinstance(texts, dict):
        return ""
    return str(texts.get(i18n.language()) or texts.get(i18n.DEFAULT) or "")


def _number_option(value: float, tol: float) -> str:
    """A number's option: its value in units of the tolerance."""
    return str(round(value / tol))


def _entries(q: Question) -> dict[str, dict]:
    """option -> what its sealed entry holds: whether it is (part of) the key, and its why;
    for a number, the values the key names there, each with its why."""
    if q.kind != "number":
        right = set(q.right_choices())
        out = {c: {"ok": c in right, "y": _by_lang(q, q.why.get(c, ""), "y", c)}
               for c in q.choices}
        if q.kind == "choice":  # the one right letter opens the explanation too
            out[q.right_choices()[0]]["x"] = _by_lang(q, q.explain, "x")
        return out
    out = {_number_option(float(q.key_answer), q.tol): {"ok": True, "w": [],
                                                        "x": _by_lang(q, q.explain, "x")}}
    for i, (value, why) in enumerate(q.wrong):
        entry = out.setdefault(_number_option(value, q.tol), {"ok": False, "w": []})
        entry["w"].append([i, value, _by_lang(q, why, "w", i)])
    return out


def token(q: Question) -> str:
    """``q``'s key as one cell-safe string: salted hashes and sealed entries (see above)."""
    if not q.has_key or not q.key_answer:
        raise ValueError(f"{q.qid}: no key to put in a token")
    payload = {"v": _TOKEN_V, "q": q.qid, "s": q.salt, "h": q.answer_hash,
               "o": {_option_hash(q.salt, q.qid, o): _seal(q.salt, q.qid, o, e)
                     for o, e in _entries(q).items()},
               "n": _by_lang(q, q.hint, "n"), "r": _by_lang(q, q.explain, "x")}
    return base64.urlsafe_b64encode(_canonical(payload)).decode().rstrip("=")


def with_token(qid: str, key: str) -> Question:
    """The question ``qid`` with the key that ``token`` wrote (a clear error for a bad token)."""
    q = get(qid)
    try:
        raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        p = json.loads(raw)
        if not isinstance(p, dict) or p.get("v") != _TOKEN_V:
            raise ValueError("unknown token version")
        if p.get("q") != qid:
            raise ValueError(f"it is the key of {p.get('q')!r}")
        h, salt, sealed = p["h"], p["s"], p["o"]
        if not (isinstance(h, str) and re.fullmatch(r"[0-9a-f]{64}", h)):
            raise ValueError("no answer hash")
        if not (isinstance(salt, str) and isinstance(sealed, dict)
                and all(isinstance(v, str) for v in sealed.values())):
            raise ValueError("no sealed entries")
        # The hint and, in the master only, the explanation, in every language they were
        # translated into (instructor-side files, written in by `cudacourse build`).
        return dataclasses.replace(q, answer_hash=h, salt=salt, sealed=dict(sealed),
                                   hint=_in_language(p.get("n")),
                                   explain=_in_language(p.get("r")))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{qid}: the answer key in this cell is not valid ({exc}); "
                         "rebuild the notebook with `cudacourse build`") from None


def _opened(q: Question, option: str) -> dict | None:
    """What the key says about ``option``: its entry, opened (None: the key names it not)."""
    if not q.sealed:  # keyed from the key file (instructor-side): the entries themselves
        return _entries(q).get(option) if q.key_answer else None
    sealed = q.sealed.get(_option_hash(q.salt, q.qid, option))
    return None if sealed is None else _unseal(q.salt, q.qid, option, sealed)


def _keyed_question(qid: str, key: str | None) -> Question:
    if key is None:
        raise ValueError(f"{qid}: this cell carries no answer key; the keys are instructor-side "
                         "and `cudacourse build` writes them into the master's question cells")
    return with_token(qid, key)


_ASK_SRC = re.compile(r'^quiz\.ask\((?P<q>"(?P<qid>[\w.]+)")\)[ \t]*$', re.M)
_GRADE_SRC = re.compile(r'^quiz\.grade\((?P<q>"(?P<qid>[\w.]+)"),\s*(?P<var>\w+)\)[ \t]*$',
                        re.M)


def embed_keys(nb, root: str | Path):  # noqa: ANN001, ANN201 - an nbformat notebook
    """Write each question's key token into a master's ``quiz.ask`` and ``quiz.grade`` lines.

    ``cudacourse build`` runs this on every master (solutions/); the learner copy then gets
    the tokens only where the assignment is formative (``cudacourse.grader.quiz_mode``).
    """
    cache: dict[str, dict[str, Question]] = {}

    def key_of(qid: str) -> str:
        lesson = qid.split(".", 1)[0]
        if lesson not in cache:
            cache[lesson] = keyed(lesson, root)
        if qid not in cache[lesson]:
            raise KeyError(f"no question {qid!r} in the {lesson!r} bank")
        return token(cache[lesson][qid])

    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = _ASK_SRC.sub(lambda m: f'quiz.ask({m["q"]}, key="{key_of(m["qid"])}")',
                           cell.source)
        cell.source = _GRADE_SRC.sub(
            lambda m: f'quiz.grade({m["q"]}, {m["var"]}, key="{key_of(m["qid"])}")', src)
    return nb


def lessons() -> list[str]:
    files = resources.files("cudacourse.quizzes").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".toml"))


def get(qid: str) -> Question:
    lesson = qid.split(".", 1)[0]
    questions = bank(lesson)
    try:
        return questions[qid]
    except KeyError:
        raise KeyError(f"no question {qid!r} in the {lesson!r} bank") from None


def answer_hash(qid: str, answer: str, salt: str | None = None) -> str:
    """The salted hash a key token holds for ``answer`` being the key to ``qid``.

    For a ``number`` question of the bank, ``answer`` is the value (rounded to ``tol``); for
    ``multi``, the letters that apply ("a, c"). ``salt`` is the question's (``Question.salt``);
    without it, the salt of the course's instructor-side key (``lessons/quizkeys``).
    """
    try:
        q = get(qid)
    except KeyError:
        q = None
    if salt is None:
        salt = _course_salt(qid)
    if q is not None and q.kind == "number":
        x = _as_number(answer)
        if x is None:
            raise ValueError(f"{qid} is a number question; got {answer!r}")
        return _digest(qid, str(round(x / q.tol)), salt)
    return _digest(qid, ",".join(_letters(answer)), salt)


def _course_salt(qid: str) -> str:
    from .courseroot import find_root  # instructor-side: the course checkout's key files

    lesson = qid.split(".", 1)[0]
    root = find_root(None)
    key = key_file(lesson, root)
    got = _salts(lesson, str(root), key.stat().st_mtime_ns if key.exists() else 0).get(qid)
    if got is None:
        raise KeyError(f"no question {qid!r} in the {lesson!r} bank")
    return got


@lru_cache(maxsize=32)
def _salts(lesson: str, root: str, _mtime: int) -> dict[str, str]:
    """The salts of a lesson's keys (cached while its key file is unchanged)."""
    return {qid: q.salt for qid, q in keyed(lesson, root).items()}


# --- feedback ----------------------------------------------------------------------------
def _number_feedback(q: Question, answer: object) -> tuple[bool, str]:
    """(right?, the why) of a number answer: the entries near its value, opened."""
    x = _as_number(answer)
    if x is None:
        return False, ""
    k = x / q.tol
    if q.is_right(x):
        return True, ""
    found: list[tuple[int, str]] = []
    for b in range(math.floor(k) - 2, math.ceil(k) + 3):  # every bucket within one tol
        entry = _opened(q, str(b)) or {}
        for i, value, why in entry.get("w", []):
            if abs(x - float(value)) <= q.tol:
                found.append((int(i), _in_language(why)))
    return False, min(found)[1] if found else ""


def _wrong_why(q: Question, answer: object) -> str:
    """What the learner's wrong answer most likely got wrong: only what its own entry says."""
    if q.kind == "number":
        return _number_feedback(q, answer)[1] or q.hint or _("Work it out again, step by step.")
    picked = _letters(str(answer))
    if q.kind == "choice":
        entry = _opened(q, picked[0]) or {}
        return _in_language(entry.get("y")) or q.hint or _("Think about it again.")
    opened = {k: _opened(q, k) or {} for k in picked}
    notes = [f"({k}) {_in_language(e.get('y'))}" for k, e in opened.items()
             if not e.get("ok") and _in_language(e.get("y"))]
    # How many right letters are missing: found as a learner would, by trying the letters
    # not picked on top of the right ones picked (the hash says when the set is complete).
    have = [k for k, e in opened.items() if e.get("ok")]
    rest = [k for k in q.choices if k not in picked]
    missing = next((r for r in range(len(rest) + 1) for extra in itertools.combinations(rest, r)
                    if _digest(q.qid, ",".join(sorted(have + list(extra))), q.salt)
                    == q.answer_hash), 0)
    if missing:
        notes.append(i18n.ngettext("{n} more choice applies.", "{n} more choices apply.",
                                   missing).format(n=missing)
                     + (_(" Hint: {hint}").format(hint=q.hint) if q.hint else ""))
    return " ".join(notes) or q.hint


def _right_why(q: Question, answer: object) -> str:
    """Why the (right) ``answer`` is right: the why of each of its letters, from their entries."""
    if q.kind == "number":
        x = _as_number(answer)
        k = x / q.tol if x is not None else 0.0
        for b in (math.floor(k), math.ceil(k)):
            if _digest(q.qid, str(int(b)), q.salt) == q.answer_hash:
                return _in_language((_opened(q, str(int(b))) or {}).get("x")) or q.explain
        return q.explain
    whys = [_in_language((_opened(q, k) or {}).get("y")) for k in _letters(str(answer))]
    return " ".join(w for w in whys if w) or q.explain


def feedback(qid: str, answer: object, key: str | None = None) -> tuple[bool, str]:
    """(right?, what to tell the learner): the why of their choice, never the key."""
    q = _keyed_question(qid, key)
    problem = q.format_problem(answer)
    if problem:
        return False, problem
    if q.is_right(answer):
        return True, _("Right. ") + _right_why(q, answer)
    return False, _opening(q, answer) + _wrong_why(q, answer)


def _opening(q: Question, answer: object) -> str:
    """How a wrong answer's feedback starts, graded by how far off it is: "Not quite" only
    for a near miss (a number within 10% of the key, some of the letters that apply)."""
    return _("Not quite. ") if _near_miss(q, answer) else _("Not right. ")


def _near_miss(q: Question, answer: object) -> bool:
    if q.kind == "choice":
        return False
    if q.kind == "multi":
        return any((_opened(q, k) or {}).get("ok") for k in _letters(str(answer)))
    x = _as_number(answer)
    if x is None:
        return False
    # the key's bucket, looked for as a learner would: every value within 10% of the answer
    lo, hi = sorted((x * 0.9 / q.tol, x * 1.1 / q.tol))
    first, last = math.floor(lo) - 1, math.ceil(hi) + 1
    if last - first > 20_000:  # a huge answer: treat as far off rather than scan
        return False
    return any(_digest(q.qid, str(b), q.salt) == q.answer_hash for b in range(first, last + 1))


def answer(qid: str, choice: object, key: str | None = None) -> bool:
    """Plain-text instant feedback: print it and return whether the answer is right."""
    ok, text = feedback(qid, choice, key)
    print(text)
    return ok


def _show(answer: object) -> str:
    return f'"{answer}"' if isinstance(answer, str) else repr(answer)


def grade(qid: str, choice: object, reveal: bool = False, key: str | None = None) -> None:
    """For nbgrader test cells: raise AssertionError, whose message teaches, unless right.

    ``key`` is the token ``embed_keys`` wrote into the master's cell. ``reveal`` (graded mode,
    after submission) adds the full explanation to both outcomes; so does running inside the
    course's grader (``after_submission``), whichever form of the test cell it runs.
    """
    __tracebackhide__ = True  # IPython and pytest show the test cell, not this frame
    q = _keyed_question(qid, key)
    reveal = reveal or after_submission()
    problem = q.format_problem(choice)
    # One paragraph per line, no blank line: graders may show only an error's first paragraph.
    extra = ("\n" + _("The explanation: {explain}").format(explain=" ".join(q.explain.split()))
             if reveal and q.explain else "")
    if problem:
        message = problem
    elif q.is_right(choice):
        print(_("{header}: right. {why}").format(header=q.header, why=_right_why(q, choice))
              + (extra if q.kind != "number" else ""))
        return
    else:
        message = _("{var} = {answer} is not the right answer to {header}. ").format(
            var=q.var, answer=_show(choice), header=q.header) + f"{_wrong_why(q, choice)}{extra}"
    _fail(message)


# IPython shows every frame of a traceback except those marked ``__tracebackhide__``, and
# never hides the last one, where the exception is raised. So the AssertionError is raised
# in a one-line frame of its own, without source: the learner sees their test cell and the
# explanation, not this module's code.
_WHERE = "<answer check>"
_RAISE = compile("raise _exc from None", _WHERE, "exec")
_SHOWN = N_("your answer, checked: the explanation follows")  # the frame's line, as a comment


_TOKEN_ARG = re.compile(r'(key\s*=\s*)(["\'])[\w-]{16,}\2')


def _hide_tokens(frame) -> None:  # noqa: ANN001 - a frame
    """Blank every key token in the source lines a traceback would print for ``frame`` and
    its callers (the test cell's ``quiz.grade(..., key="...")``): tracebacks print source
    from ``linecache``, so the token is replaced there (issue 32: no key in a traceback)."""
    while frame is not None:
        name = frame.f_code.co_filename
        lines = linecache.getlines(name, frame.f_globals)
        if any(_TOKEN_ARG.search(line) for line in lines):
            clean = [_TOKEN_ARG.sub(r'\1\2…\2', line) for line in lines]
            linecache.cache[name] = (sum(map(len, clean)), None, clean, name)
        frame = frame.f_back


def _fail(message: str) -> None:
    __tracebackhide__ = True
    _hide_tokens(sys._getframe(1))
    # What IPython prints as this frame's source line (mtime None: linecache keeps it).
    shown = f"# {i18n.gettext(_SHOWN)}\n"  # in the course's language
    linecache.cache[_WHERE] = (len(shown), None, [shown], _WHERE)
    # Wrapped: a traceback is preformatted text, which notebooks do not wrap.
    text = "\n".join(textwrap.fill(part, 88, break_on_hyphens=False)
                     for part in message.split("\n"))
    exec(_RAISE, {"_exc": AssertionError(text)})  # noqa: S102 - our own constant code


def after_submission() -> bool:
    """Whether this runs in grading, after the learner submitted (so nothing is given away).

    ``CUDACOURSE_GRADING=1`` says so explicitly; ``cudacourse grade`` runs every check in a
    sandbox that carries ``CUDACOURSE_SANDBOX_TOKEN``, and runs the master's test cells (the
    formative form), so that is taken as the same signal.
    """
    return os.environ.get("CUDACOURSE_GRADING") == "1" or bool(
        os.environ.get("CUDACOURSE_SANDBOX_TOKEN"))


def record(qid: str, choice: object) -> None:
    """Graded mode, learner side: check only the form of the answer, reveal nothing."""
    __tracebackhide__ = True
    q = get(qid)
    problem = q.format_problem(choice)
    if problem:
        _fail(problem)
    print(_("Recorded {var} = {answer}. {header} is graded after you submit; "
            "the explanation comes with your feedback.").format(
        var=q.var, answer=_show(choice), header=q.header))


def ask(qid: str, graded: bool = False, key: str | None = None) -> None:
    """Show the question; with ipywidgets, a widget (instant feedback unless ``graded``).

    Instant feedback needs the key token (``key``); without one the widget only records.
    """
    q = get(qid)
    graded = graded or key is None
    from IPython.display import Markdown, display

    md = _("**{header}.** {prompt}").format(header=q.header, prompt=q.prompt) + "\n\n" + "\n".join(
        f"- **({k})** {v}" for k, v in q.choices.items())
    how = "\n\n" + _("Answer in the cell below: `{format}`.").format(format=q.answer_format())
    if graded:
        how += _(" This question is graded after you submit: no right or wrong before then.")
    try:
        import ipywidgets as w
    except ImportError:
        tail = "" if graded else _(" Check an answer with `{call}`.").format(
            call=f"quiz.answer({qid!r}, ..., key=...)")
        display(Markdown(md + how + tail))
        return
    display(Markdown(md + how))
    # The choices' text is in the Markdown above (readable anywhere, also where widgets do not
    # render); the widgets only carry the letters.
    if q.kind == "choice":
        pick = w.RadioButtons(options=[(f"({k})", k) for k in q.choices], value=None,
                              description=_("Your choice:"), style={"description_width": "initial"})
        boxes: list = [pick]

        def value() -> object:
            return pick.value
    elif q.kind == "multi":
        boxes = [w.Checkbox(description=f"({k})", value=False, indent=False) for k in q.choices]

        def value() -> object:
            chosen = [k for k, b in zip(q.choices, boxes) if b.value]
            return ", ".join(chosen) if chosen else None
    else:
        num = w.Text(description=(_("Your answer ({unit}):").format(unit=q.unit) if q.unit
                                  else _("Your answer:")),
                     style={"description_width": "initial"})
        boxes = [num]

        def value() -> object:
            return num.value.strip() or None
    button = w.Button(description=_("Record") if graded else _("Check"), button_style="primary")
    out = w.HTML()

    def on_click(_button: object) -> None:
        v = value()
        if v is None:
            out.value = "<i>" + (_("Pick a choice first.") if q.kind != "number" else
                                 _("Type a number first.")) + "</i>"
            return
        shown = v if q.kind != "number" else _as_number(v)
        problem = q.format_problem(shown if shown is not None else v)
        if problem:
            out.value = f"<span style='color:#b35900'>{_html(problem)}</span>"
            return
        line = f"<code>{q.var} = {_html(_show(shown))}</code>"
        if graded:
            out.value = _("Now write {line} in the cell below; it is graded after you "
                          "submit.").format(line=line)
            return
        ok, text = feedback(qid, shown, key)
        colour = "#1a7f37" if ok else "#b35900"
        more = _(" Write {line} in the cell below.").format(line=line) if ok else ""
        out.value = f"<span style='color:{colour}'>{_html(text)}</span>{more}"

    button.on_click(on_click)
    display(w.VBox([*boxes, button, out]))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def answer_comment(qid: str, lang: str) -> str:
    """The comment that heads a question's answer cell in ``lang``: its header and how to
    write the answer (``# Question 1: <title>. Answer as: answer_x = ...``)."""
    from ..i18n import translations

    with translations.language(lang):
        q = get(qid)
        return (f"# {q.header}{translations.ANSWER_AS.get(lang, translations.ANSWER_AS['en'])}"
                f"{q.answer_format()}")
