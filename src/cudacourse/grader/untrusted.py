"""Strings that came from a submission, made safe for where they go next.

Everything a submission holds (cells, outputs, incidents its kernel reported, file names,
metadata) is data to the end. This module is where it is made so:

* :func:`text` -- any value to a ``str`` that every encoder accepts: lone surrogates (a
  forged ``"\\udcff"``) become ``\\udcff`` written out, so a UTF-8 writer never dies on it;
* :func:`line` -- that, plus no control characters (terminal escapes, carriage returns,
  bidirectional overrides, NUL): what a terminal or a CSV cell may show;
* :func:`redact` / :func:`redact_url` -- a database URL's password out of anything written;
* :func:`clean_html` -- HTML through an allow-list sanitizer (bleach, the library nbconvert's
  own ``SanitizeHTML`` uses): tags, attributes and URL schemes not on the list are removed;
* :func:`inert_tex` -- no TeX command that MathJax (or KaTeX) turns into a link, markup,
  styles or a script load (``\\href{javascript:...}``, ``\\class``, ``\\style``, ``\\require``,
  ...), nor one that defines macros (which could spell those from pieces);
* :func:`clean_markdown` -- a Markdown cell rendered as nbconvert renders it, sanitized, its
  TeX made inert, and frozen as one HTML block that Markdown passes through unchanged: what formgrader and the
  feedback page render from it is the sanitized HTML, whatever the learner wrote;
* :func:`clean_notebook` -- all of that over an autograded notebook (Markdown and raw cells,
  outputs, attachments, metadata), applied before formgrader or feedback reads it.

No import of the ``cudacourse`` package (nbgrader's process loads the grader by path).
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

# --- text for records, terminals and CSV ----------------------------------------------------


def text(value: Any) -> str:
    """``value`` as a str with no lone surrogate (each becomes its ``\\udcXX`` spelling)."""
    s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _visible(ch: str) -> str:
    if ch in "\t":
        return " "
    cat = unicodedata.category(ch)
    # Cc: C0/C1 controls (ESC starts terminal sequences, CR overwrites a line); Cf: format
    # characters such as U+202E (right-to-left override) that reorder what is shown;
    # Zl/Zp: line and paragraph separators.
    if cat in ("Cc", "Cf", "Zl", "Zp", "Cs"):
        return f"\\u{ord(ch):04x}" if ord(ch) > 0xFF else f"\\x{ord(ch):02x}"
    return ch


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e"
                     r"\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
                     r"\U000110bd\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001-"
                     r"\U000e007f\ud800-\udfff]")


def line(value: Any, keep_newlines: bool = False) -> str:
    """``value`` for a terminal or a CSV cell: no control or format characters (newlines
    become `` | `` unless ``keep_newlines``), no lone surrogates."""
    s = value if isinstance(value, str) else str(value)
    if keep_newlines:
        return "\n".join(_UNSAFE.sub(lambda m: _visible(m.group()), part)
                         for part in s.split("\n"))
    s = s.replace("\r\n", "\n").replace("\n", " | ")
    return _UNSAFE.sub(lambda m: _visible(m.group()), s)


# A cell a spreadsheet evaluates starts with one of OWASP's signs ("CSV Injection"), or
# their full-width forms; a plain decimal (-0.5, 10) is read as a number, never a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def csv_cell(value: Any) -> str:
    """A CSV field a spreadsheet shows as text: one clean line, and never read as a formula
    (a leading ``'`` where it starts, perhaps after spaces, with a formula's sign)."""
    raw = value if isinstance(value, str) else str(value)
    if _DECIMAL.fullmatch(raw):
        return raw
    if raw[:1] in FORMULA_START:
        return "'" + line(raw)
    s = line(raw)
    return "'" + s if s.lstrip()[:1] in FORMULA_START else s


def deep(value: Any, fn: Any = text) -> Any:
    """``fn`` over every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {deep(k, fn) if isinstance(k, str) else k: deep(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [deep(v, fn) for v in value]
    return value


# --- secrets ----------------------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*:)(?P<pw>[^@\s]+)@")


def redact_url(url: str | None) -> str | None:
    """A database URL with its password replaced by ``***``."""
    if not url:
        return url
    return _URL_PASSWORD.sub(lambda m: m.group("head") + "***@", url)


def secrets_of(*urls: str | None) -> list[str]:
    """The passwords in ``urls`` (raw and percent-decoded), to remove from any text."""
    from urllib.parse import unquote

    out: list[str] = []
    for url in urls:
        for m in _URL_PASSWORD.finditer(url or ""):
            pw = m.group("pw")
            out += [pw, unquote(pw)]
    return sorted({s for s in out if len(s) >= 3}, key=len, reverse=True)


def redact(value: Any, secrets: list[str]) -> Any:
    """Every URL password and every string of ``secrets`` out of a JSON-like value."""
    def one(s: str) -> str:
        s = _URL_PASSWORD.sub(lambda m: m.group("head") + "***@", s)
        for secret in secrets:
            s = s.replace(secret, "***")
        return s
    return deep(value, one)


# --- HTML ---------------------------------------------------------------------------------

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt",
    "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p",
    "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
})
ATTRIBUTES = {
    "a": ["href", "title"], "img": ["src", "alt", "title", "width", "height"],
    "td": ["align", "colspan", "rowspan"], "th": ["align", "colspan", "rowspan"],
    "ol": ["start"], "abbr": ["title"], "code": ["class"], "pre": ["class"],
    "span": ["class"], "div": ["class"],
}
PROTOCOLS = frozenset({"http", "https", "mailto"})
_IMAGE_DATA = re.compile(r"^data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*$")


