"""The one CSV writer of the course: every cell it writes is text a spreadsheet shows as text.

Student ids, names, reasons and diagnoses come from submissions and from rosters, and a CSV
file goes to a spreadsheet (Excel, LibreOffice, Google Sheets) or an LMS import. A cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read there as a formula
(OWASP, "CSV Injection": ``=HYPERLINK(...)`` links out with the sheet's data, ``=cmd|...``
runs a command on old Excel). Here such a cell is written with a leading ``'`` (OWASP's
advice: the cell is then text; the quote shows, the rest is as written), also when the
formula hides behind spaces or starts with a full-width sign (``＝``, which some
spreadsheets take as ``=``). Control and format characters become visible escapes and
newlines `` | `` (:func:`untrusted.line`), so one cell is one line of a row.

A number stays a number: ``int`` and ``float`` values as written by :func:`str`, and a
string that is a plain decimal (``-0.5``, ``10``) as it is, which no spreadsheet reads as a
formula. Everything else is neutralised, whoever wrote it.

Every CSV file the course writes goes through :func:`writer` or :func:`dict_writer` (a test
holds the package to it: no other module calls ``csv.writer``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

if __package__ in (None, ""):  # pragma: no cover - loaded by path, as runrecord is
    import untrusted  # type: ignore[no-redef]
else:
    from . import untrusted

FORMULA_START = untrusted.FORMULA_START
_DECIMAL = untrusted._DECIMAL


def cell(value: Any) -> str:
    """``value`` as one CSV cell that no spreadsheet evaluates: numbers as numbers, every
    other value through :func:`untrusted.csv_cell`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return untrusted.csv_cell(value)


class _Writer:
    """``csv.writer`` with every cell through :func:`cell`."""

    def __init__(self, fh: TextIO, **kw: Any) -> None:
        self._w = csv.writer(fh, **kw)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._w.writerow([cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class _DictWriter:
    """``csv.DictWriter`` with every cell (the header too) through :func:`cell`."""

    def __init__(self, fh: TextIO, fieldnames: list[str], **kw: Any) -> None:
        self.fieldnames = list(fieldnames)
        self._w = _Writer(fh, **kw)

    def writeheader(self) -> Any:
        return self._w.writerow(self.fieldnames)

    def writerow(self, row: Mapping[str, Any]) -> Any:
        extra = set(row) - set(self.fieldnames)
        if extra:
            raise ValueError(f"fields not in the header: {sorted(extra)}")
        return self._w.writerow([row.get(k, "") for k in self.fieldnames])

    def writerows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(fh: TextIO, **kw: Any) -> _Writer:
    """A ``csv.writer`` over ``fh`` whose every cell is neutralised (:func:`cell`)."""
    return _Writer(fh, **kw)


def dict_writer(fh: TextIO, fieldnames: list[str], **kw: Any) -> _DictWriter:
    """A ``csv.DictWriter`` over ``fh`` whose every cell is neutralised (:func:`cell`)."""
    return _DictWriter(fh, fieldnames, **kw)


__all__ = ["cell", "dict_writer", "writer", "FORMULA_START"]
