"""The report page in a real browser (headless Chromium)."""

import re

import matplotlib.image
from browser import plots_loaded, run_chromium, screenshot
from pages import overview_page
from scalestudy.model.paths import PLOT_KINDS


def test_the_page_loads_every_plot_in_a_browser(record_page, tmp_path):
    plots, loaded = plots_loaded(record_page, tmp_path)
    # A published record has one flag set, no service units, no parts of a run and no size curve:
    # no variants, cost, breakdown or sizes plot.
    assert plots == len(PLOT_KINDS) - 4 and loaded == plots
    shot = matplotlib.image.imread(screenshot(record_page, tmp_path))
    assert shot.shape[:2] == (2400, 1300)
    # Not a blank page: text, tables and plots give contrast.
    assert shot[..., :3].std() > 0.1


def test_a_broken_plot_is_caught_by_the_browser_check(record_page, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(record_page.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1))
    plots, loaded = plots_loaded(broken, tmp_path)
    assert (plots, loaded) == (len(PLOT_KINDS) - 4, len(PLOT_KINDS) - 5)


def test_the_overview_table_comes_first_and_links_to_each_study(tmp_path):
    page = overview_page(tmp_path / "results")
    dom = run_chromium(page, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = dom.stdout
    # The first table of the page is the overview: one row per study, each linking to its section.
    first = body[body.index("<table") : body.index("</table>")]
    assert 'class="overview"' in first
    assert re.findall(r'<a href="#([^"]+)">', first) == ["md", "hoomd-wca"]
    assert 'id="md"' in body and 'id="hoomd-wca"' in body
    rows = re.findall(r"<tr>(.*?)</tr>", first, re.S)
    assert len(rows) == 3  # the header and two studies
    assert "every run failed: hoomd not installed" in rows[2] and "0 / 4 / 0" in rows[2]
    assert "trimmed mean" in rows[1] and "30 / 0 / 0" in rows[1]
    # Every plot on the page decoded; the failed study has none (a line says why instead).
    plots, loaded = plots_loaded(page, tmp_path)
    assert plots == loaded == 4
