"""`specroute admin` over every resource against a real control plane over HTTP:
list / show / create / update / delete by name or id, `-o table|json|yaml`, one-line
errors with exit codes, `rollout wait` / `rollout status --watch`, decisions in
numeric order."""

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from control.cli.admin.watch import State
from specwire.admin_client import AdminClient
from specwire.snapshot import RolloutState
from tests.control.cli.conftest import TOKEN, as_json, ok, refused
from tests.control.conftest import THRESHOLDS, WAIVE_ALL, eval_cases, write_model_dir

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


@pytest.fixture
def setup(cli: Callable[..., Result], server: str, tmp_path: Path) -> Iterator[AdminClient]:
    """A pair version, spec and baseline pools, segment `code`, thresholds `default`
    and rollout `code-tiny` (draft), all made with the CLI, names only."""
    target = str(write_model_dir(tmp_path / "target"))
    draft = str(write_model_dir(tmp_path / "draft"))
    version = as_json(cli, "pair", "register", "tiny", "--target", target, "--draft", draft)
    pair_version = ("--pair-version", str(version["id"]))
    ok(cli, "pool", "create", "spec", "--model", "tiny", "--target", target, *pair_version)
    ok(cli, "pool", "create", "base", "--model", "tiny", "--target", target)
    ok(cli, "segment", "create", "code", "--selector", '{"tasks": ["code"]}')
    ok(cli, "thresholds", "create", "default", "--values", json.dumps(THRESHOLDS))
    created = ok(
        cli,
        "rollout",
        "create",
        "code-tiny",
        "--segment",
        "code",
        "--pair-version",
        str(version["id"]),
        "--spec-pool",
        "spec",
        "--baseline-pool",
        "base",
        "--thresholds",
        "default",
        "--stages",
        "1,10,100",
    )
    assert created.strip() == "rollout code-tiny: draft at 0 % (version 1)"
    with AdminClient(server, TOKEN) as admin:
        yield admin


def test_every_resource_lists_shows_updates_and_deletes_by_name(
    cli: Callable[..., Result], setup: AdminClient
) -> None:
    ok(cli, "tenant", "create", "acme")
    for group, name in (
        ("pool", "base"),
        ("segment", "code"),
        ("tenant", "acme"),
        ("thresholds", "default"),
        ("rollout", "code-tiny"),
        ("pair", "tiny"),
    ):
        assert name in [row["name"] for row in as_json(cli, group, "list")], group
        assert name in ok(cli, group, "list"), group
        shown = yaml.safe_load(ok(cli, group, "show", name, "-o", "yaml"))
        doc = shown["rollout"] if group == "rollout" else shown
        assert doc["name"] == name, (group, shown)
        by_id = as_json(cli, group, "show", str(doc["id"]))
        assert (by_id["rollout"] if group == "rollout" else by_id)["name"] == name

    assert "Evidence" in ok(cli, "rollout", "show", "code-tiny")
    pool = as_json(cli, "pool", "update", "base", "--set", "desired_workers=2")
    assert (pool["desired_workers"], pool["version"]) == (2, 2)
    stale = refused(
        cli, 1, "pool", "update", "base", "--set", "desired_workers=3", "--if-match", "1"
    )
    assert stale.startswith("error 412 stale_version:")
    segment = as_json(cli, "segment", "update", "code", "--set", "priority=5")
    assert segment["priority"] == 5
    tenant = as_json(cli, "tenant", "update", "acme", "--set", "override_allowed=true")
    assert tenant["override_allowed"] is True
    rollout = as_json(cli, "rollout", "update", "code-tiny", "--set", "stages=[1, 50, 100]")
    assert rollout["stages"] == [1, 50, 100]
    v2 = as_json(cli, "thresholds", "update", "default", "--values", '{"min_speedup": 1.2}')
    assert (v2["version"], v2["min_speedup"]) == (2, 1.2)
    assert as_json(cli, "thresholds", "show", "default")["version"] == 2

    key = ok(cli, "key", "create", "acme", "--name", "ci").strip()
    [listed] = as_json(cli, "key", "list", "acme")
    assert listed["name"] == "ci" and key.startswith(listed["prefix"])
    assert ok(cli, "key", "revoke", "acme", str(listed["id"])).strip() == (
        f"key {listed['prefix']} (id {listed['id']}) revoked"
    )
    assert as_json(cli, "key", "list", "acme")[0]["revoked_at"] is not None

    secret = ok(cli, "token", "create", "ci-reader", "--scope", "admin:read").strip()
    assert "\n" not in secret and any(
        t["name"] == "ci-reader" for t in as_json(cli, "token", "list")
    )
    revoked = json.loads(ok(cli, "token", "revoke", "ci-reader", "-o", "json"))
    assert revoked["revoked_at"] is not None

    ok(cli, "segment", "create", "spare")
    assert ok(cli, "segment", "delete", "spare").startswith("segment spare (id ")
    assert refused(cli, 1, "segment", "show", "spare") == (
        "error 404 not_found: no segment named 'spare'"
    )
    assert ok(cli, "tenant", "delete", "acme", "-o", "json").strip().startswith("{")
    assert "acme" not in ok(cli, "tenant", "list")
    # A rollout refers to pool `spec`: the API refuses, the CLI says so with the code.
    in_use = refused(cli, 1, "pool", "delete", "spec")
    assert in_use.startswith("error 409 ")


