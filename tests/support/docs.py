"""The user's documentation as the tests read it: README.md, config/README.md and docs/*.md,
their fenced code blocks (with the `<!-- example: ... -->` note before each), their links and
their headings' anchors (as GitHub makes them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (
    REPO / "README.md",
    REPO / "config/README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "workflow/scalestudy/apps").glob("*/README.md")),  # each app's page, in its folder
)
FENCE = re.compile(r"^(\s*)(`{3,})(\w*)\s*$")
NOTE = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target): a target without spaces; images too ("![...](...)").
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"(`+).*?\1")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    note: str | None  # the `<!-- example: ... -->` right before the fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, in order. A fence may be indented (inside a list item);
    its block's lines lose that indent."""
    lines = page.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, language = opening.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page.relative_to(REPO)}:{i + 1}: a code block that is never closed")
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        note = NOTE.match(previous)
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
        found.append(Block(page, i + 1, language, "\n".join(body) + "\n", note.group(1) if note else None))
        i = end + 1
    return found


def prose(page: Path, keep_code: bool = False) -> list[tuple[int, str]]:
    """The lines outside code blocks, with their numbers; inline code removed unless kept."""
    inside, ticks, out = False, "", []
    for number, line in enumerate(page.read_text().split("\n"), 1):
        fence = FENCE.match(line)
        if fence and (not inside or line.strip() == ticks):
            inside, ticks = (not inside), fence.group(2)
            continue
        if not inside:
            out.append((number, line if keep_code else INLINE_CODE.sub("", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (not '-' or '_'), each
    space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a page's headings make (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    made = set()
    for _, line in prose(page, keep_code=True):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            made.add(f"{base}-{seen[base]}" if base in seen else base)
            seen[base] = seen.get(base, 0) + 1
    return made


def links(page: Path) -> list[tuple[int, str]]:
    """Every link target outside code, with the line its text starts on (a link's text may
    run over a line break)."""
    lines = prose(page)
    text = "\n".join(line for _, line in lines)
    starts = [0]
    for _, line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found = []
    for match in LINK.finditer(text):
        index = max(i for i, start in enumerate(starts) if start <= match.start())
        found.append((lines[index][0], match.group(1)))
    return found
