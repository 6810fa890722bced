"""The Python SDK for the admin API (`/admin/v1`): one sync client over httpx.

    from control.contract.admin_client import AdminClient, NotFound

    with AdminClient("http://127.0.0.1:8000", token) as admin:
        pool = admin.pools.find("tiny-spec")            # by name, or .get(id)
        admin.pools.update(pool["id"], {"desired_workers": 2})
        for rollout in admin.rollouts.list(state="canary"):  # follows next_cursor
            print(rollout["name"], rollout["percentage"])
        admin.rollouts.act("code-tiny", "promote", reason="SLOs held")

Every method maps to one operation of control's OpenAPI document (a test checks
the operationIds); documents are the API's JSON as dicts. An error answer raises
`ApiError` (or its subclass for the status) carrying the API's `code`; an
unreachable control plane raises `Unreachable`. `update` and `delete` send
If-Match: the ETag passed, or else the one a GET just returned (so a concurrent
change between that GET and the write is still a 412, never a lost update).

It lives in `control.contract` because the engine tools (`engine evaluate`) may
import only the contract of control; it imports httpx and nothing of the project.
"""

from collections.abc import Iterator
from types import TracebackType
from typing import Any

import httpx

DEV_ADMIN_TOKEN = "specroute-admin-dev"
"""The well-known admin token of a control plane started with --dev (never in production)."""

DEFAULT_URL = "http://127.0.0.1:8000"
ADMIN_PREFIX = "/admin/v1"
PAGE_SIZE = 500

Document = dict[str, Any]


class AdminError(Exception):
    """Anything the SDK raises."""


class Unreachable(AdminError):
    """The control plane did not answer (connection refused, timeout)."""


