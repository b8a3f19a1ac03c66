"""What every chart of the report shares: the style, figures of a fixed layout, PNG bytes.

Figures are built with matplotlib's object API (``Figure``, never pyplot) and
rendered by the Agg canvas: no display, no pyplot registry of open figures.
Every axis names its unit. Time axes are seconds since the start of the
measured window, so the warm-up is negative and shaded grey.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure

DPI = 100
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.titlelocation": "left",
    "axes.titley": 1.0,  # a fixed title position: finding one measures every tick label
    "axes.titlepad": 5.0,
    "axes.labelsize": 8.5,
    "axes.labelcolor": "#333333",
    "axes.edgecolor": "#999999",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.prop_cycle": matplotlib.cycler(color=list(PALETTE)),
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "xtick.color": "#555555",
    "ytick.color": "#555555",
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.3,
    "lines.markersize": 4,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}
WARMUP_SHADE = {"color": "#000000", "alpha": 0.07, "linewidth": 0}
TIME_LABEL = "time since measured window start (s)"
# A cell figure's half-width panel is ~430 px: 3600 one-second steps in it are a smear of
# noise. Longer series are drawn as this many bucket means inside a min..max band.
MAX_PLOT_POINTS = 300


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG at :data:`DPI`.

    zlib level 1, not Pillow's 6: the same pixels in files about 10 % larger, for a
    third of the encoding time (a sixth of the drawing time on large reports).
    """
    buffer = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        _ReusedRendererCanvas(fig).print_png(buffer, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


class _ReusedRendererCanvas(FigureCanvasAgg):
    """An Agg canvas that draws on one renderer per figure size, kept across figures.

    A report draws many figures of one size (every cell figure, every scaling chart).
    A new renderer per figure allocates and clears a new pixel buffer and starts with
    an empty text-metrics cache (matplotlib keys it by renderer); reusing one measures
    each tick label, title and legend entry once: about 8 % of a cell figure's CPU.
    A renderer is one buffer: figures are drawn from one thread at a time (the report
    draws from its main thread; its second core is a forked process).
    """

    _renderers: ClassVar[dict[tuple[float, float, float], RendererAgg]] = {}
    _KEEP = 4  # sizes: a renderer of a cell figure holds a 6 MiB buffer

    def get_renderer(self) -> RendererAgg:
        width, height = self.get_width_height(physical=True)
        key = (width, height, self.figure.dpi)
        renderers = self._renderers
        renderer = renderers.pop(key, None)  # re-inserted last: the newest
        if renderer is None:
            renderer = RendererAgg(width, height, self.figure.dpi)
            while len(renderers) >= self._KEEP:
                del renderers[next(iter(renderers))]
        renderers[key] = renderer
        return renderer


# A renderer kept from before a fork holds parsed mathtext (log-axis labels) whose
# fonts read their glyphs through the parent's open font file: one file offset shared
# by both processes, so concurrent reads get each other's bytes ("FT_Load_Glyph
# failed: invalid outline"). A forked child starts with renderers of its own, as
# matplotlib's own font cache does.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ReusedRendererCanvas._renderers.clear)


def new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), dpi=DPI)


def set_margins(
    fig: Figure,
    *,
    left: float,
    right: float,
    top: float,
    bottom: float,
    wspace: float = 0.0,
    hspace: float = 0.0,
) -> None:
    """Fixed margins in inches (wspace/hspace as fractions of an axes).

    A fixed layout, not matplotlib's constrained one: that measures every tick
    label of every axes and took most of the time on large runs.
    """
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wspace,
        hspace=hspace,
    )


# --------------------------------------------------------------------------- factor charts


def palette_colors(n: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


def shade_warmup(ax: Axes, warmup_s: float) -> None:
    if warmup_s > 0:
        ax.axvspan(-warmup_s, 0, **WARMUP_SHADE)


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Marker:
    """An event on the measured window's clock (a fault's signal, the server back), drawn as
    a vertical line on every time axis of a figure."""

    t_s: float
    label: str


MARKER_STYLE = {"color": "#6a1b9a", "linewidth": 0.9, "linestyle": (0, (4, 2)), "alpha": 0.85}
_MARKER_GAP = 0.04  # labels closer than this share of the x axis are joined into one


def mark_events(axes: Sequence[Axes], markers: Sequence[Marker], *, labelled: bool) -> None:
    """A line per event on each of ``axes`` (after their x limits are set), its label at the
    top of the first one; events too close to read apart get one label, joined by " / "."""
    if not markers or not axes:
        return
    for ax in axes:
        for marker in markers:
            ax.axvline(marker.t_s, **MARKER_STYLE)
    if not labelled:
        return
    first = axes[0]
    low, high = first.get_xlim()
    gap = _MARKER_GAP * (high - low)
    groups: list[list[Marker]] = []
    for marker in sorted(markers, key=lambda m: m.t_s):
        if groups and marker.t_s - groups[-1][0].t_s < gap:
            groups[-1].append(marker)
        else:
            groups.append([marker])
    for group in groups:
        text = " / ".join(dict.fromkeys(m.label for m in group))
        first.annotate(
            text,
            xy=(group[0].t_s, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            rotation=90,
            ha="left",
            va="top",
            fontsize=6.5,
            color=MARKER_STYLE["color"],
        )
