"""Reading YAML config files strictly and combining them the way Snakemake does.

Snakemake (and plain PyYAML) keep the last of a key given twice in one mapping without a
word, so ``repeats: 3`` ... ``repeats: 5`` silently measures 5. Every file read here, and
every config file Snakemake read (``study.load(config, files=...)``), is read again
strictly: a key given twice, a YAML mistake or an unreadable file is one line naming the
file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..model.errors import SweepError

MERGE_TAG = "tag:yaml.org,2002:merge"  # `<<: *defaults`: merged keys may be overridden
# The key that makes Snakemake read a config file as a YTE template: Python expressions run
# while the file is read (before the Snakefile, for a --configfile). scalestudy reads sweeps
# as data and refuses the key, so a file shared between users is never code here.
YTE_KEY = "__use_yte__"


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


def shown(path: str | Path) -> str:
    """A file as a message names it: relative to the working directory when under it."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith("..") else relative


def duplicate_keys(node: yaml.Node | None, where: str) -> Iterator[tuple[int, str]]:
    """A key given twice in one mapping of a composed YAML document: (line, 'file:line: ...')
    each; every node once (anchors and aliases are walked where first seen)."""
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node | None, str]] = [(node, "")]
    while stack:
        node, path = stack.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        if not isinstance(node, yaml.MappingNode):
            continue
        first: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                stack.append((value_node, path))
                continue
            name = f"{path}.{key_node.value}" if path else key_node.value
            key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
            if key in first:
                yield (
                    line,
                    (
                        f"{where}:{line}: {name} is given twice (first at line {first[key]}); "
                        "YAML would keep only the last: remove one"
                    ),
                )
            else:
                first[key] = line
            stack.append((value_node, name))


def json_pairs(where: str, problems: list[str]):
    """json.load's object_pairs_hook: the object, noting a key given twice."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        for key in dict.fromkeys(k for k in keys if keys.count(k) > 1):
            problems.append(f"{where}: {key!r} is given twice in one object; JSON readers keep only the last")
        return dict(pairs)

    return hook


def read_strictly(path: str | Path) -> tuple[Any, list[str]]:
    """The file's data (JSON, else YAML, as Snakemake tries them) and its problems: a key
    given twice, a syntax error (file:line:column), a file that cannot be read."""
    where = shown(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [f"{where}: no such file"]
    except IsADirectoryError:
        return None, [f"{where}: is a directory, not a config file"]
    except UnicodeDecodeError as error:
        return None, [f"{where}: not UTF-8 text ({error.reason} at byte {error.start})"]
    except OSError as error:
        return None, [f"{where}: cannot be read ({error.strerror})"]
    problems: list[str] = []
    try:
        return json.loads(text, object_pairs_hook=json_pairs(where, problems)), problems
    except ValueError:
        problems.clear()
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        # Before constructing: merge keys (<<: *defaults) are flattened into the mapping then.
        problems = [problem for _line, problem in sorted(duplicate_keys(node, where))]
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        place = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        context = ""
        if error.context and error.context_mark and error.context_mark is not mark:
            context = f" ({error.context} at line {error.context_mark.line + 1})"
        return None, [f"{where}{place}: not valid YAML: {error.problem or error.context}{context}"]
    except yaml.YAMLError as error:
        return None, [f"{where}: not valid YAML: {error}"]
    finally:
        loader.dispose()
    return data, problems


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) file of keys, read strictly; raises SweepError naming file and line."""
    data, problems = read_strictly(path)
    if not problems and data is not None and not isinstance(data, Mapping):
        problems = [f"{shown(path)}: the top level must be keys (key: value), not a {type(data).__name__}"]
    if not problems and isinstance(data, Mapping) and YTE_KEY in data:
        problems = [
            f"{shown(path)}: {YTE_KEY}: scalestudy reads sweeps as data, not as YTE templates (which run Python "
            f"while the file is read); remove {YTE_KEY} and write the values out"
        ]
    if problems:
        raise SweepError(problems)
    return dict(data or {})


def file_problems(paths: Iterable[str | Path]) -> list[str]:
    """Every problem of the config files Snakemake read (it reads them leniently)."""
    problems: list[str] = []
    for path in paths:
        try:
            read_yaml(path)
        except SweepError as error:
            problems += error.problems
    return problems


def load_files(*paths: str | Path) -> dict[str, Any]:
    """Config files merged in order, as Snakemake merges several --configfile."""
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return config


def with_overrides(config: Mapping[str, Any], entries: list[str]) -> dict[str, Any]:
    """`key=value` entries (a profile's `config:` list, or --config), values read as YAML,
    replacing top-level keys as Snakemake does; raises SweepError for an entry that is not
    one (Snakemake refuses it too)."""
    problems = [
        f"--config {entry}: not key=value; give e.g. --config partial=true"
        for entry in entries
        if "=" not in str(entry) or not str(entry).partition("=")[0].strip()
    ]
    merged = dict(config)
    for entry in entries:
        key, _, value = str(entry).partition("=")
        try:
            merged[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as error:
            problems.append(f"--config {entry}: the value is not valid YAML ({getattr(error, 'problem', error)})")
    if problems:
        raise SweepError(problems)
    return merged
