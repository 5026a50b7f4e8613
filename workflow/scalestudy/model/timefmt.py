"""The one H:M:S parser and formatter.

Walltimes in the sweep and cluster files, qsub lines and Gadi's usage block are
'HH:MM:SS'; schedulers print short times as 'MM:SS' or 'SS'. A bare 'A:B' is therefore
minutes and seconds, never hours and minutes: '0:55' is 55 s. A record written another
way (e.g. a spreadsheet's 'h:mm') must say so and be converted where it is read.
Slurm's durations add days and fractions of a second (`slurm_seconds`).
"""

from __future__ import annotations


def hms_seconds(text: str | int | float) -> int:
    """'HH:MM:SS', 'MM:SS' or 'SS' -> seconds. Raises ValueError on anything else."""
    parts = str(text).strip().split(":")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"not a time of the form HH:MM:SS, MM:SS or SS: {text!r}")
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


def slurm_seconds(text: str) -> float:
    """A duration as Slurm prints it (sacct's Elapsed, scontrol's RunTime) -> seconds:
    '[D-]HH:MM:SS', 'MM:SS', or either with a fraction of a second ('MM:SS.mmm', sacct's short
    times). Days come only before H:M:S. Raises ValueError on anything else ('INVALID',
    'UNLIMITED', a negative time)."""
    days, dash, clock = str(text).strip().rpartition("-")
    whole, dot, fraction = clock.partition(".")
    if (dash and not (days.isdigit() and whole.count(":") == 2)) or (dot and not fraction.isdigit()):
        raise ValueError(f"not a Slurm time of the form [D-]HH:MM:SS, MM:SS or MM:SS.mmm: {text!r}")
    seconds = (int(days) * 86400 if dash else 0) + hms_seconds(whole)
    return seconds + float(f"0.{fraction}") if dot else float(seconds)


def hms(seconds: float) -> str:
    """Seconds -> 'HH:MM:SS', the form walltimes take in the sweep file and in qsub."""
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
