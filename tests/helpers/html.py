"""Reading the HTML dbrig writes (or a browser renders) the way the tests look at it."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNG_DATA_URI = "data:image/png;base64,"


class Page(HTMLParser):
    """The parts of a page the tests look at: tags, ids, img sources, references, text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.links: list[str] = []  # every src and href
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "img":
            self.images.append(values.get("src") or "")
        self.links += [link for name in ("src", "href") if (link := values.get(name))]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "li", "p", "dt", "dd"):
            self.text.append(" ")

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def scripts(self) -> int:
        return self.tags.count("script")

    @property
    def external(self) -> list[str]:
        """References that would be fetched from elsewhere (http, https, protocol-relative)."""
        return [link for link in self.links if re.match(r"^(https?:)?//", link)]

    @property
    def plain(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.text))


def parse_html(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def parse_page(path: Path) -> Page:
    return parse_html(path.read_text())


def decoded_png(src: str) -> bytes:
    """The bytes of an inline PNG image source; fails on anything else."""
    assert src.startswith(PNG_DATA_URI), f"not an inline PNG: {src[:60]}"
    return base64.b64decode(src[len(PNG_DATA_URI) :], validate=True)
