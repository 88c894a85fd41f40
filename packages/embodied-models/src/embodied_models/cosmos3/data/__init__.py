"""Cosmos3 data: the ``cosmos3_droid`` dataset strategy, the per-sample transform and the batch.

- :mod:`.config`: ``Cosmos3DataConfig`` (the ``data:`` section of Cosmos3 models);
- :mod:`.strategy` / :mod:`.reader`: DROID v3.0 windows on our LeRobot reader -> raw samples;
- :mod:`.transform`: raw sample -> model sample (frame count, bucket, caption, tokens, plan, padded action);
- :mod:`.collate`: ``Cosmos3Batch`` (LoongForge's per-sample lists plus stacked tensors);
- :mod:`.specs`: the entry-point spec (no torch).

The model's ``make_transforms`` uses :func:`.transform.make_sample_transform` and :func:`.collate.collate_cosmos3`.
"""
