"""The tests show where each room is: a folder under tests/<plane>/ names a
package or module of that plane, so a test is found next to what it tests."""

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
