"""The clock's timestamp formats: the same strings whether or not they were made before."""

from __future__ import annotations

from emu.kernel import clock


def test_timestamps_are_the_same_strings_from_the_cache_and_after_it_is_cleared(monkeypatch):
    monkeypatch.setattr(clock, "_TIMES", {})
    monkeypatch.setattr(clock, "_TIMES_MAX", 3)
    first = [(clock.rfc3339(t), clock.rfc3339_micro(t)) for t in (0.0, 1.5, 86400.25)]
    assert first == [("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000000Z"),
                     ("2026-01-01T00:00:01Z", "2026-01-01T00:00:01.500000Z"),
                     ("2026-01-02T00:00:00Z", "2026-01-02T00:00:00.250000Z")]
    assert len(clock._TIMES) <= 3  # cleared when full, never larger
    again = [(clock.rfc3339(t), clock.rfc3339_micro(t)) for t in (0.0, 1.5, 86400.25)]
    assert again == first
    assert clock.rfc3339(1) == clock.rfc3339(1.0) == "2026-01-01T00:00:01Z"
    assert clock.parse_time(clock.rfc3339_micro(1.5)) == 1.5
