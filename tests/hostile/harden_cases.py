"""Hostile inputs of issue #21 (Hardening II) against control: engine arguments that
would run code or take the launcher's flags, unauthenticated malformed bodies, bodies
over the size limit (declared, sent, and chunked on a raw socket), and an agent
token reused after its pool was deleted. Each has the status it must get; a 2xx
where a refusal is due counts as a wrong 2xx."""

from typing import Any

from specwire.artifacts import BUNDLED_PAIR_DIR
from tests.hostile.control_cases import Case
from tests.hostile.control_run import HttpClient, Tally, send_case
from tests.hostile.raw_bodies import chunk, exchange, post_head

# The probe's 16 values: 11 that reached build_server_command, 5 launcher flags.
HOSTILE_ENGINE_ARGS: tuple[tuple[str, Any, str], ...] = (
    ("trust-remote-code", True, "engine_arg_not_allowed"),
    ("worker-extension-cls", "os.system", "engine_arg_not_allowed"),
    ("worker-cls", "os.system", "engine_arg_not_allowed"),
    ("lora-modules", ["x=/etc"], "engine_arg_outside_model_roots"),
    ("tokenizer", "/etc", "engine_arg_not_allowed"),
    ("chat-template", "/etc/passwd", "engine_arg_not_allowed"),
    ("allowed-local-media-path", "/", "engine_arg_not_allowed"),
    ("api-key", "x", "engine_arg_reserved"),
    ("logits-processors", ["os.system"], "engine_arg_not_allowed"),
    ("hf-overrides", {"architectures": ["X"]}, "engine_arg_not_allowed"),
    ("download-dir", "/tmp", "engine_arg_not_allowed"),
    ("model", "/etc", "engine_arg_reserved"),
    ("host", "0.0.0.0", "engine_arg_reserved"),
    ("port", 1, "engine_arg_reserved"),
    ("served-model-name", "x", "engine_arg_reserved"),
    ("speculative-config", {"method": "ngram"}, "engine_arg_reserved"),
)
MIB = 1 << 20


def harden_cases(ids: dict[str, int], internal_token: str) -> list[Case]:
    target = str(BUNDLED_PAIR_DIR / "target")
    create = {"name": "h", "served_model_name": "m", "target_ref": target}
    cases = [
        Case(
            f"engine_args {flag} ({method})",
            method,
            path,
            422,
            code,
            json=body | {"engine_args": {flag: value}},
            headers=headers,
        )
        for flag, value, code in HOSTILE_ENGINE_ARGS
        for method, path, body, headers in (
            ("POST", "/admin/v1/pools", create, {}),
            # If-Match: * (any version): the change is refused for its engine_args.
            ("PATCH", f"/admin/v1/pools/{ids['pool']}", {}, {"If-Match": b"*"}),
        )
    ]
    for path in ("/admin/v1/pools", "/admin/v1/tenants", "/internal/v1/workers/w/heartbeat"):
        for label, auth in (("no token", b""), ("a wrong token", b"Bearer sr-admin-wrong")):
            cases.append(
                Case(
                    f"malformed body with {label} to {path}",
                    "POST",
                    path,
                    401,
                    "",
                    content=b'{"name": ',
                    headers={"Authorization": auth},
                )
            )
    cases += [
        Case(
            "2 MiB body",
            "POST",
            "/admin/v1/tenants",
            413,
            "body_too_large",
            content=b'{"name": "' + b"a" * (2 * MIB) + b'"}',
        ),
        Case(
            "11 MiB telemetry body",
            "POST",
            "/internal/v1/telemetry",
            413,
            "body_too_large",
            content=b" " * (11 * MIB),
            headers={"Authorization": f"Bearer {internal_token}".encode()},
        ),
    ]
    return cases


def run_cases(client: HttpClient, cases: list[Case], auth: dict[str, str], tally: Tally) -> None:
    for case in cases:
        response = send_case(client, case, auth)
        tally.add(response.status_code, case.name, expected=case.status)


def token_reuse_after_deletion(client: HttpClient, auth: dict[str, str], tally: Tally) -> None:
    """Delete a pool, create the next one (the same id on SQLite), and try the old
    agent token on it: heartbeat and both spec reads must be refused."""
    for round_ in range(5):
        created = client.post(
            "/admin/v1/pools",
            json={"name": f"reuse-{round_}", "served_model_name": "m", "target_ref": "/m"},
            headers=auth,
        )
        pool = created.json()["id"]
        token = client.post(
            f"/admin/v1/pools/{pool}/agent-tokens",
            json={"name": f"reuse-agent-{round_}", "allowed_endpoints": ["http://127.0.0.1"]},
            headers=auth,
        ).json()["token"]
        _delete_pool(client, pool, auth)
        after = client.post(
            "/admin/v1/pools",
            json={"name": f"reuse-{round_}-next", "served_model_name": "m", "target_ref": "/m"},
            headers=auth,
        ).json()["id"]
        old = {"Authorization": f"Bearer {token}"}
        beat = {
            "pool_id": after,
            "endpoint_url": "http://127.0.0.1:8100",
            "healthy": True,
            "draft_loaded": False,
            "kv_cache_usage": 0.0,
            "running": 0,
            "waiting": 0,
        }
        answers = {
            "heartbeat": client.post("/internal/v1/workers/w/heartbeat", json=beat, headers=old),
            "spec": client.get(f"/internal/v1/pools/{after}/spec", headers=old),
            "spec by name": client.get(
                f"/internal/v1/pools/by-name/reuse-{round_}-next/spec", headers=old
            ),
        }
        for what, response in answers.items():
            tally.add(response.status_code, f"old agent token {what}", expected=401)
        _delete_pool(client, after, auth)


