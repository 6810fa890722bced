"""`admin decision|request|evaluation|eval-set ...`, `admin audit`, `admin adapters`:
what happened, newest first."""

from itertools import islice
from typing import Any

import typer

from control.cli.admin.crud import add_show, emit_rows
from control.cli.admin.output import Output, OutputOption, emit, emit_document, emit_line, group
from control.cli.admin.session import CliInputError, client, read_json_file, run

decision_app = group("The automation's and admins' decisions.")
request_app = group("Per-request records (never their text).")
evaluation_app = group("Offline evaluations of pair versions.")
eval_set_app = group("Governed eval sets (versioned, with lineage).")
LimitOption: Any = typer.Option(20, min=1, help="How many, newest first.")


def _latest(attr: str, limit: int, **filters: Any) -> list[dict[str, Any]]:
    resource = getattr(client(), attr)
    return list(islice(resource.list(limit=min(limit, 500), **filters), limit))


@decision_app.command("list")
def decision_list(
    rollout: str | None = typer.Option(None, help="Rollout name or id."),
    kind: str | None = typer.Option(None, help="manual_promote, auto_rollback, ..."),
    limit: int = LimitOption,
    output: Output = OutputOption,
) -> None:
    """Latest decisions, newest first (by id)."""

    def go() -> list[dict[str, Any]]:
        rollout_id = client().rollouts.id_of(rollout) if rollout else None
        rows = _latest("decisions", limit, rollout_id=rollout_id, kind=kind)
        return sorted(rows, key=lambda d: int(d["id"]), reverse=True)

    columns: list[tuple[str, Any]] = [
        ("id", "id"),
        ("rollout", "rollout_id"),
        ("kind", "kind"),
        ("from", "from_state"),
        ("to", "to_state"),
        ("%", lambda d: f"{d['from_percentage']:g}→{d['to_percentage']:g}"),
        ("actor", "actor"),
        ("at", lambda d: d["created_at"][:19]),
    ]
    emit_rows(run(go), columns, output)


add_show(decision_app, "decisions", "decision")


@decision_app.command("record")
def decision_record(decision_id: int) -> None:
    """A decision's record (markdown: the evidence and why)."""
    typer.echo(run(lambda: client().decisions.record(decision_id)))


@request_app.command("show")
def request_show(
    request_id: str,
    replay_settings: bool = typer.Option(
        False,
        "--replay-settings",
        help="Only the settings that reproduce the request: model, adapter, pool and arm, "
        "pair version, engine build, sampling and seed, digests of stop strings, logit "
        "bias and schema (no text).",
    ),
    output: Output = OutputOption,
) -> None:
    """One request's story: who, which segment and rollout, arm and why, where it ran,
    its sampling settings, tokens, acceptance, latency and outcome (never its text)."""
    from control.cli.admin.views import replay_lines, request_story

    if replay_settings:
        settings = run(lambda: client().requests.replay_settings(request_id))
        emit(settings, output, lambda: typer.echo(replay_lines(settings)))
        return
    record = run(lambda: client().requests.get(request_id))
    emit(record, output, lambda: typer.echo(request_story(record)))


@request_app.command("list")
def request_list(
    tenant: str | None = typer.Option(None, help="Tenant name."),
    segment: int | None = typer.Option(None, help="Segment id."),
    adapter: str | None = typer.Option(None, help="LoRA adapter."),
    arm: str | None = typer.Option(None, help="spec or baseline."),
    outcome: str | None = typer.Option(
        None, help="ok, error (an arm error), client_error (a 4xx) or cancelled."
    ),
    since: str | None = typer.Option(None, help="Received at or after (ISO 8601, UTC)."),
    until: str | None = typer.Option(None, help="Received before (ISO 8601, UTC)."),
    limit: int = LimitOption,
    output: Output = OutputOption,
) -> None:
    """Latest request records, newest first, filtered."""
    filters = {
        "tenant": tenant,
        "segment_id": segment,
        "adapter": adapter,
        "arm": arm,
        "outcome": outcome,
        "since": since,
        "until": until,
    }
    columns: list[tuple[str, Any]] = [
        ("request", "request_id"),
        ("received", lambda r: r["received_at"][:19]),
        ("tenant", "tenant"),
        ("segment", "segment"),
        ("arm", "arm"),
        ("reason", "reason"),
        ("status", "http_status"),
        ("e2e ms", lambda r: None if r["e2e_ms"] is None else round(r["e2e_ms"], 1)),
    ]
    emit_rows(run(lambda: _latest("requests", limit, **filters)), columns, output)


