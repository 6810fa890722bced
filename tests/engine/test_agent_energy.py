"""The host energy counter: RAPL powercap where present (wraps unfolded, sub-domains not
double counted), else absent with the reason; NVML only where pynvml imports."""

import importlib.util
from pathlib import Path

from engine.agent.energy import POWERCAP, EnergyMeter


def _zone(root: Path, name: str, energy_uj: int, max_uj: int = 1_000_000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


def test_this_hosts_energy_is_reported_absent_with_the_reason_or_counted() -> None:
    reading = EnergyMeter().read()
    if not POWERCAP.is_dir() and importlib.util.find_spec("pynvml") is None:
        # This machine (no powercap in the container, no pynvml).
        assert reading.joules is None
        assert reading.source == (
            f"absent: no powercap ({POWERCAP} missing); no NVML (pynvml not importable)"
        )
    else:
        assert reading.joules is not None or reading.source.startswith("absent: ")


def test_rapl_packages_are_summed_with_wraps_unfolded(tmp_path: Path) -> None:
    # A powercap tree written to disk: this machine has none to read.
    p0 = _zone(tmp_path, "intel-rapl:0", 999_000)
    _zone(tmp_path, "intel-rapl:0:0", 500_000)  # a sub-domain, inside package 0's figure
    p1 = _zone(tmp_path, "intel-rapl:1", 10_000)
    meter = EnergyMeter(powercap=tmp_path, use_nvml=False)
    first = meter.read()
    assert (first.joules, first.source) == (0.0, "rapl:intel-rapl:0,intel-rapl:1")
    (p0 / "energy_uj").write_text("3000\n")  # wrapped: 1 000 uJ to the top, 3 000 after
    (p1 / "energy_uj").write_text("2010000\n")  # +2 J
    assert meter.read().joules == 0.004 + 2.0
    (p1 / "energy_uj").write_text("2510000\n")
    assert meter.read().joules == 0.004 + 2.5


def test_a_powercap_without_packages_is_absent_with_that_reason(tmp_path: Path) -> None:
    (tmp_path / "dtpm").mkdir()
    reading = EnergyMeter(powercap=tmp_path, use_nvml=False).read()
    assert reading.joules is None
    assert reading.source == f"absent: no intel-rapl package domain under {tmp_path}; NVML not used"
