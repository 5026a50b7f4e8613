"""Open a report page in headless Chromium: the DOM after its scripts ran, and a screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (scripts/system-packages.sh installs it as root with apt)")
    return found


def run_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
               *args, page.resolve().as_uri()]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def plots_loaded(page: Path, tmp_path: Path) -> tuple[int, int]:
    """(plots on the page, plots the browser decoded), as the page's own load check counted them."""
    dom = run_chromium(page, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r'<body data-plots="(\d+)" data-plots-loaded="(\d+)"', dom.stdout)
    assert body, "the page's load check did not run: " + dom.stdout[:500]
    return int(body.group(1)), int(body.group(2))


def screenshot(page: Path, tmp_path: Path, size: str = "1300,2400") -> Path:
    shot = tmp_path / "screenshot.png"
    result = run_chromium(page, tmp_path / "profile", f"--window-size={size}", f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    return shot
