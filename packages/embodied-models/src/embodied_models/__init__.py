"""embodied-models: model plugins (reached through the registry)."""
