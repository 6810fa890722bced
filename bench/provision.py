"""What the capacity and fleet runs register alike on a fresh control plane."""

from pathlib import Path
from typing import Any

import httpx


def post_json(admin: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST an admin document; anything but 200/201 stops the run with the answer's text."""
    response = admin.post(path, json=body)
    assert response.status_code in (200, 201), f"{path}: {response.text}"
    doc: dict[str, Any] = response.json()
    return doc


def register_tiny_pair(admin: httpx.Client, pair_dir: Path) -> dict[str, Any]:
    """The bundled tiny pair and its draft-model version; returns the version document."""
    pair = post_json(admin, "/pairs", {"name": "tiny"})
    return post_json(
        admin,
        f"/pairs/{pair['id']}/versions",
        {
            "method": "draft_model",
            "target_ref": str(pair_dir / "target"),
            "draft_ref": str(pair_dir / "draft"),
            "num_speculative_tokens": 3,
        },
    )
