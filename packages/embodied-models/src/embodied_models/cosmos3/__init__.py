"""Cosmos3 policy (NVIDIA Cosmos3 on diffusers' Cosmos3OmniTransformer) and its data (:mod:`.data`)."""
