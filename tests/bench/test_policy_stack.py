"""The policy benchmark's set-up on a real control plane (no engines): its threshold
set reaches control, and the tenants may force an arm for the static phases."""

from pathlib import Path

import httpx

from bench.policy_cli import allow_overrides
from demo.plan import DEMO_THRESHOLDS
from demo.stack import DemoStack, prepare_data_dir


def test_register_with_a_holdout_andallow_overrides(tmp_path: Path) -> None:
    stack = DemoStack.create(prepare_data_dir(tmp_path / "run"))
    try:
        stack.migrate()
        stack.start_control(lambda _message: None)
        plan = stack.register({**DEMO_THRESHOLDS, "holdout_percentage": 2.0})
        allow_overrides(stack)
        admin = httpx.Client(
            base_url=f"{stack.endpoints.control_url}/admin/v1",
            headers={"Authorization": f"Bearer {stack.endpoints.admin_token}"},
        )
        with admin:
            sets = admin.get("/threshold-sets").json()
            tenants = admin.get("/tenants").json()
        mine = next(s for s in sets if s["id"] == plan.threshold_set_id)
        assert mine["holdout_percentage"] == 2.0
        assert mine["no_benefit_action"] == DEMO_THRESHOLDS["no_benefit_action"]
        assert {t["name"]: t["override_allowed"] for t in tenants} == dict.fromkeys(
            plan.tenant_keys, True
        )
    finally:
        stack.stack.stop()
