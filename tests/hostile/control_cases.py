"""The control-plane inputs a hostile probe got a 500 for, each with the typed 4xx
it must get: (name, request, expected status, expected error code)."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specwire.artifacts import BUNDLED_PAIR_DIR
from tests.hostile.model_dirs import BREAKAGES, write_broken_drafts
from tests.hostile.values import LONE_SURROGATE, nested


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    status: int
    code: str
    json: Any = None
    content: bytes | None = None
    headers: dict[str, bytes] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    message_has: tuple[str, ...] = ()  # substrings the error message must contain


def control_cases(ids: dict[str, int], models_root: Path) -> list[Case]:
    """`ids`: pair, segment (with its version 1), pool of a seeded control plane;
    `models_root`: a configured model root where broken drafts are written."""
    pair, segment = ids["pair"], ids["segment"]
    versions = f"/admin/v1/pairs/{pair}/versions"
    target = str(BUNDLED_PAIR_DIR / "target")

    def version_body(draft: str) -> dict[str, Any]:
        return {
            "method": "draft_model",
            "target_ref": target,
            "draft_ref": draft,
            "num_speculative_tokens": 3,
        }

    cases = [
        Case(
            f"If-Match {label}",
            "PATCH",
            f"/admin/v1/segments/{segment}",
            422,
            "invalid_value",
            json={"priority": 3},
            headers={"If-Match": value},
        )
        for label, value in (
            ("Arabic-Indic digits", '"١٢"'.encode()),
            ("superscript digit", 'W/"²"'.encode()),
            ("5,000 digits", b'"' + b"9" * 5000 + b'"'),
            ("beyond 64 bits", b'"99999999999999999999"'),
        )
    ]
    cases += [
        Case(
            "engine_args nested 400 deep",
            "POST",
            "/admin/v1/pools",
            422,
            "invalid_body",
            json={
                "name": "deep",
                "served_model_name": "m",
                "target_ref": target,
                "engine_args": nested(400),
            },
            message_has=("nests deeper",),
        ),
        Case(
            "lone surrogate in a list field",
            "POST",
            "/admin/v1/tenants",
            422,
            "invalid_body",
            content=b'{"name": "t-sur", "allowed_models": ["\\ud800"]}',
            message_has=("surrogate",),
        ),
        Case(
            "lone surrogate in a key",
            "POST",
            "/admin/v1/pools",
            422,
            "invalid_body",
            json={
                "name": "k",
                "served_model_name": "m",
                "target_ref": target,
                "engine_args": {LONE_SURROGATE: 1},
            },
        ),
    ]
    for label, since, status, code in (
        ("without a timezone", "2026-01-01T00:00:00", 422, "invalid_value"),
        ("at the lower limit, east of UTC", "0001-01-01T00:00:00+14:00", 200, ""),
        ("at the upper limit, west of UTC", "9999-12-31T23:59:59-14:00", 200, ""),
    ):
        cases.append(
            Case(
                f"audit since {label}",
                "GET",
                "/admin/v1/audit",
                status,
                code,
                params={"since": since},
            )
        )
    for ref in ("../../", "/", "/etc", "/proc/self", "engine/../../", "a\x00b"):
        cases.append(
            Case(
                f"draft_ref {ref!r}",
                "POST",
                versions,
                422,
                "artifact_outside_model_roots",
                json=version_body(ref),
            )
        )
    for name, path in write_broken_drafts(models_root).items():
        file, _, field_name = BREAKAGES[name]
        cases.append(
            Case(
                f"draft directory: {name}",
                "POST",
                versions,
                422,
                "",  # the code depends on the check (malformed / unreadable / unsupported)
                json=version_body(str(path)),
                message_has=(file, field_name),
            )
        )
    return cases
