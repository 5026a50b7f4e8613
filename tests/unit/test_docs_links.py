"""Every link between the docs (README.md, config/README.md, docs/*.md) leads somewhere: the
file exists and the anchor is one of its headings' (as GitHub makes them); and the sweep
reference names every key the schema allows."""

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import docs  # noqa: E402  (tests/support/docs.py)

EXTERNAL = ("http://", "https://", "mailto:")


def broken_links(page: Path) -> list[str]:
    broken = []
    for line, target in docs.links(page):
        if target.startswith(EXTERNAL):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(docs.REPO)}:{line}: {target}"
        if not linked.exists():
            broken.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in docs.anchors(linked):
            broken.append(f"{where}: no heading makes #{anchor} in {linked.relative_to(docs.REPO)}")
        elif anchor and linked.suffix != ".md":
            broken.append(f"{where}: an anchor into a file that is not Markdown")
    return broken


@pytest.mark.parametrize("page", docs.PAGES, ids=lambda page: str(page.relative_to(docs.REPO)))
def test_every_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_a_broken_anchor_or_file_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(docs, "REPO", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## Two words: `code` here\n\n## Two words: `code` here\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#two-words-code-here) [second](other.md#two-words-code-here-1) [self](#a-b)\n"
        "## A, b\n"
        "[bad](other.md#two-words) [gone](missing.md) `[in code](missing.md)` [over a\n"
        "line break](other.md#over)\n"
        "```\n[in a block](missing.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md:3: other.md#two-words: no heading makes #two-words in other.md",
        "page.md:3: missing.md: no such file",
        "page.md:3: other.md#over: no heading makes #over in other.md",
    ]


def test_the_sweep_reference_names_every_key_the_schema_allows():
    schema = yaml.safe_load((docs.REPO / "config/schema/sweep.schema.yaml").read_text())
    top = set(schema["properties"])
    study = set(schema["properties"]["studies"]["additionalProperties"]["properties"])
    reference = (docs.REPO / "docs/sweep.md").read_text()
    assert sorted(key for key in top | study if f"`{key}`" not in reference) == []
