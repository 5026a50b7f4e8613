"""A study's axes and the combinations of their values it runs: `exclude` (entries left out
of the cross product) and `zip` (axes that vary together, value by value), checked against
the axes the study has (config.sweep validates, then expands with `kept_combination`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.errors import did_you_mean
from ..model.ladder import is_ladder, node_values

# The axes a study varies besides its list-valued params (the per-node one is ranks_per_node
# or gpus_per_node, whichever the study gives).
BUILTIN_AXES = (
    "nodes",
    "ranks_per_node",
    "gpus_per_node",
    "mpi_flags",
    "nccl_env",
    "hyperthreads",
    "binding",
    "mapping",
)


def study_axes(study: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Every axis of a study and its values: the built-in ones (a node ladder's every rung) and
    its list-valued params."""
    axes = {key: list(study[key]) for key in BUILTIN_AXES if isinstance(study.get(key), list)}
    if is_ladder(study.get("nodes")):
        axes = {"nodes": node_values(study["nodes"]), **axes}
    axes.update({key: value for key, value in study.get("params", {}).items() if isinstance(value, list)})
    return axes


def as_values(value: Any) -> list[Any]:
    """An exclude entry's value: one value, or a list matching any of its values."""
    return value if isinstance(value, list) else [value]


def combination_problems(where: str, study: Mapping[str, Any]) -> list[str]:
    """`exclude` entries naming an axis the study does not vary or a value it does not take,
    and `zip` groups of unknown axes, of unequal lengths, or sharing an axis."""
    axes = study_axes(study)
    allowed = ", ".join(axes)
    problems = []
    for i, entry in enumerate(study.get("exclude", [])):
        for axis, value in entry.items():
            at = f"{where}.exclude[{i}].{axis}"
            if axis not in axes:
                problems.append(f"{at}: unknown axis {axis!r}; the study's axes: {allowed}{did_you_mean(axis, axes)}")
                continue
            for item in as_values(value):
                if item not in axes[axis]:
                    values = ", ".join(map(str, axes[axis]))
                    problems.append(f"{at}: unknown value {item!r}; {axis} takes: {values}")
    zipped: set[str] = set()
    for i, group in enumerate(study.get("zip", [])):
        at = f"{where}.zip[{i}]"
        unknown = next((axis for axis in group if axis not in axes), None)
        if unknown is not None:
            problems.append(f"{at}: unknown axis {unknown!r}; the study's axes: {allowed}{did_you_mean(unknown, axes)}")
            continue
        lengths = {axis: len(axes[axis]) for axis in group}
        if len(set(lengths.values())) > 1:
            each = ", ".join(f"{axis} has {n}" for axis, n in lengths.items())
            problems.append(f"{at}: zipped axes vary together value by value, so need as many values each; {each}")
        for axis in group:
            if axis in zipped or group.count(axis) > 1:
                problems.append(f"{at}: axis {axis!r} is zipped twice; an axis may be in one zip group once")
            zipped.add(axis)
    return problems


def kept_combination(study: Mapping[str, Any], axes: Mapping[str, list[Any]]):
    """A test of one combination of axis values (axis name -> value): False where an `exclude`
    entry matches every key of it, or where zipped axes are not at the same position."""
    excluded = [{axis: as_values(value) for axis, value in entry.items()} for entry in study.get("exclude", [])]
    groups = [list(group) for group in study.get("zip", [])]

    def kept(values: Mapping[str, Any]) -> bool:
        for group in groups:
            if len({axes[axis].index(values[axis]) for axis in group}) > 1:
                return False
        return not any(all(values[axis] in allowed for axis, allowed in entry.items()) for entry in excluded)

    return kept
