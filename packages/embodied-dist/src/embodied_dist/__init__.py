"""embodied-dist: distributed strategies (reached through the registry)."""
