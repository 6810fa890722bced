"""specroute gateway: the OpenAI-compatible data plane. No SQL, no Celery."""
