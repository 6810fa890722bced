"""Decision records as files under the data dir: the control plane's own Markdown
record (one ADR format for every flip), written out verbatim."""

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from demo.monitor import DecisionEvent


async def write_records(
    records_dir: Path,
    decisions: Sequence[DecisionEvent],
    fetch: Callable[[int], Awaitable[str | None]],
) -> list[Path]:
    """One file per decision the control plane keeps a record for (every flip), in
    numeric order."""
    records_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for d in sorted(decisions, key=lambda d: d.id):
        if not d.has_record:
            continue
        text = await fetch(d.id)
        if text is None:
            continue
        # Zero-padded, so `ls` lists them in numeric order too (2 before 20).
        path = records_dir / f"decision-{d.id:04d}-{d.segment}-{d.to_state}.md"
        path.write_text(text)
        written.append(path)
    return written


def record_paths(records_dir: Path) -> list[Path]:
    """The record files in numeric order of their decision id (2, 3, 20; never 2, 20, 3)."""

    def decision_id(path: Path) -> int:
        parts = path.name.split("-")
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1

    return sorted(records_dir.glob("decision-*.md"), key=lambda p: (decision_id(p), p.name))
