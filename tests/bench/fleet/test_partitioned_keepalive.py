"""A non-streamed request on a kept-alive connection to an engine host whose link then
goes down: no response-header deadline applies (its headers come with its end), so
the kernel's bound on the unacknowledged request (TCP_USER_TIMEOUT, the gateway's
response-header timeout) must end it, as EngineUnresponsive, in about that time,
not the request's own 600 s timeout.

The partition is real: the engine runs in a network namespace whose veth leaves the
bridge (bench/fleet/netns.py), as in the fleet run.
"""

import asyncio
import subprocess
import sys
import time

import pytest

from bench.fleet.netns import Network, available
from gateway.proxy.engine_http import EngineClient, EngineConnectError, EngineUnresponsive
from tests.fixtures.services import unavailable

UNACKED_S = 1.0
PORT = 9000
ENGINE = """
import http.server
import sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""


def test_a_partitioned_host_ends_a_non_streamed_request_on_a_kept_connection() -> None:
    reason = available()
    if reason is not None:
        unavailable(f"no network namespaces: {reason}", what="capability")
    with Network() as net:
        host = net.add_host("eng")
        engine = subprocess.Popen(host.exec_argv([sys.executable, "-c", ENGINE, str(PORT)]))
        try:
            url = f"http://{host.address}:{PORT}"
            asyncio.run(_partitioned(net, url))
        finally:
            engine.kill()
            engine.wait(5)


async def _partitioned(net: Network, url: str) -> None:
    client = EngineClient(connect_timeout_s=2.0, unacked_timeout_s=UNACKED_S)
    headers = {"content-type": "application/json"}
    try:
        deadline = time.monotonic() + 10
        while True:  # the engine process starting
            try:
                first = await client.post(url, "/v1/completions", b"{}", headers, timeout_s=10)
                break
            except EngineConnectError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        assert await first.read() == b'{"ok": true}'
        first.release()
        net.link_down("eng")
        started = time.monotonic()
        with pytest.raises(EngineUnresponsive, match="stopped acknowledging"):
            await client.post(url, "/v1/completions", b"{}", headers, timeout_s=600)
        elapsed = time.monotonic() - started
        # The bound plus one retransmission timer's slack (RTO min 200 ms, doubling).
        assert UNACKED_S <= elapsed < UNACKED_S + 1.5, elapsed
    finally:
        await client.close()
