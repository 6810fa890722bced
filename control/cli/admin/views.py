"""The admin CLI's richer table views: a rollout with the automation's readout,
one request's story, and the settings that reproduce it."""

from typing import Any

from control.cli.admin.output import cell, table


def rollout_table(rollout: dict[str, Any]) -> Any:
    out = table("field", "value", title=f"Rollout {rollout['name']}")
    for key, value in rollout.items():
        out.add_row(key, cell(value))
    return out


def _verdict_cell(verdict: dict[str, Any] | None) -> str:
    if verdict is None:
        return "not evaluated in this state"
    code = f" ({verdict['code']})" if verdict.get("code") else ""
    return f"{verdict['action']}{code}: {verdict['reason']}"


def readout_table(readout: dict[str, Any]) -> Any:
    """The automation's view, one line each: verdicts, blocking checks, acceptance per
    draft position and by response position (buckets with draft tokens), the speedup at
    this and the next stage's load, depth advice."""
    evidence = readout["evidence"]
    out = table("what the automation sees now", "value", title="Evidence")
    out.add_row("guards", _verdict_cell(readout["guards"]))
    out.add_row("stage", _verdict_cell(readout["stage"]))
    out.add_row("blocks promotion", ", ".join(readout["blocking"]) or "nothing")
    acceptance = evidence.get("acceptance")
    if acceptance:
        rates = " / ".join(
            "-" if r is None else f"{r:.2f}" for r in acceptance["conditional_rates"]
        )
        tau = acceptance["mean_acceptance_length"]
        out.add_row("acceptance per position", f"{rates} (mean length {_num(tau)}, per draft)")
    by_position = [
        f"{p['bucket']} {_num(p['acceptance_rate'])} of {p['drafted_tokens']}"
        for p in readout.get("acceptance_by_response_position") or ()
        if p["drafted_tokens"]
    ]
    if by_position:
        out.add_row("acceptance by response position", " / ".join(by_position) + " drafted")
    monitor = evidence.get("acceptance_monitor")
    if monitor:
        out.add_row("acceptance test", str(monitor.get("decision")))
    here = (evidence.get("stage") or {}).get("e2e_per_token")
    if here:
        out.add_row(
            "speedup here",
            f"{here['speedup']:.3f} [{here['lower']:.3f}, {here['upper']:.3f}] "
            f"({here['spec_requests']} vs {here['baseline_requests']} requests)",
        )
    nxt = evidence.get("next_stage")
    if nxt:
        speed = nxt.get("speedup")
        bound = f"lower bound {speed['lower']:.3f}" if speed else "no evidence"
        out.add_row(
            f"at the {nxt.get('target', 'next stage')}",
            f"{nxt['share_next']:g} %: {nxt['spec_load_next']:.1f} requests per spec worker; "
            f"{bound}" + (f"; {nxt['advice']}" if nxt.get("advice") else ""),
        )
    for advice in readout["depth_advice"][:1]:
        out.add_row(
            "depth advice",
            f"k={advice['recommended_k']} (expected speedup "
            f"{advice['expected_speedup_recommended']:.3f} vs "
            f"{advice['expected_speedup_current']:.3f} at k={advice['current_k']}; "
            f"{advice['created_at'][:19]})",
        )
    if evidence.get("missing"):
        out.add_row("missing", "; ".join(evidence["missing"]))
    return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def request_story(r: dict[str, Any]) -> str:
    """Who, which segment and rollout, arm and why, where it ran, its sampling
    settings, tokens, acceptance, latency and outcome (never its text)."""
    pair = f"{r['pair']} (version id {r['pair_version_id']})" if r["pair"] else "-"
    rollout = f"{r['rollout_id']} (version {r['rollout_version']})" if r["rollout_id"] else "none"
    segment = f"{r['segment']} ({r['segment_id']})" if r["segment_id"] else "none"
    adapter = f", adapter {r['adapter']}" if r["adapter"] else ""
    stream = " stream" if r["stream"] else ""
    sampling = ", ".join(f"{k}={v}" for k, v in r["sampling"].items() if v not in (None, 0, False))
    accepted = (
        f"{r['accepted_tokens']}/{r['drafted_tokens']} drafted tokens in {r['drafts']} drafts, "
        f"per position {r['accepted_per_position']}"
        if r["drafts"]
        else "no speculation"
    )
    error = f" ({r['error_code']})" if r["error_code"] else ""
    if r["arm"] is None:
        # Refused before routing: who (if the key was known), when, the typed error.
        tenant = f"{r['tenant']} ({r['tenant_id']})" if r["tenant"] else "unknown (key refused)"
        return (
            f"request    {r['request_id']}  received {r['received_at']}\n"
            f"tenant     {tenant}\n"
            f"asked      {r['endpoint']}, gateway {r['gateway_id']}\n"
            f"decision   not routed: refused before routing\n"
            f"outcome    {r['outcome']} HTTP {r['http_status']}{error} "
            f"after {_ms(r['e2e_ms'])}"
        )
    lines = [
        f"request    {r['request_id']}  received {r['received_at']}",
        f"tenant     {r['tenant']} ({r['tenant_id']})",
        f"asked      {r['endpoint']}{stream}, model {r['model']}{adapter}",
        f"sampling   {sampling or 'defaults'}",
        f"segment    {segment}",
        f"rollout    {rollout}",
        f"decision   arm={r['arm']} reason={r['reason']}, pair {pair}",
        f"served by  pool {r['pool_id']}, worker {r['worker_id'] or '-'}, "
        f"engine {r['engine_version'] or '-'}, build {r.get('engine_build') or '-'}, "
        f"gateway {r['gateway_id']}",
        f"tokens     prompt {r['prompt_tokens']}, completion {r['completion_tokens']}",
        f"accepted   {accepted}",
        f"latency    TTFT {_ms(r['ttft_ms'])}, TPOT {_ms(r['tpot_ms'])}, "
        f"end-to-end {_ms(r['e2e_ms'])}",
        f"outcome    {r['outcome']} HTTP {r['http_status']}{error}",
    ]
    return "\n".join(lines)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def evaluation_diff_lines(doc: dict[str, Any]) -> tuple[str, list[tuple[str, ...]]]:
    """`evaluation diff`: a summary line, and one row per changed case."""
    head = (
        f"evaluation {doc['before_id']} → {doc['after_id']}: {doc['compared']} cases in both, "
        f"{doc['changed']} changed ({doc['worse']} worse, {doc['better']} better outcome), "
        f"showing {len(doc['cases'])}; only in {doc['before_id']}: {len(doc['only_before'])}, "
        f"only in {doc['after_id']}: {len(doc['only_after'])}"
    )
    rows: list[tuple[str, ...]] = []
    for c in doc["cases"]:
        delta = c["acceptance_delta"]
        rows.append(
            (
                str(c["case_key"]),
                str(c["boundary"] or ""),
                f"{c['outcome_before']} → {c['outcome_after']}",
                f"{_rate(c['acceptance_before'])} → {_rate(c['acceptance_after'])}",
                "-" if delta is None else f"{delta:+.3f}",
                f"{c['completion_tokens_before']} → {c['completion_tokens_after']}",
            )
        )
    return head, rows


def replay_lines(settings: dict[str, Any]) -> str:
    """One `name value` line per setting (specwire.replay), the routing first;
    `-` where the record has none (a sampling `-` is the engine's default)."""
    fields = {k: v for k, v in settings.items() if k != "sampling"} | settings["sampling"]
    width = max(len(name) for name in fields) + 2
    return "\n".join(
        f"{name:<{width}}{'-' if value is None else value}" for name, value in fields.items()
    )
