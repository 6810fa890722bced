"""Scales each pool's Deployment to its desired workers through the Kubernetes API.

Runs as `specroute control capacity --kubernetes` with a ServiceAccount whose Role
allows only `get`/`patch` on `deployments/scale` of the pool Deployments
(deploy/base/capacity.yaml). Each pass reads every pool, computes its desired
count (`control.capacity.policy`) and patches the Deployment's scale
subresource where it differs. A pool without a Deployment, or one the Role does
not cover, is reported and skipped; the next pass tries again.

NOTE: tested against the real `kubernetes` client with the API server faked at
the HTTP level (tests/control/capacity/test_kubernetes.py); it has never run on
a cluster.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select

from control.capacity.policy import desired_workers
from control.db import Database
from control.models import Pool

log = logging.getLogger("specroute.capacity")

Outcome = Literal["scaled", "unchanged", "no_deployment", "forbidden", "error"]


@dataclass(frozen=True)
class ScaleResult:
    pool: str
    deployment: str
    desired: int
    current: int | None
    outcome: Outcome
    detail: str = ""


def deployment_name(pool_name: str, template: str) -> str:
    """The Deployment of a pool: `template` with `{pool}` replaced (RFC 1123: pool
    names are lower-cased and `_` becomes `-`)."""
    return template.format(pool=pool_name.lower().replace("_", "-"))


class KubernetesScaler:
    def __init__(self, apps_api: Any, namespace: str, name_template: str) -> None:
        # NOTE: `apps_api` is a kubernetes.client.AppsV1Api; typed Any because the
        # kubernetes package ships no type hints.
        self.apps = apps_api
        self.namespace = namespace
        self.name_template = name_template

    def scale(self, pool: str, desired: int) -> ScaleResult:
        from kubernetes.client.exceptions import ApiException

        name = deployment_name(pool, self.name_template)
        try:
            current = self.apps.read_namespaced_deployment_scale(name, self.namespace)
            replicas = int(current.spec.replicas or 0)
            if replicas == desired:
                return ScaleResult(pool, name, desired, replicas, "unchanged")
            self.apps.patch_namespaced_deployment_scale(
                name, self.namespace, {"spec": {"replicas": desired}}
            )
        except ApiException as exc:
            outcome: Outcome = {404: "no_deployment", 403: "forbidden"}.get(exc.status, "error")  # type: ignore[assignment]
            log.warning(
                "pool %s: cannot scale deployment %s: %s %s", pool, name, exc.status, exc.reason
            )
            return ScaleResult(pool, name, desired, None, outcome, f"{exc.status} {exc.reason}")
        log.info("pool %s: deployment %s scaled %d -> %d", pool, name, replicas, desired)
        return ScaleResult(pool, name, desired, replicas, "scaled")


def reconcile(
    database: Database,
    scale: Callable[[str, int], ScaleResult],
) -> list[ScaleResult]:
    """One pass: every pool's desired count to `scale`, in pool id order."""
    with database.session() as session:
        pools = session.scalars(select(Pool).order_by(Pool.id)).all()
        wanted = [(pool.name, desired_workers(session, pool)) for pool in pools]
    return [scale(name, count) for name, count in wanted]


def apps_api(host: str | None = None, token: str | None = None) -> Any:
    """An AppsV1Api: in-cluster config (the pod's ServiceAccount) unless `host` is
    given (tests, or a kubeconfig-less operator outside the cluster)."""
    from kubernetes import client, config

    if host is None:
        config.load_incluster_config()
        return client.AppsV1Api()
    configuration = client.Configuration()
    configuration.host = host
    if token:
        configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.AppsV1Api(client.ApiClient(configuration))