@evaluation_app.command("list")
def evaluation_list(
    pair_version: int | None = typer.Option(None, help="Pair version id."),
    output: Output = OutputOption,
) -> None:
    """Offline evaluations, newest first, with the stale cases each ran."""
    rows = run(lambda: list(client().evaluations.list(pair_version_id=pair_version)))

    def speedups(e: dict[str, Any]) -> str:
        return ", ".join(f"{k}:{v:.2f}" for k, v in sorted(e["expected_speedup"].items()))

    columns: list[tuple[str, Any]] = [
        ("id", "id"),
        ("pair v", "pair_version_id"),
        ("eval set", "eval_set_id"),
        ("cases", "cases"),
        ("mean acc len", lambda e: f"{e['mean_acceptance_length']:.3f}"),
        ("acceptance from", "acceptance_source"),
        ("speedup by k", speedups),
        (
            "ppl",
            lambda e: None if e["draft_perplexity"] is None else f"{e['draft_perplexity']:.2f}",
        ),
        ("stale", lambda e: len(e["stale_case_keys"])),
    ]
    emit_rows(rows, columns, output)


add_show(evaluation_app, "evaluations", "evaluation")


@evaluation_app.command("create")
def evaluation_create(
    results: str = typer.Option(
        ...,
        "--results",
        help="JSON file: the evaluation's body (case_keys, drafts, position_acceptance, "
        "mean_acceptance_length, cost_ratio, expected_speedup, ...; see POST /evaluations).",
    ),
    pair_version: int | None = typer.Option(
        None, "--pair-version", min=1, help="Pair version id (else the file's pair_version_id)."
    ),
    eval_set: str | None = typer.Option(
        None, "--eval-set", help="Eval set id, or a name (latest); else the file's eval_set_id."
    ),
    output: Output = OutputOption,
) -> None:
    """Post an offline evaluation measured elsewhere (`engine evaluate` posts its own)."""

    def go() -> dict[str, Any]:
        body = read_json_file("--results", results)
        if not isinstance(body, dict):
            raise CliInputError(f"--results: {results} must hold a JSON object")
        if pair_version is not None:
            body["pair_version_id"] = pair_version
        if eval_set is not None:
            body["eval_set_id"] = _eval_set(eval_set)["id"]
        for key, option in (("pair_version_id", "--pair-version"), ("eval_set_id", "--eval-set")):
            if key not in body:
                raise CliInputError(f"no {key}: pass {option} or put it in {results}")
        return client().evaluations.create(body)

    created = run(go)
    emit_line(
        created,
        output,
        f"offline evaluation {created['id']} for pair version {created['pair_version_id']} "
        f"on eval set {created['eval_set_id']}: mean acceptance length "
        f"{created['mean_acceptance_length']:.3f}, {len(created['stale_case_keys'])} stale cases",
    )


