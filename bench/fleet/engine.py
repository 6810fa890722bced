"""A fake OpenAI engine worker for the fleet run, with the real engine agent beside it.

The upstream is `engine.fake.FakeUpstream` (SSE shaped like vLLM's) plus
what the agent probes on a vLLM server: `/metrics` in vLLM's names (KV-cache
usage read from a file the harness writes, so it can raise memory pressure on
demand; spec-decode counters on a speculating worker) and `/version`. `/stats`
says how many completions it has served. The heartbeat agent is
`engine.agent.heartbeat.HeartbeatAgent`, as in `specroute engine up`.

    python -m bench.fleet.engine --host 10.231.7.14 --port 9000 --pool-id 1 \
        --worker-id e1-spec --control-url http://10.231.7.10:8000 --speculative \
        --kv-file /tmp/kv --token-env SPECROUTE_AGENT_TOKEN
"""

import argparse
import json
import os
from pathlib import Path

from engine.fake import (
    JSON_HEADERS,
    FakeUpstream,
    Receive,
    Scope,
    Send,
    respond,
    serve,
)

ENGINE_VERSION = "0.32.0"


class FleetEngine(FakeUpstream):
    def __init__(
        self, tokens: int, interval_s: float, model: str, *, speculative: bool, kv_file: Path
    ) -> None:
        super().__init__(tokens, interval_s, model)
        self.speculative = speculative
        self.kv_file = kv_file
        self.served = 0
        self.running = 0

    def kv_usage(self) -> float:
        try:
            return float(self.kv_file.read_text().strip() or 0.1)
        except (OSError, ValueError):
            return 0.1

    def metrics_text(self) -> str:
        lines = [
            f'vllm:kv_cache_usage_perc{{engine="0"}} {self.kv_usage()}',
            f'vllm:num_requests_running{{engine="0"}} {self.running}',
            'vllm:num_requests_waiting{engine="0"} 0',
            f'vllm:generation_tokens_total{{engine="0"}} {self.served * self.tokens}',
        ]
        if self.speculative:
            steps = max(self.tokens // 2, 1) * self.served
            lines += [
                f'vllm:spec_decode_num_drafts_total{{engine="0"}} {steps}',
                f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {3 * steps}',
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {steps}',
            ]
        return "\n".join(lines) + "\n"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path = scope["path"]
            if path == "/metrics":
                headers = [(b"content-type", b"text/plain; version=0.0.4")]
                await respond(send, 200, headers, self.metrics_text().encode())
                return
            if path == "/version":
                await respond(
                    send, 200, JSON_HEADERS, b'{"version":"%s"}' % ENGINE_VERSION.encode()
                )
                return
            if path == "/stats":
                body = json.dumps({"served": self.served, "running": self.running})
                await respond(send, 200, JSON_HEADERS, body.encode())
                return
        if scope["type"] != "http" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        self.running += 1
        try:
            await super().__call__(scope, receive, send)
            self.served += 1
        finally:
            self.running -= 1


def main() -> None:
    from engine.agent.client import ControlClient
    from engine.agent.heartbeat import HeartbeatAgent, WorkerProbe

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pool-id", type=int, required=True)
    p.add_argument("--worker-id", required=True)
    p.add_argument("--control-url", required=True)
    p.add_argument("--token-env", default="SPECROUTE_AGENT_TOKEN")
    p.add_argument("--speculative", action="store_true")
    p.add_argument("--kv-file", type=Path, required=True)
    p.add_argument("--model", default="fleet-model")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--beat-seconds", type=float, default=1.0)
    a = p.parse_args()
    app = FleetEngine(
        a.tokens, a.interval_ms / 1000.0, a.model, speculative=a.speculative, kv_file=a.kv_file
    )
    probe = WorkerProbe(
        pool_id=a.pool_id,
        endpoint_url=f"http://{a.host}:{a.port}",
        speculative=a.speculative,
        pid=os.getpid,
        health_timeout=min(2.0, a.beat_seconds * 0.8),
    )
    agent = HeartbeatAgent(
        a.worker_id,
        probe,
        ControlClient(a.control_url, os.environ[a.token_env]),
        interval=a.beat_seconds,
    )
    agent.start()
    serve(app, a.host, a.port)


if __name__ == "__main__":
    main()
