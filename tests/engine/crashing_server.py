"""A real HTTP server process that answers like vLLM's /health and /v1/models and
crashes after `--crash-after` seconds on its first `--crashes` launches.

Lets the supervisor's restart and backoff logic run against real processes and
real sockets in a second, instead of a minute per vLLM start. Launch count is
kept in `--state` (a file) because each launch is a fresh process.
"""

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--crashes", type=int, default=0)
    parser.add_argument("--crash-after", type=float, default=0.3)
    args = parser.parse_args()

    launches = int(args.state.read_text()) + 1 if args.state.exists() else 1
    args.state.write_text(str(launches))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body = b""
            elif self.path == "/v1/models":
                body = json.dumps({"data": [{"id": args.model}]}).encode()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if launches <= args.crashes:
        threading.Timer(args.crash_after, lambda: os._exit(3)).start()
    try:
        server.serve_forever()
    finally:
        sys.exit(0)


if __name__ == "__main__":
    main()
