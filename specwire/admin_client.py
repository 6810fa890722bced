"""The Python SDK for the admin API (`/admin/v1`): `AdminClient` over httpx, and its
async twin `AsyncAdminClient` with the same resources and methods, awaited.

    from specwire.admin_client import AdminClient, NotFound

    with AdminClient("http://127.0.0.1:8000", token) as admin:
        pool = admin.pools.find("tiny-spec")            # by name, or .get(id)
        admin.pools.update(pool["id"], {"desired_workers": 2})
        for rollout in admin.rollouts.list(state="canary"):  # follows next_cursor
            print(rollout["name"], rollout["percentage"])
        admin.rollouts.act("code-tiny", "promote", reason="SLOs held")

    async with AsyncAdminClient("http://127.0.0.1:8000", token) as admin:
        pool = await admin.pools.find("tiny-spec")
        async for rollout in admin.rollouts.list(state="canary"):
            ...

Every method maps to one operation of control's OpenAPI document (a test checks
the operationIds); documents are the API's JSON as dicts. An error answer raises
`ApiError` (or its subclass for the status) carrying the API's `code`; an
unreachable control plane raises `Unreachable`. `update` and `delete` send
If-Match: the ETag passed, or else the one a GET just returned (so a concurrent
change between that GET and the write is still a 412, never a lost update).

What each operation sends and how it reads the answers is written once, without
I/O, in specwire.admin_operations; the two clients only carry the calls.
It lives in `specwire` because the engine tools (`engine evaluate`) import
nothing of control; it imports httpx and nothing of the project.
"""

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

import httpx

from specwire import admin_operations as ops
from specwire.admin_operations import (
    ADMIN_PREFIX,
    DEFAULT_URL,
    DEV_ADMIN_TOKEN,
    PAGE_SIZE,
    AdminError,
    ApiError,
    Call,
    Conflict,
    Document,
    Forbidden,
    InvalidRequest,
    Listing,
    NotFound,
    NotReplayable,
    PreconditionFailed,
    PreconditionRequired,
    ServiceUnavailable,
    Step,
    Steps,
    Unauthorized,
    Unreachable,
    error_of,
)

__all__ = [
    "ADMIN_PREFIX",
    "DEFAULT_URL",
    "DEV_ADMIN_TOKEN",
    "PAGE_SIZE",
    "AdminClient",
    "AdminError",
    "ApiError",
    "AsyncAdminClient",
    "AsyncResource",
    "Conflict",
    "Document",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "NotReplayable",
    "PreconditionFailed",
    "PreconditionRequired",
    "Resource",
    "ServiceUnavailable",
    "Unauthorized",
    "Unreachable",
    "error_of",
]

