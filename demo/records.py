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
        path = records_dir / f"decision-{d.id}-{d.segment}-{d.to_state}.md"
        path.write_text(text)
        written.append(path)
    return written
