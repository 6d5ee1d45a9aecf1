"""One source, two languages: a lesson's translation file and the Japanese notebooks.

The English lesson (``lessons/NN_topic.py``) and its question bank
(``cudacourse/quizzes/NN_topic.toml``) stay the only source of code cells and answers. Each
lesson has one gettext file, ``cudacourse/locale/<lang>/lessons/NN_topic.po``, with one entry
per text unit (a markdown cell, a question's title, prompt, choice, why, explanation, hint)::

    #. en-sha256: 3f1c0a9b5e2d7c44
    msgctxt "md.setup.1"
    msgid "The line printed above tells you ..."      <- the English, as it was translated
    msgstr "上に表示された行は ..."

The texts of a question's *key* (each choice's why, the feedback on known wrong values, the
explanation, the hint) tell the answer, so they are instructor-side like the English keys
(``lessons/quizkeys/``): their entries live in ``lessons/quizkeys/<lang>/NN_topic.po``, never
in the package, and reach a notebook only inside the key tokens that ``cudacourse build``
writes into the masters (``cudacourse.course.quiz.keyed``; issue 19). The package's file keeps the
lesson's markdown and the questions' title, prompt and choices.

``msgctxt`` is the unit's stable key: ``md.<anchor>.<n>`` for the n-th markdown cell after
the cell whose marker carries ``id=<anchor>`` (``start`` before the first one), so a cell
added elsewhere in the lesson moves no key; ``q.<question id>.<field>`` for question texts.
The comment carries the hash of the English that ``msgstr`` translates. A unit is **stale**
when the English changed since (its hash differs) or the entry is marked ``fuzzy``;
**missing** when it has no entry or an empty ``msgstr``.

Workflow (``cudacourse i18n update``): new units get empty entries, changed ones keep their
old translation, get the new English as ``msgid`` (the old one as ``#| msgid``) and the
``fuzzy`` flag; after re-translating, remove ``fuzzy`` and run update again, which records
the new hash. The package's file is kept beside the package data, so the questions can be asked in
Japanese wherever the package is installed; the key file stays beside the lesson sources.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po, write_po

HASH_PREFIX = "en-sha256: "
PACKAGE_DIR = Path(__file__).resolve().parent.parent
_SETUP_LINES = ("import cudacourse", "cudacourse.setup()")
_USE_COMMENT = {"ja": "この版の言語: デバイスの表示、チェッカーのメッセージと問題も日本語で"}
# The words between a question's header and its answer format in an answer cell's comment
# ("# Question 1: What a GPU is built for. Answer as: answer_x = ..."), per language.
ANSWER_AS = {"en": ". Answer as: ", "ja": "。答え方: "}
_SOLUTION_REGION = re.compile(r"^\s*### BEGIN SOLUTION$.*?^\s*### END SOLUTION$", re.M | re.S)
# A comment a learner reads in an exercise's scaffold: a whole-line or trailing comment (no
# quote before it on the line), or a one-line docstring.
_COMMENT = re.compile(r'^(?P<pre>[^"\'#\n]*?)(?P<mark>#[ \t]?)(?P<text>\S.*)$'
                      r'|^(?P<dpre>[ \t]*""")(?P<doc>.+)(?P<dpost>"""[ \t]*)$', re.M)


def english_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Unit:
    key: str      # msgctxt: stable across edits elsewhere in the lesson
    english: str


# --- the units of a lesson --------------------------------------------------------------------
def cell_keys(cells: list) -> list[str | None]:
    """A key per cell of ``lessonsource.parse``: ``md.<anchor>.<n>`` for markdown, else None."""
    keys: list[str | None] = []
    anchor, n = "start", 0
    for c in cells:
        if c.kind == "markdown" and not c.attrs.get("id"):
            n += 1
            keys.append(f"md.{anchor}.{n}")
            continue
        keys.append(f"md.{c.attrs['id']}" if c.kind == "markdown" else None)
        if c.attrs.get("id"):  # any cell with an id anchors the markdown cells after it
            anchor, n = c.attrs["id"], 0
    return keys


def _scaffold_comments(source: str) -> list[re.Match]:
    """The comments of an exercise cell's scaffold: outside its solution region, which the
    learner copy replaces, and never an nbgrader marker."""
    # blanked to spaces, newlines kept: the matches' offsets are the source's own
    kept = _SOLUTION_REGION.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    return [m for m in _COMMENT.finditer(kept) if not (m["text"] or "").startswith("##")]


def _comment_text(m: re.Match) -> str:
    return m["text"] if m["text"] is not None else m["doc"]


def code_units(cells: list) -> list[Unit]:
    """An exercise's scaffold comments (``[solution]`` cells other than a question's answer
    cell, whose comment is made from the question itself): one unit per cell, keyed
    ``code.<id>``, one comment per line, in order."""
    out = []
    for c in cells:
        gid = c.attrs.get("id", "")
        if c.kind != "solution" or gid.startswith("answer_"):
            continue
        comments = _scaffold_comments(c.source)
        if comments:
            out.append(Unit(f"code.{gid}", "\n".join(_comment_text(m) for m in comments)))
    return out


def _translated_code(source: str, translation: str) -> str:
    """``source`` with its scaffold comments replaced, line for line, by ``translation``
    (left as it is when the counts differ: the completeness test reports the unit)."""
    lines = translation.split("\n")
    comments = _scaffold_comments(source)
    if len(lines) != len(comments):
        return source
    out, at = [], 0
    for m, text in zip(comments, lines):
        part = "text" if m["text"] is not None else "doc"
        out.append(source[at:m.start(part)])
        out.append(text)
        at = m.end(part)
    return "".join(out) + source[at:]


def language(lang: str):
    """Messages in ``lang`` for a moment (the course's language restored after)."""
    from .. import i18n

    return i18n.speaking(lang)


def question_units(bank_text: str) -> list[Unit]:
    """The texts of a question bank (TOML), keyed ``q.<id>.<field>``, stripped as
    :func:`cudacourse.course.quiz.bank` strips them."""
    units = []
    data = tomllib.loads(bank_text)
    keys = {k.get("id"): k for k in data.get("key", [])}  # the instructor-side half, if given
    for q in data.get("question", []):
        q = {**q, **keys.get(q["id"], {})}
        base = f"q.{q['id']}"
        for fld in ("title", "prompt"):
            if q.get(fld, "").strip():
                units.append(Unit(f"{base}.{fld}", q[fld].strip()))
        for k, v in q.get("choices", {}).items():
            units.append(Unit(f"{base}.choice.{k}", v))
        if q.get("unit", "").strip():  # a unit in words ("cells") is said in the edition's language
            units.append(Unit(f"{base}.unit", q["unit"].strip()))
        for k, v in q.get("why", {}).items():
            units.append(Unit(f"{base}.why.{k}", v.strip()))
        for i, w in enumerate(q.get("wrong", [])):
            units.append(Unit(f"{base}.wrong.{i}", w["why"].strip()))
        for fld in ("explain", "hint"):
            if q.get(fld, "").strip():
                units.append(Unit(f"{base}.{fld}", q[fld].strip()))
    return units


def lesson_units(lesson_text: str, bank_text: str | None, name: str = "<lesson>") -> list[Unit]:
    from ..course import lessonsource

    cells = lessonsource.parse(lesson_text, name)
    units = [Unit(k, c.source) for k, c in zip(cell_keys(cells), cells) if k]
    units += code_units(cells)
    if len({u.key for u in units}) != len(units):
        raise ValueError(f"{name}: two markdown cells share a translation key")
    return units + (question_units(bank_text) if bank_text else [])


def po_path(stem: str, lang: str, root: Path | None = None) -> Path:
    """The package's translation file: lesson markdown and question texts, no key texts."""
    base = (root / "src" / "cudacourse") if root is not None else PACKAGE_DIR
    return base / "locale" / lang / "lessons" / f"{stem}.po"


KEY_DIR = Path("lessons") / "quizkeys"  # cudacourse.course.quiz.KEY_DIR: instructor-side only
_KEY_FIELDS = ("why", "wrong", "explain", "hint")  # the fields of cudacourse.course.quiz.KEY_FIELDS with text


def key_po_path(stem: str, lang: str, root: Path) -> Path:
    """The instructor-side translation file of ``stem``'s answer keys (no package default:
    a learner's install has none)."""
    return Path(root) / KEY_DIR / lang / f"{stem}.po"


def is_key_unit(key: str) -> bool:
    """Whether the unit ``key`` translates part of an answer key (``q.<id>.why.a``,
    ``q.<id>.wrong.0``, ``q.<id>.explain``, ``q.<id>.hint``): text that gives answers away."""
    parts = key.split(".")
    return parts[0] == "q" and len(parts) >= 3 and parts[2] in _KEY_FIELDS


def split_units(units: list[Unit]) -> tuple[list[Unit], list[Unit]]:
    """``(the package's units, the key file's units)``."""
    return ([u for u in units if not is_key_unit(u.key)],
            [u for u in units if is_key_unit(u.key)])


def sources(stem: str, root: Path) -> tuple[str, str | None]:
    lesson = (root / "lessons" / f"{stem}.py").read_text()
    bank = root / "src" / "cudacourse" / "quizzes" / f"{stem}.toml"
    keys = root / KEY_DIR / f"{stem}.toml"
    if not bank.is_file():
        return lesson, None
    # The questions and their keys (why, explanations, hints) are translated alike.
    return lesson, bank.read_text() + ("\n" + keys.read_text() if keys.is_file() else "")


# --- the translation file -----------------------------------------------------------------------
def read(path: Path) -> Catalog:
    with open(path, "rb") as f:
        return read_po(f)


def _hash_of(msg: Message) -> str | None:
    for c in msg.auto_comments:
        if c.startswith(HASH_PREFIX):
            return c[len(HASH_PREFIX):].strip()
    return None


def entries(catalog: Catalog) -> dict[str, Message]:
    return {m.context: m for m in catalog if m.id and m.context}


@dataclass
class Status:
    missing: list[str]
    stale: list[str]
    unknown: list[str]   # entries whose unit no longer exists (obsolete)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale)

    def describe(self, name: str) -> str:
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} without a translation: {', '.join(self.missing)}")
        if self.stale:
            parts.append(f"{len(self.stale)} stale (the English changed since, or marked fuzzy):"
                         f" {', '.join(self.stale)}")
        if self.unknown:
            parts.append(f"{len(self.unknown)} for text the lesson no longer has: "
                         f"{', '.join(self.unknown)}")
        return f"{name}: " + ("; ".join(parts) if parts else "complete")