def _attribute_ok(tag: str, name: str, value: str) -> bool:
    if name not in ATTRIBUTES.get(tag, ()):
        return False
    if name in ("href", "src"):
        v = value.strip()
        if tag == "img":
            # an inline PNG/JPEG/GIF only: an image, never a document or a script, and no
            # request anywhere (a learner's src="x" or src="https://..." would make the
            # instructor's browser fetch it on every view: a beacon, or a GET with the
            # instructor's session). The image stays, inert, with its alt text.
            return _IMAGE_DATA.match(v) is not None
        scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):", v)
        if scheme:
            return scheme.group(1).lower() in PROTOCOLS
        return not v.startswith("//")  # relative links only within the page's own site
    if name == "class":  # highlighting classes, never something that looks like a hook
        return re.fullmatch(r"[A-Za-z0-9_\- ]{0,100}", value) is not None
    return True


# Markup sanitised per fragment, at most: html5lib (bleach's parser) is slow per character and
# superlinear in nesting; past this, the rest of a fragment is cut with a note, in linear time.
MAX_MARKUP = 100_000
# Open elements a fragment may nest: past this depth a start tag is shown as text (html5lib's
# work per token grows with the stack of open elements; no honest cell nests 100 deep).
MAX_DEPTH = 100
MAX_MARKDOWN = MAX_MARKUP // 4  # characters of one Markdown cell rendered (its HTML may be
# longer: `&` becomes `&amp;`); seven times the longest Markdown cell of the course's masters
_TAG_TOKEN = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)[^<>]*(>?)")
VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                       "meta", "param", "source", "track", "wbr"})


def cut_note(n: int) -> str:
    """The note that replaces what a budget cut (said in the text, not as markup)."""
    return f"\n[... {n} characters cut by the grader: too long to show]\n"


def _capped(s: str, cap: int = MAX_MARKUP) -> str:
    return s if len(s) <= cap else s[:cap] + cut_note(len(s) - cap)


