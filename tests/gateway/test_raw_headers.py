"""Header values httpx will not send (non-ASCII, Latin-1, UTF-8, control bytes),
written on a raw socket to a real gateway (issue #21): each is answered with a typed
4xx, a success, or uvicorn's own 400 for a request it cannot parse; never a 5xx or a
dropped connection."""

import json
from pathlib import Path

from tests.hostile.raw_headers import HOSTILE_VALUES, gateway_answers, is_http_layer_400

CONTROL_BYTES = (b"a\x00b", b"a\x7fb", b"a\x01b")


def test_non_ascii_header_values_get_a_typed_4xx_or_a_clean_400(tmp_path: Path) -> None:
    answers = gateway_answers(tmp_path)
    assert len(answers) == 3 * 8 * len(HOSTILE_VALUES)
    for case, answer in answers:
        assert 200 <= answer.status < 500, case.what
        value = case.headers[-1][1]
        if value in CONTROL_BYTES:
            assert is_http_layer_400(answer), case.what
            continue
        if answer.status >= 400:
            error = json.loads(answer.body)["error"]
            assert error["type"] and error["code"], case.what
        name = case.headers[-1][0]
        if name == b"authorization":
            assert answer.status == 401, case.what
            assert json.loads(answer.body)["error"]["code"] == "invalid_api_key"
        elif name == b"x-specroute-speculation" and case.method == "POST":
            assert answer.status in (400, 403), case.what  # not on/off; or not allowed
        elif name in (b"x-request-id", b"x-specroute-task", b"x-specroute-session"):
            assert answer.status == 200, case.what  # replaced, or a feature like any other
