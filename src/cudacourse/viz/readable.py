"""Does a figure read at a glance? What a reader trips over, found from the drawn figure.

:func:`problems` draws the figure (Agg) and asks matplotlib where each piece of text landed
(``get_window_extent``): every axes holding data has a title (its own or the figure's) and
labelled axes; no two tick labels of one axis overlap; a legend inside the axes covers no
point and no bar; bars are compared on a linear axis (a log axis only where the values span
more than a factor of 50, and then its label says so); and no bar is too short to see
unless its value is written beside it. ``tests/test_plots.py`` runs it on every plot of the
course, in both languages.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

MIN_BAR_PX = 2.0  # a bar shorter than this reads as no bar at all
LOG_SAYS = re.compile(r"(?i)\blog\b|対数")


def _texts_overlap(texts: list[Any], renderer: Any) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts
             if t.get_visible() and t.get_text().strip()]
    out = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            # shrink by a pixel: touching boxes are fine
            if (min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1
                    and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1):
                out.append((a, b))
    return out


def _tick_labels(axis: Any, ax: Any) -> list[Any]:
    """The tick labels drawn: inside the view limits, visible, not empty."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for tick in axis.get_major_ticks():
        label = tick.label1
        if label.get_visible() and label.get_text().strip() and lo <= tick.get_loc() <= hi:
            out.append(label)
    return out


def _is_colorbar(ax: Any) -> bool:
    return ax.get_label() == "<colorbar>" or hasattr(ax, "_colorbar")


def _has_data(ax: Any) -> bool:
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.containers)


def _data_points_px(ax: Any) -> np.ndarray:
    pts = [line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
           for line in ax.lines if line.get_visible() and len(line.get_xdata())]
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def _legend_problems(ax: Any, renderer: Any, name: str) -> list[str]:
    legend = ax.get_legend()
    if legend is None or not legend.get_visible():
        return []
    box = legend.get_window_extent(renderer)
    frame = ax.get_window_extent(renderer)
    if (box.x1 <= frame.x0 + 1 or box.x0 >= frame.x1 - 1 or box.y1 <= frame.y0 + 1
            or box.y0 >= frame.y1 - 1):
        return []  # beside the axes
    out = []
    pts = _data_points_px(ax)
    for twin in ax.figure.axes:  # a twin axes' points lie under this legend as well
        if twin is not ax and twin.bbox.bounds == ax.bbox.bounds:
            pts = np.concatenate([pts, _data_points_px(twin)])
    inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0)
              & (pts[:, 1] < box.y1)) if len(pts) else np.zeros(0, bool)
    if inside.any():
        out.append(f"{name}: the legend covers {int(inside.sum())} data point(s)")
    for bar in (p for c in ax.containers for p in getattr(c, "patches", [])):
        bb = bar.get_window_extent(renderer)
        if (min(bb.x1, box.x1) - max(bb.x0, box.x0) > 1
                and min(bb.y1, box.y1) - max(bb.y0, box.y0) > 1):
            out.append(f"{name}: the legend covers a bar")
            break
    return out


def _bar_problems(ax: Any, renderer: Any, name: str) -> list[str]:
    bars = [p for c in ax.containers for p in getattr(c, "patches", [])]
    if not bars:
        return []
    out = []
    horizontal = getattr(ax.containers[0], "orientation", "vertical") == "horizontal"
    values = np.array([b.get_width() if horizontal else b.get_height() for b in bars])
    axis = ax.xaxis if horizontal else ax.yaxis
    label = (ax.get_xlabel() if horizontal else ax.get_ylabel())
    if axis.get_scale() == "log":
        # reference lines drawn across the bars (a ceiling) count in the span shown
        refs = [float(line.get_xdata()[0] if horizontal else line.get_ydata()[0])
                for line in ax.lines
                if len(set(np.atleast_1d(line.get_xdata() if horizontal
                                         else line.get_ydata()))) == 1]
        positive = np.array([v for v in [*values, *refs] if v > 0])
        span = positive.max() / positive.min() if positive.size else 1.0
        if span <= 50:
            out.append(f"{name}: bars on a log axis for values within a factor of {span:.1f}: "
                       "lengths no longer compare (use a linear axis)")
        elif not LOG_SAYS.search(label):
            out.append(f"{name}: bars on a log axis whose label does not say so")
        return out
    texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
    for b, v in zip(bars, values):
        if v == 0:
            continue
        bb = b.get_window_extent(renderer)
        length = bb.width if horizontal else bb.height
        if length < MIN_BAR_PX and len(texts) < len(bars):
            out.append(f"{name}: a bar of {v:.3g} is {length:.1f} px long, with no value "
                       "written beside it: it reads as empty")
            break
    return out


def _symbol_only(label: str) -> bool:
    """A label that is only a symbol ("l", "m"): not a label a reader can use."""
    return bool(re.fullmatch(r"\s*[A-Za-z]\s*", label))


def problems(fig: Any) -> list[str]:
    """What keeps ``fig`` from reading at a glance (an empty list: nothing)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    suptitle = fig._suptitle.get_text().strip() if fig._suptitle is not None else ""
    out = []
    axes = [ax for ax in fig.axes if not _is_colorbar(ax) and ax.get_visible()]
    for k, ax in enumerate(axes):
        name = ax.get_title() or suptitle or f"axes {k}"
        twin = any(o is not ax and o.bbox.bounds == ax.bbox.bounds and fig.axes.index(o)
                   < fig.axes.index(ax) for o in axes)
        if not _has_data(ax) and not twin:
            continue
        if not twin and not (ax.get_title().strip() or suptitle
                             or any(o.get_title().strip() for o in axes
                                    if o.bbox.bounds == ax.bbox.bounds)):
            out.append(f"{name}: no title")
        for axis, get in ((ax.xaxis, ax.get_xlabel), (ax.yaxis, ax.get_ylabel)):
            ticks = _tick_labels(axis, ax)
            if twin and axis is ax.xaxis:
                continue  # a twin shares its x axis with the axes below it
            if ticks and not get().strip():
                out.append(f"{name}: the {axis.axis_name} axis has no label")
            elif ticks and _symbol_only(get()):
                out.append(f"{name}: the {axis.axis_name} axis is labelled only {get()!r}")
            for a, b in _texts_overlap(ticks, renderer):
                out.append(f"{name}: {axis.axis_name} tick labels {a!r} and {b!r} overlap")
                break
        out += _legend_problems(ax, renderer, name)
        out += _bar_problems(ax, renderer, name)
    return out


def texts(fig: Any) -> list[str]:
    """Every piece of text a reader sees in ``fig``: titles, labels, tick labels, legends and
    annotations (for the check that a Japanese figure has no English sentence)."""
    fig.canvas.draw()
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
    return [t for t in out if t and t.strip()]
