"""DreamZero's data: the ``dreamzero`` dataset strategy, its per-sample transform, collator and precomputed cache.

Modules: :mod:`.config` (``DreamZeroDataConfig``), :mod:`.embodiments` (keys, layouts, prompts), :mod:`.index`
(sample indices), :mod:`.stats`, :mod:`.video`, :mod:`.transforms`, :mod:`.collate` (-> ``DreamZeroBatch``),
:mod:`.cache` (manifest + validation), :mod:`.precompute` (``embodied data precompute-dreamzero``),
:mod:`.strategy`, :mod:`.specs` (entry points). Importing this package imports no torch.
"""
