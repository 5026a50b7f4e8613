"""The one H:M:S reading: walltimes, qsub lines, Gadi's usage block, published records and Slurm's times."""

import pytest
from scalestudy.model.timefmt import hms, hms_seconds, slurm_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("01:00:00", 3600), ("00:10:00", 600), ("0:55", 55), ("12:34", 754), ("40", 40), (" 02:00:05 ", 7205)],
)
def test_short_times_are_minutes_and_seconds_as_schedulers_print_them(text, seconds):
    assert hms_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "1.5", "-1:00", "a:bc", "1::2"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError, match="not a time of the form"):
        hms_seconds(text)


def test_format_round_trips():
    assert hms(55) == "00:00:55" and hms(3600 * 49 + 61) == "49:01:01"
    assert hms_seconds(hms(7205)) == 7205


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:01:07", 67.0),  # sacct's Elapsed, scontrol's RunTime
        ("1-02:03:04", 93784.0),  # past a day
        ("12-00:00:00", 1036800.0),
        ("01:07", 67.0),  # MM:SS
        ("01:07.250", 67.25),  # MM:SS.mmm (sacct's short times)
        ("00:00:00", 0.0),
    ],
)
def test_slurm_times_have_days_and_fractions(text, seconds):
    assert slurm_seconds(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "INVALID", "UNLIMITED", "Partition_Limit", "1-02:03", "-00:01", "1:2.x", "a-01:00:00"]
)
def test_anything_else_is_not_a_slurm_time(text):
    with pytest.raises(ValueError, match="not a"):
        slurm_seconds(text)
