"""Nested settings groups read from flat variables, one unit convention, and the
old `_seconds` names kept one release with a DeprecationWarning."""

import pytest
from pydantic import ValidationError

from control.settings import ControlSettings
from gateway.settings import GatewaySettings
from specwire.settings import PlaneSettings

PLANES: list[type[PlaneSettings]] = [ControlSettings, GatewaySettings]


def test_a_group_field_reads_its_flat_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECROUTE_GATEWAY_QUOTA_REDIS_FAILURE", "closed")
    monkeypatch.setenv("SPECROUTE_GATEWAY_TELEMETRY_WINDOW_S", "4")
    monkeypatch.setenv("SPECROUTE_DATABASE_URL", "postgresql+psycopg://db/x")
    monkeypatch.setenv("SPECROUTE_GUARD_INTERVAL_S", "7.5")
    gateway, control = GatewaySettings(), ControlSettings()
    assert gateway.quota.redis_failure == "closed"
    assert gateway.telemetry.window_s == 4
    assert control.database.url == "postgresql+psycopg://db/x"
    assert control.resolved_database_url() == "postgresql+psycopg://db/x"
    assert control.automation.guard_interval_s == 7.5


def test_a_flat_keyword_goes_to_its_group_and_the_rest_still_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECROUTE_GATEWAY_QUOTA_REDIS_TIMEOUT_S", "0.5")
    settings = GatewaySettings(quota_redis_failure="open", connect_timeout_s=1.5)
    assert settings.quota.redis_failure == "open"
    assert settings.quota.redis_timeout_s == 0.5  # from the environment, same group
    assert settings.upstream.connect_timeout_s == 1.5
    # A keyword beats the variable, as for a plane's own fields.
    monkeypatch.setenv("SPECROUTE_GATEWAY_QUOTA_REDIS_FAILURE", "closed")
    assert GatewaySettings(quota_redis_failure="local").quota.redis_failure == "local"


def test_a_bad_value_is_refused_in_its_group() -> None:
    with pytest.raises(ValidationError):
        GatewaySettings(quota_redis_failure="sometimes")
    with pytest.raises(ValidationError):
        GatewaySettings().model_copy(update={"breaker_cooldown_s": -1})


def test_model_copy_takes_flat_names_and_keeps_the_other_values() -> None:
    base = ControlSettings(guard_on_telemetry=True, guard_interval_s=9.0, dev_tokens=True)
    copy = base.model_copy(update={"guard_on_telemetry": False, "auth_failure_burst": 3})
    assert copy.automation.guard_on_telemetry is False
    assert copy.automation.guard_interval_s == 9.0
    assert copy.auth_failure.burst == 3 and copy.dev_tokens is True
    assert base.automation.guard_on_telemetry is True  # the original is untouched


def test_old_second_names_still_work_with_a_deprecation_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECROUTE_GATEWAY_TELEMETRY_FLUSH_SECONDS", "7")
    monkeypatch.setenv("SPECROUTE_WORKER_STALE_AFTER_SECONDS", "30")
    with pytest.warns(DeprecationWarning, match="TELEMETRY_FLUSH_SECONDS"):
        assert GatewaySettings().telemetry.flush_s == 7.0
    with pytest.warns(DeprecationWarning, match="WORKER_STALE_AFTER_SECONDS"):
        assert ControlSettings().workers.stale_after_s == 30.0
    with pytest.warns(DeprecationWarning, match="shutdown_grace_seconds"):
        assert GatewaySettings(shutdown_grace_seconds=3).shutdown_grace_s == 3
    with pytest.warns(DeprecationWarning, match="monitor_lookback_seconds"):
        assert ControlSettings(monitor_lookback_seconds=60).automation.monitor_lookback_s == 60
    # An old keyword reaches a group already built, in a copy or beside it.
    with pytest.warns(DeprecationWarning, match="window_seconds"):
        copied = GatewaySettings().model_copy(update={"telemetry_window_seconds": 3})
    assert copied.telemetry.window_s == 3
    built = GatewaySettings().telemetry
    with pytest.warns(DeprecationWarning, match="window_seconds"):
        given = GatewaySettings(telemetry=built, telemetry_window_seconds=4)
    assert given.telemetry.window_s == 4 and given.telemetry.flush_s == built.flush_s
    # The new name wins where both are set.
    monkeypatch.setenv("SPECROUTE_GATEWAY_TELEMETRY_FLUSH_S", "2")
    assert GatewaySettings().telemetry.flush_s == 2.0


@pytest.mark.parametrize("plane", PLANES)
def test_every_group_field_has_one_flat_name_and_durations_end_in_s(
    plane: type[PlaneSettings],
) -> None:
    flat = plane.flat_names()
    groups = plane.groups()
    assert len(groups) >= 5
    fields = [(g, f) for g, cls in groups.items() for f in cls.model_fields]
    assert {v for v in flat.values() if v[1] in groups[v[0]].model_fields} == set(fields)
    names = [f for _, f in fields] + list(plane.model_fields)
    assert [n for n in names if n.endswith("_seconds")] == []
    # The flat name is the variable without the plane's prefix.
    prefix = str(plane.model_config["env_prefix"])
    for name, (group, field) in flat.items():
        group_prefix = str(groups[group].model_config["env_prefix"])
        assert (prefix + name).upper() == (group_prefix + field).upper()
