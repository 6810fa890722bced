"""The multi-host fleet run: namespace hosts, real processes, faults (`python -m bench.fleet`)."""
