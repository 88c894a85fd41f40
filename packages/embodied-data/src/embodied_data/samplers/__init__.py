"""Index samplers of group ``embodied.samplers`` beyond core's ``cyclic`` / ``block`` (DreamZero's samplers).

Each factory takes ``(rank, world_size, *, options)`` and returns a share function mapping an epoch's global order
(what the resumable loader builds from ``(seed, epoch)``) to this rank's indices. A share is a pure function of
the order, so a resumed run rebuilds exactly the same share and continues at its saved position; every rank gets
the same number of indices. Modules: :mod:`.distributed`, :mod:`.global_batch_shard`, :mod:`.sharded`,
:mod:`.specs` (entry points and options).
"""
