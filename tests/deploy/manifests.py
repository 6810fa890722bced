"""Rendering deploy/'s overlays with `kubectl kustomize` and reading what they hold."""

import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures.services import unavailable

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.30.0"
"""The Kubernetes release the manifests are validated against (docs/deployment.md)."""

Doc = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        unavailable(
            "kubectl is not installed (Debian's kubernetes-client; `make tools`)", what="tool"
        )
    return path


@cache
def render(overlay: str) -> tuple[Doc, ...]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def of_kind(docs: tuple[Doc, ...], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: tuple[Doc, ...], kind: str, name: str) -> Doc:
    (found,) = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    return found


def pod_templates(docs: tuple[Doc, ...]) -> Iterator[tuple[Doc, Doc]]:
    """(workload, pod template) for every Deployment and Job."""
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            yield doc, doc["spec"]["template"]


def containers(docs: tuple[Doc, ...]) -> Iterator[tuple[Doc, Doc]]:
    for workload, template in pod_templates(docs):
        for container in template["spec"]["containers"]:
            yield workload, container


def env_names(container: Doc) -> set[str]:
    return {e["name"] for e in container.get("env", [])}


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    """A label selector (matchLabels and In/NotIn/Exists expressions) against labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
    return True
