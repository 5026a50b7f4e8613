"""Counts that import torch and LitGPT are kept on disk per user (apps.saved_bytes.kept_on_disk):
a planning that counts a shape counted before imports neither, and a change of the counting
code counts again."""

import json
from dataclasses import dataclass

from scalestudy.apps.saved_bytes import kept_on_disk


@dataclass(frozen=True)
class Count:
    saved: int
    parameters: int


def test_a_count_is_read_back_from_disk_and_counted_again_when_the_counting_code_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "counting.py"
    source.write_text("version 1")
    calls = []

    def count(width: int, batch: int) -> Count:
        calls.append((width, batch))
        return Count(saved=width * batch, parameters=width * width)

    first = kept_on_disk(Count, source)(count)
    assert first(64, 2) == Count(128, 4096) and calls == [(64, 2)]
    stored = json.loads((tmp_path / "cache/scalestudy/count.json").read_text())
    assert list(stored.values()) == [{"saved": 128, "parameters": 4096}]
    # A new process (a fresh decorator: no memory of its own) reads the count back.
    assert kept_on_disk(Count, source)(count)(64, 2) == Count(128, 4096) and calls == [(64, 2)]
    assert kept_on_disk(Count, source)(count)(64, 4) == Count(256, 4096) and calls == [(64, 2), (64, 4)]
    source.write_text("version 2")
    assert kept_on_disk(Count, source)(count)(64, 2) == Count(128, 4096) and calls[-1] == (64, 2) and len(calls) == 3
    # A cache file half-written or not JSON is counted past.
    (tmp_path / "cache/scalestudy/count.json").write_text("{not json")
    assert kept_on_disk(Count, source)(count)(8, 1) == Count(8, 64) and len(calls) == 4
