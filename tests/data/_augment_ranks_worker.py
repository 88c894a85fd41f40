"""torchrun worker of tests/data/test_augment_determinism.py: each gloo rank reads its share of one epoch through
the augmented loader; rank 0 writes ``{index: {camera: sha256 of the augmented frames}}`` of every rank to the path
given (``python -m torch.distributed.run --nproc_per_node 2 _augment_ranks_worker.py OUT``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from embodied_core.data.samplers import cyclic_sampler
from tests.data.test_augment_determinism import epoch_hashes


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = epoch_hashes(cyclic_sampler(rank, world))
    gathered: list[dict] = [{} for _ in range(world)]
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        merged = {k: v for part in gathered for k, v in part.items()}
        Path(out).write_text(json.dumps({"world_size": world, "hashes": merged}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
