"""The control plane's internal API, as an engine agent and launcher use it."""

from typing import Any

import httpx

from specwire import INTERNAL_PREFIX, HeartbeatAck, PoolSpec, WorkerHeartbeat


class ControlClientError(RuntimeError):
    """The control plane refused a call or could not be reached."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def _error_message(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


class ControlClient:
    def __init__(
        self,
        base_url: str,
        internal_token: str,
        *,
        timeout: float = 5.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self._headers = {"Authorization": f"Bearer {internal_token}"}

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(
                method, f"{INTERNAL_PREFIX}{path}", headers=self._headers, **kwargs
            )
        except httpx.HTTPError as exc:
            raise ControlClientError(f"control plane unreachable: {exc}") from exc
        if response.status_code >= 400:
            raise ControlClientError(
                f"{method} {path}: {response.status_code} {_error_message(response)}",
                response.status_code,
            )
        return response

    def pool_spec(self, pool: str | int) -> PoolSpec:
        """By id when `pool` is all digits, else by name."""
        key = str(pool)
        path = f"/pools/{key}/spec" if key.isdigit() else f"/pools/by-name/{key}/spec"
        return PoolSpec.model_validate(self._call("GET", path).json())

    def heartbeat(self, worker_id: str, beat: WorkerHeartbeat) -> HeartbeatAck:
        response = self._call(
            "POST", f"/workers/{worker_id}/heartbeat", json=beat.model_dump(mode="json")
        )
        return HeartbeatAck.model_validate(response.json())
