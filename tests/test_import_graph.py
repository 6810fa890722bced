"""The allowed imports of docs/architecture.md, checked on every module's
top-level imports, those under TYPE_CHECKING included (a type-level import is
still an arrow between two modules); imports inside functions are lazy by design
and count only for circles."""

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "specwire",
    "gateway",
    "control",
    "engine",
    "bench",
    "demo",
    "docs",
    "dashboards",
    "migrations",
)
DOMAINS = {
    "audit",
    "automation",
    "decisions",
    "evaluations",
    "internal",
    "pairs",
    "pools",
    "rollouts",
    "segments",
    "snapshot",
    "stats",
    "telemetry",
    "tenants",
    "thresholds",
    "workers",
    "requests",
}


# A domain's HTTP layer: its routes and, for the internal API, its auth dependencies.
HTTP_MODULES = {"endpoints", "auth"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module(path)] = path
    return found


MODULES = _modules()


def _top_level(nodes: list[ast.stmt], module: str, is_package: bool) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body, module, is_package)
            yield from _top_level(node.orelse, module, is_package)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    yield from _top_level(handler.body, module, is_package)
                yield from _top_level(node.finalbody, module, is_package)


def _everywhere(nodes: list[ast.stmt], module: str, is_package: bool) -> Iterator[str]:
    """Top-level imports and those inside functions and classes (a lazy import still
    ties two modules together)."""
    yield from _top_level(nodes, module, is_package)
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from _everywhere(child.body, module, is_package)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from _everywhere(node.body, module, is_package)


