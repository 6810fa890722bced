"""Header values httpx will not send (non-ASCII, Latin-1, UTF-8, control bytes),
written on a raw socket to a real control plane under uvicorn (issue #21): each is
answered with a typed 4xx, a success, or uvicorn's own 400 for a request it cannot
parse; never a 5xx or a dropped connection."""

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from control.app import create_app
from control.migrate import upgrade
from control.settings import ControlSettings
from tests.gateway.server import serve_app
from tests.hostile.raw_headers import control_cases, is_http_layer_400, run_cases

CONTROL_BYTES = (b"a\x00b", b"a\x7fb", b"a\x01b")


def test_non_ascii_header_values_get_a_typed_4xx_or_a_clean_400(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=url,
        admin_token="raw-admin",
        internal_token="raw-int",
        # Bad Authorization values on purpose, from one address: no failure limit.
        auth_failure_burst=1_000_000,
    )
    with serve_app(create_app(settings)) as base:
        created = httpx.post(
            f"{base}/admin/v1/tenants",
            json={"name": "raw"},
            headers={"Authorization": "Bearer raw-admin"},
        )
        assert created.status_code == 201, created.text
        port = urlsplit(base).port
        assert port is not None
        answers = run_cases(port, control_cases("raw-admin", "raw-int", created.json()["id"]))
    statuses = {answer.status for _, answer in answers}
    assert 401 in statuses and 200 in statuses
    for case, answer in answers:
        assert 200 <= answer.status < 500, case.what
        name, value = case.headers[-1]
        if value in CONTROL_BYTES:
            assert is_http_layer_400(answer), case.what
            continue
        if answer.status >= 400:
            assert "error" in json.loads(answer.body) or "detail" in json.loads(answer.body), (
                case.what
            )
        if name == b"authorization" and case.path != "/healthz":
            assert answer.status == 401, case.what
