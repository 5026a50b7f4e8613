"""Reading YAML config files and combining them the way Snakemake does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def is_true(value: Any) -> bool:
    """A flag from a config file (True) or from --config (the string 'true')."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def drop_nulls(value: Any) -> Any:
    """An overlay sets a key to null to remove it (JSON merge-patch semantics)."""
    if isinstance(value, Mapping):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge, overlay wins; used for config/local.yaml over config/sweep.yaml."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def load_files(*paths: str | Path) -> dict[str, Any]:
    """Config files merged in order, as Snakemake merges several --configfile."""
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return config


def with_overrides(config: Mapping[str, Any], entries: list[str]) -> dict[str, Any]:
    """`key=value` entries (a profile's `config:` list, or --config), values read as YAML,
    replacing top-level keys as Snakemake does."""
    merged = dict(config)
    for entry in entries:
        key, _, value = str(entry).partition("=")
        merged[key.strip()] = yaml.safe_load(value)
    return merged