T = TypeVar("T")
P = ParamSpec("P")


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
        self.http = http or httpx.Client(**ops.client_options(self.base_url, token, timeout_s))
        self.pairs = Pairs(self, Steps.pairs)
        self.pools = Pools(self, Steps.pools)
        self.segments = Resource(self, Steps.segments)
        self.tenants = Tenants(self, Steps.tenants)
        self.threshold_sets = ThresholdSets(self, Steps.threshold_sets)
        self.rollouts = Rollouts(self, Steps.rollouts)
        self.admin_tokens = AdminTokens(self, Steps.admin_tokens)
        self.eval_sets = EvalSets(self, Steps.eval_sets)
        self.evaluations = Evaluations(self, Steps.evaluations)
        self.decisions = Decisions(self, Steps.decisions)
        self.requests = Requests(self, Steps.requests)
        self.audit = Resource(self, Steps.audit)

    # -- carrying calls -------------------------------------------------------------

    def send(self, call: Call) -> httpx.Response:
        """One call's successful response (ApiError / Unreachable otherwise)."""
        try:
            response = self.http.request(
                call.method, call.path, json=call.json, params=call.query(), headers=call.headers
            )
        except httpx.TransportError as exc:
            raise ops.unreachable(self.base_url, exc) from exc
        return ops.checked(response)

    def run(self, step: Step[T]) -> T:
        """An operation's value: each call it yields sent, its response sent back."""
        try:
            call = next(step)
            while True:
                call = step.send(self.send(call))
        except StopIteration as stop:
            return cast(T, stop.value)

    def iterate(self, step: Step[Listing]) -> Iterator[Document]:
        """A listing's items, one page fetched at a time."""
        call: Call | None = self.run(step).first
        while call is not None:
            response = self.send(call)
            yield from ops.items_of(response)
            call = ops.next_page(call, response.json())

    # -- the raw API, for calls no resource method covers -----------------------------

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
        return self.send(Call(method, path, json=json, params=params or {}, headers=headers))

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
        return ops.body_of(self.response(method, path, json=json, params=params, headers=headers))

    def pages(self, path: str, **params: Any) -> Iterator[Document]:
        """Every item of a paginated listing, following `next_cursor`."""
        return self.iterate(ops.done(Listing.of(path, params)))

    def status(self) -> Document:
        """Rollouts, pools and segments in one read (three listings)."""
        return self.run(ops.status())

    def adapter_acceptance(self, **filters: Any) -> Document:
        """Measured acceptance per LoRA adapter and pair version (getAdapterAcceptance)."""
        return self.run(ops.adapter_acceptance(**filters))

    def telemetry_acceptance(self, segment: str | int | None = None, **filters: Any) -> Document:
        """Acceptance over a segment's stored windows, by draft and by response position
        (getTelemetryAcceptance): `pool`, `pair_version`, `arm`, `since`, `until`;
        segment and pool by name or id, pair version by id. `unsegmented=True` instead
        of a segment: the windows of requests that matched no segment."""
        return self.run(ops.telemetry_acceptance(segment, **filters))

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