def _delete_pool(client: HttpClient, pool: int, auth: dict[str, str]) -> None:
    etag = client.get(f"/admin/v1/pools/{pool}", headers=auth).headers.get("ETag", "*")
    deleted = client.delete(f"/admin/v1/pools/{pool}", headers=auth | {"If-Match": etag})
    assert deleted.status_code == 204, deleted.text


def raw_body_cases(port: int, admin: str, tally: Tally) -> None:
    """On a real server: huge bodies announced and never sent, chunked bodies never
    finished. Each must be answered (401 or 413) without the rest of the body."""

    def head(token: str | None, length: int | None) -> bytes:
        return post_head("/admin/v1/tenants", token=token, length=length)

    chunks = b"".join(chunk(b" " * 65536) for _ in range(20))
    for what, request, body, expected in (
        ("200 MB announced, no token", head(None, 200_000_000), b"", 401),
        ("200 MB announced, wrong token", head("sr-admin-wrong", 200_000_000), b"", 401),
        ("2 MiB announced, admin", head(admin, 2 * MIB), b"", 413),
        ("chunked 1.25 MiB unfinished, no token", head(None, None), chunks, 401),
        ("chunked 1.25 MiB unfinished, admin", head(admin, None), chunks, 413),
    ):
        for _ in range(10):
            tally.add(
                exchange(port, request, body, timeout_s=10)[0], f"raw: {what}", expected=expected
            )


def id_oracle_cases(
    client: HttpClient, auth: dict[str, str], ids: dict[str, int], tally: Tally
) -> None:
    """Tokens that may not use a route, on an existing and on a missing id: each pair
    must get 403 with the same body (no existence oracle). The routes' scope, and the
    two checks that depend on more than it (an agent token needs `internal:agent`;
    revoking a token needs its scopes)."""

    def mint(name: str, scopes: list[str]) -> dict[str, Any]:
        created = client.post(
            "/admin/v1/admin-tokens", json={"name": name, "scopes": scopes}, headers=auth
        )
        assert created.status_code == 201, created.text
        body: dict[str, Any] = created.json()
        return body

    reader = {"Authorization": f"Bearer {mint('oracle-reader', ['admin:read'])['token']}"}
    writer = {"Authorization": f"Bearer {mint('oracle-writer', ['admin:write'])['token']}"}
    gateway = {"Authorization": f"Bearer {mint('oracle-gw', ['internal:gateway'])['token']}"}
    stronger = mint("oracle-rw", ["admin:read", "admin:write"])["id"]
    missing = 999_999
    enrol = {"name": "oracle-agent", "allowed_endpoints": ["http://127.0.0.1"]}
    pairs: list[tuple[str, str, str, str, dict[str, str], Any]] = [
        (
            "GET pool as admin:write",
            "GET",
            f"/pools/{ids['pool']}",
            f"/pools/{missing}",
            writer,
            None,
        ),
        (
            "PATCH pool as admin:read",
            "PATCH",
            f"/pools/{ids['pool']}",
            f"/pools/{missing}",
            reader,
            {},
        ),
        (
            "GET rollout as gateway",
            "GET",
            f"/rollouts/{ids['rollout']}",
            f"/rollouts/{missing}",
            gateway,
            None,
        ),
        (
            "DELETE tenant as admin:read",
            "DELETE",
            f"/tenants/{ids['tenant']}",
            f"/tenants/{missing}",
            reader,
            None,
        ),
        (
            "agent token without internal:agent",
            "POST",
            f"/pools/{ids['pool']}/agent-tokens",
            f"/pools/{missing}/agent-tokens",
            writer,
            enrol,
        ),
        (
            "revoke a stronger token",
            "POST",
            f"/admin-tokens/{stronger}/revoke",
            f"/admin-tokens/{missing}/revoke",
            writer,
            None,
        ),
    ]
    for what, method, existing, absent, headers, body in pairs:
        answers = [
            client.request(
                method,
                f"/admin/v1{path}",
                json=body,
                headers=headers | {"If-Match": "*"},
            )
            for path in (existing, absent)
        ]
        for label, answer in zip(("existing", "missing"), answers, strict=True):
            tally.add(answer.status_code, f"oracle: {what} ({label} id)", expected=403)
        # The message may name the id asked for; everything else must be equal.
        shapes = [
            _shape(a.json()["error"], path)
            for a, path in zip(answers, (existing, absent), strict=True)
        ]
        if shapes[0] != shapes[1]:
            tally.unexpected.append(f"oracle: {what}: bodies differ: {shapes}")


def _shape(error: dict[str, Any], path: str) -> dict[str, Any]:
    """An error body with the path's id in its message replaced by N."""
    ident = path.split("/")[2]
    return error | {"message": str(error.get("message", "")).replace(ident, "N")}
