"""Acceptance by response position summed over windows, without a database."""

from control.telemetry.service import acceptance_by_response_position
from specwire import PositionTokens, WindowCounts
from specwire.telemetry import UNKNOWN


def _window(drafted: int, accepted: int, buckets: dict[str, tuple[int, int]]) -> WindowCounts:
    return WindowCounts(
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        by_response_position={
            b: PositionTokens(drafted_tokens=d, accepted_tokens=a) for b, (d, a) in buckets.items()
        },
    )


def test_what_a_windows_buckets_leave_out_is_unknown_and_an_overshoot_takes_nothing_off() -> None:
    windows = [
        _window(100, 70, {"0-15": (60, 50), UNKNOWN: (10, 5)}),  # 30 and 15 left out
        _window(10, 4, {"0-15": (20, 8)}),  # its buckets over its totals: nothing left out
        _window(7, 3, {}),  # an older gateway's: all unknown
    ]
    rows = {
        p.bucket: (p.drafted_tokens, p.accepted_tokens, p.acceptance_rate)
        for p in acceptance_by_response_position(windows)
    }

    assert rows == {
        "0-15": (80, 58, 58 / 80),
        "16-63": (0, 0, None),
        "64-255": (0, 0, None),
        "256+": (0, 0, None),
        UNKNOWN: (10 + 30 + 7, 5 + 15 + 3, 23 / 47),
    }
