"""SmolVLA model plugin (SmolVLM2 backbone + flow-matching action expert); reached through the registry."""