@evaluation_app.command("diff")
def evaluation_diff(
    base: int = typer.Argument(..., metavar="A", help="The earlier evaluation's id."),
    evaluation: int = typer.Argument(..., metavar="B", help="The later evaluation's id."),
    limit: int = typer.Option(20, min=1, max=500, help="How many changed cases to list."),
    output: Output = OutputOption,
) -> None:
    """The cases that changed most from evaluation A to B (outcome moves first, worse
    before better, then the largest acceptance change); both need per-case results."""
    from control.cli.admin.views import evaluation_diff_lines

    doc = run(lambda: client().evaluations.diff(base, evaluation, limit=limit))

    def render() -> None:
        from control.cli.admin.output import console, table

        head, rows = evaluation_diff_lines(doc)
        typer.echo(head)
        if rows:
            out = table("case", "boundary", "outcome", "acceptance", "Δ acceptance", "tokens")
            for row in rows:
                out.add_row(*row)
            console().print(out)

    emit(doc, output, render)


evaluations_alias = typer.Typer(
    help="Offline evaluations (alone: `evaluation list`).",
    invoke_without_command=True,
    rich_markup_mode=None,
)
evaluations_alias.command("diff")(evaluation_diff)


@evaluations_alias.callback()
def _evaluations(
    ctx: typer.Context,
    pair_version: int | None = typer.Option(None, help="Pair version id."),
    output: Output = OutputOption,
) -> None:
    if ctx.invoked_subcommand is None:
        evaluation_list(pair_version, output)


@eval_set_app.command("list")
def eval_set_list(
    name: str | None = typer.Option(None, help="Only this set's versions."),
    output: Output = OutputOption,
) -> None:
    """Eval sets with their stale cases (past refresh-by), which evaluations get flagged on."""
    rows = run(lambda: list(client().eval_sets.list(name=name)))

    def stale(s: dict[str, Any]) -> str:
        keys = s["stale_case_keys"]
        return ", ".join(keys[:5]) + (" …" if len(keys) > 5 else "")

    columns: list[tuple[str, Any]] = [
        ("id", "id"),
        ("name", "name"),
        ("version", "version"),
        ("cases", "case_count"),
        ("stale", lambda s: len(s["stale_case_keys"])),
        ("stale cases", stale),
        ("prompt store", "prompt_store"),
    ]
    emit_rows(rows, columns, output)


def _eval_set(ident: str) -> dict[str, Any]:
    """An eval set by id, or a name's latest version (NotFound naming it otherwise)."""
    sets = client().eval_sets
    if ident.isdigit():
        return sets.get(int(ident))
    versions = list(sets.list(name=ident))
    if not versions:
        sets.find(ident)  # raises the typed NotFound
    return sets.get(max(versions, key=lambda s: int(s["version"]))["id"])


@eval_set_app.command("show")
def eval_set_show(
    ident: str = typer.Argument(..., metavar="NAME_OR_ID", help="Id, or a name (latest)."),
    output: Output = OutputOption,
) -> None:
    """One eval set with its cases and their lineage."""

    doc = run(lambda: _eval_set(ident))
    emit_document(doc, output, title=f"eval set {doc['name']} v{doc['version']}")


@eval_set_app.command("create")
def eval_set_create(
    name: str,
    cases: str = typer.Option(..., help="JSON file: a list of cases (see the README)."),
    prompt_store: str = typer.Option(..., help="Where the prompts live, e.g. file:///.../p.jsonl."),
    description: str = typer.Option("", help="Free text."),
    output: Output = OutputOption,
) -> None:
    """Write the next version of an eval set from a JSON file of cases."""

    def go() -> dict[str, Any]:
        rows = read_json_file("--cases", cases)
        body = {"name": name, "description": description, "prompt_store": prompt_store}
        return client().eval_sets.create(body | {"cases": rows})

    created = run(go)
    emit_line(
        created,
        output,
        f"eval set {created['name']} v{created['version']} (id {created['id']}): "
        f"{created['case_count']} cases, {len(created['stale_case_keys'])} stale",
    )


def _digest_from_store(eval_set: dict[str, Any], ref: str) -> str:
    """The sha256 of the prompt `ref` in the set's prompt store, as `engine evaluate`
    checks it (read here, on the operator's machine; control never sees it)."""
    from specwire.prompts import PromptStoreError, load_store, prompt_digest

    try:
        prompts = load_store(eval_set["prompt_store"])
    except PromptStoreError as exc:
        raise CliInputError(f"--prompt-sha256 not given and {exc}") from exc
    if ref not in prompts:
        raise CliInputError(f"--prompt-ref {ref!r} is not in {eval_set['prompt_store']}")
    return prompt_digest(prompts[ref])


