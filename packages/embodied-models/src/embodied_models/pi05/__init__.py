"""pi0.5 model plugin (PaliGemma + flow-matching action expert); reached through the registry."""
