"""The host's energy counter, where the host exposes one: RAPL powercap on CPU hosts,
NVML on NVIDIA GPUs; otherwise the reason it is absent.

RAPL: the package domains `/sys/class/powercap/intel-rapl:N/energy_uj` (their
sub-domains, `intel-rapl:N:M`, are inside the package figure and are not added).
Each counter wraps at its `max_energy_range_uj`; the meter unfolds the wraps, so
what it reports is a counter of joules since the meter started. NVML: the total
energy of each device (mJ since the driver loaded), only when `pynvml` imports.
The figure is the host's (or the devices'), not one server's share of it.
"""

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"^intel-rapl:\d+$")


@dataclass(frozen=True)
class EnergyReading:
    joules: float | None  # None: absent (see source)
    source: str  # "rapl:intel-rapl:0", "nvml:1 device(s)", or "absent: REASON"


@dataclass
class _Zone:
    path: Path
    max_uj: int | None
    last_uj: int | None = None


@dataclass
class EnergyMeter:
    """Reads the host's energy counters; `read()` returns joules since the first read."""

    powercap: Path = POWERCAP
    use_nvml: bool = True
    _zones: list[_Zone] | None = field(default=None, init=False, repr=False)
    _rapl_absent: str | None = field(default=None, init=False, repr=False)
    _rapl_joules: float = field(default=0.0, init=False, repr=False)
    _nvml: Any = field(default=None, init=False, repr=False)
    _nvml_absent: str | None = field(default=None, init=False, repr=False)
    _nvml_first_mj: list[int] | None = field(default=None, init=False, repr=False)

    def _find_zones(self) -> list[_Zone]:
        if not self.powercap.is_dir():
            self._rapl_absent = f"no powercap ({self.powercap} missing)"
            return []
        zones = []
        for d in sorted(self.powercap.iterdir()):
            if _PACKAGE.match(d.name) and (d / "energy_uj").exists():
                zones.append(_Zone(d, _read_int(d / "max_energy_range_uj")))
        if not zones:
            self._rapl_absent = f"no intel-rapl package domain under {self.powercap}"
        return zones

    def _read_rapl(self) -> float | None:
        if self._zones is None:
            self._zones = self._find_zones()
        if not self._zones:
            return None
        for zone in self._zones:
            try:
                now = int((zone.path / "energy_uj").read_text().strip())
            except PermissionError:
                self._rapl_absent = f"{zone.path.name}/energy_uj not readable (permission)"
                return None
            except (OSError, ValueError) as exc:
                self._rapl_absent = f"{zone.path.name}/energy_uj unreadable: {exc}"
                return None
            if zone.last_uj is not None:
                delta = now - zone.last_uj
                if delta < 0:  # the counter wrapped at max_energy_range_uj
                    delta += zone.max_uj or 0
                self._rapl_joules += max(delta, 0) / 1e6
            zone.last_uj = now
        self._rapl_absent = None
        return self._rapl_joules

    def _read_nvml(self) -> float | None:
        if not self.use_nvml:
            self._nvml_absent = "NVML not used"
            return None
        if self._nvml is None and self._nvml_absent is None:
            try:
                nvml = importlib.import_module("pynvml")
                nvml.nvmlInit()
                self._nvml = nvml
            except ImportError:
                self._nvml_absent = "no NVML (pynvml not importable)"
            except Exception as exc:  # pynvml raises NVMLError_* (no driver, no device)
                self._nvml_absent = f"no NVML ({type(exc).__name__})"
        if self._nvml is None:
            return None
        try:
            n = self._nvml.nvmlDeviceGetCount()
            totals = [
                int(
                    self._nvml.nvmlDeviceGetTotalEnergyConsumption(
                        self._nvml.nvmlDeviceGetHandleByIndex(i)
                    )
                )
                for i in range(n)
            ]
        except Exception as exc:  # e.g. NVMLError_NotSupported on older devices
            self._nvml_absent = f"NVML energy unsupported ({type(exc).__name__})"
            return None
        if not totals:
            self._nvml_absent = "no NVML device"
            return None
        if self._nvml_first_mj is None or len(self._nvml_first_mj) != len(totals):
            self._nvml_first_mj = totals
        self._nvml_absent = None
        return sum(t - f for t, f in zip(totals, self._nvml_first_mj, strict=True)) / 1e3

    def read(self) -> EnergyReading:
        rapl = self._read_rapl()
        nvml = self._read_nvml()
        sources = []
        if rapl is not None and self._zones:
            sources.append("rapl:" + ",".join(z.path.name for z in self._zones))
        if nvml is not None:
            sources.append(f"nvml:{len(self._nvml_first_mj or [])} device(s)")
        if not sources:
            return EnergyReading(None, f"absent: {self._rapl_absent}; {self._nvml_absent}")
        return EnergyReading((rapl or 0.0) + (nvml or 0.0), "+".join(sources))


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
