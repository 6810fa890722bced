"""Automation: Celery jobs that read telemetry, judge rollouts with `control.stats`
and flip them through `control.rollouts.service.transition_rollout`.

- `celery_app`: the Celery app (broker and backend from settings) and beat schedule.
- `tasks`: the Celery tasks; each opens its own sessions and calls a job.
- `jobs`: canary evaluation, guards, probation and depth advice per rollout.
- `evidence`: telemetry windows of both arms turned into statistics.
- `verdicts`: pure rules from evidence and thresholds to an action.
- `flips`: compare-and-set flips with decision rows, audit and lost-race records.
- `records`: the Markdown decision record (ADR) of promotions to full and disables.
- `repository`: the SQL the jobs need.
"""