def status(units: list[Unit], catalog: Catalog) -> Status:
    have = entries(catalog)
    missing, stale = [], []
    for u in units:
        m = have.get(u.key)
        if m is None or not m.string:
            missing.append(u.key)
        elif m.fuzzy or _hash_of(m) != english_hash(u.english):
            stale.append(u.key)
    keys = {u.key for u in units}
    return Status(missing, stale, [k for k in have if k not in keys])


def update(units: list[Unit], catalog: Catalog | None, lang: str) -> Catalog:
    """The translation file brought in line with the English (see the module docstring)."""
    old = entries(catalog) if catalog is not None else {}
    out = Catalog(locale=lang, project="cudacourse", fuzzy=False,
                  creation_date=catalog.creation_date if catalog is not None else None,
                  revision_date=catalog.revision_date if catalog is not None else None)
    for u in units:
        m = old.get(u.key)
        flags, previous, string, h = set(), (), "", english_hash(u.english)
        if m is not None and m.string:
            string = m.string
            if m.fuzzy or m.id != u.english:
                flags = {"fuzzy"}
                previous = m.previous_id or (m.id if m.id != u.english else ())
                h = _hash_of(m) or ""   # still the English the translation was made from
        out.add(u.english, string, flags=flags, auto_comments=[HASH_PREFIX + h],
                previous_id=previous, context=u.key)
    return out