def test_bad_input_gets_one_line_and_an_exit_code(
    cli: Callable[..., Result], setup: AdminClient, tmp_path: Path
) -> None:
    bad_json = refused(cli, 2, "segment", "create", "x", "--selector", '{"tasks": [')
    assert bad_json.startswith("error: --selector is not valid JSON")
    assert refused(cli, 2, "segment", "create", "x", "--selector", "[1]").startswith(
        "error: --selector must be a JSON object"
    )
    assert "FIELD=VALUE" in refused(cli, 2, "pool", "update", "base", "--set", "desired_workers")
    stages = refused(
        cli,
        2,
        *("rollout", "create", "r2", "--segment", "code", "--pair-version", "1"),
        *("--spec-pool", "spec", "--baseline-pool", "base", "--thresholds", "1"),
        *("--stages", "1,x"),
    )
    assert "--stages wants comma-separated numbers" in stages
    missing_file = refused(
        cli,
        2,
        "eval-set",
        "create",
        "e",
        "--cases",
        str(tmp_path / "no.json"),
        "--prompt-store",
        "x",
    )
    assert missing_file.startswith("error: --cases: cannot read")
    assert refused(cli, 1, "rollout", "show", "abc") == (
        "error 404 not_found: no rollout named 'abc'"
    )
    assert refused(cli, 1, "rollout", "promote", "nope").startswith("error 404 not_found:")
    duplicate = refused(cli, 1, "segment", "create", "code")
    assert re.match(r"^error 409 \w+: ", duplicate), duplicate
    invalid = refused(cli, 1, "pool", "update", "base", "--set", "desired_workers=-5")
    assert invalid.startswith("error 422 "), invalid
    illegal = refused(cli, 1, "rollout", "promote", "code-tiny")
    assert illegal.startswith("error 409 ") and "allowed:" in illegal


