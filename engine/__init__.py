"""specroute engine side: vLLM pools, agents, the bundled tiny pair, pair artifacts."""
