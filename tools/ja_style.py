"""Bring every Japanese translation file to docs/japanese-style.md, mechanically.

    .venv/bin/python tools/ja_style.py          # rewrite the files in place, list what changed
    .venv/bin/python tools/ja_style.py --check  # exit 1 if any file would change

It rewrites only translations (``msgstr``), never the English or a hash, so no entry turns
stale: half-width parentheses with the house spacing, the glossary's spellings (バッファ), 第 N
回 / 第 N 節, no space between two Japanese words, no space opening a sentence appended to
another, and the phrasings the style guide replaces (cudacourse.i18n.glossary.PHRASINGS).
After merging branches that add Japanese entries, run it once, then ``cudacourse i18n
update`` to recompile the catalogue; tests/test_i18n_style.py says what is left.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudacourse.i18n import catalog as catalog_module  # noqa: E402
from cudacourse.i18n import glossary, translations  # noqa: E402


def files() -> list[Path]:
    return sorted((ROOT / "src/cudacourse/locale/ja").rglob("*.po")) + sorted(
        (ROOT / "lessons/quizkeys/ja").glob("*.po"))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for path in files():
        catalog = translations.read(path)
        n = 0
        for m in catalog:
            if not m.id or not m.string:
                continue
            english = m.id if isinstance(m.id, str) else m.id[0]
            strings = m.string if isinstance(m.string, (tuple, list)) else (m.string,)
            fixed = tuple(glossary.restyle(english, s) for s in strings)
            if fixed != tuple(strings):
                n += 1
                if not check:
                    m.string = fixed if isinstance(m.string, (tuple, list)) else fixed[0]
        if n:
            changed.append(f"{path.relative_to(ROOT)}: {n} entries")
            if not check and path.name == "cudacourse.po":  # the message catalogue's layout
                path.write_bytes(catalog_module.render_po(catalog))
            elif not check:
                translations.write(path, catalog)
    print("\n".join(changed) or "nothing to change")
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
