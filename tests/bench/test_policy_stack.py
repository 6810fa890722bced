"""The policy benchmark's set-up on a real control plane (no engines): its threshold
set reaches control, the tenants may force an arm for the static phases, and the
pools serve a LoRA adapter only when a chosen segment names one."""

from pathlib import Path

import httpx
import pytest
import typer

from bench.policy_cli import allow_overrides, choose_segments
from demo.plan import ALL_SEGMENTS, DEFAULT_SEGMENTS, DEMO_ADAPTER, DEMO_THRESHOLDS
from demo.stack import DemoStack, prepare_data_dir


def test_the_default_mix_leaves_out_adapter_segments_and_names_are_checked() -> None:
    default = choose_segments([], None)
    assert default == DEFAULT_SEGMENTS
    assert [s.name for s in default] == [s.name for s in ALL_SEGMENTS if s.adapter is None]
    assert len(default) == len(ALL_SEGMENTS) - 1
    chosen = choose_segments(["cipher-adapter", "prose", "prose"], 200)
    assert [(s.name, s.users, s.adapter) for s in chosen] == [
        ("cipher-adapter", 200, DEMO_ADAPTER),
        ("prose", 200, None),
    ]
    with pytest.raises(typer.BadParameter, match=r"unknown segment.*'nope'.*cipher-adapter"):
        choose_segments(["prose", "nope"], None)


def test_register_with_a_holdout_andallow_overrides(tmp_path: Path) -> None:
    stack = DemoStack.create(prepare_data_dir(tmp_path / "run"))
    try:
        stack.migrate()
        stack.start_control(lambda _message: None)
        segments = choose_segments([], None)
        plan = stack.register({**DEMO_THRESHOLDS, "holdout_percentage": 2.0}, segments)
        allow_overrides(stack)
        admin = httpx.Client(
            base_url=f"{stack.endpoints.control_url}/admin/v1",
            headers={"Authorization": f"Bearer {stack.endpoints.admin_token}"},
        )
        with admin:
            sets = admin.get("/threshold-sets").json()["items"]
            tenants = admin.get("/tenants").json()["items"]
            pools = admin.get("/pools").json()["items"]
            registered = {x["name"] for x in admin.get("/segments").json()["items"]}
        mine = next(s for s in sets if s["id"] == plan.threshold_set_id)
        assert mine["holdout_percentage"] == 2.0
        assert registered == {x.name for x in segments}
        # no segment names an adapter: neither pool is LoRA-enabled
        assert [p["engine_args"].get("lora-modules") for p in pools] == [None, None]
        assert len(pools) == 2
        assert mine["no_benefit_action"] == DEMO_THRESHOLDS["no_benefit_action"]
        assert {t["name"]: t["override_allowed"] for t in tenants} == dict.fromkeys(
            plan.tenant_keys, True
        )
    finally:
        stack.stack.stop()