def write(path: Path, catalog: Catalog) -> None:
    buf = io.BytesIO()
    write_po(buf, catalog, width=0, no_location=True, omit_header=False, include_previous=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())


def _merged(a: Status, b: Status) -> Status:
    return Status(a.missing + b.missing, a.stale + b.stale, a.unknown + b.unknown)


def update_file(stem: str, lang: str, root: Path) -> Status:
    """Both files of ``stem`` brought in line: the package's and the key file. A key unit
    still in the package's file (as before issue 19) moves to the key file, translation and
    all, and leaves the package."""
    lesson, bank = sources(stem, root)
    shown, keys = split_units(lesson_units(lesson, bank, stem))
    path, kpath = po_path(stem, lang, root), key_po_path(stem, lang, root)
    old = read(path) if path.exists() else None
    old_keys = read(kpath) if kpath.exists() else old
    catalog, key_catalog = update(shown, old, lang), update(keys, old_keys, lang)
    write(path, catalog)
    if keys:
        write(kpath, key_catalog)
    return _merged(status(shown, catalog), status(keys, key_catalog))


def file_status(stem: str, lang: str, root: Path) -> Status:
    """Both files' status; an answer key's entry in the package's file counts as unknown
    (it does not belong there: run update, which moves it)."""
    lesson, bank = sources(stem, root)
    shown, keys = split_units(lesson_units(lesson, bank, stem))
    path, kpath = po_path(stem, lang, root), key_po_path(stem, lang, root)
    return _merged(status(shown, read(path) if path.exists() else Catalog()),
                   status(keys, read(kpath) if kpath.exists() else Catalog()))


