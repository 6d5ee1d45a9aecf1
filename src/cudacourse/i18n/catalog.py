"""The message catalogue: extracted from the package with Babel, compiled for gettext.

``cudacourse i18n update`` runs :func:`update`: it extracts every ``_("...")``,
``N_("...")`` and ``ngettext(...)`` of ``src/cudacourse`` (plus the checkers' cause table,
``check._failure.CAUSES``, whose entries head a translated diagnosis, and the sentences the
lessons' code cells show through ``prose.show``) into a template,
merges it into ``locale/<lang>/LC_MESSAGES/cudacourse.po`` (changed English becomes
``fuzzy``; a fuzzy entry is not used, so the English shows), and compiles the ``.mo`` that
:mod:`gettext` reads. ``tests/test_i18n_catalog.py`` fails when the ``.mo`` is stale or a
message is untranslated.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from ..course import lessons
from . import DOMAIN

KEYWORDS = {"_": None, "N_": None, "T": None, "gettext": None, "ngettext": (1, 2)}


def package_dir(root: Path) -> Path:
    return root / "src" / "cudacourse"


def po_path(root: Path, lang: str) -> Path:
    return package_dir(root) / "locale" / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def causes(root: Path) -> dict[str, str]:
    """``check._failure.CAUSES`` and the exercise specs' own ``causes={...}``, read from the
    source (no import: they are data)."""
    out: dict[str, str] = {}
    tree = ast.parse((package_dir(root) / "check" / "_failure.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CAUSES":
            out.update(ast.literal_eval(node.value))
    for path in sorted((package_dir(root) / "check").glob("*.py")):
        try:
            for fields in lessons.spec_fields(path).values():
                out.update(fields.get("causes") or {})
        except (SyntaxError, lessons.RegistryError):
            continue
    return out


def shown_sentences(source: str) -> list[tuple[int, str]]:
    """(line, template) of every ``prose.show(...)`` / ``prose.shown(...)`` and every
    ``viz.T(...)`` of a lesson source (percent-format Python): the sentences its code cells
    display and the words of its plots, each a literal template looked up whole."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            continue
        f = node.func
        shown = (isinstance(f, ast.Attribute) and f.attr in ("show", "shown")
                 and getattr(f.value, "id", "") == "prose")
        label = (isinstance(f, ast.Attribute) and f.attr == "T") or getattr(f, "id", "") == "T"
        if shown or label:  # prose.show(...) sentences; viz.T(...) a plot's words
            out.append((node.lineno, node.args[0].value))
    return out


def template(root: Path) -> Catalog:
    """Every message of the package, as Babel extracts it."""
    pot = Catalog(project="cudacourse", fuzzy=False)
    src = package_dir(root)
    for filename, lineno, message, comments, context in extract_from_dir(
            str(src), method_map=[("**.py", "python")], keywords=KEYWORDS,
            comment_tags=("TRANSLATORS:",), strip_comment_tags=True):
        pot.add(message, None, [(f"src/cudacourse/{filename}", lineno)],
                auto_comments=comments, context=context)
    for lesson in sorted((root / "lessons").glob("[0-9]*.py")):
        for lineno, message in shown_sentences(lesson.read_text()):
            pot.add(message, None, [(f"lessons/{lesson.name}", lineno)])
    for cause, text in causes(root).items():
        pot.add(text, None, [("src/cudacourse/check/_failure.py", 0)],
                auto_comments=[f"cause: {cause}"])
    return pot


def read(path: Path) -> Catalog:
    with open(path, "rb") as f:
        return read_po(f)


def render_po(catalog: Catalog) -> bytes:
    buf = io.BytesIO()
    write_po(buf, catalog, width=0, include_lineno=False, include_previous=True,
             sort_output=True)
    return buf.getvalue()


def render_mo(catalog: Catalog) -> bytes:
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    return buf.getvalue()


def update(root: Path, lang: str) -> list[str]:
    """Merge the template into ``lang``'s catalogue and compile it; return the msgids
    still without a (non-fuzzy) translation."""
    path = po_path(root, lang)
    catalog = read(path) if path.exists() else Catalog(locale=lang, project="cudacourse")
    pot = template(root)
    pot.creation_date = catalog.creation_date  # the header changes only with the messages
    catalog.update(pot, no_fuzzy_matching=True)
    catalog.obsolete.clear()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render_po(catalog))
    path.with_suffix(".mo").write_bytes(render_mo(read(path)))
    return untranslated(catalog)


def untranslated(catalog: Catalog) -> list[str]:
    out = []
    for m in catalog:
        if not m.id:
            continue
        strings = m.string if isinstance(m.string, (tuple, list)) else (m.string,)
        if m.fuzzy or not all(strings):
            out.append(m.id if isinstance(m.id, str) else m.id[0])
    return out
