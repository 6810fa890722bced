"""A user's mistake is never a 500: every input a hostile probe got a 500 for is
now its typed 4xx, and a seeded fuzz of every route in the OpenAPI document gets
no 5xx, on SQLite and PostgreSQL (tests/hostile holds the inputs)."""

from pathlib import Path

from fastapi.testclient import TestClient

from tests.fixtures.db import INTERNAL_TOKEN
from tests.hostile.control_cases import control_cases
from tests.hostile.control_run import fuzz, seed, send_case

FUZZ_PER_OPERATION = 20  # ~1,000 requests per backend, ~10 s


def test_each_input_that_was_a_500_is_its_typed_4xx(
    app_client: TestClient, admin_headers: dict[str, str], tmp_path: Path
) -> None:
    ids = seed(app_client, admin_headers)
    cases = control_cases(ids, tmp_path / "models")
    assert len(cases) == 23
    wrong = []
    for case in cases:
        response = send_case(app_client, case, admin_headers)
        error = response.json().get("error", {}) if response.status_code >= 400 else {}
        if (
            response.status_code != case.status
            or (case.code and error.get("code") != case.code)
            or not all(part in error.get("message", "") for part in case.message_has)
        ):
            wrong.append(f"{case.name}: {response.status_code} {response.text[:200]}")
    assert wrong == []


def test_refs_outside_the_model_roots_say_nothing_about_the_file_system(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    ids = seed(app_client, admin_headers)
    answers = set()
    for ref in ("/etc", "/nonexistent-dir", "/root", "../../"):
        response = app_client.post(
            f"/admin/v1/pairs/{ids['pair']}/versions",
            json={"method": "ngram", "target_ref": ref, "num_speculative_tokens": 3},
            headers=admin_headers,
        )
        assert response.status_code == 422
        answers.add(response.text)
    # One identical answer whether the directory exists, is unreadable or is absent.
    assert len(answers) == 1
    assert "etc" not in answers.pop()


def test_seeded_fuzz_of_every_route_gets_no_5xx(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    ids = seed(app_client, admin_headers)
    tally = fuzz(
        app_client,
        app_client.app.openapi(),  # type: ignore[attr-defined]
        ids,
        admin_headers,
        {"Authorization": f"Bearer {INTERNAL_TOKEN}"},
        per_operation=FUZZ_PER_OPERATION,
    )
    assert tally.tried >= 900
    assert tally.server_errors == []
    # The fuzz reaches the handlers, not only the validators.
    assert tally.statuses[200] > 100 and tally.statuses[422] > 300


def test_the_hardening_cases_get_their_refusals(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Issue #21's hostile inputs: engine arguments, unauthenticated malformed and
    oversized bodies, an agent token reused after its pool was deleted, and admin ids
    asked by tokens that may not use the route (existing and missing: one 403)."""
    from tests.hostile.control_run import Tally
    from tests.hostile.harden_cases import (
        harden_cases,
        id_oracle_cases,
        run_cases,
        token_reuse_after_deletion,
    )

    ids = seed(app_client, admin_headers)
    tally = Tally()
    run_cases(app_client, harden_cases(ids, INTERNAL_TOKEN), admin_headers, tally)
    token_reuse_after_deletion(app_client, admin_headers, tally)
    id_oracle_cases(app_client, admin_headers, ids, tally)
    assert tally.tried == 55 + 12
    assert tally.statuses[403] >= 12
    assert (tally.server_errors, tally.wrong_successes, tally.unexpected) == ([], [], [])