class ApiError(AdminError):
    """An error answer of the API: its status, typed `code` and message."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type_: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{message} ({code})")
        self.status = status
        self.code = code
        self.message = message
        self.type = type_
        self.details = details or {}


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class PreconditionFailed(ApiError):
    pass


class PreconditionRequired(ApiError):
    pass


class InvalidRequest(ApiError):
    pass


class ServiceUnavailable(ApiError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    422: InvalidRequest,
    428: PreconditionRequired,
    503: ServiceUnavailable,
}


def error_of(response: httpx.Response) -> ApiError:
    """The typed error for an error response (the API's `{"error": {...}}` body)."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        type_, details = str(error.get("type", "")), dict(error.get("details") or {})
    except (ValueError, KeyError, TypeError):
        code, message, type_, details = "http_error", response.text[:500], "", {}
    kind = _BY_STATUS.get(response.status_code, ApiError)
    return kind(response.status_code, code, message, type_=type_, details=details)


class AdminClient:
    """The admin API. `url` is control's base URL (without /admin/v1); `http`, an
    httpx client already based at /admin/v1 with its auth (tests pass the app's
    TestClient), replaces the one built from url and token."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.base_url = url.rstrip("/") + ADMIN_PREFIX
        self.http = http or httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=timeout_s,
            # A plain-http base URL never negotiates TLS (every call goes to it, and
            # redirects are not followed): skip loading the CA bundle (~25 ms a start).
            verify=not self.base_url.startswith("http://"),
        )
        self.pairs = Pairs(self, "/pairs", "pair")
        self.pools = Pools(self, "/pools", "pool")
        self.segments = Resource(self, "/segments", "segment")
        self.tenants = Tenants(self, "/tenants", "tenant")
        self.threshold_sets = ThresholdSets(self, "/threshold-sets", "threshold set")
        self.rollouts = Rollouts(self, "/rollouts", "rollout")
        self.admin_tokens = AdminTokens(self, "/admin-tokens", "admin token")
        self.eval_sets = Resource(self, "/eval-sets", "eval set")
        self.evaluations = Resource(self, "/evaluations", "evaluation")
        self.decisions = Decisions(self, "/decisions", "decision")
        self.requests = Resource(self, "/requests", "request record")
        self.audit = Resource(self, "/audit", "audit event")

    # -- plumbing -----------------------------------------------------------------

    def response(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """The raw response of a successful call (ApiError / Unreachable otherwise)."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.http.request(method, path, json=json, params=query, headers=headers)
        except httpx.TransportError as exc:
            raise Unreachable(f"control plane unreachable at {self.base_url}: {exc}") from exc
        if response.is_error:
            raise error_of(response)
        return response

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One call; the decoded JSON body (None for an empty one)."""
        response = self.response(method, path, json=json, params=params, headers=headers)
        return response.json() if response.content else None

    def pages(self, path: str, **params: Any) -> Iterator[Document]:
        """Every item of a paginated listing, following `next_cursor`."""
        query = {"limit": PAGE_SIZE, **params}
        while True:
            page = self.call("GET", path, params=query)
            yield from page["items"]
            if page.get("next_cursor") is None:
                return
            query["cursor"] = page["next_cursor"]

    def status(self) -> Any:
        """Rollouts, pools and segments in one read (three listings)."""
        return {
            "rollouts": list(self.rollouts.list()),
            "pools": list(self.pools.list()),
            "segments": list(self.segments.list()),
        }

    def adapter_acceptance(self, **filters: Any) -> Any:
        """Measured acceptance per LoRA adapter and pair version (getAdapterAcceptance)."""
        return self.call("GET", "/adapters/acceptance", params=filters)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()


def _if_match(etag: str | int) -> dict[str, str]:
    text = str(etag)
    return {"If-Match": text if text.startswith('"') else f'"{text}"'}


class Resource:
    """The list / get / find / create / update / delete a collection offers (each
    only where the API has it: creating a decision is a 405 from the server)."""

    def __init__(self, client: AdminClient, path: str, noun: str) -> None:
        self.client = client
        self.path = path
        self.noun = noun

    def list(self, **filters: Any) -> Iterator[Document]:
        """Every item matching the filters (the listing's query parameters)."""
        return self.client.pages(self.path, **filters)

    def get(self, ident: int | str) -> Document:
        body: Document = self.client.call("GET", f"{self.path}/{ident}")
        return body

    def get_with_etag(self, ident: int | str) -> tuple[Document, str]:
        response = self.client.response("GET", f"{self.path}/{ident}")
        return response.json(), response.headers.get("ETag", "")

    def find(self, name_or_id: str | int) -> Document:
        """By id (all digits) or by name; NotFound naming the value otherwise."""
        text = str(name_or_id)
        if text.isdigit():
            return self.get(int(text))
        for row in self.list(name=text):
            return row
        raise NotFound(404, "not_found", f"no {self.noun} named {text!r}")

    def id_of(self, name_or_id: str | int) -> int:
        text = str(name_or_id)
        return int(text) if text.isdigit() else int(self.find(text)["id"])

    def create(self, body: Document, *, idempotency_key: str | None = None) -> Document:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        created: Document = self.client.call("POST", self.path, json=body, headers=headers)
        return created

    def update(
        self, name_or_id: str | int, changes: Document, *, if_match: str | int | None = None
    ) -> Document:
        ident = self.id_of(name_or_id)
        tag = if_match if if_match is not None else self.get_with_etag(ident)[1]
        updated: Document = self.client.call(
            "PATCH", f"{self.path}/{ident}", json=changes, headers=_if_match(tag)
        )
        return updated

    def delete(self, name_or_id: str | int, *, if_match: str | int | None = None) -> None:
        ident = self.id_of(name_or_id)
        tag = if_match if if_match is not None else self.get_with_etag(ident)[1]
        self.client.call("DELETE", f"{self.path}/{ident}", headers=_if_match(tag))


class Tenants(Resource):
    def keys(self, tenant: str | int) -> Iterator[Document]:
        return self.client.pages(f"{self.path}/{self.id_of(tenant)}/keys")

    def create_key(self, tenant: str | int, name: str = "") -> Document:
        """The new key; its secret (`key`) is in this answer only."""
        created: Document = self.client.call(
            "POST", f"{self.path}/{self.id_of(tenant)}/keys", json={"name": name}
        )
        return created

    def revoke_key(self, tenant: str | int, key_id: int) -> Document:
        revoked: Document = self.client.call(
            "POST", f"{self.path}/{self.id_of(tenant)}/keys/{key_id}/revoke"
        )
        return revoked


class ThresholdSets(Resource):
    def change(self, name_or_id: str | int, changes: Document) -> Document:
        """A change is the next version of the same name (sets are never edited)."""
        created: Document = self.client.call(
            "POST", f"{self.path}/{self.id_of(name_or_id)}/versions", json=changes
        )
        return created

    def latest(self, name: str) -> Document:
        versions = list(self.list(name=name))
        if not versions:
            raise NotFound(404, "not_found", f"no threshold set named {name!r}")
        return max(versions, key=lambda s: int(s["version"]))


class Rollouts(Resource):
    def act(
        self,
        name_or_id: str | int,
        action: str,
        *,
        reason: str | None = None,
        waive: list[str] | None = None,
        if_match: str | int | None = None,
        idempotency_key: str | None = None,
    ) -> Document:
        """evaluate, start, promote, pause, resume, rollback, disable or enable."""
        headers = _if_match(if_match) if if_match is not None else {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        body: Document = {}
        if reason is not None:
            body["reason"] = reason
        if waive:
            body["waive"] = waive
        acted: Document = self.client.call(
            "POST",
            f"{self.path}/{self.id_of(name_or_id)}/{action}",
            json=body or None,
            headers=headers or None,
        )
        return acted

    def evidence(self, name_or_id: str | int, *, advice: int | None = None) -> Document:
        readout: Document = self.client.call(
            "GET", f"{self.path}/{self.id_of(name_or_id)}/evidence", params={"advice": advice}
        )
        return readout


class AdminTokens(Resource):
    def revoke(self, token_id: int) -> Document:
        revoked: Document = self.client.call("POST", f"{self.path}/{token_id}/revoke")
        return revoked


class Decisions(Resource):
    def record(self, decision_id: int) -> str:
        """The decision record (markdown)."""
        return self.client.response("GET", f"{self.path}/{decision_id}/record").text


class Pairs(Resource):
    def versions(self, pair: str | int, **filters: Any) -> Iterator[Document]:
        return self.client.pages(f"{self.path}/{self.id_of(pair)}/versions", **filters)

    def version(self, pair: str | int, version_id: int) -> Document:
        body: Document = self.client.call(
            "GET", f"{self.path}/{self.id_of(pair)}/versions/{version_id}"
        )
        return body

    def register(self, pair: str | int, body: Document) -> Document:
        """A new immutable version (the artifacts are validated by control)."""
        created: Document = self.client.call(
            "POST", f"{self.path}/{self.id_of(pair)}/versions", json=body
        )
        return created

    def retire(self, pair: str | int, version_id: int, reason: str | None = None) -> Document:
        retired: Document = self.client.call(
            "POST",
            f"{self.path}/{self.id_of(pair)}/versions/{version_id}/retire",
            json={"reason": reason} if reason else None,
        )
        return retired

    def suggest_depth(
        self, pair: str | int, version_id: int, body: Document | None = None
    ) -> Document:
        advice: Document = self.client.call(
            "POST",
            f"{self.path}/{self.id_of(pair)}/versions/{version_id}/suggest-depth",
            json=body,
        )
        return advice


class Pools(Resource):
    def enrol(self, pool: str | int, body: Document) -> Document:
        """An engine agent's token for this pool (its secret in this answer only)."""
        created: Document = self.client.call(
            "POST", f"{self.path}/{self.id_of(pool)}/agent-tokens", json=body
        )
        return created