def test_keys_and_tokens_show_by_name_or_id(cli: Callable[..., Result], setup: AdminClient) -> None:
    ok(cli, "tenant", "create", "acme")
    secret = ok(cli, "key", "create", "acme", "--name", "ci").strip()
    ok(cli, "key", "create", "acme", "--name", "twice")
    ok(cli, "key", "create", "acme", "--name", "twice")
    by_name = as_json(cli, "key", "show", "acme", "ci")
    assert by_name["name"] == "ci" and secret.startswith(by_name["prefix"])
    assert "key" not in by_name  # the secret is never shown again
    by_id = yaml.safe_load(ok(cli, "key", "show", "acme", str(by_name["id"]), "-o", "yaml"))
    assert by_id == by_name
    table = ok(cli, "key", "show", "acme", "ci")
    assert "key ci of tenant acme" in table and by_name["prefix"] in table
    assert refused(cli, 1, "key", "show", "acme", "nope") == (
        "error 404 not_found: tenant acme has no key named 'nope'"
    )
    assert refused(cli, 1, "key", "show", "acme", "999999").startswith(
        "error 404 api_key_not_found:"
    )
    assert refused(cli, 1, "key", "show", "nobody", "ci") == (
        "error 404 not_found: no tenant named 'nobody'"
    )
    ambiguous = refused(cli, 1, "key", "show", "acme", "twice")
    assert ambiguous.startswith("error 409 ambiguous_name: 2 keys named 'twice' (ids ")

    ok(cli, "token", "create", "ci-reader", "--scope", "admin:read")
    token = as_json(cli, "token", "show", "ci-reader")
    assert (token["name"], token["scopes"], token["revoked_at"]) == (
        "ci-reader",
        ["admin:read"],
        None,
    )
    assert "token" not in token
    assert as_json(cli, "token", "show", str(token["id"])) == token
    assert "admin token ci-reader" in ok(cli, "token", "show", "ci-reader")
    assert refused(cli, 1, "token", "show", "nope") == (
        "error 404 not_found: no admin token named 'nope'"
    )
    assert refused(cli, 1, "token", "show", "999999").startswith("error 404 admin_token_not_found:")


def test_evaluation_create_posts_results_from_a_file(
    cli: Callable[..., Result], setup: AdminClient, tmp_path: Path
) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(eval_cases(4)))
    ok(cli, "eval-set", "create", "code-evals", "--cases", str(cases), "--prompt-store", "x://p")
    [version] = list(setup.pairs.versions("tiny"))
    results = tmp_path / "results.json"
    body = {
        "case_keys": [f"case-{i}" for i in range(4)],
        "drafts": 40,
        "position_acceptance": [0.9, 0.8, 0.7],
        "mean_acceptance_length": 3.1,
        "cost_ratio": 0.1,
        "expected_speedup": {"3": 2.4},
    }
    results.write_text(json.dumps(body))
    line = ok(
        cli,
        *("evaluation", "create", "--results", str(results)),
        *("--pair-version", str(version["id"]), "--eval-set", "code-evals"),
    ).strip()
    [listed] = as_json(cli, "evaluation", "list")
    assert line == (
        f"offline evaluation {listed['id']} for pair version {version['id']} on eval set "
        f"{listed['eval_set_id']}: mean acceptance length 3.100, 0 stale cases"
    )
    assert (listed["pair_version_id"], listed["drafts"], listed["cases"]) == (version["id"], 40, 4)
    # The ids may come from the file; -o json prints the API's document.
    results.write_text(
        json.dumps(body | {"pair_version_id": version["id"], "eval_set_id": listed["eval_set_id"]})
    )
    second = as_json(cli, "evaluation", "create", "--results", str(results))
    assert second["id"] > listed["id"] and second["expected_speedup"] == {"3": 2.4}

    no_ids = tmp_path / "no-ids.json"
    no_ids.write_text(json.dumps(body))
    assert refused(cli, 2, "evaluation", "create", "--results", str(no_ids)) == (
        f"error: no pair_version_id: pass --pair-version or put it in {no_ids}"
    )
    assert refused(
        cli, 2, "evaluation", "create", "--results", str(tmp_path / "absent.json")
    ).startswith("error: --results: cannot read")
    listed_file = tmp_path / "list.json"
    listed_file.write_text("[1, 2]")
    assert refused(cli, 2, "evaluation", "create", "--results", str(listed_file)) == (
        f"error: --results: {listed_file} must hold a JSON object"
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert refused(cli, 2, "evaluation", "create", "--results", str(broken)).startswith(
        f"error: --results: {broken} is not valid JSON"
    )
    unknown_set = refused(
        cli, 1, "evaluation", "create", "--results", str(results), "--eval-set", "nope"
    )
    assert unknown_set == "error 404 not_found: no eval set named 'nope'"
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps(body | {"drafts": 0}))
    rejected = refused(
        cli,
        1,
        *("evaluation", "create", "--results", str(invalid)),
        *("--pair-version", str(version["id"]), "--eval-set", "code-evals"),
    )
    assert rejected.startswith("error 422 "), rejected


