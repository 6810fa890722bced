"""Where an enrolled agent's workers may serve: the origins of its enrolment.

An entry is `scheme://host:port`, `scheme://host` (any port of that host), or
`scheme://ADDRESS/PREFIX` (any host in that IP network, any port): on Kubernetes
a pool's pods get addresses from the pod network when they start, so a pool is
enrolled for the pod CIDR (deploy/, docs/deployment.md), not for one address.
"""

import ipaddress
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def origin_of(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def network_of(entry: str) -> Network | None:
    """The IP network of a `scheme://ADDRESS/PREFIX` entry; None for other entries.
    Raises ValueError for a prefix on something that is not an address."""
    parts = urlsplit(entry)
    prefix = parts.path.strip("/")
    if not prefix:
        return None
    if parts.port is not None:
        raise ValueError("a network entry names no port")
    return ipaddress.ip_network(f"{parts.hostname}/{prefix}", strict=True)


def endpoint_allowed(endpoint_url: str, allowed: tuple[str, ...]) -> bool:
    """Whether `endpoint_url` lies at one of the allowed origins or networks."""
    scheme, host, port = origin_of(endpoint_url)
    for entry in allowed:
        a_scheme, a_host, a_port = origin_of(entry)
        if a_scheme != scheme:
            continue
        try:
            network = network_of(entry)
        except ValueError:
            continue
        if network is not None:
            try:
                if ipaddress.ip_address(host) in network:
                    return True
            except ValueError:
                continue
        elif a_host == host and a_port in (None, port):
            return True
    return False
