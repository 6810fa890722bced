"""Request bodies, the upstream call, and the stream relay."""
