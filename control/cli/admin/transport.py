"""The admin CLI's HTTP transport for a plain-http control plane: the standard
library's http.client under httpx's client, so a command does not import httpcore
(its connection pools, both sync and async; ~15 % of `admin status`'s start).

One keep-alive connection per command, opened on first use; a connection the
server closed while idle is reopened once. Errors are httpx's (ConnectError,
TimeoutException, ...), so the SDK's `Unreachable` and the CLI's one-line message
are the same as over httpx's own transport. An https URL uses httpx's transport
(its TLS configuration); see control.cli.admin.session.make_client.
"""

import http.client

import httpx


class StdlibTransport(httpx.BaseTransport):
    def __init__(self) -> None:
        self._connection: http.client.HTTPConnection | None = None
        self._origin: tuple[str, int] | None = None

    def _connect(self, host: str, port: int, timeout_s: float | None) -> http.client.HTTPConnection:
        if self._connection is None or self._origin != (host, port):
            self.close()
            self._connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
            self._origin = (host, port)
        return self._connection

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"{request.url.scheme} needs httpx's own transport")
        timeouts = request.extensions.get("timeout", {})
        timeout_s = timeouts.get("read") or timeouts.get("connect")
        host, port = request.url.host, request.url.port or 80
        target = request.url.raw_path.decode("ascii")
        body = request.read()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        for attempt in (1, 2):
            fresh = self._connection is None
            connection = self._connect(host, port, timeout_s)
            try:
                connection.putrequest(
                    request.method, target, skip_host=True, skip_accept_encoding=True
                )
                for name, value in headers:
                    connection.putheader(name, value)
                connection.endheaders(body or None)
                answer = connection.getresponse()
                content = answer.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if fresh or attempt == 2:  # not an idle connection the server dropped
                    raise httpx.RemoteProtocolError(str(exc), request=request) from exc
                continue
            except TimeoutError as exc:
                self.close()
                raise httpx.TimeoutException(f"timed out: {exc}", request=request) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
            if answer.will_close:
                self.close()
            return httpx.Response(
                answer.status,
                headers=answer.getheaders(),
                content=content,
                request=request,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection, self._origin = None, None
