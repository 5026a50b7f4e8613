"""A page: document blocks (headings, paragraphs, bullets, tables, images, folded details,
preformatted text), rendered to one self-contained HTML file (images embedded) and to its
Markdown twin, and the text of numbers and times on it. The report, the comparison of two
results and the published-record page are built of these blocks; this module knows nothing
of what they say (it imports only the model layer)."""

from __future__ import annotations

import base64
import datetime as dt
import html
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..model.timefmt import hms

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f0f0f0}
td:first-child{text-align:left}
.overview td{text-align:left}
.summary{font-weight:bold}
.defs{background:#f7f7f7;padding:0.5em 1em;font-size:0.9em}
.plots img{width:49%;margin:2px 0;border:1px solid #ddd}
pre{font-size:0.8em;background:#f7f7f7;padding:0.5em;white-space:pre-wrap}
"""
# Marks the page once every plot has loaded (or says which did not): the browser test reads it.
LOAD_CHECK = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll('img'));
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  document.body.setAttribute('data-plots', imgs.length);
  document.body.setAttribute('data-plots-loaded', imgs.length - broken.length);
  broken.forEach(function (i) { i.insertAdjacentText('afterend', '[plot did not load: ' + i.alt + ']'); });
});
"""


# ---------------------------------------------------------------- blocks (rendered to HTML and Markdown)


@dataclass
class Link:
    """A cell or a line that links: to a study's section ('#study') or a side file."""

    text: str
    href: str


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str | Link]]
    css: str = ""


@dataclass
class Details:
    summary: str
    blocks: list = field(default_factory=list)
    # Per-run provenance is for the page; a paper does not want it.
    in_markdown: bool = True


@dataclass
class Image:
    path: Path
    alt: str


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str
    css: str = ""
    link: Link | None = None


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Pre:
    text: str


def cell_html(value: str | Link) -> str:
    if isinstance(value, Link):
        return f"<a href='{html.escape(value.href)}'>{html.escape(value.text)}</a>"
    return html.escape(value)


def cell_markdown(value: str | Link) -> str:
    return f"[{md_cell(value.text)}]({value.href})" if isinstance(value, Link) else md_cell(value)


def to_html(blocks: Sequence) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f" id='{html.escape(block.text.split(' ')[0])}'" if block.level == 2 else ""
            parts.append(f"<h{block.level}{anchor}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            css = f" class='{block.css}'" if block.css else ""
            link = f" {cell_html(block.link)}" if block.link else ""
            parts.append(f"<p{css}>{html.escape(block.text)}{link}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
            body = "".join("<tr>" + "".join(f"<td>{cell_html(c)}</td>" for c in r) + "</tr>" for r in block.rows)
            css = f" class='{block.css}'" if block.css else ""
            parts.append(f"<table{css}><tr>{head}</tr>{body}</table>")
        elif isinstance(block, Image):
            data = base64.b64encode(Path(block.path).read_bytes()).decode()
            parts.append(f'<img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}">')
        elif isinstance(block, Details):
            parts.append(f"<details><summary>{html.escape(block.summary)}</summary>{to_html(block.blocks)}</details>")
        elif isinstance(block, Pre):
            parts.append(f"<pre>{html.escape(block.text)}</pre>")
        elif isinstance(block, list):  # a row of plots
            parts.append(f"<div class='plots'>{to_html(block)}</div>")
    return "\n".join(parts)


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence, base: Path) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append("#" * block.level + " " + block.text)
        elif isinstance(block, Para):
            text = block.text + (f" {cell_markdown(block.link)}" if block.link else "")
            parts.append(f"**{text}**" if block.css == "summary" else text)
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {i}" for i in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(map(md_cell, block.headers)) + " |"]
            lines.append("|" + "|".join("---" for _ in block.headers) + "|")
            lines += ["| " + " | ".join(map(cell_markdown, r)) + " |" for r in block.rows]
            parts.append("\n".join(lines))
        elif isinstance(block, Image):
            parts.append(f"![{block.alt}]({os.path.relpath(block.path, base)})")
        elif isinstance(block, Details) and block.in_markdown:
            parts.append(f"*{block.summary}*\n\n" + to_markdown(block.blocks, base))
        elif isinstance(block, Pre):
            parts.append(f"```\n{block.text}\n```")
        elif isinstance(block, list):
            parts.append(to_markdown(block, base))
    return "\n\n".join(p for p in parts if p)


# ---------------------------------------------------------------- numbers as text


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value, digits: int = 3) -> str:
    if missing(value):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float | int):
        value = float(value)
        if math.isinf(value):
            return "∞"
        if value.is_integer() and abs(value) < 1e6:
            return f"{int(value):,}" if abs(value) >= 1000 else str(int(value))
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"
    return str(value)


def duration(seconds) -> str:
    """A wall time in the one H:M:S form (scalestudy.model.timefmt), or – when unknown."""
    return "–" if missing(seconds) else hms(seconds)


def scale_text(row) -> str:
    """A scale as every page says it: '8 nodes (p = 384)'; `row` has nodes and ranks."""
    nodes = int(row["nodes"])
    return f"{nodes} node{'s' if nodes != 1 else ''} (p = {int(row['ranks'])})"


# ---------------------------------------------------------------- writing a page


def write_page(blocks: list, title: str, out_html: Path, out_md: Path | None = None) -> None:
    """The blocks as `out_html` (and, given `out_md`, its Markdown twin, images linked relative
    to it), under `title` and the time they were generated."""
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    stamp = f"Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}."
    page = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style><script>{LOAD_CHECK}</script></head><body>",
        f"<h1>{html.escape(title)}</h1><p>{stamp}</p>",
        to_html(blocks),
        "</body></html>",
    ]
    out_html.write_text("\n".join(page), encoding="utf-8")
    if out_md is not None:
        text = f"# {title}\n\n{stamp}\n\n" + to_markdown(blocks, Path(out_md).parent) + "\n"
        Path(out_md).write_text(text, encoding="utf-8")
