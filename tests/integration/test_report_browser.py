"""The report page in a real browser (headless Chromium)."""

import matplotlib.image
from browser import plots_loaded, screenshot
from scalestudy.model.paths import PLOT_KINDS


def test_the_page_loads_every_plot_in_a_browser(record_page, tmp_path):
    plots, loaded = plots_loaded(record_page, tmp_path)
    assert plots == len(PLOT_KINDS) and loaded == plots
    shot = matplotlib.image.imread(screenshot(record_page, tmp_path))
    assert shot.shape[:2] == (2400, 1300)
    # Not a blank page: text, tables and plots give contrast.
    assert shot[..., :3].std() > 0.1


def test_a_broken_plot_is_caught_by_the_browser_check(record_page, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(record_page.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1))
    plots, loaded = plots_loaded(broken, tmp_path)
    assert (plots, loaded) == (len(PLOT_KINDS), len(PLOT_KINDS) - 1)
