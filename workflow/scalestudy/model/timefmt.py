"""The one H:M:S parser and formatter.

Walltimes in the sweep and cluster files, qsub lines and Gadi's usage block are
'HH:MM:SS'; schedulers print short times as 'MM:SS' or 'SS'. A bare 'A:B' is therefore
minutes and seconds, never hours and minutes: '0:55' is 55 s. A record written another
way (e.g. a spreadsheet's 'h:mm') must say so and be converted where it is read.
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


def hms(seconds: float) -> str:
    """Seconds -> 'HH:MM:SS', the form walltimes take in the sweep file and in qsub."""
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
