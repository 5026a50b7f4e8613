"""A laddered study's section of the page: why each node ladder stopped, what it measured at each
rung (efficiency against the first rung with its 95% interval), the rungs it did not run and the
node-hours and SU that saved against the full ladder, and with intermediate rungs which rung came
after which and why (the ladder rule's ladder.json, planning.tables.ladder_state)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..model.ladder import nodes_text
from .page import Heading, Para, Table


def read_ladder(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def cost_words(entry: Mapping[str, Any], intermediate: bool = False) -> str:
    hours, units = entry["node_hours"], entry["su"]
    share = hours["not_spent"] / hours["full"] if hours["full"] else 0.0
    full = "full ladder's (every rung and intermediate rung)" if intermediate else "full ladder's"
    text = (
        f"Not run: {', '.join(map(str, entry['not_run'])) or 'none'} nodes; {hours['not_spent']:,.2f} of the {full} "
        f"{hours['full']:,.2f} node-hours ({share:.0%}) not spent"
    )
    if units["full"] is not None:
        text += f", {units['not_spent']:,.1f} of {units['full']:,.1f} SU on {entry['cluster']}"
    if intermediate:
        text += (
            f"; run: {', '.join(map(str, entry['run']))} nodes, {hours['spent']:,.2f} node-hours, against "
            f"{hours['doublings']:,.2f} for every doubling rung alone"
        )
    return text + " (requested walltime + margin, the forecast's worst case)."


def ladder_blocks(state: Mapping[str, Any]) -> list:
    """The section's blocks ([] without a ladder)."""
    if not state.get("ladders"):
        return []
    rungs = ", ".join(map(str, state["rungs"]))
    between = state.get("intermediate") or []
    also = (
        f" (intermediate rungs {', '.join(map(str, between))}, each measured before the doubling above it where"
        " that is cheaper in expectation)"
        if between
        else ""
    )
    blocks: list = [
        Heading(3, "Node ladder"),
        Para(f"Rungs {rungs} nodes{also}; the ladder stops below parallel efficiency {state['threshold']:g}."),
    ]
    for entry in state["ladders"]:
        step = entry["step"] or {}
        if entry["stopped"]:
            head = f"{entry['ladder']}: stopped at {nodes_text(step['top'])}: {step['why']}."
        else:
            head = f"{entry['ladder']}: not finished; runs at {nodes_text(entry['waiting_on'])} next."
        blocks.append(Para(f"{head} {cost_words(entry, bool(between))}"))
        rows = []
        for rung in step.get("rungs", []):
            interval = f"[{number(rung['low'])}–{number(rung['high'])}]" if rung["low"] is not None else "none"
            efficiency = number(rung["efficiency"]) if rung["runs"] else "no successful run"
            rows.append([str(rung["nodes"]), str(rung["runs"]), efficiency, interval])
        predicted = step.get("predicted")
        if predicted and predicted.get("high") is not None:
            band = f"[{number(predicted['low'])}–{number(predicted['high'])}]"
            rows.append([f"{predicted['nodes']} (predicted)", "0", number(predicted["efficiency"]), band])
        if rows:
            blocks.append(Table(["nodes", "successful runs", "parallel efficiency", "95% interval"], rows))
        if between and entry.get("steps"):
            chosen = [[str(s["after"]), str(s["next"]) if s["next"] is not None else "stops", s["why"]]
                      for s in entry["steps"]]  # fmt: skip
            blocks.append(Table(["after (nodes)", "next", "why"], chosen))
    return blocks