class AsyncAdminClient:
    """`AdminClient`'s twin over httpx.AsyncClient: the same resources and methods,
    awaited (`list` and the other listings are async iterators). `http`, an
    httpx.AsyncClient based at /admin/v1 with its auth, replaces the one built."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = url.rstrip("/") + ADMIN_PREFIX
        self.http = http or httpx.AsyncClient(**ops.client_options(self.base_url, token, timeout_s))
        self.pairs = AsyncPairs(self, Steps.pairs)
        self.pools = AsyncPools(self, Steps.pools)
        self.segments = AsyncResource(self, Steps.segments)
        self.tenants = AsyncTenants(self, Steps.tenants)
        self.threshold_sets = AsyncThresholdSets(self, Steps.threshold_sets)
        self.rollouts = AsyncRollouts(self, Steps.rollouts)
        self.admin_tokens = AsyncAdminTokens(self, Steps.admin_tokens)
        self.eval_sets = AsyncEvalSets(self, Steps.eval_sets)
        self.evaluations = AsyncEvaluations(self, Steps.evaluations)
        self.decisions = AsyncDecisions(self, Steps.decisions)
        self.requests = AsyncRequests(self, Steps.requests)
        self.audit = AsyncResource(self, Steps.audit)

    async def send(self, call: Call) -> httpx.Response:
        """One call's successful response (ApiError / Unreachable otherwise)."""
        try:
            response = await self.http.request(
                call.method, call.path, json=call.json, params=call.query(), headers=call.headers
            )
        except httpx.TransportError as exc:
            raise ops.unreachable(self.base_url, exc) from exc
        return ops.checked(response)

    async def run(self, step: Step[T]) -> T:
        """An operation's value: each call it yields sent, its response sent back."""
        try:
            call = next(step)
            while True:
                call = step.send(await self.send(call))
        except StopIteration as stop:
            return cast(T, stop.value)

    async def iterate(self, step: Step[Listing]) -> AsyncIterator[Document]:
        """A listing's items, one page fetched at a time."""
        call: Call | None = (await self.run(step)).first
        while call is not None:
            response = await self.send(call)
            for item in ops.items_of(response):
                yield item
            call = ops.next_page(call, response.json())

    async def response(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """The raw response of a successful call (ApiError / Unreachable otherwise)."""
        return await self.send(Call(method, path, json=json, params=params or {}, headers=headers))

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One call; the decoded JSON body (None for an empty one)."""
        response = await self.response(method, path, json=json, params=params, headers=headers)
        return ops.body_of(response)

    def pages(self, path: str, **params: Any) -> AsyncIterator[Document]:
        """Every item of a paginated listing, following `next_cursor`."""
        return self.iterate(ops.done(Listing.of(path, params)))

    async def status(self) -> Document:
        """Rollouts, pools and segments in one read (three listings)."""
        return await self.run(ops.status())

    async def adapter_acceptance(self, **filters: Any) -> Document:
        """Measured acceptance per LoRA adapter and pair version (getAdapterAcceptance)."""
        return await self.run(ops.adapter_acceptance(**filters))

    async def telemetry_acceptance(
        self, segment: str | int | None = None, **filters: Any
    ) -> Document:
        """Acceptance over a segment's stored windows, by draft and by response position
        (getTelemetryAcceptance): `pool`, `pair_version`, `arm`, `since`, `until`;
        segment and pool by name or id, pair version by id. `unsegmented=True` instead
        of a segment: the windows of requests that matched no segment."""
        return await self.run(ops.telemetry_acceptance(segment, **filters))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "AsyncAdminClient":
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# -- the resources: each method runs one operation of admin_operations --------------------


class _Front:
    def __init__(self, client: Any, steps: ops.ResourceSteps) -> None:
        self.client = client
        self.steps = steps
        self.path = steps.path
        self.noun = steps.noun


class _Blocking(Generic[P, T]):
    """A sync resource's method: the operation run to its value."""

    def __init__(self, operation: Callable[Concatenate[Any, P], Step[T]]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(self, front: _Front, owner: type | None = None) -> Callable[P, T]:
        operation, client = self.operation, front.client

        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            result: T = client.run(operation(front.steps, *args, **kwargs))
            return result

        run.__doc__ = operation.__doc__
        return run


class _Awaiting(Generic[P, T]):
    """An async resource's method: a coroutine of the operation's value."""

    def __init__(self, operation: Callable[Concatenate[Any, P], Step[T]]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(
        self, front: _Front, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]:
        operation, client = self.operation, front.client

        async def run(*args: P.args, **kwargs: P.kwargs) -> T:
            result: T = await client.run(operation(front.steps, *args, **kwargs))
            return result

        run.__doc__ = operation.__doc__
        return run


class _Paged(Generic[P]):
    """A sync resource's listing: an iterator over every page's items."""

    def __init__(self, operation: Callable[Concatenate[Any, P], Step[Listing]]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(self, front: _Front, owner: type | None = None) -> Callable[P, Iterator[Document]]:
        operation, client = self.operation, front.client

        def iterate(*args: P.args, **kwargs: P.kwargs) -> Iterator[Document]:
            items: Iterator[Document] = client.iterate(operation(front.steps, *args, **kwargs))
            return items

        iterate.__doc__ = operation.__doc__
        return iterate


class _AsyncPaged(Generic[P]):
    """An async resource's listing: an async iterator over every page's items."""

    def __init__(self, operation: Callable[Concatenate[Any, P], Step[Listing]]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(
        self, front: _Front, owner: type | None = None
    ) -> Callable[P, AsyncIterator[Document]]:
        operation, client = self.operation, front.client

        def iterate(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Document]:
            items: AsyncIterator[Document] = client.iterate(operation(front.steps, *args, **kwargs))
            return items

        iterate.__doc__ = operation.__doc__
        return iterate


R = ops.ResourceSteps


class Resource(_Front):
    """A collection of the admin API (AdminClient's)."""

    list = _Paged(R.list)
    get = _Blocking(R.get)
    get_with_etag = _Blocking(R.get_with_etag)
    find = _Blocking(R.find)
    id_of = _Blocking(R.id_of)
    create = _Blocking(R.create)
    update = _Blocking(R.update)
    delete = _Blocking(R.delete)


class AsyncResource(_Front):
    """A collection of the admin API (AsyncAdminClient's)."""

    list = _AsyncPaged(R.list)
    get = _Awaiting(R.get)
    get_with_etag = _Awaiting(R.get_with_etag)
    find = _Awaiting(R.find)
    id_of = _Awaiting(R.id_of)
    create = _Awaiting(R.create)
    update = _Awaiting(R.update)
    delete = _Awaiting(R.delete)


class Tenants(Resource):
    keys = _Paged(ops.TenantSteps.keys)
    key = _Blocking(ops.TenantSteps.key)
    create_key = _Blocking(ops.TenantSteps.create_key)
    revoke_key = _Blocking(ops.TenantSteps.revoke_key)


class AsyncTenants(AsyncResource):
    keys = _AsyncPaged(ops.TenantSteps.keys)
    key = _Awaiting(ops.TenantSteps.key)
    create_key = _Awaiting(ops.TenantSteps.create_key)
    revoke_key = _Awaiting(ops.TenantSteps.revoke_key)


class ThresholdSets(Resource):
    change = _Blocking(ops.ThresholdSetSteps.change)
    latest = _Blocking(ops.ThresholdSetSteps.latest)


class AsyncThresholdSets(AsyncResource):
    change = _Awaiting(ops.ThresholdSetSteps.change)
    latest = _Awaiting(ops.ThresholdSetSteps.latest)


class Rollouts(Resource):
    act = _Blocking(ops.RolloutSteps.act)
    evidence = _Blocking(ops.RolloutSteps.evidence)


class AsyncRollouts(AsyncResource):
    act = _Awaiting(ops.RolloutSteps.act)
    evidence = _Awaiting(ops.RolloutSteps.evidence)


class AdminTokens(Resource):
    revoke = _Blocking(ops.AdminTokenSteps.revoke)


class AsyncAdminTokens(AsyncResource):
    revoke = _Awaiting(ops.AdminTokenSteps.revoke)


class Requests(Resource):
    replay_settings = _Blocking(ops.RequestSteps.replay_settings)


class AsyncRequests(AsyncResource):
    replay_settings = _Awaiting(ops.RequestSteps.replay_settings)


class Decisions(Resource):
    record = _Blocking(ops.DecisionSteps.record)


class AsyncDecisions(AsyncResource):
    record = _Awaiting(ops.DecisionSteps.record)


class Pairs(Resource):
    versions = _Paged(ops.PairSteps.versions)
    version = _Blocking(ops.PairSteps.version)
    register = _Blocking(ops.PairSteps.register)
    retire = _Blocking(ops.PairSteps.retire)
    suggest_depth = _Blocking(ops.PairSteps.suggest_depth)


class AsyncPairs(AsyncResource):
    versions = _AsyncPaged(ops.PairSteps.versions)
    version = _Awaiting(ops.PairSteps.version)
    register = _Awaiting(ops.PairSteps.register)
    retire = _Awaiting(ops.PairSteps.retire)
    suggest_depth = _Awaiting(ops.PairSteps.suggest_depth)


class EvalSets(Resource):
    latest = _Blocking(ops.EvalSetSteps.latest)
    add_case = _Blocking(ops.EvalSetSteps.add_case)


class AsyncEvalSets(AsyncResource):
    latest = _Awaiting(ops.EvalSetSteps.latest)
    add_case = _Awaiting(ops.EvalSetSteps.add_case)


class Evaluations(Resource):
    cases = _Paged(ops.EvaluationSteps.cases)
    diff = _Blocking(ops.EvaluationSteps.diff)


class AsyncEvaluations(AsyncResource):
    cases = _AsyncPaged(ops.EvaluationSteps.cases)
    diff = _Awaiting(ops.EvaluationSteps.diff)


class Pools(Resource):
    enrol = _Blocking(ops.PoolSteps.enrol)


class AsyncPools(AsyncResource):
    enrol = _Awaiting(ops.PoolSteps.enrol)
