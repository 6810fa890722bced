"""Hostile requests derived from an app's OpenAPI document, deterministically.

For every operation: path parameters replaced by hostile ids or the seeded real
ones, bodies built from the operation's schema with one field (or the whole body)
swapped for a hostile value, hostile headers and query values. Seeded, so a run
is reproducible and a regression names the same request each time.
"""

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.hostile.values import HOSTILE_HEADERS, HOSTILE_IDS, HOSTILE_QUERY, HOSTILE_VALUES


@dataclass(frozen=True)
class FuzzRequest:
    method: str
    path: str
    headers: dict[str, bytes]
    params: dict[str, str]
    content: bytes | None

    def describe(self) -> str:
        body = (self.content or b"")[:120]
        return (
            f"{self.method} {self.path} params={self.params} "
            f"headers={list(self.headers)} body={body!r}"
        )


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 20:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
        seen += 1
    return schema


def _example(schema: dict[str, Any], doc: dict[str, Any], depth: int = 0) -> Any:
    """A plausible valid value for `schema` (so hostile values land one at a time)."""
    schema = _resolve(schema, doc)
    if depth > 4:
        return None
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if _resolve(s, doc).get("type") != "null"]
            return _example(options[0] if options else schema[key][0], doc, depth + 1)
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _example(v, doc, depth + 1) for k, v in props.items()}
    if kind == "array":
        item = _example(schema.get("items", {}), doc, depth + 1)
        return [item] if item is not None else []
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 0.5) or 0.5)
    if kind == "boolean":
        return False
    if kind == "string":
        return "fuzz" + str(depth)
    return None


def _encode(value: Any) -> bytes:
    # NOTE: ensure_ascii escapes lone surrogates as \ud800, as a hostile client would.
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


def requests_from_openapi(
    doc: dict[str, Any], ids: dict[str, int], *, seed: int, per_operation: int
) -> Iterator[FuzzRequest]:
    rng = random.Random(seed)
    for path, item in sorted(doc["paths"].items()):
        for method, op in sorted(item.items()):
            if method not in ("get", "post", "patch", "put", "delete"):
                continue
            body_schema = (
                op.get("requestBody", {})
                .get("content", {})
                .get("application/json", {})
                .get("schema")
            )
            query = [p["name"] for p in op.get("parameters", []) if p.get("in") == "query"]
            for _ in range(per_operation):
                yield _one(rng, doc, path, method, body_schema, query, ids)


def _one(
    rng: random.Random,
    doc: dict[str, Any],
    path: str,
    method: str,
    body_schema: dict[str, Any] | None,
    query: list[str],
    ids: dict[str, int],
) -> FuzzRequest:
    concrete = path
    for part in path.split("/"):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            real = next((v for k, v in ids.items() if name.startswith(k)), 1)
            value = str(real) if rng.random() < 0.6 else rng.choice(HOSTILE_IDS)
            concrete = concrete.replace(part, value, 1)
    headers: dict[str, bytes] = {}
    if rng.random() < 0.3:
        headers.update(rng.choice(HOSTILE_HEADERS))
    params = {name: rng.choice(HOSTILE_QUERY) for name in query if rng.random() < 0.4}
    content = None
    if body_schema is not None:
        body = _example(body_schema, doc)
        roll = rng.random()
        if roll < 0.15:
            body = rng.choice(HOSTILE_VALUES)
        elif isinstance(body, dict) and body:
            for key in rng.sample(sorted(body), k=min(len(body), rng.randint(1, 2))):
                body[key] = rng.choice(HOSTILE_VALUES)
        content = _encode(body)
        if roll > 0.95:
            content = content[: max(1, len(content) // 2)]  # truncated JSON
    return FuzzRequest(method.upper(), concrete, headers, params, content)
