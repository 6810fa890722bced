"""The prompt store an eval set references: JSON lines, one prompt per line.

Each line is {"ref": KEY, "messages": [...]} (chat) or {"ref": KEY, "prompt": "..."}
(completion). Control keeps only KEY and the sha256 of the prompt, so a case
cannot silently point at a changed prompt: the digest is checked on load.

The store is a local file (`file:///path`, or a bare path) or an HTTP(S) URL
that serves the same JSON lines (an internal object store or file server); an
`Authorization` header for it comes from `SPECROUTE_PROMPT_STORE_TOKEN`.
"""

import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse


class PromptStoreError(ValueError):
    pass


def prompt_of(entry: dict[str, Any]) -> Any:
    if "messages" in entry:
        return entry["messages"]
    if "prompt" in entry:
        return entry["prompt"]
    raise PromptStoreError(f"prompt store entry {entry.get('ref')!r} has no messages or prompt")


def prompt_digest(prompt: Any) -> str:
    """sha256 of the prompt as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(prompt, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


TOKEN_ENV = "SPECROUTE_PROMPT_STORE_TOKEN"
HTTP_TIMEOUT_S = 60.0


def store_path(store: str) -> Path:
    parsed = urlparse(store)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else store)
    raise PromptStoreError(
        f"prompt store {store!r}: readable stores are local files (file://) and http(s):// URLs"
    )


def _store_text(store: str) -> tuple[str, str]:
    """(where, text) of the store's JSON lines."""
    if urlparse(store).scheme in ("http", "https"):
        import httpx

        token = os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            response = httpx.get(store, headers=headers, timeout=HTTP_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise PromptStoreError(f"prompt store {store}: {exc}") from exc
        if response.is_error:
            raise PromptStoreError(f"prompt store {store}: HTTP {response.status_code}")
        return store, response.text
    path = store_path(store)
    if not path.is_file():
        raise PromptStoreError(f"prompt store {path} does not exist")
    return str(path), path.read_text(encoding="utf-8")


def load_store(store: str) -> dict[str, Any]:
    """ref -> prompt (messages list or text)."""
    where, text = _store_text(store)
    prompts: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise PromptStoreError(f"{where}:{number}: not JSON ({exc})") from exc
        if not isinstance(entry, dict) or not isinstance(entry.get("ref"), str):
            raise PromptStoreError(f"{where}:{number}: each line needs a string 'ref'")
        prompts[entry["ref"]] = prompt_of(entry)
    return prompts


def resolve_cases(
    cases: list[dict[str, Any]], prompts: dict[str, Any]
) -> list[tuple[dict[str, Any], Any]]:
    """(case, prompt) for every case; refuses a missing prompt or a digest mismatch."""
    out = []
    for case in cases:
        ref = case["prompt_ref"]
        if ref not in prompts:
            raise PromptStoreError(f"case {case['case_key']}: prompt {ref!r} not in the store")
        prompt = prompts[ref]
        if prompt_digest(prompt) != case["prompt_sha256"]:
            raise PromptStoreError(
                f"case {case['case_key']}: prompt {ref!r} changed since the case was reviewed "
                "(sha256 mismatch); write a new eval set version"
            )
        out.append((case, prompt))
    return out
