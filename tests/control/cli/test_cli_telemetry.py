"""`specroute admin telemetry acceptance` against a served control plane, over windows
posted to its ingestion API."""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from typer.testing import Result

from specwire import Arm
from tests.control.cli.conftest import as_json, ok, refused
from tests.control.conftest import write_model_dir
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


def test_acceptance_by_pair_version_and_of_the_unsegmented_windows(
    cli: Callable[..., Result], server: str, tmp_path: Path
) -> None:
    target = str(write_model_dir(tmp_path / "target"))
    draft = str(write_model_dir(tmp_path / "draft"))
    register = ("pair", "register", "tiny", "--target", target, "--draft", draft, "--k")
    v3, v5 = (int(as_json(cli, *register, k)["id"]) for k in ("3", "5"))
    pool = int(
        as_json(
            cli, "pool", "create", "spec", "--model", "tiny", "--target", target,
            "--pair-version", str(v3),
        )["id"]
    )  # fmt: skip
    seg = int(as_json(cli, "segment", "create", "code", "--selector", '{"tasks": ["code"]}')["id"])
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
                        buckets={"0-15": (60, 36)},
                        pair_version_id=v3,
                    ),
                ),
                (
                    "gw-cli",
                    window(
                        seg,
                        Arm.SPEC,
                        T0,
                        requests=3,
                        drafts=4,
                        per_position=[4, 2],
                        buckets={"0-15": (20, 6)},
                        pair_version_id=v5,
                    ),
                ),
                (
                    "gw-cli",
                    window(
                        None,
                        Arm.SPEC,
                        T0,
                        requests=7,
                        drafts=8,
                        per_position=[6, 4],
                        buckets={"16-63": (24, 10)},
                        pair_version_id=v3,
                    ),
                ),
                ("gw-cli", window(None, Arm.BASELINE, T0, requests=5)),
            ],
            base_url=server,
        )

    by_version = ok(
        cli, "telemetry", "acceptance", "--segment", "code", "--pair-version", str(v5), *RANGE
    )
    assert by_version.splitlines()[:2] == [
        f"segment {seg}, both arms, pair version {v5}, windows starting 2026-12-01T02:30:00 .. "
        "2026-12-01T03:30:00: 1 windows, 3 requests",
        "accepted 6 of 20 drafted tokens (0.30) in 4 drafts, per position 1.00 / 0.50 [4, 2]",
    ]
    unsegmented = ok(cli, "telemetry", "acceptance", "--unsegmented", "--pool", "spec", *RANGE)
    assert unsegmented.splitlines()[:2] == [
        f"no segment, both arms, pool {pool} (pair version {v3}), windows starting "
        "2026-12-01T02:30:00 .. 2026-12-01T03:30:00: 1 windows, 7 requests",
        "accepted 10 of 24 drafted tokens (0.42) in 8 drafts, per position 0.75 / 0.50 [6, 4]",
    ]
    every = as_json(cli, "telemetry", "acceptance", "--unsegmented", *RANGE)
    assert (every["segment_id"], every["windows"], every["requests"]) == (None, 2, 12)
    assert (every["drafted_tokens"], every["accepted_tokens"]) == (24, 10)

    for args in (["--segment", "code", "--unsegmented"], []):
        assert refused(cli, 2, "telemetry", "acceptance", *args, *RANGE) == (
            "error: give one of --segment NAME and --unsegmented"
        )
    mismatch = refused(
        cli, 1, "telemetry", "acceptance", "--segment", "code", "--pool", "spec",
        "--pair-version", str(v5), *RANGE,
    )  # fmt: skip
    assert mismatch.startswith(
        f"error 422 pair_version_mismatch: pool_id {pool} serves pair version {v3}, "
        f"not pair_version_id {v5}"
    )
    assert refused(
        cli, 1, "telemetry", "acceptance", "--unsegmented", "--pair-version", "98765", *RANGE
    ).startswith("error 404 pair_version_not_found")
