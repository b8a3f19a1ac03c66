#!/usr/bin/env python3
"""Rewrite the generated tables in docs/ (metrics, tool keys) from the code."""

from pathlib import Path

from dbrig.report.reference import pages, render_page

docs = Path(__file__).resolve().parent.parent / "docs"
for name, tables in pages().items():
    path = docs / name
    path.write_text(render_page(path.read_text(), tables))
    print(f"wrote {path}")
