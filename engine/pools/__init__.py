"""engine.pools: start a pool's vLLM servers from its spec and keep them running."""
