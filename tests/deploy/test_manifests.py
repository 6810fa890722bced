"""deploy/'s overlays render with `kubectl kustomize`, validate against Kubernetes
1.30's schemas (strict), and stay in step with the code: every command a container
runs parses, every SPECROUTE_* variable it sets is a setting or an option's
variable, every probe path is a route of the process it probes, every selector
selects, and the PrometheusRule holds dashboards/rules.yml. Nothing here has run
on a cluster."""

import importlib.util
import re
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from typer._click import Context
from typer.main import get_command

from control.cli import app as specroute_app
from dashboards import rules
from deploy import generate
from docs.generate import _env_rows, settings_classes
from tests.deploy.manifests import (
    KUBERNETES_VERSION,
    OVERLAYS,
    ROOT,
    Doc,
    containers,
    env_names,
    named,
    of_kind,
    pod_templates,
    render,
    selects,
)

CRDS = {"PrometheusRule", "ServiceMonitor"}
# What each image's ENTRYPOINT puts before a container's args (deploy/images).
ENTRYPOINTS = {"specroute": [], "specroute-engine": ["engine"]}
SETTING_ENVS = {env for _, cls, prefix in settings_classes() for env, *_ in _env_rows(cls, prefix)}


def test_there_are_the_two_overlays() -> None:
    assert OVERLAYS == ["cpu-single-node", "gpu-production"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly(overlay: str) -> None:
    skipped: list[str] = []
    for doc in render(overlay):
        if doc["kind"] in CRDS:
            # NOTE: kubernetes-validate bundles only Kubernetes' own schemas; the
            # Prometheus Operator's CRD schemas cannot be fetched here. Their content
            # is checked below against rules.yml and the Services instead.
            skipped.append(doc["kind"])
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert sorted(skipped) == sorted(CRDS)


def test_validation_is_strict(tmp_path: Path) -> None:
    doc = dict(named(render("cpu-single-node"), "Service", "specroute-gateway"))
    doc["spec"] = doc["spec"] | {"portz": []}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_lands_in_one_namespace(overlay: str) -> None:
    assert {d["metadata"].get("namespace") for d in render(overlay)} == {"specroute"}


def command_of(container: Doc) -> tuple[Any, list[str]]:
    """The click command a container runs and its arguments, resolved through the
    real `specroute` CLI (the lazy groups load their modules)."""
    image = container["image"].rsplit("/", 1)[-1].split(":")[0]
    base = "specroute-engine" if image.startswith("specroute-engine") else "specroute"
    args = ENTRYPOINTS[base] + list(container["args"])
    command: Any = get_command(specroute_app)
    while hasattr(command, "list_commands"):  # a group
        name, args = args[0], args[1:]
        sub = command.get_command(Context(command), name)
        assert sub is not None, f"no command {name!r}"
        command = sub
    return command, args


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_a_real_command(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for workload, container in containers(render(overlay)):
        command, args = command_of(container)
        with monkeypatch.context() as env:
            # The container's environment, secrets as placeholders: options read it.
            for entry in container.get("env", []):
                env.setenv(entry["name"], entry.get("value", "from-a-secret"))
            # Parses the options as the CLI would (unknown options, bad values raise).
            command.make_context(workload["metadata"]["name"], list(args))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_specroute_variable_is_a_setting_or_an_option(overlay: str) -> None:
    seen = set()
    for workload, container in containers(render(overlay)):
        command, _ = command_of(container)
        option_envs = {
            env
            for param in command.params
            for env in ([param.envvar] if isinstance(param.envvar, str) else param.envvar or [])
        }
        for env in env_names(container):
            if env.startswith("SPECROUTE_"):
                seen.add(env)
                assert env in SETTING_ENVS | option_envs, (workload["metadata"]["name"], env)
    assert "SPECROUTE_AGENT_TOKEN" in seen and "SPECROUTE_API_SURFACES" in seen


def settings_of(container: Doc) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def routes_of(workload: Doc, container: Doc) -> set[str]:
    """The GET paths of the app the container serves, built from its own settings."""
    command, _ = command_of(container)
    if command.name == "serve" and "gateway" in container["args"]:
        from gateway.app import create_app as gateway_app
        from gateway.settings import GatewaySettings

        app = gateway_app(GatewaySettings(dev_tokens=True))
    elif command.name == "serve":
        import json

        from control.app import create_app as control_app
        from control.settings import ControlSettings

        surfaces = json.loads(settings_of(container)["SPECROUTE_API_SURFACES"])
        settings = ControlSettings(dev_tokens=True, api_surfaces=surfaces)
        app = control_app(settings)
    else:
        return vllm_routes()
    return {getattr(r, "path", "") for r in app.routes}


@cache
def vllm_routes() -> set[str]:
    """GET routes vLLM's OpenAI server declares, read from its source (importing it
    would load torch)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip("vllm is not installed: the engine probes' paths are not checked")
    found: set[str] = set()
    for path in (Path(spec.origin).parent / "entrypoints").rglob("*.py"):
        found |= set(re.findall(r'@router\.get\(\s*"([^"]+)"', path.read_text()))
    return found


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_probe_path_is_a_route_on_a_declared_port(overlay: str) -> None:
    probed = set()
    for workload, container in containers(render(overlay)):
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        probes = [
            container[k]
            for k in ("startupProbe", "readinessProbe", "livenessProbe")
            if k in container
        ]
        if not probes:
            continue
        routes = routes_of(workload, container)
        for probe in probes:
            path, port = probe["httpGet"]["path"], probe["httpGet"]["port"]
            assert path in routes, (workload["metadata"]["name"], path)
            assert port in ports
            args = container["args"]
            flag = "--base-port" if "--base-port" in args else "--port"
            assert str(ports[port]) == args[args.index(flag) + 1]
            probed.add((workload["metadata"]["name"], path))
    assert ("specroute-control-admin", "/readyz") in probed
    assert ("specroute-gateway", "/readyz") in probed
    assert ("specroute-engine-tiny-spec", "/health") in probed


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_selector_selects_pods(overlay: str) -> None:
    docs = render(overlay)
    pods = [
        (w["metadata"]["name"], t["metadata"]["labels"], t["spec"]) for w, t in pod_templates(docs)
    ]
    for workload, template in pod_templates(docs):
        if workload["kind"] == "Deployment":
            assert selects(workload["spec"]["selector"], template["metadata"]["labels"])
    for kind in ("Service", "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"):
        for doc in of_kind(docs, kind):
            selector = doc["spec"].get("podSelector", doc["spec"].get("selector"))
            if kind == "Service":
                selector = {"matchLabels": selector}
            if kind == "ServiceMonitor":
                services = [
                    s
                    for s in of_kind(docs, "Service")
                    if selects(selector, s["metadata"]["labels"])
                ]
                assert {s["metadata"]["name"] for s in services} == {
                    "specroute-gateway",
                    "specroute-control-admin",
                }
                for service in services:
                    assert {p["name"] for p in service["spec"]["ports"]} >= {"http"}
                continue
            matched = [name for name, labels, _ in pods if selects(selector, labels)]
            assert matched, (kind, doc["metadata"]["name"])
    hpa = named(docs, "HorizontalPodAutoscaler", "specroute-gateway")["spec"]["scaleTargetRef"]
    assert named(docs, "Deployment", hpa["name"])


def ingress_sources(docs: tuple[Doc, ...], component: str) -> list[Doc]:
    labels = {"app.kubernetes.io/component": component}
    rules_for = [
        rule
        for policy in of_kind(docs, "NetworkPolicy")
        if selects(policy["spec"]["podSelector"], labels)
        for rule in policy["spec"].get("ingress", [])
    ]
    return [source for rule in rules_for for source in rule.get("from", [{"anyone": True}])]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_allow_only_the_designed_flows(overlay: str) -> None:
    docs = render(overlay)
    deny = named(docs, "NetworkPolicy", "specroute-default-deny-ingress")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}

    def components(sources: list[Doc]) -> set[str]:
        return {
            s["podSelector"]["matchLabels"].get("app.kubernetes.io/component", "")
            for s in sources
            if "podSelector" in s and "namespaceSelector" not in s
        }

    assert components(ingress_sources(docs, "engine")) == {"gateway"}
    assert len(ingress_sources(docs, "engine")) == 1
    internal = ingress_sources(docs, "control-internal")
    assert components(internal) == {"gateway", "engine"}
    assert all("namespaceSelector" not in s or "podSelector" not in s for s in internal)
    admin = ingress_sources(docs, "control-admin")
    assert {"gateway", "engine"}.isdisjoint(components(admin))
    assert any(
        s.get("podSelector", {}).get("matchLabels") == {"specroute.io/admin-client": "true"}
        for s in admin
    )
    for worker in ("worker", "beat", "migrate"):
        assert ingress_sources(docs, worker) == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_prometheus_rule_holds_rules_yml(overlay: str) -> None:
    spec = named(render(overlay), "PrometheusRule", "specroute")["spec"]
    assert spec == rules.absolute_runbooks(rules.load(), rules.RulesSettings().runbook_base_url)
    assert spec == rules.load()  # committed without a base URL


def test_generated_manifests_are_current() -> None:
    for path, text in generate.render(None).items():
        assert path.read_text() == text, "run `python -m deploy.generate`"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_external_services_come_from_secrets_the_docs_name(overlay: str) -> None:
    doc = (ROOT / "docs/deployment.md").read_text()
    refs = set()
    for _, container in containers(render(overlay)):
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                refs.add((ref["name"], ref["key"]))
            elif env["name"].endswith(("_URL", "_TOKEN", "_BACKEND")) and "value" in env:
                assert env["name"] in ("SPECROUTE_GATEWAY_CONTROL_URL", "SPECROUTE_CONTROL_URL")
    for name, key in refs:
        assert f"`{name}`" in doc and f"`{key}`" in doc, (name, key)
    assert ("specroute-config", "database-url") in refs


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_capacity_controller_holds_an_api_token_and_only_for_scaling(
    overlay: str,
) -> None:
    docs = render(overlay)
    with_token = [
        w["metadata"]["name"]
        for w, t in pod_templates(docs)
        if t["spec"].get("automountServiceAccountToken", True)
    ]
    assert with_token == ["specroute-capacity"]
    (role,) = of_kind(docs, "Role")
    engines = sorted(
        w["metadata"]["name"]
        for w, t in pod_templates(docs)
        if t["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"
    )
    (rule,) = role["rules"]
    assert (rule["apiGroups"], rule["resources"], rule["verbs"]) == (
        ["apps"],
        ["deployments/scale"],
        ["get", "patch"],
    )
    assert sorted(rule["resourceNames"]) == engines
    binding = named(docs, "RoleBinding", "specroute-capacity")
    assert binding["subjects"][0]["name"] == "specroute-capacity"
    assert of_kind(docs, "ClusterRole") == [] and of_kind(docs, "ClusterRoleBinding") == []
    # The capacity controller's Deployment template names follow its setting.
    from control.capacity.kubernetes import deployment_name
    from control.settings import ControlSettings

    template = ControlSettings().capacity.deployment_template
    assert sorted(deployment_name(n, template) for n in ("tiny-spec", "tiny-base")) == engines
