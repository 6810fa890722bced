"""What each admin SDK operation sends and what it makes of the answers, without I/O.

An operation is a *step*: a generator that yields the `Call`s it needs (one for a
GET; a name lookup, a GET for the ETag and the PATCH for an update) and receives
each successful `httpx.Response` back, then returns its value. `AdminClient` runs
steps over `httpx.Client`, `AsyncAdminClient` over `httpx.AsyncClient`
(specwire.admin_client); request building, response parsing and the typed
errors live here once, so the two clients cannot drift apart.

Listings are steps that return a `Listing` (its first page's call); the clients
follow `next_cursor` lazily, page by page, or `collect` reads every page.
"""

from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import httpx

from specwire import replay

DEV_ADMIN_TOKEN = "specroute-admin-dev"
"""The well-known admin token of a control plane started with --dev (never in production)."""

DEFAULT_URL = "http://127.0.0.1:8000"
ADMIN_PREFIX = "/admin/v1"
PAGE_SIZE = 500

Document = dict[str, Any]
T = TypeVar("T")


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


class NotReplayable(AdminError):
    """A recorded request with no settings to replay (refused before routing)."""


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


def checked(response: httpx.Response) -> httpx.Response:
    """The response if it succeeded, else its typed error raised."""
    if response.is_error:
        raise error_of(response)
    return response


def unreachable(base_url: str, exc: httpx.TransportError) -> Unreachable:
    return Unreachable(f"control plane unreachable at {base_url}: {exc}")


