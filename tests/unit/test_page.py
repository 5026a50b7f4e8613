"""The page's blocks rendered: what Markdown would misread is escaped."""

from scalestudy.presentation.page import Table, to_markdown


def test_markdown_tables_escape_pipes(tmp_path):
    text = to_markdown([Table(["a|b"], [["1|2"]])], tmp_path)
    assert text.splitlines()[0] == "| a\\|b |" and text.splitlines()[2] == "| 1\\|2 |"
