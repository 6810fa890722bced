"""The compiled policy snapshot: version counter, compiler, change notifications."""
