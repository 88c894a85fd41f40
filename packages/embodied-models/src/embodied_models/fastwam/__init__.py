"""FastWAM: a mixture-of-transformers world-action model (Wan2.2-TI2V-5B video DiT + action DiT).

The data side (``--dataset-strategy fastwam``, the per-sample transform, the collator, the UMT5 text cache and
``embodied data precompute-text``) lives in :mod:`embodied_models.fastwam.data`.
"""
