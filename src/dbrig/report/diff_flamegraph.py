"""Differential flame graphs (Brendan Gregg's idea): the candidate's CPU profile drawn
as a flame graph, each frame coloured by how its share of the samples moved against
the baseline's: red where it grew, blue where it shrank, white-grey where it held; the
deeper the colour, the larger the change.

Widths are the candidate's (each side normalised to its own samples, so runs of
different length compare). The colour is the change of the frame's width, its total
share (``flamegraph.pl`` colours by a frame's own samples): a grown function turns the
path that leads to it red too, so the eye follows it down to the root. A function the
candidate no longer runs has no width and is not drawn: the tables beside the graph
list what shrank. Saturation is the change over the largest change of the graph (but
at least :data:`FULL_PP` percentage points, so a graph of noise stays pale).

The SVG stands alone (an ``.svg`` file a browser opens) and inline in a page: its
"Search" link asks for a text, outlines the frames whose name holds it and says which
share of the candidate's samples they cover, by a script inside the SVG. No network.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbrig.analysis.explain import frame_shares
from dbrig.report.flamegraph import (
    FRAME_PX,
    MARK_FRAMES_SCRIPT,
    WIDTH_PX,
    Placed,
    frame_svg,
    placed,
    svg_text,
    tree,
    tree_depth,
)

FULL_PP = 1.0  # a change of at least this many points may be drawn at full colour
HEADER_PX = 36
NEUTRAL = "rgb(225,225,225)"

SEARCH_SCRIPT = (
    MARK_FRAMES_SCRIPT
    + """
function dbrigDiffSearch(link) {
  var svg = link.ownerSVGElement || link.closest("svg");
  var asked = svg.getAttribute("data-term") || "";
  var term = window.prompt("Outline the frames whose name holds:", asked);
  if (term === null) { return; }
  svg.setAttribute("data-term", term);
  var text = term.toLowerCase(), total = Number(svg.getAttribute("data-samples")) || 1;
  var share = (100 * dbrigMarkFrames(svg, text) / total).toFixed(1);
  svg.querySelector(".found").textContent = text === "" ? "" :
    "\\u201c" + term + "\\u201d: " + share + " % of the candidate's samples";
}
"""
)

# Scoped to the graph: a <style> inside an inline SVG applies to the whole HTML page.
_STYLE = (
    "svg.diff text{font:11px monospace}svg.diff .head{font:13px sans-serif}"
    "svg.diff .link{fill:#1565c0;cursor:pointer}svg.diff .fr.hit rect{stroke:#000;stroke-width:1.5}"
)


def diff_colour(change_pp: float, scale_pp: float) -> str:
    """Red for a share that grew, blue for one that shrank, by ``change / scale``."""
    if change_pp == 0 or scale_pp <= 0:
        return NEUTRAL
    depth = min(1.0, abs(change_pp) / scale_pp)
    fade = round(225 - 190 * depth)
    return f"rgb(255,{fade},{fade})" if change_pp > 0 else f"rgb({fade},{fade},255)"


def render_diff_svg(
    base: Mapping[str, int],
    cand: Mapping[str, int],
    graph_id: str,
    title: str,
    *,
    standalone: bool = False,
) -> str:
    """The candidate's stacks coloured by their change against ``base``, as an ``<svg>``
    (``standalone``: with an XML prolog, as an ``.svg`` file)."""
    root = tree(cand)
    total = root.count
    before, after = frame_shares(base), frame_shares(cand)
    changes = {path: 100 * (share - before.get(path, 0.0)) for path, share in after.items()}
    scale = max([FULL_PP, *(abs(c) for c in changes.values())])
    height = HEADER_PX + tree_depth(root) * FRAME_PX + 4
    parts = [
        '<?xml version="1.0" encoding="utf-8"?>\n' if standalone else "",
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{svg_text(graph_id)}" '
        f'class="flamegraph diff" width="{WIDTH_PX}" height="{height}" '
        f'viewBox="0 0 {WIDTH_PX} {height}" data-samples="{total}" role="img" '
        f'aria-label="{svg_text(title)}">',
        f"<style>{_STYLE}</style>",
        f"<script><![CDATA[{SEARCH_SCRIPT}]]></script>",
        *_header(title, scale),
    ]
    if total:
        shares = (before, after, changes, scale)
        parts += (_frame(frame, shares) for frame in placed(root, height))
    parts.append("</svg>\n" if standalone else "</svg>")
    return "".join(parts)


def _header(title: str, scale: float) -> list[str]:
    legend = (
        f"red: a larger share than in the baseline, blue: smaller; full colour at "
        f"{scale:.1f} points. Widths: the candidate's samples."
    )
    return [
        f'<text class="head" x="4" y="14">{svg_text(title)}</text>',
        f'<text class="head" x="4" y="30" fill="#555">{svg_text(legend)}</text>',
        f'<text class="head link" x="{WIDTH_PX - 180}" y="14" '
        'onclick="dbrigDiffSearch(this)">Search</text>',
        f'<text class="head found" x="{WIDTH_PX - 180}" y="30"></text>',
    ]


Shares = tuple[dict[str, float], dict[str, float], dict[str, float], float]


def _frame(frame: Placed, shares: Shares) -> str:
    before, after, changes, scale = shares
    path, count = frame.path, frame.node.count
    if path:  # a frame of the stacks ("all", the root, is 100 % on both sides)
        cand, base, change = 100 * after[path], 100 * before.get(path, 0.0), changes[path]
    else:
        cand, base, change = 100.0, 100.0, 0.0
    tip = (
        f"{svg_text(frame.node.name)}: {cand:.2f} % of the candidate's samples ({count}), "
        f"{base:.2f} % of the baseline's: {change:+.2f} points"
    )
    return frame_svg(frame, tip, diff_colour(change, scale), f' data-d="{change:.3f}"')