def _bounded_nesting(s: str, depth: int = MAX_DEPTH) -> str:
    """``s`` with every start tag past ``depth`` unclosed elements made text (``&lt;``):
    one pass, counting open elements per name (an end tag closes one of its own name)."""
    open_by_name: dict[str, int] = {}
    total = 0
    out: list[str] = []
    at = 0
    for m in _TAG_TOKEN.finditer(s):
        name = m.group(2).lower()
        if m.group(1):  # an end tag
            if open_by_name.get(name):
                open_by_name[name] -= 1
                total -= 1
            continue
        if name in VOID_TAGS or m.group(0).endswith("/>"):
            continue
        if total >= depth:
            out += [s[at:m.start()], "&lt;"]
            at = m.start() + 1
            continue
        open_by_name[name] = open_by_name.get(name, 0) + 1
        total += 1
    out.append(s[at:])
    return "".join(out)


_DROPPED_BLOCK = re.compile(r"(?is)<(script|style|template|noscript)\b.*?(</\1\s*>|$)")


def clean_html(fragment: Any) -> str:
    """``fragment`` through the allow-list: disallowed tags are escaped as text (so the
    learner sees what they wrote), ``<script>``/``<style>`` content and comments are
    dropped, attributes and URL schemes not listed are removed. Linear in the fragment's
    length: at most :data:`MAX_MARKUP` characters are parsed (the rest is cut with a note)
    and at most :data:`MAX_DEPTH` elements nest."""
    import bleach

    s = text(fragment if isinstance(fragment, str) else
             "".join(fragment) if isinstance(fragment, list) else str(fragment))
    # Dropped with their content: what would otherwise show up as a wall of code
    s = _bounded_nesting(_capped(_DROPPED_BLOCK.sub("", s)))
    return bleach.clean(s, tags=TAGS, attributes=_attribute_ok, protocols=PROTOCOLS,
                        strip=False, strip_comments=True)


# --- TeX for MathJax ------------------------------------------------------------------------
# Formgrader's and feedback's pages run MathJax over the page's text: whatever sits between
# $...$, $$...$$, \(...\), \[...\] or in \begin{...} becomes MathJax's own markup, after the
# sanitizer. These commands make links (\href{javascript:...}, \url), set classes, ids, data
# attributes and styles (a fixed overlay over the grading form, \class{...} hooks), load
# extensions or fonts (\require, \unicode), add tooltips and toggles, or, in KaTeX, the same
# (\htmlClass, \htmlStyle, \includegraphics). The macro definitions are in the list because
# MathJax expands a macro as text: \def\h#1{\hre#1}\h{f} spells \href. nbconvert loads
# MathJax with its Safe extension, which filters some of these; this does not depend on it.
TEX_MARKUP = (
    "href", "url", "class", "style", "cssId", "data", "unicode", "require", r"html[A-Za-z]*",
    "mmlToken", "bbox", "toggle", "texttip", "tooltip", "mathtip", "setOptions",
    "includegraphics",
    "def", "gdef", "edef", "xdef", "let", "futurelet", "newcommand", "renewcommand",
    "providecommand", "newenvironment", "renewenvironment", "DeclareMathOperator",
    "Newextarrow", "global", "begingroup", "csname", "expandafter",
)
_TEX_COMMAND = re.compile(r"\\(?=(?:%s)(?![A-Za-z]))" % "|".join(TEX_MARKUP), re.I)
# FULLWIDTH REVERSE SOLIDUS: the reader still sees a backslash; TeX reads a plain character
INERT_BACKSLASH = "\uff3c"


def inert_text(value: str) -> str:
    """Plain text (not HTML) with each listed TeX command's backslash made a character."""
    return _TEX_COMMAND.sub(INERT_BACKSLASH, value)


