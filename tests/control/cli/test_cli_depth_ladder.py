"""`specroute admin rollout depth-ladder set|show|clear` against a real control plane
over HTTP: the stored ladder, the snapshot the gateway reads, and the API's typed 422
(`depth_ladder_invalid`) as a one-line error."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import Result

from specwire import PolicySnapshot
from specwire.admin_client import AdminClient
from tests.control.cli.conftest import TOKEN, as_json, ok, refused
from tests.control.conftest import THRESHOLDS, write_model_dir

INTERNAL = "cli-internal"  # the conftest server's internal token


@pytest.fixture
def ladder_setup(cli: Callable[..., Result], tmp_path: Path) -> dict[str, int]:
    """Pair `tiny` at k = 3 (the rollout's), 5 and 2, a spec pool for each, a probabilistic
    k = 2 sibling (differs in more than k), a baseline pool, and rollout `code-tiny`."""
    target = str(write_model_dir(tmp_path / "target"))
    draft = str(write_model_dir(tmp_path / "draft"))
    ids: dict[str, int] = {}
    for name, k, sampling in (
        ("spec", 3, "greedy"),
        ("spec-k5", 5, "greedy"),
        ("spec-k2", 2, "greedy"),
        ("odd-k2", 2, "probabilistic"),
    ):
        version = as_json(
            cli, "pair", "register", "tiny", "--target", target, "--draft", draft,
            "--k", str(k), "--sample-method", sampling,
        )  # fmt: skip
        ids[f"v-{name}"] = int(version["id"])
        pool = as_json(
            cli, "pool", "create", name, "--model", "tiny", "--target", target,
            "--pair-version", str(version["id"]),
        )  # fmt: skip
        ids[name] = int(pool["id"])
    ids["base"] = int(
        as_json(cli, "pool", "create", "base", "--model", "tiny", "--target", target)["id"]
    )
    ok(cli, "segment", "create", "code", "--selector", '{"tasks": ["code"]}')
    ok(cli, "thresholds", "create", "default", "--values", json.dumps(THRESHOLDS))
    ok(
        cli, "rollout", "create", "code-tiny", "--segment", "code",
        "--pair-version", str(ids["v-spec"]), "--spec-pool", "spec",
        "--baseline-pool", "base", "--thresholds", "default",
    )  # fmt: skip
    return ids


def _snapshot_ladder(server: str) -> Any:
    with AdminClient(server, TOKEN) as admin:
        rollout_id = admin.rollouts.id_of("code-tiny")
    got = httpx.get(
        f"{server}/internal/v1/snapshot", headers={"Authorization": f"Bearer {INTERNAL}"}
    )
    assert got.status_code == 200, got.text
    snap = PolicySnapshot.model_validate_json(got.content)
    [rollout] = [r for r in snap.rollouts if r.id == rollout_id]
    return rollout.depth_ladder


def test_set_show_and_clear_store_the_ladder(
    cli: Callable[..., Result], server: str, ladder_setup: dict[str, int]
) -> None:
    ids = ladder_setup
    line = ok(
        cli, "rollout", "depth-ladder", "set", "code-tiny",
        "--rung", "spec-k5:2", "--rung", "spec:6", "--rung", "spec-k2",
        "--hysteresis", "0.75", "--min-dwell-s", "10",
    ).strip()  # fmt: skip
    assert line == (
        f"rollout code-tiny: depth ladder k=5 pool {ids['spec-k5']} up to 2, "
        f"k=3 pool {ids['spec']} up to 6, k=2 pool {ids['spec-k2']}; hysteresis 0.75, "
        "dwell 10 s, load averaged over 2 s, acceptance reset 0.15"
    )

    with AdminClient(server, TOKEN) as admin:
        found = admin.rollouts.find("code-tiny")
    stored = found["depth_ladder"]
    assert stored == {
        "rungs": [
            {"pool_id": ids["spec-k5"], "num_speculative_tokens": 5, "max_load": 2.0},
            {"pool_id": ids["spec"], "num_speculative_tokens": 3, "max_load": 6.0},
            {"pool_id": ids["spec-k2"], "num_speculative_tokens": 2, "max_load": None},
        ],
        "hysteresis": 0.75,
        "min_dwell_s": 10.0,
        "load_smoothing_s": 2.0,
        "acceptance_reset": 0.15,
    }
    compiled = _snapshot_ladder(server)
    assert compiled is not None and compiled.model_dump() == stored

    assert as_json(cli, "rollout", "depth-ladder", "show", "code-tiny") == stored
    table = ok(cli, "rollout", "depth-ladder", "show", str(found["id"]))  # by id
    for name in ("spec-k5", "spec-k2"):
        assert name in table
    assert "rollout code-tiny: depth ladder k=5" in table

    cleared = as_json(cli, "rollout", "depth-ladder", "clear", "code-tiny")
    assert cleared["depth_ladder"] is None
    assert ok(cli, "rollout", "depth-ladder", "show", "code-tiny").strip() == (
        "rollout code-tiny: no depth ladder"
    )
    assert as_json(cli, "rollout", "depth-ladder", "show", "code-tiny") is None
    assert _snapshot_ladder(server) is None


def test_refusals_are_one_typed_line(
    cli: Callable[..., Result], server: str, ladder_setup: dict[str, int]
) -> None:
    def set_(*rungs: str) -> str:
        args = [a for r in rungs for a in ("--rung", r)]
        return refused(cli, 1, "rollout", "depth-ladder", "set", "code-tiny", *args)

    assert (
        set_("spec:4", "base") == "error 422 depth_ladder_invalid: pool 'base' is a baseline pool"
    )
    differs = set_("spec:4", "odd-k2")
    assert differs.startswith("error 422 depth_ladder_invalid: pool 'odd-k2' serves pair version")
    assert differs.endswith("in more than k: draft_sample_method")
    assert set_("spec-k2:4", "spec").startswith(
        "error 422 depth_ladder_invalid: the rungs' depths must decrease strictly"
    )
    assert set_("spec-k5:4", "spec-k2").startswith(
        "error 422 depth_ladder_invalid: the ladder must include the rollout's spec pool"
    )
    # bounds that do not increase: the schema's plain 422
    assert set_("spec-k5:4", "spec:3", "spec-k2").startswith("error 422 ")
    assert set_("spec:4", "nosuch") == "error 404 not_found: no pool named 'nosuch'"
    # bad input on the command line: exit 2, nothing sent
    bad = refused(cli, 2, "rollout", "depth-ladder", "set", "code-tiny", "--rung", "spec:x")
    assert bad == "error: --rung wants POOL:MAX_LOAD or POOL, got 'spec:x'"
    stale = refused(cli, 1, "rollout", "depth-ladder", "clear", "code-tiny", "--if-match", "99")
    assert stale.startswith("error 412 stale_version:")

    with AdminClient(server, TOKEN) as admin:
        after = admin.rollouts.find("code-tiny")
    assert after["depth_ladder"] is None and after["version"] == 1
    assert _snapshot_ladder(server) is None
