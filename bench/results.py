"""bench/RESULTS.md: each benchmark command replaces its own section, nothing else."""

from pathlib import Path


def write_section(path: Path, section: str) -> None:
    """Replace the `## ...` section that `section` starts with, or append it."""
    heading = section.splitlines()[0]
    assert heading.startswith("## "), "a section starts with its '## ' heading"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = text.find("\n## ", start + len(heading))
        rest = text[end + 1 :] if end >= 0 else ""
        text = text[:start] + section.rstrip("\n") + "\n" + ("\n" + rest if rest else "")
    path.write_text(text)


def load_note(start: tuple[float, float, float], end: tuple[float, float, float]) -> str:
    """'load average 0.4 at start, 2.1 at end (2 CPUs)': what else was running."""
    import os

    return (
        f"load average {start[0]:.1f} at start, {end[0]:.1f} at end ({os.cpu_count()} CPUs shared)"
    )
