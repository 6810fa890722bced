"""The admin CLI's http.client transport against real servers: answers and headers
arrive as httpx's would, a keep-alive connection the server dropped is reopened
once, and a refused connection is httpx's ConnectError (the SDK's Unreachable)."""

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from control.cli.admin.transport import StdlibTransport


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    drop_after_answer = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"] or 0))
        answer = (
            b'{"echo": "' + body + b'", "auth": "' + self.headers["Authorization"].encode() + b'"}'
        )
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("ETag", '"3"')
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        if self.server.drop_after_answer:  # type: ignore[attr-defined]
            # Close without `Connection: close`, as a server's idle timeout does.
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(params=[False, True], ids=["kept-alive", "dropped"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.drop_after_answer = request.param  # type: ignore[attr-defined]
    srv.connections = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_answers_arrive_and_a_dropped_connection_is_reopened(
    server: tuple[str, ThreadingHTTPServer],
) -> None:
    url, srv = server
    with httpx.Client(
        base_url=url, headers={"Authorization": "Bearer t"}, transport=StdlibTransport()
    ) as http:
        for n in range(3):
            response = http.post("/x", content=f"n{n}".encode())
            assert response.status_code == 201
            assert response.headers["etag"] == '"3"'
            assert response.json() == {"echo": f"n{n}", "auth": "Bearer t"}
    # One connection kept alive; or a new one after each drop (the retry).
    assert srv.connections == (3 if srv.drop_after_answer else 1)  # type: ignore[attr-defined]


def test_a_refused_connection_is_httpx_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{port}", transport=StdlibTransport()) as http,
            pytest.raises(httpx.ConnectError, match="Connection refused"),
        ):
            http.get("/")
