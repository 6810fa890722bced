# specroute — set-up and checks. `make test` and `make demo` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.specroute-installed
EXTRAS ?= cpu,dev

.PHONY: install test lint typecheck pytest services tools demo clean image image-engine-cpu image-engine-gpu

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Re-installs only when a file the install reads changed since the last one:
# pyproject.toml (metadata, dependencies) or setup.py (its build_py step). MANIFEST.in
# shapes the sdist only, not this editable install.
$(STAMP): pyproject.toml setup.py | $(PY)
	@# compat: the checkout's root goes on sys.path, so bench/ and demo/ (kept out of
	@# the wheel) import from a development install as they do from `make demo`.
	$(PIP) install -e '.[$(EXTRAS)]' --config-settings editable_mode=compat
	@# PyPI's torchvision/torchaudio break `transformers` imports against torch 2.13.0+cpu.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

install: $(STAMP)

services:
	bash .ci/services.sh

# promtool (Debian's prometheus package) for the alert-rule unit tests and the
# Prometheus scrape test; kubectl (Debian's kubernetes-client: `kubectl kustomize`
# renders deploy/ offline); haproxy and redis-server for the multi-host fleet test
# (tests/bench/fleet). Each installs only when missing; needs root, as CI has.
tools:
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "installing Debian's prometheus package (promtool)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends prometheus >/dev/null) \
	  || echo "could not install prometheus: promtool tests skip (and fail under CI)"; }
	@command -v kubectl >/dev/null 2>&1 || { \
	  echo "installing Debian's kubernetes-client package (kubectl)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends kubernetes-client >/dev/null) \
	  || echo "could not install kubernetes-client: manifest tests skip (and fail under CI)"; }
	@command -v haproxy >/dev/null 2>&1 || { \
	  echo "installing Debian's haproxy package (the fleet test's balancer)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends haproxy >/dev/null) \
	  || echo "could not install haproxy: the fleet test skips (and fails under CI)"; }
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing Debian's redis-server package (the fleet test's private Redis)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends redis-server >/dev/null) \
	  || echo "could not install redis-server: the fleet test skips (and fails under CI)"; }

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/hadolint deploy/images/*Containerfile

typecheck: install
	$(VENV)/bin/mypy specwire gateway control engine bench demo docs dashboards deploy migrations tests setup.py

pytest: install services tools
	$(VENV)/bin/pytest -q -ra --durations=25 $(PYTEST_ARGS)

test: lint typecheck pytest

demo: install
	PYTHONPATH=$(CURDIR) $(VENV)/bin/specroute demo $(DEMO_ARGS)

# Container images (deploy/images; docs/deployment.md). Commands, not tests: they
# pull base images from a registry. CONTAINER=docker works the same.
CONTAINER ?= podman
IMAGE_TAG ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
image:
	$(CONTAINER) build -f deploy/images/Containerfile -t specroute:$(IMAGE_TAG) .
image-engine-cpu:
	$(CONTAINER) build -f deploy/images/engine.Containerfile -t specroute-engine-cpu:$(IMAGE_TAG) .
image-engine-gpu:
	$(CONTAINER) build -f deploy/images/engine-gpu.Containerfile -t specroute-engine-gpu:$(IMAGE_TAG) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
