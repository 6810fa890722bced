"""A flip's evidence is complete: fetched back by window id, it recomputes to the same numbers."""

import math

import numpy as np
from fastapi.testclient import TestClient

from control.app import create_app
from control.automation.budget import family_alpha
from control.automation.gather import SHIFT_MULTIPLES
from control.automation.pipeline import Job, judge_one
from control.db import Database
from control.settings import ControlSettings
from control.stats import BlockEstimate, build_panel, gaussian_cusum
from control.stats.load_model import adjusted_blocks, arm_cells, fit_line, joint_slopes, slope_bias
from control.stats.panel import window_arrays
from specwire import TelemetryWindow
from tests.control.automation import scenario as sc
from tests.control.stats.simulate import window_row
from tests.fixtures.db import ADMIN_TOKEN


def test_a_rollback_recomputes_from_the_windows_it_names(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    outcome = None
    for _ in range(4):
        sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=30.0, baseline_tpot_ms=20.0)
        outcome = judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, "task-1")
        if outcome.action == "rollback":
            break
    assert outcome is not None and outcome.action == "rollback", outcome
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    evidence = decision.evidence
    stored = evidence["statistics"]["latency_guard"]["cusum"]

    client = TestClient(create_app(settings, committed_database))
    ids = ",".join(str(i) for i in evidence["window_ids"])
    response = client.get(
        f"/admin/v1/telemetry/windows?ids={ids}",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert response.status_code == 200
    fetched = response.json()
    assert [w["id"] for w in fetched] == evidence["window_ids"]

    # Recompute the latency monitor from the fetched documents alone.
    windows = [TelemetryWindow.model_validate(w) for w in fetched]
    starts = sorted({w.window_start for w in windows})
    slots = {s: i for i, s in enumerate(starts)}
    panels = {
        arm: build_panel(
            slots, len(starts), [window_arrays(window_row(w)) for w in windows if w.arm == arm]
        )
        for arm in ("spec", "baseline")
    }
    spec_cells, base_cells = arm_cells(panels["spec"], 0), arm_cells(panels["baseline"], 0)
    spec_line, base_line = fit_line(spec_cells), fit_line(base_cells)
    assert spec_line is not None and base_line is not None
    slopes = joint_slopes(spec_line, base_line)
    adjusted = adjusted_blocks(
        spec_cells, base_cells, spec_line, base_line, slopes, min_requests=10, target_load=None
    )
    blocks = adjusted.blocks
    recorded = [BlockEstimate(*b) for b in evidence["statistics"]["blocks"]["latency"]]
    assert np.allclose([b.estimate for b in blocks], [b.estimate for b in recorded])
    assert np.allclose([b.variance for b in blocks], [b.variance for b in recorded])
    margin = math.log1p(0.1)
    alpha = family_alpha(sc.threshold_row())
    cusum = gaussian_cusum(
        blocks,
        null_value=margin + slope_bias(slopes, adjusted, alpha),
        shifts=[margin * k for k in SHIFT_MULTIPLES],
        alpha=alpha,
        horizon_blocks=1000,
    )
    assert cusum.alarm and stored["alarm"]
    assert math.isclose(cusum.peak, stored["peak"], rel_tol=1e-9)
    assert math.isclose(cusum.threshold, stored["threshold"], rel_tol=1e-12)


def test_windows_by_id_refuses_bad_ids(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    client = TestClient(create_app(control_settings, committed_database))
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for bad in ("", "x", "1,,2,-3", "١", ",".join(["1"] * 1001), "99999999999999"):
        response = client.get(f"/admin/v1/telemetry/windows?ids={bad}", headers=headers)
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["error"]["param"] == "ids" or "ids" in response.text
    assert client.get("/admin/v1/telemetry/windows?ids=1").status_code == 401
    assert client.get("/admin/v1/telemetry/windows?ids=5", headers=headers).json() == []
