"""specwire.digest: one canonical digest for every value a record identifies."""

import hashlib

import pytest

from specwire.digest import DIGEST_LENGTH, canonical_digest, canonical_json


def test_key_order_and_spacing_do_not_change_the_digest() -> None:
    a = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}
    b = {"properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "type": "object"}
    assert canonical_digest(a) == canonical_digest(b)
    assert canonical_json(a) == (
        b'{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    )


def test_it_is_sha256_of_the_canonical_json_with_a_prefix() -> None:
    digest = canonical_digest(["END", "é"])
    expected = hashlib.sha256('["END","é"]'.encode()).hexdigest()
    assert digest == f"sha256:{expected}" and len(digest) == DIGEST_LENGTH


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (["END"], ["END "]),
        (["a", "b"], ["b", "a"]),  # a list's order is part of its value
        ({"17": 2.0}, {"17": 2.5}),
        ({"17": 2.0}, {"18": 2.0}),
        ("1", 1),
    ],
)
def test_different_values_digest_differently(one: object, other: object) -> None:
    assert canonical_digest(one) != canonical_digest(other)


def test_a_value_without_canonical_json_is_refused() -> None:
    with pytest.raises(ValueError):
        canonical_digest({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical_digest({"x": object()})
