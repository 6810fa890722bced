"""Settings in nested groups, read from flat environment variables.

A plane's settings (`ControlSettings`, `GatewaySettings`) hold groups, one per
subsystem. Each group is a pydantic-settings class of its own whose env prefix
extends the plane's, so a field's variable is the plane's prefix, the group's,
then the field: `settings.quota.redis_failure` is
`SPECROUTE_GATEWAY_QUOTA_REDIS_FAILURE`. That variable's name, lower-cased and
without the plane's prefix, is also the keyword the plane's class takes
(`GatewaySettings(quota_redis_failure="open")`) and the key `model_copy(update=)`
takes, so a setting has one flat name everywhere outside the code that reads it.

One unit convention: a duration ends in `_s` (seconds) or `_ms`, a size in
`_bytes`, a retention in `_days`. The names renamed to it (`..._seconds`) still
work for one release, as variables and as keywords, with a DeprecationWarning.
"""

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import Field
from pydantic_settings import BaseSettings


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and goes away in the next release: use {new}",
        DeprecationWarning,
        stacklevel=4,
    )


def _env(name: str) -> str | None:
    # pydantic-settings reads variables case-insensitively; so do the old names.
    wanted = name.upper()
    return next((value for key, value in os.environ.items() if key.upper() == wanted), None)


def _renamed_keywords(cls: type[BaseSettings], values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the old keywords of `cls.renamed` turned into the new ones (a
    new keyword given too wins)."""
    renamed: Mapping[str, str] = getattr(cls, "renamed", {})
    for old, new in renamed.items():
        if old in values:
            _deprecated(old, new)
            value = values.pop(old)
            values.setdefault(new, value)
    return values


def _apply_renames(cls: type[BaseSettings], values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the old names of `cls.renamed` turned into the new ones, from the
    keywords given and from the environment (a new name set either way wins)."""
    values = _renamed_keywords(cls, values)
    prefix = str(cls.model_config.get("env_prefix", ""))
    renamed: Mapping[str, str] = getattr(cls, "renamed", {})
    for old, new in renamed.items():
        old_value = _env(prefix + old)
        if old_value is not None and new not in values and _env(prefix + new) is None:
            _deprecated((prefix + old).upper(), (prefix + new).upper())
            values[new] = old_value
    return values


class SettingsGroup(BaseSettings):
    """One subsystem's settings. A subclass sets `env_prefix` (the plane's prefix
    plus the group's) and may list `renamed` fields (old name -> new)."""

    renamed: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **values: Any) -> None:
        super().__init__(**_apply_renames(type(self), values))


class PlaneSettings(BaseSettings):
    """A plane's settings: its own fields, and groups (fields typed as a
    `SettingsGroup`) that also take their flat names as keywords."""

    renamed: ClassVar[Mapping[str, str]] = {}

    keep_alive_s: int = Field(
        default=75,
        ge=1,
        description=(
            "How long an idle client connection stays open for its next request. Longer "
            "than a load balancer's idle timeout (60 s on many), so the server never closes "
            "a connection the client is reusing at that moment (a reset request); uvicorn's "
            "own default is 5 s."
        ),
    )

    def __init__(self, **values: Any) -> None:
        super().__init__(**self._route(_apply_renames(type(self), values)))

    @classmethod
    def groups(cls) -> dict[str, type[SettingsGroup]]:
        """Field name -> group class, in declaration order."""
        found: dict[str, type[SettingsGroup]] = {}
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, SettingsGroup):
                found[name] = annotation
        return found

    @classmethod
    def flat_names(cls) -> dict[str, tuple[str, str]]:
        """Flat name (the variable without the plane's prefix, lower case) ->
        (group, field) for every group field."""
        top = str(cls.model_config.get("env_prefix", ""))
        names: dict[str, tuple[str, str]] = {}
        for group, group_cls in cls.groups().items():
            prefix = str(group_cls.model_config.get("env_prefix", ""))
            assert prefix.upper().startswith(top.upper()), (group, prefix, top)
            head = prefix[len(top) :].lower()
            for field in group_cls.model_fields:
                names[head + field] = (group, field)
            for old in group_cls.renamed:
                names[head + old] = (group, old)
        return names

    @classmethod
    def _split(cls, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Take the flat names of group fields out of `values`: group -> its changes."""
        flat = cls.flat_names()
        touched: dict[str, dict[str, Any]] = {}
        for key in [k for k in values if k in flat]:
            group, field = flat[key]
            touched.setdefault(group, {})[field] = values.pop(key)
        return touched

    @classmethod
    def _route(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Flat keywords into their groups; a group given as a mapping or touched is
        built by its class, so the variables of its other fields are still read."""
        touched = cls._split(values)
        for group, group_cls in cls.groups().items():
            given = values.get(group)
            if isinstance(given, SettingsGroup):
                if group in touched:
                    values[group] = _updated(given, touched[group])
            elif given is not None or group in touched:
                values[group] = group_cls(**(dict(given) if given else {}) | touched.get(group, {}))
        return values

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied; flat names of group fields go to their
        group (validated there), the plane's own fields as pydantic copies them."""
        if not update:
            return super().model_copy(deep=deep)
        own = _renamed_keywords(type(self), dict(update))
        for group, changes in type(self)._split(own).items():
            own[group] = _updated(getattr(self, group), changes)
        return super().model_copy(update=own, deep=deep)


def _updated(group: SettingsGroup, changes: dict[str, Any]) -> SettingsGroup:
    """A built group with `changes` (old names allowed) validated in; its other values
    kept as they are, not read again from the environment."""
    changes = _renamed_keywords(type(group), changes)
    return type(group).model_validate(group.model_dump() | changes)


class AuthFailureLimits(SettingsGroup):
    """The rate limit on failed authentications per source address; each plane's
    subclass sets the env prefix (both planes limit the same way)."""

    burst: int = Field(
        default=20,
        ge=1,
        description=(
            "Failed authentications one source address may make in a burst; past it, its "
            "requests are 429 auth_rate_limited with Retry-After until failures age out."
        ),
    )
    refill_per_second: float = Field(
        default=1.0,
        gt=0,
        description="Failed authentications per second an address regains (the steady rate).",
    )
    max_addresses: int = Field(
        default=10_000,
        ge=1,
        description=(
            "Source addresses the failure table tracks at once; past it, the least "
            "recently failed address is forgotten (bounded memory)."
        ),
    )


class TlsFiles(SettingsGroup):
    """HTTPS served by the process itself; each plane's subclass sets the env prefix."""

    certfile: Path | None = Field(
        default=None,
        description=(
            "PEM certificate (chain) to serve HTTPS with; needs ssl_keyfile. Unset: plain "
            "HTTP (TLS ends at a proxy or load balancer in front)."
        ),
    )
    keyfile: Path | None = Field(default=None, description="PEM private key of ssl_certfile.")