# A tag as a browser starts one (``<`` then a letter, or ``</`` then a letter), up to the next
# ``<`` or ``>``: stopping at ``<`` too keeps the scan linear on a run of unclosed ``<``.
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def inert_tex(fragment: str) -> str:
    """Sanitized HTML whose text (what MathJax reads: character references decoded, across
    tags, since MathJax's math can span them) holds none of the commands of
    :data:`TEX_MARKUP`; tags are kept (their own text made inert too), text is re-escaped.
    One pass over the fragment: linear in its length, whatever its shape."""
    kinds: list[bool] = []  # True: a tag (kept), False: text (decoded)
    pieces: list[str] = []
    at = 0
    for m in _HTML_TAG.finditer(fragment):
        if m.start() > at:
            kinds.append(False)
            pieces.append(html.unescape(fragment[at:m.start()]))
        kinds.append(True)
        pieces.append(_TEX_COMMAND.sub(INERT_BACKSLASH, m.group(0)))
        at = m.end()
    if at < len(fragment):
        kinds.append(False)
        pieces.append(html.unescape(fragment[at:]))
    texts = [i for i, k in enumerate(kinds) if not k]
    joined = "".join(pieces[i] for i in texts)
    hits = [m.start() for m in _TEX_COMMAND.finditer(joined)]  # in order: one merge below
    if hits:
        h, start = 0, 0
        for i in texts:
            piece = pieces[i]
            end = start + len(piece)
            if h < len(hits) and hits[h] < end:
                chars = list(piece)
                while h < len(hits) and hits[h] < end:
                    chars[hits[h] - start] = INERT_BACKSLASH
                    h += 1
                pieces[i] = "".join(chars)
            start = end
    return "".join(p if k else html.escape(p, quote=False) for k, p in zip(kinds, pieces))


def _markdown_to_html(source: str) -> str:
    """Rendered as nbgrader's formgrade and feedback templates render a Markdown cell."""
    from nbconvert.filters.markdown import markdown2html

    return markdown2html(source)


FROZEN_CLASS = "cudacourse-sanitized"


def clean_markdown(source: Any) -> str:
    """A Markdown cell's source replaced by its sanitized rendering, as one line of HTML:
    Markdown passes an HTML block that is one line through verbatim, so nothing is
    interpreted again (newlines become ``&#10;``, which HTML reads as the same newline)."""
    s = text(source if isinstance(source, str) else
             "".join(source) if isinstance(source, list) else str(source))
    # A cell is cut at MAX_MARKDOWN before rendering; one frozen already (its rendering, up
    # to a few times longer than its source) is sanitized again whole, up to MAX_MARKUP.
    s = _capped(s, MAX_MARKUP if s.startswith(f'<div class="{FROZEN_CLASS}">') else
                MAX_MARKDOWN)
    try:
        rendered = _markdown_to_html(s)
    except Exception:  # noqa: BLE001 - whatever defeats the renderer is shown as text
        rendered = f"<pre>{html.escape(s)}</pre>"
    safe = inert_tex(clean_html(rendered)).strip().replace("\r", "").replace("\n", "&#10;")
    wrapper = f'<div class="{FROZEN_CLASS}">'
    if safe.startswith(wrapper) and safe.endswith("</div>") and \
            safe.count(wrapper) == 1:  # cleaned already (feedback after autograde): as is
        return safe
    return f"{wrapper}{safe}</div>"


def markdown_text(value: Any) -> str:
    """Untrusted text inside Markdown the grader writes: no HTML, no Markdown syntax."""
    # quote=False: a quote is text in Markdown, and its entity (&#x27;) would lose its "#" to
    # the escape below and show literally in the feedback
    s = html.escape(inert_text(line(value)), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~>$])", r"\\\1", s)


# --- notebooks --------------------------------------------------------------------------

SAFE_OUTPUT_DATA = frozenset({"text/plain", "image/png", "image/jpeg"})


