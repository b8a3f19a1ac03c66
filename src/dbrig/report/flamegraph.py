"""Flame graphs of the cells' CPU profiles, drawn here as inline SVG (no network, no
outside tool), and the report's "CPU profiles" section.

A flame graph stacks each function above its caller: the bottom bar is every sample
("all"), the one above it the process; each bar's width is its share of the samples
(it and what it called), and siblings are sorted by name, so the x axis is not time.
The widest bars near the top are where the CPU went. Frames narrower than
:data:`MIN_WIDTH_PX` are left out (their samples still count in their callers'
widths). A search box above each graph outlines the frames whose name holds the text
and says which share of the samples they cover (a small inline script: the page's
only one).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from dbrig.analysis.profile import FunctionShare, merge, parse_folded, top_by_total, top_functions
from dbrig.report.data import RunData, read_trial

FOLDED = "profile.folded"  # written by the trial (sampling/profile.py)
WIDTH_PX = 1180
FRAME_PX = 16
MIN_WIDTH_PX = 0.3
CHAR_PX = 6.6  # of the 11 px monospace font, for trimming names to their bar
TOP_N = 12
KERNEL_MARK = " [k]"
UNKNOWN = "[unknown]"
WARNING_PREFIX = "profile:"  # the trials' warnings about their profiles (sampling/profile.py)
# XML 1.0 forbids these characters even as references: a frame name holding one (perf
# prints what the binary's symbols hold) would make a standalone .svg unreadable.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def svg_text(text: str) -> str:
    """``text`` escaped for SVG, its control characters left out."""
    return html.escape(_CONTROL.sub("", text))


@dataclass
class Node:
    name: str
    count: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def tree(stacks: Mapping[str, int]) -> Node:
    root = Node("all")
    for stack, count in stacks.items():
        node = root
        node.count += count
        for name in stack.split(";"):
            node = node.children.setdefault(name, Node(name))
            node.count += count
    return root


def tree_depth(node: Node) -> int:
    return 1 + max((tree_depth(child) for child in node.children.values()), default=0)


def frame_colour(name: str) -> str:
    """Warm colours for the program's frames, orange-brown for the kernel's, grey for
    frames with no name; the shade comes from the name, so a function keeps its colour
    across graphs."""
    shade = hashlib.md5(name.encode(), usedforsecurity=False).digest()[0] / 255
    if name.startswith(UNKNOWN):
        return f"rgb({int(170 + 30 * shade)},{int(170 + 30 * shade)},{int(170 + 30 * shade)})"
    if name.endswith(KERNEL_MARK):
        return f"rgb({int(200 + 40 * shade)},{int(130 + 40 * shade)},{int(60 + 30 * shade)})"
    return f"rgb({int(225 + 30 * shade)},{int(80 + 130 * shade)},{int(40 + 30 * shade)})"


def render_svg(stacks: Mapping[str, int], graph_id: str, title: str = "") -> str:
    """One flame graph as an ``<svg>`` element (empty stacks: an empty graph)."""
    root = tree(stacks)
    total = root.count
    depth = tree_depth(root)
    height = depth * FRAME_PX + 4
    parts = [
        f'<svg id="{svg_text(graph_id)}" class="flamegraph" '
        f'width="{WIDTH_PX}" height="{height}" viewBox="0 0 {WIDTH_PX} {height}" '
        f'data-samples="{total}" role="img" aria-label="{svg_text(title or "flame graph")}">'
    ]
    if total:
        parts += (_frame(frame, total) for frame in placed(root, height))
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Placed:
    """A frame where the graph draws it: ``path`` its stack from the first frame under
    the root ("" for the root), ``y`` its top, bottom-up from ``height``."""

    node: Node
    path: str
    x: float
    y: int
    width: float


def placed(root: Node, height: int) -> Iterator[Placed]:
    """Every frame at least :data:`MIN_WIDTH_PX` wide, callers before callees, children
    left to right in name order, widths in proportion to the root's samples."""
    total = root.count

    def walk(node: Node, path: str, x: float, level: int) -> Iterator[Placed]:
        width = WIDTH_PX * node.count / total
        if width < MIN_WIDTH_PX:
            return
        yield Placed(node, path, x, height - (level + 1) * FRAME_PX, width)
        child_x = x
        for name in sorted(node.children):
            child = node.children[name]
            yield from walk(child, f"{path};{name}" if path else name, child_x, level + 1)
            child_x += WIDTH_PX * child.count / total

    yield from walk(root, "", 0.0, 0)


