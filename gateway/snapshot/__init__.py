"""The policy snapshot the gateway routes on, and how it stays fresh."""