def clean_outputs(outputs: Any) -> list[dict[str, Any]]:
    """Outputs with only plain text, PNG/JPEG images and error text; HTML, JavaScript, SVG,
    Markdown, LaTeX and widget views are dropped (their text/plain stays). Their text holds no
    live TeX command either (:func:`inert_text`): MathJax skips ``<pre>`` today, a template
    or a configuration tomorrow may not."""
    clean: list[dict[str, Any]] = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "stream":
            clean.append({"output_type": "stream",
                          "name": "stderr" if out.get("name") == "stderr" else "stdout",
                          "text": _inert(out.get("text", ""))})
        elif kind == "error":
            tb = out.get("traceback")
            clean.append({"output_type": "error", "ename": _inert(out.get("ename", "")),
                          "evalue": _inert(out.get("evalue", "")),
                          "traceback": [_inert(t) for t in tb]
                          if isinstance(tb, list) else []})
        elif kind in ("display_data", "execute_result"):
            data = out.get("data") if isinstance(out.get("data"), dict) else {}
            keep = {k: (_inert(v) if k == "text/plain" else v)
                    for k, v in data.items() if k in SAFE_OUTPUT_DATA and
                    (isinstance(v, str) or (k == "text/plain" and isinstance(v, list)))}
            item: dict[str, Any] = {"output_type": kind, "data": keep, "metadata": {}}
            if kind == "execute_result":
                count = out.get("execution_count")
                item["execution_count"] = count if isinstance(count, int) and \
                    not isinstance(count, bool) else None
            clean.append(item)
    return clean


def _inert(v: Any) -> str:
    return inert_text(text(_joined(v)))


def _joined(v: Any) -> str:
    if isinstance(v, list):
        return "".join(x if isinstance(x, str) else str(x) for x in v)
    return v if isinstance(v, str) else str(v)


def clean_notebook(nb: Any) -> Any:
    """In place: every cell of ``nb`` safe to render in the instructor's and the learner's
    browser. Markdown cells become their sanitized rendering, raw cells are escaped text,
    outputs keep text and images only, attachments other than PNG/JPEG/GIF are dropped, and
    no cell metadata but nbgrader's, cudacourse's and tags of plain words survives."""
    from nbformat import from_dict

    for cell in nb.cells:
        kind = cell.get("cell_type")
        if kind == "markdown":
            cell["source"] = clean_markdown(cell.get("source", ""))
            atts = cell.get("attachments")
            if isinstance(atts, dict):
                cell["attachments"] = from_dict({
                    text(name): {m: d for m, d in (b.items() if isinstance(b, dict) else [])
                                 if m in ("image/png", "image/jpeg", "image/gif")
                                 and isinstance(d, str)}
                    for name, b in atts.items()})
        elif kind == "raw":
            cell["source"] = html.escape(inert_text(text(_joined(cell.get("source", "")))))
            cell.get("metadata", {}).pop("format", None)
            cell.get("metadata", {}).pop("raw_mimetype", None)
        elif kind == "code":
            cell["source"] = text(_joined(cell.get("source", "")))
            cell["outputs"] = [from_dict(o) for o in clean_outputs(cell.get("outputs", []))]
        md = cell.get("metadata", {})
        grading = md.get("nbgrader") if isinstance(md, dict) else None
        if isinstance(grading, dict) and not (isinstance(grading.get("grade_id"), str) and
                                              _GRADE_ID.fullmatch(grading["grade_id"])):
            grading.pop("grade_id", None)  # templates put it into id="..." attributes
        if isinstance(md, dict):
            tags = md.get("tags")
            for key in list(md):
                if key not in ("nbgrader", "cudacourse", "tags", "deletable", "editable",
                               "collapsed", "scrolled", "jupyter"):
                    md.pop(key)
            if tags is not None:
                md["tags"] = [t for t in tags if isinstance(t, str) and
                              re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", t)] \
                    if isinstance(tags, list) else []
    meta = nb.get("metadata", {})
    if isinstance(meta, dict):  # "widgets" would load a widget renderer; "title" is shown
        for key in list(meta):
            if key not in ("kernelspec", "language_info"):
                meta.pop(key)
        for key in ("kernelspec", "language_info"):
            if key in meta:
                meta[key] = deep(meta[key], line) if isinstance(meta[key], dict) else {}
    return nb


_GRADE_ID = re.compile(r"[A-Za-z0-9_\-]{1,200}")


__all__ = ["text", "line", "csv_cell", "deep", "redact", "redact_url", "secrets_of",
           "clean_html", "inert_tex", "inert_text", "clean_markdown", "markdown_text", "clean_outputs", "clean_notebook"]
