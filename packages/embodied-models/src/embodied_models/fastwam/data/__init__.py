"""FastWAM's data side: the ``fastwam`` dataset strategy, its per-sample transform and collator, the UMT5 text
cache and ``embodied data precompute-text``.

- :mod:`.config`: ``FastWAMDataConfig`` (the model's ``data:`` section; no torch);
- :mod:`.strategy`: ``--dataset-strategy fastwam`` (offsets, checks, text-cache scan, LoongForge stats switch);
- :mod:`.transforms`: ``make_transforms`` -> per-sample transform + collator + action postprocessing;
- :mod:`.collator`: samples -> the FastWAM batch (field list in its docstring);
- :mod:`.prompts` / :mod:`.text_cache`: prompt template, cache file names, entries, ``INDEX.json``;
- :mod:`.precompute_text`: the cache builder.
"""
