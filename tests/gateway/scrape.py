"""Reading a running gateway's /metrics in the tests."""

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.server import GatewayServer


def scrape(gw: GatewayServer, family: str, *labels: str) -> dict[tuple[str, ...], float]:
    """The family's `_total` samples, keyed by the values of `labels`."""
    text = httpx.get(gw.base_url + "/metrics").text
    return {
        tuple(s.labels[name] for name in labels): s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == family
        for s in fam.samples
        if s.name == family + "_total"
    }


def refusals(gw: GatewayServer) -> dict[tuple[str, ...], float]:
    return scrape(gw, "specroute_gateway_refusals", "status", "code")
