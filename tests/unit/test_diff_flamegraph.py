"""The differential flame graph (report/diff_flamegraph.py): the candidate's stacks,
red where a frame's share grew against the baseline, blue where it shrank."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

from dbrig.report.diff_flamegraph import NEUTRAL, diff_colour, render_diff_svg
from dbrig.report.flamegraph import render_svg

SVG = "{http://www.w3.org/2000/svg}"
BASE = Counter({"mariadbd;do_command;filesort;memcmp": 10, "mariadbd;do_command;net_read": 90})
CAND = Counter({"mariadbd;do_command;filesort;memcmp": 60, "mariadbd;do_command;net_read": 40})


def _frames(svg: str) -> dict[str, tuple[str, float]]:
    """frame name -> (fill, change in points), from the parsed document."""
    root = ET.fromstring(svg.split("?>", 1)[-1])
    found = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "fr":
            rect = group.find(f"{SVG}rect")
            assert rect is not None
            found[group.get("data-n")] = (rect.get("fill"), float(group.get("data-d")))
    return found


def _red(fill: str) -> bool:
    r, g, b = map(int, re.findall(r"\d+", fill))
    return r == 255 and g == b and g < 225


def _blue(fill: str) -> bool:
    r, g, b = map(int, re.findall(r"\d+", fill))
    return b == 255 and r == g and r < 225


def test_grown_frames_are_red_shrunk_ones_blue_and_the_rest_neutral() -> None:
    svg = render_diff_svg(BASE, CAND, "d0", "threads=1: b against a", standalone=True)
    assert svg.startswith('<?xml version="1.0"')
    frames = _frames(svg)
    assert set(frames) == {"all", "mariadbd", "do_command", "filesort", "memcmp", "net_read"}
    assert _red(frames["filesort"][0]) and _red(frames["memcmp"][0])
    assert frames["memcmp"][1] == 50.0
    assert _blue(frames["net_read"][0]) and frames["net_read"][1] == -50.0
    # every sample passes through these: their share cannot move
    assert frames["do_command"] == (NEUTRAL, 0.0) and frames["all"] == (NEUTRAL, 0.0)


def test_widths_are_the_candidates_and_a_new_function_is_drawn() -> None:
    cand = Counter({**CAND, "mariadbd;do_command;brand_new": 100})
    svg = render_diff_svg(BASE, cand, "d1", "t")
    root = ET.fromstring(svg)
    widths = {
        g.get("data-n"): float(g.find(f"{SVG}rect").get("width"))
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "fr"
    }
    assert widths["brand_new"] == widths["all"] / 2
    assert _red(_frames(svg)["brand_new"][0])
    # a function only the baseline ran has no width in the candidate's graph
    assert "gone" not in _frames(render_diff_svg({**BASE, "mariadbd;gone": 50}, CAND, "d2", "t"))


def test_the_graph_is_searchable_and_needs_no_network() -> None:
    svg = render_diff_svg(BASE, CAND, "d3", "t <&> title")
    root = ET.fromstring(svg)  # valid XML, the title escaped
    scripts = list(root.iter(f"{SVG}script"))
    assert len(scripts) == 1 and "function dbrigDiffSearch" in (scripts[0].text or "")
    assert 'onclick="dbrigDiffSearch(this)"' in svg
    assert "http://" not in svg.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in svg


def test_saturation_grows_with_the_change_and_small_changes_stay_pale() -> None:
    assert diff_colour(0.0, 5.0) == NEUTRAL
    pale, deep = diff_colour(0.5, 5.0), diff_colour(5.0, 5.0)
    assert int(re.findall(r"\d+", pale)[1]) > int(re.findall(r"\d+", deep)[1])
    assert diff_colour(-5.0, 5.0) == "rgb(35,35,255)"
    # a graph whose largest change is 0.2 points is drawn against 1 point: pale
    base = Counter({"m;a": 500, "m;b": 500})
    cand = Counter({"m;a": 502, "m;b": 498})
    fill = _frames(render_diff_svg(base, cand, "d4", "t"))["a"][0]
    assert int(re.findall(r"\d+", fill)[1]) > 180


def test_an_empty_candidate_gives_an_empty_graph() -> None:
    root = ET.fromstring(render_diff_svg(BASE, Counter(), "d5", "t"))
    assert not [g for g in root.iter(f"{SVG}g") if g.get("class") == "fr"]


def test_control_characters_in_a_frame_name_leave_valid_xml() -> None:
    odd = Counter({"mariadbd;do_\x01command\x1f;net\x0bread": 5, "mariadbd;do_command": 5})
    svg = render_diff_svg(BASE, odd, "g", "title\x07", standalone=True)
    root = ET.fromstring(svg.encode())  # with its prolog, as a browser reads the .svg file
    names = {g.get("data-n") for g in root.iter(f"{SVG}g")}
    assert "do_command" in names and "netread" in names


def test_the_cells_flame_graph_drops_control_characters_too() -> None:
    svg = render_svg(Counter({"mariadbd;bad\x00name\x1b": 3}), "g", "t\x02")
    names = {g.get("data-n") for g in ET.fromstring(svg).iter("g")}
    assert "badname" in names