def client_options(base_url: str, token: str | None, timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of the httpx client (sync or async) for one control plane."""
    return {
        "base_url": base_url,
        "headers": {"Authorization": f"Bearer {token}"} if token else {},
        "timeout": timeout_s,
        # A plain-http base URL never negotiates TLS (every call goes to it, and
        # redirects are not followed): skip loading the CA bundle (~25 ms a start).
        "verify": not base_url.startswith("http://"),
    }


def body_of(response: httpx.Response) -> Any:
    """The decoded JSON body (None for an empty one)."""
    return response.json() if response.content else None


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request, relative to /admin/v1; `params` that are None are left out."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] | None = None

    def query(self) -> dict[str, Any]:
        return {k: v for k, v in self.params.items() if v is not None}


Step = Generator[Call, httpx.Response, T]
"""An operation: yields calls, is sent each successful response, returns its value."""


def respond(call: Call) -> Step[httpx.Response]:
    """The raw response of one call."""
    response = yield call
    return response


def fetch(call: Call) -> Step[Any]:
    """One call; the decoded JSON body."""
    response = yield call
    return body_of(response)


def done(value: T) -> Step[T]:
    """A step that needs no call."""
    yield from ()
    return value


@dataclass(frozen=True, slots=True)
class Listing:
    """A paginated listing: its first page's call."""

    first: Call

    @classmethod
    def of(cls, path: str, filters: dict[str, Any]) -> "Listing":
        return cls(Call("GET", path, params={"limit": PAGE_SIZE, **filters}))


def next_page(call: Call, page: Document) -> Call | None:
    """The call for the page after `page` (fetched with `call`), or None at the end."""
    cursor = page.get("next_cursor")
    return None if cursor is None else replace(call, params={**call.params, "cursor": cursor})


def items_of(response: httpx.Response) -> list[Document]:
    items: list[Document] = response.json()["items"]
    return items


def collect(listing: Listing) -> Step[list[Document]]:
    """Every item of a listing, page after page."""
    items: list[Document] = []
    call: Call | None = listing.first
    while call is not None:
        response = yield call
        items.extend(items_of(response))
        call = next_page(call, response.json())
    return items


def if_match_header(etag: str | int) -> dict[str, str]:
    text = str(etag)
    return {"If-Match": text if text.startswith('"') else f'"{text}"'}


class ResourceSteps:
    """The list / get / find / create / update / delete a collection offers (each
    only where the API has it: creating a decision is a 405 from the server)."""

    def __init__(self, path: str, noun: str) -> None:
        self.path = path
        self.noun = noun

    def list(self, /, **filters: Any) -> Step[Listing]:
        """Every item matching the filters (the listing's query parameters)."""
        return done(Listing.of(self.path, filters))

    def get(self, ident: int | str) -> Step[Document]:
        got: Document = yield from fetch(Call("GET", f"{self.path}/{ident}"))
        return got

    def get_with_etag(self, ident: int | str) -> Step[tuple[Document, str]]:
        """The document and its ETag (what `update` and `delete` send as If-Match)."""
        response = yield Call("GET", f"{self.path}/{ident}")
        return response.json(), response.headers.get("ETag", "")

    def find(self, name_or_id: str | int) -> Step[Document]:
        """By id (all digits) or by name; NotFound naming the value otherwise."""
        text = str(name_or_id)
        if text.isdigit():
            return (yield from self.get(int(text)))
        response = yield Call("GET", self.path, params={"name": text, "limit": 1})
        for row in items_of(response):
            return row
        raise NotFound(404, "not_found", f"no {self.noun} named {text!r}")

    def id_of(self, name_or_id: str | int) -> Step[int]:
        text = str(name_or_id)
        if text.isdigit():
            return int(text)
        found = yield from self.find(text)
        return int(found["id"])

    def create(self, body: Document, *, idempotency_key: str | None = None) -> Step[Document]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        created: Document = yield from fetch(Call("POST", self.path, json=body, headers=headers))
        return created

    def _etag(self, ident: int, given: str | int | None) -> Step[str | int]:
        if given is not None:
            return given
        _, tag = yield from self.get_with_etag(ident)
        return tag

    def update(
        self, name_or_id: str | int, changes: Document, *, if_match: str | int | None = None
    ) -> Step[Document]:
        """PATCH with If-Match: the ETag passed, or else the one a GET just returned (so
        a concurrent change between that GET and the write is a 412, never lost)."""
        ident = yield from self.id_of(name_or_id)
        tag = yield from self._etag(ident, if_match)
        call = Call("PATCH", f"{self.path}/{ident}", json=changes, headers=if_match_header(tag))
        updated: Document = yield from fetch(call)
        return updated

    def delete(self, name_or_id: str | int, *, if_match: str | int | None = None) -> Step[int]:
        """DELETE with If-Match as `update` sends it; the id deleted."""
        ident = yield from self.id_of(name_or_id)
        tag = yield from self._etag(ident, if_match)
        yield Call("DELETE", f"{self.path}/{ident}", headers=if_match_header(tag))
        return ident


class TenantSteps(ResourceSteps):
    def keys(self, /, tenant: str | int, **filters: Any) -> Step[Listing]:
        """A tenant's API keys (prefixes only; `name` filters)."""
        ident = yield from self.id_of(tenant)
        return Listing.of(f"{self.path}/{ident}/keys", filters)

    def key(self, tenant: str | int, key: str | int) -> Step[Document]:
        """One API key, by id or by name (NotFound if none, Conflict if several share it)."""
        ident = yield from self.id_of(tenant)
        text = str(key)
        if text.isdigit():
            got: Document = yield from fetch(Call("GET", f"{self.path}/{ident}/keys/{text}"))
            return got
        listing = Listing.of(f"{self.path}/{ident}/keys", {"name": text})
        named = yield from collect(listing)
        if len(named) == 1:
            return named[0]
        if not named:
            raise NotFound(404, "not_found", f"tenant {tenant} has no key named {text!r}")
        ids = ", ".join(str(k["id"]) for k in named)
        raise Conflict(409, "ambiguous_name", f"{len(named)} keys named {text!r} (ids {ids})")

    def create_key(self, tenant: str | int, name: str = "") -> Step[Document]:
        """The new key; its secret (`key`) is in this answer only."""
        ident = yield from self.id_of(tenant)
        created: Document = yield from fetch(
            Call("POST", f"{self.path}/{ident}/keys", json={"name": name})
        )
        return created

    def revoke_key(self, tenant: str | int, key_id: int) -> Step[Document]:
        ident = yield from self.id_of(tenant)
        revoked: Document = yield from fetch(
            Call("POST", f"{self.path}/{ident}/keys/{key_id}/revoke")
        )
        return revoked


class ThresholdSetSteps(ResourceSteps):
    def change(self, name_or_id: str | int, changes: Document) -> Step[Document]:
        """A change is the next version of the same name (sets are never edited)."""
        ident = yield from self.id_of(name_or_id)
        created: Document = yield from fetch(
            Call("POST", f"{self.path}/{ident}/versions", json=changes)
        )
        return created

    def latest(self, name: str) -> Step[Document]:
        versions = yield from collect(Listing.of(self.path, {"name": name}))
        if not versions:
            raise NotFound(404, "not_found", f"no {self.noun} named {name!r}")
        return max(versions, key=lambda s: int(s["version"]))


class RolloutSteps(ResourceSteps):
    def act(
        self,
        name_or_id: str | int,
        action: str,
        *,
        reason: str | None = None,
        waive: list[str] | None = None,
        if_match: str | int | None = None,
        idempotency_key: str | None = None,
    ) -> Step[Document]:
        """evaluate, start, promote, pause, resume, rollback, disable or enable."""
        headers = if_match_header(if_match) if if_match is not None else {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        body: Document = {}
        if reason is not None:
            body["reason"] = reason
        if waive:
            body["waive"] = waive
        ident = yield from self.id_of(name_or_id)
        call = Call(
            "POST", f"{self.path}/{ident}/{action}", json=body or None, headers=headers or None
        )
        acted: Document = yield from fetch(call)
        return acted

    def evidence(self, name_or_id: str | int, *, advice: int | None = None) -> Step[Document]:
        ident = yield from self.id_of(name_or_id)
        call = Call("GET", f"{self.path}/{ident}/evidence", params={"advice": advice})
        readout: Document = yield from fetch(call)
        return readout


class AdminTokenSteps(ResourceSteps):
    def revoke(self, token_id: int) -> Step[Document]:
        revoked: Document = yield from fetch(Call("POST", f"{self.path}/{token_id}/revoke"))
        return revoked


class DecisionSteps(ResourceSteps):
    def record(self, decision_id: int) -> Step[str]:
        """The decision record (markdown)."""
        response = yield Call("GET", f"{self.path}/{decision_id}/record")
        return response.text


class PairSteps(ResourceSteps):
    def versions(self, /, pair: str | int, **filters: Any) -> Step[Listing]:
        ident = yield from self.id_of(pair)
        return Listing.of(f"{self.path}/{ident}/versions", filters)

    def version(self, pair: str | int, version_id: int) -> Step[Document]:
        ident = yield from self.id_of(pair)
        got: Document = yield from fetch(Call("GET", f"{self.path}/{ident}/versions/{version_id}"))
        return got

    def register(self, pair: str | int, body: Document) -> Step[Document]:
        """A new immutable version (the artifacts are validated by control)."""
        ident = yield from self.id_of(pair)
        created: Document = yield from fetch(
            Call("POST", f"{self.path}/{ident}/versions", json=body)
        )
        return created

    def retire(self, pair: str | int, version_id: int, reason: str | None = None) -> Step[Document]:
        ident = yield from self.id_of(pair)
        call = Call(
            "POST",
            f"{self.path}/{ident}/versions/{version_id}/retire",
            json={"reason": reason} if reason else None,
        )
        retired: Document = yield from fetch(call)
        return retired

    def suggest_depth(
        self, pair: str | int, version_id: int, body: Document | None = None
    ) -> Step[Document]:
        ident = yield from self.id_of(pair)
        call = Call("POST", f"{self.path}/{ident}/versions/{version_id}/suggest-depth", json=body)
        advice: Document = yield from fetch(call)
        return advice


class EvalSetSteps(ResourceSteps):
    def latest(self, name_or_id: str | int) -> Step[Document]:
        """By id, or a name's latest version."""
        text = str(name_or_id)
        if text.isdigit():
            return (yield from self.get(int(text)))
        versions = yield from collect(Listing.of(self.path, {"name": text}))
        if not versions:
            raise NotFound(404, "not_found", f"no {self.noun} named {text!r}")
        return (yield from self.get(max(versions, key=lambda s: int(s["version"]))["id"]))

    def add_case(self, eval_set: str | int, body: Document) -> Step[Document]:
        """The set's next version with a case made from a request record (`from_request`,
        `prompt_ref`, `prompt_sha256`, `reviewer`, `refresh_by`, ...)."""
        text = str(eval_set)
        ident = int(text) if text.isdigit() else int((yield from self.latest(text))["id"])
        created: Document = yield from fetch(Call("POST", f"{self.path}/{ident}/cases", json=body))
        return created


class EvaluationSteps(ResourceSteps):
    def cases(self, /, evaluation_id: int, **filters: Any) -> Step[Listing]:
        """An evaluation's per-case results (case key, outcome, tokens, acceptance)."""
        return done(Listing.of(f"{self.path}/{evaluation_id}/cases", filters))

    def diff(self, base: int, evaluation_id: int, *, limit: int | None = None) -> Step[Document]:
        """The cases that changed most from evaluation `base` to `evaluation_id`."""
        call = Call(
            "GET", f"{self.path}/{evaluation_id}/diff", params={"base": base, "limit": limit}
        )
        changed: Document = yield from fetch(call)
        return changed


class RequestSteps(ResourceSteps):
    def replay_settings(self, request_id: str) -> Step[Document]:
        """The settings that reproduce a recorded request (specwire.replay):
        NotFound for an unknown id, NotReplayable for a request refused before routing."""
        record: Document = yield from self.get(request_id)
        try:
            return replay.replay_settings(record)
        except replay.NotReplayable as exc:
            raise NotReplayable(str(exc)) from None


class PoolSteps(ResourceSteps):
    def enrol(self, pool: str | int, body: Document) -> Step[Document]:
        """An engine agent's token for this pool (its secret in this answer only)."""
        ident = yield from self.id_of(pool)
        created: Document = yield from fetch(
            Call("POST", f"{self.path}/{ident}/agent-tokens", json=body)
        )
        return created


class Steps:
    """The collections of the admin API (stateless: both clients share them)."""

    pairs = PairSteps("/pairs", "pair")
    pools = PoolSteps("/pools", "pool")
    segments = ResourceSteps("/segments", "segment")
    tenants = TenantSteps("/tenants", "tenant")
    threshold_sets = ThresholdSetSteps("/threshold-sets", "threshold set")
    rollouts = RolloutSteps("/rollouts", "rollout")
    admin_tokens = AdminTokenSteps("/admin-tokens", "admin token")
    eval_sets = EvalSetSteps("/eval-sets", "eval set")
    evaluations = EvaluationSteps("/evaluations", "evaluation")
    decisions = DecisionSteps("/decisions", "decision")
    requests = RequestSteps("/requests", "request record")
    audit = ResourceSteps("/audit", "audit event")


def status() -> Step[Document]:
    """Rollouts, pools and segments in one read (three listings)."""
    return {
        "rollouts": (yield from collect(Listing.of(Steps.rollouts.path, {}))),
        "pools": (yield from collect(Listing.of(Steps.pools.path, {}))),
        "segments": (yield from collect(Listing.of(Steps.segments.path, {}))),
    }


def adapter_acceptance(**filters: Any) -> Step[Document]:
    """Measured acceptance per LoRA adapter and pair version (getAdapterAcceptance)."""
    got: Document = yield from fetch(Call("GET", "/adapters/acceptance", params=filters))
    return got


def telemetry_acceptance(
    segment: str | int | None = None,
    *,
    unsegmented: bool = False,
    pool: str | int | None = None,
    pair_version: int | None = None,
    arm: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> Step[Document]:
    """Acceptance over a segment's stored windows, by draft and by response position
    (getTelemetryAcceptance); segment and pool by name or id, pair version by id.
    `unsegmented` instead of a segment: the windows of requests that matched no segment
    (control refuses both, and neither)."""
    segment_id = (yield from Steps.segments.id_of(segment)) if segment is not None else None
    pool_id = (yield from Steps.pools.id_of(pool)) if pool is not None else None
    params = {
        "segment_id": segment_id,
        "unsegmented": "true" if unsegmented else None,
        "pool_id": pool_id,
        "pair_version_id": pair_version,
        "arm": arm,
    }
    got: Document = yield from fetch(
        Call("GET", "/telemetry/acceptance", params={**params, "since": since, "until": until})
    )
    return got