def test_rollout_wait_and_watch_follow_the_state(
    cli: Callable[..., Result], setup: AdminClient
) -> None:
    admin = setup
    admin.rollouts.act("code-tiny", "start", **WAIVE_ALL)
    assert admin.rollouts.find("code-tiny")["state"] == "canary"
    reached = ok(cli, "rollout", "wait", "code-tiny", "--for", "canary")
    assert STAMP.match(reached) and "rollout code-tiny: canary at 1 %" in reached
    timed_out = refused(
        cli,
        3,
        "rollout",
        "wait",
        "code-tiny",
        "--for",
        "full",
        "--timeout",
        "0.5",
        "--interval",
        "0.1",
    )
    assert timed_out == (
        "timed out after 0.5 s waiting for full: rollout code-tiny: canary at 1 % (version 2)"
    )
    assert cli("rollout", "wait", "code-tiny", "--for", "fully").exit_code == 2

    def later(action: str) -> threading.Thread:
        def act() -> None:
            time.sleep(0.6)
            admin.rollouts.act("code-tiny", action, reason="test")

        thread = threading.Thread(target=act)
        thread.start()
        return thread

    pausing = later("pause")
    paused = ok(cli, "rollout", "wait", "code-tiny", "--for", "paused", "--interval", "0.1")
    pausing.join()
    assert "rollout code-tiny: paused at 1 % (version 3)" in paused

    resuming = later("resume")
    watched = ok(
        cli, "rollout", "status", "code-tiny", "--watch", "--interval", "0.1", "--timeout", "2"
    )
    resuming.join()
    lines = watched.strip().splitlines()
    assert len(lines) == 2 and all(STAMP.match(line) for line in lines), watched
    assert "paused at 1 % (version 3); allowed: resume" in lines[0]
    assert "canary at 1 % (version 4)" in lines[1]
    once = json.loads(ok(cli, "rollout", "status", "code-tiny", "-o", "json"))
    assert (once["state"], once["version"]) == ("canary", 4)


def test_decisions_list_in_numeric_order(cli: Callable[..., Result], setup: AdminClient) -> None:
    admin = setup
    admin.rollouts.act("code-tiny", "start", **WAIVE_ALL)
    for _ in range(5):
        admin.rollouts.act("code-tiny", "pause", reason="test")
        admin.rollouts.act("code-tiny", "resume", reason="test")
    rows = as_json(cli, "decision", "list", "--rollout", "code-tiny", "--limit", "50")
    ids = [row["id"] for row in rows]
    assert len(ids) == 11 and ids == sorted(ids, reverse=True), ids
    table_ids = [
        int(line.split("│")[1])
        for line in ok(cli, "decision", "list").splitlines()
        if line.count("│") > 2 and line.split("│")[1].strip().isdigit()
    ]
    assert table_ids == ids
    assert [r["id"] for r in as_json(cli, "decisions", "--limit", "3")] == ids[:3]
    shown = as_json(cli, "decision", "show", str(ids[0]))
    assert (shown["id"], shown["kind"]) == (ids[0], "manual_resume")


def test_the_cli_knows_every_rollout_state() -> None:
    assert [s.value for s in State] == [s.value for s in RolloutState]
