"""Header values httpx will not send (non-ASCII, Latin-1, UTF-8, control bytes),
written on a raw socket to a real control plane under uvicorn (issue #21): each is
answered with a typed 4xx, a success, or uvicorn's own 400 for a request it cannot
parse; never a 5xx or a dropped connection."""

import json
from pathlib import Path

from tests.hostile.raw_headers import control_answers, is_http_layer_400

CONTROL_BYTES = (b"a\x00b", b"a\x7fb", b"a\x01b")


def test_non_ascii_header_values_get_a_typed_4xx_or_a_clean_400(tmp_path: Path) -> None:
    answers = control_answers(tmp_path)
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
