"""The unit tier starts no process: it is the fast loop. A test that needs one belongs in
tests/integration."""

import os
import subprocess

import pytest


@pytest.fixture(autouse=True)
def no_subprocess(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a unit test started a process; move it to tests/integration")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
    monkeypatch.setattr(os, "posix_spawnp", refuse)
    monkeypatch.setattr(os, "fork", refuse)
