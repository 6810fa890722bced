"""An agent enrolled for an IP network (a Kubernetes pod CIDR) registers workers at
any address of it and nowhere else."""

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from control.internal.origins import endpoint_allowed
from tests.control.internal.factories import beat, build_world


@pytest.mark.parametrize(
    ("endpoint", "allowed"),
    [
        ("http://10.244.3.7:8100", True),
        ("http://10.244.255.255:1", True),
        ("http://10.245.0.1:8100", False),
        ("https://10.244.3.7:8100", False),
        ("http://pod.example:8100", False),
        ("http://[fd00::5]:8100", True),
        ("http://[fd01::5]:8100", False),
    ],
)
def test_network_entries_match_addresses_in_the_network(endpoint: str, allowed: bool) -> None:
    entries = ("http://10.244.0.0/16", "http://[fd00::]/16")
    assert endpoint_allowed(endpoint, entries) is allowed


def test_plain_origins_keep_their_meaning() -> None:
    assert endpoint_allowed("http://127.0.0.1:8101", ("http://127.0.0.1:8101",))
    assert endpoint_allowed("http://127.0.0.1:9", ("http://127.0.0.1",))
    assert not endpoint_allowed("http://127.0.0.1:9", ("http://127.0.0.1:8101",))
    # An entry that is no valid network never matches (it was refused at enrolment).
    assert not endpoint_allowed("http://10.0.0.1:80", ("http://10.0.0.1/8",))


def test_an_agent_enrolled_for_a_pod_cidr(
    app_client: TestClient, session: Session, admin_headers: dict[str, str]
) -> None:
    world = build_world(session)
    session.commit()
    pool = world.spec_pool.id
    enrolled = app_client.post(
        f"/admin/v1/pools/{pool}/agent-tokens",
        json={"name": "k8s-spec", "allowed_endpoints": ["http://10.244.0.0/16"]},
        headers=admin_headers,
    )
    assert enrolled.status_code == 201, enrolled.text
    agent = {
        "Authorization": f"Bearer {enrolled.json()['token']}",
        "content-type": "application/json",
    }

    def send(worker: str, endpoint: str) -> int:
        doc = beat(pool, endpoint_url=endpoint).model_dump_json()
        url = f"/internal/v1/workers/{worker}/heartbeat"
        return app_client.post(url, content=doc, headers=agent).status_code

    assert send("pod-a", "http://10.244.1.20:8100") == 200
    assert send("pod-b", "http://10.244.9.3:8100") == 200
    assert send("pod-c", "http://10.99.0.1:8100") == 403

    for bad in ("http://pods.example/16", "http://10.244.0.1/16", "http://10.0.0.0:80/8"):
        refused = app_client.post(
            f"/admin/v1/pools/{pool}/agent-tokens",
            json={"name": "bad", "allowed_endpoints": [bad]},
            headers=admin_headers,
        )
        assert refused.status_code == 422, (bad, refused.text)
