"""Shared fixtures. Each fixture module is owned by the area that needs it."""

import os

# NOTE: tests never download from a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest_plugins: list[str] = ["tests.fixtures.vllm", "tests.fixtures.db"]
