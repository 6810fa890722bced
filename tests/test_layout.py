"""The tests show where each room is: a folder under tests/<plane>/ names a
package or module of that plane, so a test is found next to what it tests."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders that group tests by concern, not by module.
CONCERNS = {"tests/control/cli": "control/cli", "tests/control/db": "control/db.py"}


def _test_folders(plane: str) -> list[Path]:
    base = ROOT / "tests" / plane
    return sorted(p for p in base.iterdir() if p.is_dir() and any(p.glob("test_*.py")))


def test_every_test_folder_names_a_package_of_its_plane() -> None:
    wrong = []
    for plane in ("control", "gateway", "engine"):
        for folder in _test_folders(plane):
            target = ROOT / plane / folder.name
            if not (target.is_dir() or target.with_suffix(".py").is_file()):
                wrong.append(str(folder.relative_to(ROOT)))
    assert wrong == []
    # The walk sees the folders it judges.
    names = {f.name for f in _test_folders("control")}
    assert {"pairs", "rollouts", "evaluations", "api", "automation"} <= names
    assert {"quota", "telemetry", "routing"} <= {f.name for f in _test_folders("gateway")}


# Domains whose routes are read-only views or internal, tested where their
# readers are.
ROUTES_TESTED_ELSEWHERE = {
    "audit": "tests/control/api/test_listings.py",
    "decisions": "tests/control/api/test_listings.py",
    "telemetry": "tests/control/automation/test_recompute.py",
    "automation": "tests/control/automation/test_readout.py",
    "internal": "tests/control/internal",
}


def test_each_domain_with_routes_keeps_their_tests_in_its_folder() -> None:
    # A control domain with an endpoints module keeps its route tests in
    # tests/control/<domain>/test_endpoints.py, or says where they are.
    missing = []
    for domain in sorted((ROOT / "control").iterdir()):
        if not (domain / "endpoints.py").is_file():
            continue
        where = ROUTES_TESTED_ELSEWHERE.get(
            domain.name, f"tests/control/{domain.name}/test_endpoints.py"
        )
        if not (ROOT / where).exists():
            missing.append(where)
    assert missing == []
    assert len(list((ROOT / "control").glob("*/endpoints.py"))) >= 10


def _imported_modules(path: Path) -> set[str]:
    """Every module an import in `path` names, relative ones made absolute; for
    `from a import b` both `a` and `a.b` (b may be a module)."""
    package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _is_test_module(module: str) -> bool:
    parts = module.split(".")
    return (
        parts[0] == "tests"
        and parts[-1].startswith("test_")
        and ROOT.joinpath(*parts).with_suffix(".py").is_file()
    )


def test_no_test_imports_from_a_test_module() -> None:
    # Shared helpers live in helper modules or conftest fixtures; a test_*.py
    # module holds tests, and another test that imports it breaks when it moves.
    wrong = sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (ROOT / "tests").rglob("*.py")
        for module in _imported_modules(path)
        if _is_test_module(module)
    )
    assert wrong == []
    # The walk sees the imports it judges.
    here = _imported_modules(ROOT / "tests/control/requests/test_endpoints.py")
    assert "tests.control.requests.records.record" in here
    assert _is_test_module("tests.control.requests.test_endpoints")
