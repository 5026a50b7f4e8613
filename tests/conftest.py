import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(REPO / "workflow"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA
