"""Test sweeps kept as files (tests/sweeps/*.yaml), combined and given a results directory."""

from pathlib import Path

import yaml

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"


def sweep(*names: str, **settings) -> dict:
    """The named sweep files merged (their studies side by side), with top-level `settings`."""
    merged: dict = {"studies": {}}
    for name in names:
        loaded = yaml.safe_load((SWEEPS / f"{name}.yaml").read_text())
        merged["studies"].update(loaded.pop("studies"))
        for key, value in loaded.items():
            merged[key] = {**merged[key], **value} if isinstance(value, dict) and key in merged else value
    return {**merged, **settings}


def merge(into: dict, over: dict) -> dict:
    """`over` into `into` key by key at every depth, as Snakemake merges config files; `into`."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def write(config: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path
