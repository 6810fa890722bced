"""bench.gateway_micro drives the whole app in process: a streamed request comes
back whole, the same bytes from a second copy of the gateway package, and a
refused one fails the bench's check."""

from pathlib import Path

import pytest
import uvloop

from bench import gateway_micro
from bench.gateway_overhead import write_snapshot
from bench.relay_micro import engine_reads

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def snapshot_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = tmp_path / "snapshot.json"
    write_snapshot(snap, "http://127.0.0.1:9")
    monkeypatch.setenv("SPECROUTE_GATEWAY_SNAPSHOT_FILE", str(snap))
    monkeypatch.delenv("SPECROUTE_GATEWAY_REDIS_URL", raising=False)


def test_a_streamed_request_is_served_whole_by_either_tree(snapshot_env: None) -> None:
    reads = engine_reads(8, per_read=3)
    ours = gateway_micro.this_tree()
    other = gateway_micro.load_tree(ROOT)
    assert other.module("gateway.app") is not ours.module("gateway.app")
    _, _, body = uvloop.run(gateway_micro.timed(ours, reads, 3))
    gateway_micro.check(body, 8)
    # Both apps in one loop, batches in ABBA order: every batch's answer the same.
    trees = {"new": ours, "old": other}
    runs = uvloop.run(gateway_micro.interleaved(trees, reads, 2, ["old", "new", "new", "old"]))
    assert {name: len(done) for name, done in runs.items()} == {"new": 2, "old": 2}
    assert {again for done in runs.values() for _, _, again in done} == {body}
    head = body.partition(b"\r\n\r\n")[0].lower()
    assert b"x-request-id: bench-request-0001" in head
    assert b"x-specroute-decision: arm=baseline" in head


def test_the_check_refuses_an_answer_that_is_not_the_stream() -> None:
    with pytest.raises(AssertionError):
        gateway_micro.check(b"HTTP/1.1 401 Unauthorized\r\n\r\n{}", 8)
    with pytest.raises(AssertionError):
        gateway_micro.check(b"HTTP/1.1 200 OK\r\n\r\ndata: tok\n\n0\r\n\r\n", 8)
