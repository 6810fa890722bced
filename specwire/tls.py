"""TLS for `control serve` and `gateway serve`: a certificate and its key, or neither.

Shared by both services (the gateway may import only specwire), so both
refuse the same half-configured or unreadable setup with the same one-line error.
"""

import ssl
from pathlib import Path


class TLSConfigError(ValueError):
    """The certificate/key pair cannot serve TLS (one without the other, unreadable,
    or not a matching pair)."""


def tls_options(certfile: Path | None, keyfile: Path | None) -> dict[str, str]:
    """uvicorn's `ssl_certfile`/`ssl_keyfile` for the pair, or {} for plain HTTP.

    Loaded once here, so a wrong file is refused before the server binds its port
    (uvicorn would fail later, inside its start-up, with a traceback)."""
    if certfile is None and keyfile is None:
        return {}
    if certfile is None or keyfile is None:
        given, missing = ("certificate", "key") if keyfile is None else ("key", "certificate")
        raise TLSConfigError(f"TLS needs both files: a {given} was given without its {missing}")
    for path in (certfile, keyfile):
        if not path.is_file():
            raise TLSConfigError(f"TLS file not found: {path}")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise TLSConfigError(f"cannot load the TLS certificate and key: {exc}") from None
    return {"ssl_certfile": str(certfile), "ssl_keyfile": str(keyfile)}
