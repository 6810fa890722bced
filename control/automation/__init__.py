"""Automation: Celery jobs that read telemetry, judge rollouts with `control.stats`
and flip them through `control.rollouts.service.transition_rollout`.

Read `pipeline` first: it is the whole path, top to bottom.

- `pipeline`: window lands → which rollouts to judge → gather evidence → verdict →
  flip → record, one rollout per transaction; `Job` names what is done to a rollout.
- `tasks`: the Celery tasks, one named entry point per job onto the pipeline.
- `celery_app`, `app`: the Celery app (broker, backend, beat schedule) and its tasks.
- `beat`: `specroute beat`'s program, whose SIGTERM handler is safe during start-up.
- `dispatch`: the guard task sent when a telemetry batch brings a rollout's window.
- `health`: the spec pool's health from its workers.
- `gather`: both arms' telemetry windows turned into statistics.
- `evidence`: the stored models of those statistics (`Evidence`).
- `budget`: the false-alarm budget split over the families that can flip.
- `load_plan`: which stage's load the promotion evidence must reach.
- `verdicts`, `shadow`: pure rules from evidence and thresholds to an `Action`.
- `flips`: compare-and-set flips with decision rows, audit and lost-race records.
- `records`: the Markdown decision record (ADR) of every automated flip.
- `depth`: the speculative-length advice (stored, never flipped).
- `readout`: the same rules as a dry run, for the API.
- `repository`: the SQL the pipeline needs.
"""
