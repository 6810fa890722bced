"""Worker choice within a pool: least outstanding requests behind circuit breakers."""