def frame_svg(frame: Placed, tip: str, fill: str, data: str = "") -> str:
    """One frame: its bar, the name that fits it, ``tip`` on hover (escaped already);
    ``data``: more attributes of its group."""
    node, x, y, width = frame.node, frame.x, frame.y, frame.width
    label = fit_label(node.name, width)
    text = f'<text x="{x + 3:.1f}" y="{y + FRAME_PX - 4}">{svg_text(label)}</text>' if label else ""
    return (
        f'<g class="fr" data-n="{svg_text(node.name)}" data-c="{node.count}"{data}>'
        f"<title>{tip}</title>"
        f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{FRAME_PX - 1}" rx="2" '
        f'fill="{fill}"/>{text}</g>'
    )


def _frame(frame: Placed, total: int) -> str:
    name, count = svg_text(frame.node.name), frame.node.count
    tip = f"{name} ({count} samples, {100 * count / total:.2f} %)"
    return frame_svg(frame, tip, frame_colour(frame.node.name))


def fit_label(name: str, width: float) -> str:
    """As much of ``name`` as fits its bar ("" under three characters)."""
    chars = int((width - 6) / CHAR_PX)
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[: chars - 2] + ".."


# Outlines the frames whose name holds ``text`` and counts their samples (a frame
# inside another match is not counted twice: only the outermost match counts). Both
# graphs' searches use it, so it reads attributes, not ``dataset``: the differential
# graph stands alone as an .svg file.
MARK_FRAMES_SCRIPT = """
function dbrigMarkFrames(svg, text) {
  var found = 0, spans = [];
  svg.querySelectorAll("g.fr").forEach(function (g) {
    var hit = text !== "" && g.getAttribute("data-n").toLowerCase().indexOf(text) >= 0;
    g.classList.toggle("hit", hit);
    if (!hit) { return; }
    var r = g.querySelector("rect"), x = Number(r.getAttribute("x"));
    var w = Number(r.getAttribute("width"));
    if (spans.some(function (s) { return x >= s[0] - 0.05 && x + w <= s[1] + 0.05; })) { return; }
    spans.push([x, x + w]);
    found += Number(g.getAttribute("data-c"));
  });
  return found;
}
"""

SEARCH_SCRIPT = (
    MARK_FRAMES_SCRIPT
    + """
function dbrigFlameSearch(box) {
  var svg = document.getElementById(box.dataset.graph);
  var out = document.getElementById(box.dataset.graph + "-found");
  var text = box.value.toLowerCase();
  var total = Number(svg.dataset.samples) || 1;
  var share = (100 * dbrigMarkFrames(svg, text) / total).toFixed(1);
  out.textContent = text === "" ? "" : "matched " + share + " % of the samples";
}
"""
)


@dataclass(frozen=True)
class CellProfile:
    cell: str
    label: str
    trials: int  # with a profile
    samples: int
    svg: Markup
    by_self: list[FunctionShare]
    by_total: list[FunctionShare]
    notes: list[str]  # its trials' profile warnings, each once

    @property
    def rows(self) -> list[tuple[FunctionShare | None, FunctionShare | None]]:
        """The two top lists side by side, as the table shows them."""
        return list(itertools.zip_longest(self.by_self, self.by_total))


def cell_profile(cell: str, label: str, folders: list[Path]) -> CellProfile | None:
    """A cell's trials' profiles merged into one graph and two tables (None: no trial of
    the cell has a profile.folded)."""
    files = [folder / FOLDED for folder in folders if (folder / FOLDED).exists()]
    if not files:
        return None
    stacks = merge(parse_folded(f.read_text(errors="replace")) for f in files)
    return CellProfile(
        cell=cell,
        label=label,
        trials=len(files),
        samples=sum(stacks.values()),
        svg=Markup(render_svg(stacks, f"flame-{cell}", f"CPU profile of cell {cell}")),
        by_self=top_functions(stacks, TOP_N),
        by_total=top_by_total(stacks, TOP_N),
        notes=_notes(folders),
    )


def _notes(folders: list[Path]) -> list[str]:
    """The trials' warnings about their profiles (no samples, perf could not attach,
    unnamed functions), each text once, with the trials that gave it."""
    by_text: dict[str, list[str]] = {}
    for folder in folders:
        if (record := read_trial(folder)) is None:
            continue
        for line in record.warnings:
            if line.startswith(WARNING_PREFIX):
                text = line.removeprefix(WARNING_PREFIX).strip()
                by_text.setdefault(text, []).append(record.trial)
    return [f"{', '.join(trials)}: {text}" for text, trials in by_text.items()]


def profiles_section(data: RunData) -> dict[str, Any]:
    """The report's "CPU profiles" context: one entry per cell with a profile, in the
    matrix's order."""
    labels = dict(zip(data.cells["cell"].astype(str), data.cells["label"], strict=True))
    by_cell = data.trials_by_cell
    cells = []
    for cell, label in labels.items():
        trials = by_cell.get(cell, [])
        found = cell_profile(cell, str(label), [data.trial_dir(t) for t in trials])
        if found is not None:
            cells.append(found)
    return {"cells": cells, "script": Markup(SEARCH_SCRIPT) if cells else ""}
