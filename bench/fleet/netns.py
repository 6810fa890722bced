"""Hosts made of Linux network namespaces: one bridge, one veth pair per host.

Each host is a namespace `srf-<tag>-<name>` whose `eth0` is one end of a veth
pair; the other end sits on the bridge `srfbr-<tag>` in the root namespace,
which holds the subnet's `.1` address (the root namespace is a host too: the
harness and the relays to the machine's PostgreSQL and RabbitMQ live there).
`link_down` cuts a host off the bridge (its processes keep running, their
packets go nowhere), `link_up` restores it. Everything is removed by `close`,
and `sweep_stale` removes what a hard-killed earlier run left behind.

Needs root (CAP_NET_ADMIN) and the `ip` command; `available()` says why not.
"""

import contextlib
import ipaddress
import os
import random
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field

PREFIX = "srf-"
BRIDGE_PREFIX = "srfbr-"


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`, refused)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


def available() -> str | None:
    """None where namespaces work; else the reason they do not."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"{PREFIX}probe-{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` refused: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def sweep_stale() -> list[str]:
    """Delete every namespace and bridge of this harness (they are named `srf-*`)
    whose run is gone. A run's tag is in a file under /run/specroute-fleet while it
    lives; namespaces of tags without a live pid there are removed."""
    removed: list[str] = []
    alive_tags = _live_tags()
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(PREFIX) or name.startswith(f"{PREFIX}probe"):
            continue
        tag = name.removeprefix(PREFIX).split("-", 1)[0]
        if tag not in alive_tags:
            _kill_namespace_pids(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines():
        dev = line.split(":")[1].strip().split("@")[0]
        if dev.startswith(BRIDGE_PREFIX) and dev.removeprefix(BRIDGE_PREFIX) not in alive_tags:
            _ip("link", "del", dev, check=False)
            removed.append(dev)
    return removed


RUN_DIR = "/run/specroute-fleet"


def _live_tags() -> set[str]:
    tags: set[str] = set()
    with contextlib.suppress(OSError):
        for entry in os.listdir(RUN_DIR):
            try:
                with open(os.path.join(RUN_DIR, entry)) as f:
                    pid = int(f.read().strip())
                os.kill(pid, 0)
                tags.add(entry)
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(RUN_DIR, entry))
    return tags


def _kill_namespace_pids(name: str) -> None:
    pids = _ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)


def _free_subnet() -> ipaddress.IPv4Network:
    used = _ip("-o", "-4", "addr", "show", check=False).stdout
    candidates = list(range(16, 250))
    random.shuffle(candidates)
    for third in candidates:
        net = ipaddress.IPv4Network(f"10.231.{third}.0/24")
        if f" 10.231.{third}." not in used:
            return net
    raise NetnsUnavailable("no free 10.231.x.0/24 subnet")


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    root_veth: str

    def exec_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]


@dataclass
class Network:
    """A bridge and its hosts. Use as a context manager, or call `close()`."""

    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: ipaddress.IPv4Network = field(default_factory=_free_subnet)
    hosts: dict[str, Host] = field(default_factory=dict)
    _made_bridge: bool = False

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.tag}"

    @property
    def gateway_address(self) -> str:
        """The root namespace's address on the bridge."""
        return str(self.subnet.network_address + 1)

    def open(self) -> "Network":
        os.makedirs(RUN_DIR, exist_ok=True)
        with open(os.path.join(RUN_DIR, self.tag), "w") as f:
            f.write(str(os.getpid()))
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{self.gateway_address}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 10
        address = str(self.subnet.network_address + index)
        namespace = f"{PREFIX}{self.tag}-{name}"
        root_veth = f"vsrf{self.tag}{index}"
        peer = f"psrf{self.tag}{index}"
        _ip("netns", "add", namespace)
        host = Host(name, namespace, address, root_veth)
        self.hosts[name] = host
        _ip("link", "add", root_veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", namespace)
        _ip("link", "set", root_veth, "master", self.bridge)
        _ip("link", "set", root_veth, "up")
        ns = ["-n", namespace]
        _ip(*ns, "link", "set", peer, "name", "eth0")
        _ip(*ns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip(*ns, "link", "set", "eth0", "up")
        _ip(*ns, "link", "set", "lo", "up")
        _ip(*ns, "route", "add", "default", "via", self.gateway_address)
        return host

    def link_down(self, name: str) -> None:
        """Partition the host: its end on the bridge goes down (no packet in or out)."""
        _ip("link", "set", self.hosts[name].root_veth, "down")

    def link_up(self, name: str) -> None:
        _ip("link", "set", self.hosts[name].root_veth, "up")

    def close(self) -> None:
        for host in self.hosts.values():
            _kill_namespace_pids(host.namespace)
            _ip("netns", "del", host.namespace, check=False)
            _ip("link", "del", host.root_veth, check=False)
        self.hosts.clear()
        if self._made_bridge:
            _ip("link", "del", self.bridge, check=False)
            self._made_bridge = False
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(RUN_DIR, self.tag))

    def __enter__(self) -> "Network":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
