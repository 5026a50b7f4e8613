"""The one H:M:S reading: walltimes, qsub lines, Gadi's usage block and published records."""

import pytest
from scalestudy.model.timefmt import hms, hms_seconds


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
