"""specroute gateway: the OpenAI-compatible data plane. No SQL, no Celery.

Request path (gateway/routes/openai.py): request id → bearer key (sha256,
constant-time) → body (400/413) → decision (gateway/decision, pure) →
quota admit → worker (gateway/routing, least outstanding behind breakers) →
engine, with fallback before the first byte (gateway/proxy/upstream.py) →
relay (gateway/proxy/relay.py) → RequestRecord to telemetry, metrics, quota.

Headers: `x-request-id` (in/out, passed to the engine), `x-specroute-decision`
(out), `x-specroute-task` (segment feature), `x-specroute-session` (cohort key
when the body has no `user`), `x-specroute-speculation: on|off` (override,
only for tenants with override_allowed; others get 403).
"""
