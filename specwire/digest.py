"""One digest for every value a record identifies without keeping it.

`canonical_digest` hashes a JSON value's canonical form (sorted keys, no
whitespace, UTF-8, no NaN), so two spellings of the same settings (keys in
another order, other spacing) digest alike and any change of a value does not.
It identifies settings; it does not hide them: a low-entropy value (a short stop
string, a one-token bias) can be recovered by hashing guesses (docs/security.md).
"""

import hashlib
import json
from typing import Any

DIGEST_PREFIX = "sha256:"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
DIGEST_LENGTH = len(DIGEST_PREFIX) + 64


def canonical_json(value: Any) -> bytes:
    """`value` as canonical JSON bytes (TypeError / ValueError if it is not JSON)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def canonical_digest(value: Any) -> str:
    """ "sha256:" + the hex sha256 of `value`'s canonical JSON."""
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()