# --- the translated notebook and questions ----------------------------------------------------
def translated_notebook(nb, lesson_text: str, catalog: Catalog, lang: str,
                        name: str = "<lesson>", root: Path | None = None,
                        answer_comment=None):
    """The master ``nb`` (from ``authoring.to_notebook``) with its markdown in ``lang``, and
    its setup cell choosing ``lang`` for messages and questions; code cells unchanged.

    A unit without a translation stays in English (the completeness test reports it).
    Figures are filled into the translation as into the English (``cudacourse.course.prose``).
    """
    import copy

    from ..course import lessonsource, prose

    cells = lessonsource.parse(lesson_text, name)
    have = entries(catalog)
    out = copy.deepcopy(nb)
    stem = Path(name).stem
    for key, c, cell in zip(cell_keys(cells), cells, out.cells):
        gid = c.attrs.get("id", "")
        code = have.get(f"code.{gid}")
        if key and key in have and have[key].string:
            # the translation carries the English's placeholders ({{bench.*}}): same figures
            cell.source = prose.fill(have[key].string, root=root)
        elif c.kind == "solution" and gid.startswith("answer_"):
            # the answer cell's first line, made from the question in the edition's language
            qid = f"{stem}.{gid[len('answer_'):]}"
            first, _, rest = cell.source.partition("\n")
            if first.startswith("# "):
                if answer_comment is None:  # given by authoring: quiz.answer_comment
                    raise ValueError(f"{name}: an answer cell needs its question's comment")
                cell.source = answer_comment(qid, lang) + "\n" + rest
        elif code is not None and code.string and not code.fuzzy:
            cell.source = _translated_code(cell.source, code.string)
        elif cell.metadata.get("nbgrader", {}).get("grade_id") == "setup":
            # the language is set by the setup call itself, first: the device line is shown
            # in the edition's language too
            lines = cell.source.split("\n")
            if len(lines) < 2 or [l.split("#")[0].strip() for l in lines[:2]] != list(_SETUP_LINES):
                raise ValueError(f"{name}: the setup cell must start with "
                                 f"{chr(10).join(_SETUP_LINES)!r}")
            lines[1] = f'cudacourse.setup(lang="{lang}")  # {_USE_COMMENT.get(lang, "")}'
            cell.source = "\n".join(lines)
    out.metadata.setdefault("cudacourse", {})["lang"] = lang
    return out


def _texts_of(path: Path) -> dict[str, tuple[str, str]]:
    if not path.is_file():
        return {}
    return {key: (_hash_of(m) or "", m.string) for key, m in entries(read(path)).items()
            if key.startswith("q.") and m.string and not m.fuzzy}


def question_texts(lesson: str, lang: str) -> dict[str, tuple[str, str]]:
    """``{key: (hash of the English it translates, translation)}`` for a lesson's question
    texts in the package (title, prompt, choices; never a key's text, even from a stale
    file); use one through :func:`pick`, which keeps the English when it changed since."""
    return {k: v for k, v in _texts_of(po_path(lesson, lang)).items() if not is_key_unit(k)}


def key_texts(lesson: str, lang: str, root: Path) -> dict[str, tuple[str, str]]:
    """As :func:`question_texts`, for the answer keys' texts, from the instructor-side file."""
    return {k: v for k, v in _texts_of(key_po_path(lesson, lang, root)).items()
            if is_key_unit(k)}


def pick(texts: dict[str, tuple[str, str]], key: str, english: str) -> str:
    """The translation of ``english`` under ``key``, or ``english`` itself when there is none
    or it translates older English (a stale translation never hides a correction)."""
    h, string = texts.get(key, ("", ""))
    return string if string and h == english_hash(english) else english
