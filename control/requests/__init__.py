"""Per-request records: storing what gateways ship, reading one request's story, retention."""
