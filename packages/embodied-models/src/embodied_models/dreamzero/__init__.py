"""DreamZero: a causal chunked Wan world-action model (LoongForge) and its ``dreamzero`` dataset strategy."""
