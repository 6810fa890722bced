# specroute — set-up and checks. `make test` and `make demo` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.specroute-installed
EXTRAS ?= cpu,dev

.PHONY: install test lint typecheck pytest services demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Re-installs only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -e '.[$(EXTRAS)]'
	@# PyPI's torchvision/torchaudio break `transformers` imports against torch 2.13.0+cpu.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

install: $(STAMP)

services:
	bash .ci/services.sh

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy gateway control engine bench

pytest: install services
	$(VENV)/bin/pytest -q -ra $(PYTEST_ARGS)

test: lint typecheck pytest

demo: install
	$(VENV)/bin/specroute demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
