"""`specroute admin telemetry acceptance` against a served control plane, over windows
posted to its ingestion API."""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from typer.testing import Result

from specwire import Arm
from tests.control.cli.conftest import ok, refused
from tests.control.telemetry.windows import post_windows, window

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
RANGE = ["--since", "2026-12-01T02:30:00Z", "--until", "2026-12-01T03:30:00Z"]


def test_acceptance_prints_the_segments_sums_per_position_and_per_bucket(
    cli: Callable[..., Result], server: str
) -> None:
    created = json.loads(
        ok(cli, "segment", "create", "code", "--selector", '{"tasks": ["code"]}', "-o", "json")
    )
    seg = created["id"]
    with httpx.Client() as http:
        post_windows(
            http,
            "cli-internal",
            [
                (
                    "gw-cli",
                    window(
                        seg,
                        Arm.SPEC,
                        T0,
                        requests=10,
                        drafts=20,
                        per_position=[16, 12, 8],
                        buckets={"0-15": (40, 30), "16-63": (20, 6)},
                    ),
                ),
                ("gw-cli", window(seg, Arm.BASELINE, T0, requests=9)),
                # Outside the range asked: not in any sum below.
                (
                    "gw-cli",
                    window(
                        seg,
                        Arm.SPEC,
                        T0 + timedelta(hours=1),
                        requests=1,
                        drafts=1,
                        per_position=[1],
                        buckets={"0-15": (3, 1)},
                    ),
                ),
            ],
            base_url=server,
        )

    out = ok(cli, "telemetry", "acceptance", "--segment", "code", *RANGE)

    lines = out.splitlines()
    assert lines[0] == (
        f"segment {seg}, both arms, windows starting 2026-12-01T02:30:00 .. "
        "2026-12-01T03:30:00: 2 windows, 19 requests"
    )
    assert lines[1] == (
        "accepted 36 of 60 drafted tokens (0.60) in 20 drafts, per position "
        "0.80 / 0.60 / 0.40 [16, 12, 8]"
    )
    rows = {line.split()[1]: line.split()[3:-1] for line in lines if line.startswith("│")}
    assert rows["0-15"] == ["40", "│", "30", "│", "0.75"]
    assert rows["16-63"] == ["20", "│", "6", "│", "0.30"]
    assert rows["256+"] == ["0", "│", "0", "│", "-"]

    spec = json.loads(
        ok(
            cli,
            "telemetry",
            "acceptance",
            "--segment",
            str(seg),
            "--arm",
            "spec",
            *RANGE,
            "-o",
            "json",
        )
    )
    assert (spec["windows"], spec["requests"], spec["accepted_tokens"]) == (1, 10, 36)
    assert spec["acceptance_by_response_position"][0] == {
        "bucket": "0-15",
        "drafted_tokens": 40,
        "accepted_tokens": 30,
        "acceptance_rate": 0.75,
    }
    assert "no segment named 'chat'" in refused(
        cli, 1, "telemetry", "acceptance", "--segment", "chat", *RANGE
    )
    assert "range_too_long" in refused(
        cli,
        1,
        "telemetry",
        "acceptance",
        "--segment",
        "code",
        "--since",
        "2026-01-01T00:00:00Z",
        "--until",
        "2026-12-01T00:00:00Z",
    )
