"""Closed-loop streaming traffic through the balancer with the real `openai` client.

Each thread sends one streamed chat completion after another, with its own
`x-request-id`, and keeps what happened: start and end (monotonic), the
gateway that served it (haproxy's `x-fleet-gateway` header), the usage, or
the typed error the client raised.
"""

import threading
import time
import uuid
from dataclasses import dataclass, field

import openai

from bench.fleet.stack import MODEL, TASK_HEADER


@dataclass
class Outcome:
    request_id: str
    start: float
    end: float
    ok: bool
    gateway: str | None = None
    tokens: int = 0  # prompt + completion tokens of the final usage chunk
    status: int | None = None
    error: str | None = None  # the openai exception's class (and the API's code)


def one_request(client: openai.OpenAI, max_tokens: int) -> Outcome:
    rid = uuid.uuid4().hex
    start = time.monotonic()
    gateway: str | None = None
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "def add(a, b):"}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            user=f"user-{rid[:4]}",
            extra_headers={"x-request-id": rid, **TASK_HEADER},
        )
        gateway = raw.headers.get("x-fleet-gateway")
        tokens = 0
        for chunk in raw.parse():
            if chunk.usage is not None:
                tokens = chunk.usage.total_tokens
        if tokens == 0:  # a stream cut short carries no usage
            return Outcome(rid, start, time.monotonic(), False, gateway, error="TruncatedStream")
        return Outcome(rid, start, time.monotonic(), True, gateway, tokens)
    except openai.APIStatusError as exc:
        code = exc.code if isinstance(exc.code, str) else None
        name = f"{type(exc).__name__}:{exc.status_code}" + (f":{code}" if code else "")
        end = time.monotonic()
        return Outcome(rid, start, end, False, gateway, status=exc.status_code, error=name)
    except openai.APIError as exc:  # connection errors, errors inside a stream
        return Outcome(rid, start, time.monotonic(), False, gateway, error=type(exc).__name__)


@dataclass
class Load:
    base_url: str
    api_key: str
    concurrency: int
    max_tokens: int = 16
    limit: int | None = None  # stop after this many requests in all (None: until stop())
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _issued: int = 0

    def _take(self) -> bool:
        with self._lock:
            if self._stop.is_set() or (self.limit is not None and self._issued >= self.limit):
                return False
            self._issued += 1
            return True

    def _run(self) -> None:
        client = openai.OpenAI(
            base_url=self.base_url + "/v1", api_key=self.api_key, max_retries=0, timeout=15.0
        )
        try:
            while self._take():
                outcome = one_request(client, self.max_tokens)
                with self._lock:
                    self.outcomes.append(outcome)
        finally:
            client.close()

    def start(self) -> "Load":
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._run, name=f"load-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def join(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.1))

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self.join(timeout_s)

    def snapshot(self) -> list[Outcome]:
        with self._lock:
            return list(self.outcomes)