@eval_set_app.command("add-case")
def eval_set_add_case(
    ident: str = typer.Argument(..., metavar="SET", help="Eval set name (latest) or id."),
    from_request: str = typer.Option(..., "--from-request", help="The request's id."),
    prompt_ref: str = typer.Option(
        ..., "--prompt-ref", help="Where you stored the request's prompt in the set's store."
    ),
    prompt_sha256: str | None = typer.Option(
        None, "--prompt-sha256", help="Its digest; default: read from the set's prompt store."
    ),
    source: str = typer.Option(
        "production_incident", "--source", help="generated, production_incident or curated."
    ),
    reviewer: str = typer.Option(..., "--reviewer", help="Who reviewed its expected behaviour."),
    refresh_by: str = typer.Option(..., "--refresh-by", help="YYYY-MM-DD: stale after it."),
    case_key: str | None = typer.Option(None, "--case-key", help="Default incident-<request>."),
    why: str | None = typer.Option(None, "--why", help="Default: the request's outcome."),
    supports: str | None = typer.Option(None, "--supports", help="Default: the request."),
    boundary: str | None = typer.Option(
        None,
        "--boundary",
        help="authorization, privacy, safety or irreversible_action: makes it blocking.",
    ),
    output: Output = OutputOption,
) -> None:
    """Write the set's next version with a case made from a request record: its labels
    from the record's settings; the prompt reference (and digest) from you."""

    def go() -> dict[str, Any]:
        admin = client()
        current = admin.eval_sets.latest(ident)
        digest = prompt_sha256 or _digest_from_store(current, prompt_ref)
        body = {
            "from_request": from_request,
            "case_key": case_key,
            "source": source,
            "prompt_ref": prompt_ref,
            "prompt_sha256": digest,
            "reviewer": reviewer,
            "why": why,
            "supports": supports,
            "refresh_by": refresh_by,
            "blocking": boundary is not None,
            "boundary": boundary,
        }
        return admin.eval_sets.add_case(current["id"], body)

    created = run(go)
    case = created["cases"][-1]
    emit_line(
        created,
        output,
        f"eval set {created['name']} v{created['version']} (id {created['id']}): case "
        f"{case['case_key']} from request {from_request} ({case['source']}"
        + (f", blocking: {case['boundary']}" if case["blocking"] else "")
        + f"), {created['case_count']} cases",
    )


def audit(
    entity_type: str | None = typer.Option(None, help="pair, rollout, segment, ..."),
    actor: str | None = typer.Option(None, help="Only this actor's."),
    limit: int = LimitOption,
    output: Output = OutputOption,
) -> None:
    """Latest audit events, newest first."""
    rows = run(lambda: _latest("audit", limit, entity_type=entity_type, actor=actor))
    columns: list[tuple[str, Any]] = [
        ("id", "id"),
        ("at", lambda e: e["created_at"][:19]),
        ("actor", "actor"),
        ("action", "action"),
        ("entity", lambda e: f"{e['entity_type']} {e['entity_id']}"),
        ("reason", lambda e: e["reason"] or ""),
    ]
    emit_rows(rows, columns, output)


eval_sets_alias = typer.Typer(
    help="Eval sets (alone: `eval-set list`).", invoke_without_command=True, rich_markup_mode=None
)
eval_sets_alias.command("add-case")(eval_set_add_case)


@eval_sets_alias.callback()
def _eval_sets(
    ctx: typer.Context,
    name: str | None = typer.Option(None, help="Only this set's versions."),
    output: Output = OutputOption,
) -> None:
    if ctx.invoked_subcommand is None:
        eval_set_list(name, output)