def _graph(lazy: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    walk = _everywhere if lazy else _top_level
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        names = walk(tree.body, module, path.name == "__init__.py")
        graph[module] = {n for n in names if n in MODULES and n != module}
    return graph


GRAPH = _graph(lazy=False)
# For circles lazy imports count too: a factory importing its implementations,
# which import the factory's module back, is a circle however late it closes.
GRAPH_WITH_LAZY = _graph(lazy=True)


def _arrows() -> Iterator[tuple[str, str]]:
    for module, targets in sorted(GRAPH.items()):
        for target in sorted(targets):
            yield module, target


def _type_checking_imports() -> dict[str, set[str]]:
    """The project modules each module imports only under `if TYPE_CHECKING:`."""
    found: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                names = _top_level(node.body, module, path.name == "__init__.py")
                targets = {n for n in names if n in MODULES and n != module}
                if targets:
                    found.setdefault(module, set()).update(targets)
    return found


def test_the_walker_sees_the_tree() -> None:
    assert "control.app" in GRAPH and "gateway.app" in GRAPH
    assert "specwire" in GRAPH["gateway.app"] or any(
        t.startswith("specwire") for m in GRAPH if m.startswith("gateway") for t in GRAPH[m]
    )


def test_the_walker_counts_type_checking_imports() -> None:
    # They are arrows like any other: the circle test and the layer tests see them.
    type_level = _type_checking_imports()
    assert "control.automation.celery_app" in type_level["control.automation.dispatch"]
    assert all(targets <= GRAPH[m] for m, targets in type_level.items())
    assert all(targets <= GRAPH_WITH_LAZY[m] for m, targets in type_level.items())


def test_the_shadow_takes_its_collaborators_not_the_gateway_state() -> None:
    assert "gateway.state" not in GRAPH_WITH_LAZY["gateway.proxy.shadow"]
    assert "gateway.proxy.shadow" in GRAPH["gateway.state"]


def test_gateway_and_engine_reach_each_other_and_control_only_through_the_floor() -> None:
    wrong = [
        (m, t)
        for m, t in _arrows()
        if m.split(".")[0] in ("gateway", "engine")
        and t.split(".")[0] not in (m.split(".")[0], "specwire")
    ]
    assert wrong == []


def test_the_floor_imports_nothing_else_of_the_project() -> None:
    # Lazy imports included: specwire must install and import on its own.
    wrong = [
        (m, t)
        for m, targets in sorted(GRAPH_WITH_LAZY.items())
        for t in sorted(targets)
        if m.startswith("specwire") and not t.startswith("specwire")
    ]
    assert wrong == []
    assert {"specwire.telemetry", "specwire.artifacts", "specwire.prompts"} <= MODULES.keys()


def test_control_never_imports_engine_not_even_lazily() -> None:
    # The one arrow that ran back up (settings -> engine.artifacts for a default
    # path, the CLI -> engine's prompt store) now points down at the floor.
    wrong = [
        (m, t)
        for m, targets in sorted(GRAPH_WITH_LAZY.items())
        for t in sorted(targets)
        if m.startswith("control") and t.split(".")[0] == "engine"
    ]
    assert wrong == []
    assert "specwire.artifacts" in GRAPH["control.settings"]


def test_control_never_imports_gateway_bench_or_demo() -> None:
    wrong = [
        (m, t)
        for m, t in _arrows()
        if m.startswith("control") and t.split(".")[0] in ("gateway", "bench", "demo")
    ]
    assert wrong == []


def test_api_is_plumbing_and_domains_reach_it_only_from_endpoints() -> None:
    def domain(name: str) -> str | None:
        parts = name.split(".")
        return (
            parts[1] if len(parts) > 1 and parts[0] == "control" and parts[1] in DOMAINS else None
        )

    api_to_domain = [(m, t) for m, t in _arrows() if m.startswith("control.api") and domain(t)]
    assert api_to_domain == []
    domain_to_api = [
        (m, t)
        for m, t in _arrows()
        if domain(m) and t.startswith("control.api") and m.rsplit(".", 1)[-1] not in HTTP_MODULES
    ]
    assert domain_to_api == []


def test_the_request_pipeline_sits_above_decision_and_proxy() -> None:
    # The routes reach the request path only through gateway.pipeline, and nothing
    # the pipeline builds on imports it back.
    floor = (
        "gateway.decision",
        "gateway.proxy",
        "gateway.routing",
        "gateway.quota",
        "gateway.telemetry",
        "gateway.snapshot",
    )
    steps = (
        "gateway.decision.decide",
        "gateway.quota",
        "gateway.routing",
        "gateway.telemetry",
        "gateway.proxy.upstream",
        "gateway.proxy.relay",
        "gateway.proxy.accounting",
    )
    assert [(m, t) for m, t in _arrows() if m.startswith(floor) and t == "gateway.pipeline"] == []
    assert [
        (m, t) for m, t in _arrows() if m.startswith("gateway.routes") and t.startswith(steps)
    ] == []
    assert "gateway.pipeline" in GRAPH["gateway.routes.openai"]


def test_no_import_circles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH_WITH_LAZY[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH_WITH_LAZY):
        if v not in index:
            visit(v)
    assert circles == []


def _imported_roots(folder: str) -> dict[str, set[str]]:
    """Each file under `folder` -> the top-level names it imports, lazy imports included."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        module = _module(path)
        names = _everywhere(ast.parse(path.read_text()).body, module, path.name == "__init__.py")
        found[str(path.relative_to(ROOT))] = {n.split(".")[0] for n in names if n}
    return found


def test_bench_and_tests_share_no_code_but_through_the_packages() -> None:
    # The fakes both use live in the packages (engine.fake, control.simulation); the
    # hostile suite is test code (tests/hostile). Only the benchmarks' own tests
    # (tests/bench) import bench.
    bench_to_tests = [p for p, roots in _imported_roots("bench").items() if "tests" in roots]
    tests_to_bench = [
        p
        for p, roots in _imported_roots("tests").items()
        if "bench" in roots and not p.startswith("tests/bench/")
    ]
    assert bench_to_tests == [] and tests_to_bench == []
    # The walker sees both directions (a rule it could not break would prove nothing).
    assert "bench" in _imported_roots("tests/bench")["tests/bench/test_policy.py"]
    assert "tests" in _imported_roots("tests/hostile")["tests/hostile/__main__.py"]
