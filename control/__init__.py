"""specroute control plane: SQL model, admin REST, internal API, automation."""
