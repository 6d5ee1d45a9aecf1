"""The message catalogue: current with the code, fully translated, compiled (cudacourse.i18n.catalog)."""

from __future__ import annotations

from cudacourse.course import authoring
from cudacourse.i18n import catalog

ROOT = authoring.ROOT


def _ids(cat) -> set:
    return {m.id if isinstance(m.id, str) else tuple(m.id) for m in cat if m.id}


def test_the_catalogue_holds_every_message_of_the_code():
    """Fails when code gained or changed a message: run `cudacourse i18n update`."""
    want = _ids(catalog.template(ROOT))
    have = _ids(catalog.read(catalog.po_path(ROOT, "ja")))
    assert not want - have, f"not in the catalogue: {sorted(map(str, want - have))[:10]}"
    assert not have - want, f"no longer in the code: {sorted(map(str, have - want))[:10]}"


def test_every_message_is_translated():
    left = catalog.untranslated(catalog.read(catalog.po_path(ROOT, "ja")))
    assert not left, left[:10]


def test_the_compiled_catalogue_is_fresh():
    po = catalog.po_path(ROOT, "ja")
    assert po.with_suffix(".mo").read_bytes() == catalog.render_mo(catalog.read(po)), \
        "cudacourse.mo is stale: run `cudacourse i18n update`"


def test_placeholders_survive_translation():
    import re

    field = re.compile(r"\{(\w+)\}")
    for m in catalog.read(catalog.po_path(ROOT, "ja")):
        if not m.id:
            continue
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        want = set(field.findall(ids[0]))
        for s in strings:
            assert set(field.findall(s)) == want, (m.id, s)
