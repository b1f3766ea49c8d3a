from __future__ import annotations

from datetime import UTC, datetime

from reef_cli.core.clock import iso, now_iso


def test_the_format_keeps_microseconds_and_z_even_on_a_whole_second() -> None:
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000000Z"
    moment = datetime(2026, 12, 3, 15, 29, 14, 360955, tzinfo=UTC)
    assert iso(moment) == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_now_reads_back_as_now() -> None:
    stamp = datetime.strptime(now_iso(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 5
