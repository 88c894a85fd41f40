"""``--save-format dcp``: sharded checkpoints with torch.distributed.checkpoint (DCP).

Every rank writes its own shards into ``step_<N>/dcp/``; DCP records global tensor shapes, so a checkpoint
loads into another strategy or world size (DDP <-> FSDP, 2 -> 1 processes). The state dict is::

    model.<fqn>                  weights (DTensor shards under FSDP, whole tensors otherwise)
    optim.state.<fqn>.<name>     optimizer state keyed by parameter name; optim.param_groups
    rank_state.rank<r>.<...>     RNG and dataloader position of rank r (written by rank r only)

Scheduler and counters are small and identical on every rank: rank 0 writes them into
``training_state/`` like the other formats. With ``async_save`` the write runs in a background thread
on a dedicated gloo process group; the checkpoint is committed (extras, ``meta.json``, rename, ``latest``)
when it completes, and the next save (or the end of training) waits for it first.

Reading goes through :mod:`embodied_core.checkpoint.dcp_reader` only: no code from the checkpoint runs.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from embodied_core.checkpoint.contract import CheckpointFormat, ResumeState, WriterOptions
from embodied_core.checkpoint.dcp_reader import (
    check_dcp_dir,
    dcp_keys,
    load_dcp_keys,
    read_dcp_metadata,
    read_dcp_state_dict,
    single_process_is_intended,
)
from embodied_core.checkpoint.file_format import SCHEDULER_FILE, TRAINER_STATE_FILE
from embodied_core.checkpoint.layout import TRAINING_STATE_DIR, step_dir
from embodied_core.checkpoint.readers import read_json, torch_load
from embodied_core.checkpoint.writer import TMP_PREFIX, commit_checkpoint, remove_stale_temporaries
from embodied_core.config.provenance import embodied_versions
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["DCP_DIR", "DCP_FORMAT", "DcpCheckpointWriter", "dcp_keys", "load_dcp_keys",
           "read_dcp_state_dict"]

logger = logging.getLogger("embodied.checkpoint")

DCP_DIR = "dcp"
_RANK_STATE = "rank_state"
_MODEL = "model"


@attrs.define
class _PendingSave:
    future: Any
    tmp: Path
    final: Path
    meta: dict[str, Any]
    started: float


class DcpCheckpointWriter:
    """Writes ``checkpoints/step_<N>`` in DCP format, synchronously or in the background (``options.async_save``)."""

    def __init__(self, options: WriterOptions, strategy: DistributedStrategy) -> None:
        self.options = options
        self.strategy = strategy
        self._pending: _PendingSave | None = None
        self.last_blocking_seconds = 0.0
        strategy.on_close(self.wait)

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Starts (async) or completes (sync) the save of ``step``; returns the final directory."""
        self.wait()  # one save in flight at most: the previous must be committed before the next starts
        strategy, options = self.strategy, self.options
        started = time.perf_counter()
        final = step_dir(options.root, step)
        tmp = options.root / f"{TMP_PREFIX}{final.name}"
        if strategy.is_main:
            remove_stale_temporaries(options.root)
            (tmp / TRAINING_STATE_DIR).mkdir(parents=True)
        strategy.barrier()
        state = strategy.sharded_state_dict(model, optimizer if options.save_training_state else None)
        if options.save_training_state:
            state[_RANK_STATE] = {f"rank{strategy.rank}": rank_state}
            if strategy.is_main:
                torch.save(scheduler.state_dict(), tmp / TRAINING_STATE_DIR / SCHEDULER_FILE)
                (tmp / TRAINING_STATE_DIR / TRAINER_STATE_FILE).write_text(json.dumps(shared_state, indent=2))
        meta = {"step": step, "format": "dcp", "world_size": strategy.world_size,
                "strategy": type(strategy).__name__, "training_state": options.save_training_state,
                "async": options.async_save, "versions": embodied_versions()}
        if options.async_save:
            with single_process_is_intended():
                future = dcp.async_save(state, checkpoint_id=str(tmp / DCP_DIR),
                                        process_group=strategy.async_checkpoint_process_group)
            self._pending = _PendingSave(future=future, tmp=tmp, final=final, meta=meta, started=started)
            self.last_blocking_seconds = time.perf_counter() - started
            return final
        with single_process_is_intended():
            dcp.save(state, checkpoint_id=str(tmp / DCP_DIR), process_group=strategy.checkpoint_process_group)
        self.last_blocking_seconds = time.perf_counter() - started
        if strategy.is_main:
            self._commit(_PendingSave(future=None, tmp=tmp, final=final, meta=meta, started=started))
        strategy.barrier()
        return final

    def wait(self) -> None:
        """Blocks until the save in flight (if any) is written, then commits it (rank 0)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        result = pending.future.result()
        # Newer torch returns a response whose upload future completes after staging and writing.
        upload = getattr(result, "upload_completion", None)
        if upload is not None:
            upload.result()
        if self.strategy.is_main:
            # DCP's finish step (metadata on the coordinator) runs after every rank's write results are
            # gathered, so once rank 0's future is done, all shards are on disk.
            self._commit(pending)

    def _commit(self, pending: _PendingSave) -> None:
        meta = {**pending.meta, "save_seconds": round(time.perf_counter() - pending.started, 3),
                "blocking_seconds": round(self.last_blocking_seconds, 3)}
        commit_checkpoint(pending.tmp, pending.final, meta, write_extras=self.options.write_extras)
        self.options.on_commit(int(meta["step"]))
        logger.info("checkpoint step %d saved to %s (%s, blocked %.3fs, total %.3fs)", meta["step"], pending.final,
                    "async dcp" if meta["async"] else "dcp", meta["blocking_seconds"], meta["save_seconds"])


# ---------------------------------------------------------------------------------------------- reading
def _source_rank(strategy: DistributedStrategy, saved_world_size: int) -> int:
    rank = strategy.rank
    return rank if rank < saved_world_size else rank % saved_world_size


def check_files(path: Path, meta: dict[str, Any], strategy: DistributedStrategy) -> None:
    """Metadata safe and every shard present and long enough; weights, optimizer and this rank's state stored;
    scheduler and counters readable."""
    metadata = check_dcp_dir(path / DCP_DIR)
    keys = set(metadata.state_dict_metadata)
    metadata_file = path / DCP_DIR / ".metadata"
    if not any(k.startswith(f"{_MODEL}.") for k in keys):
        raise CheckpointError(f"{metadata_file}: the checkpoint holds no model weights")
    if not meta.get("training_state"):
        return
    if not any(k.startswith("optim.") for k in keys):
        raise CheckpointError(f"{metadata_file}: no optimizer state although meta.json says the training state "
                              "was saved")
    source = _source_rank(strategy, int(meta["world_size"]))
    if not any(k.startswith(f"{_RANK_STATE}.rank{source}.") for k in keys):
        raise CheckpointError(f"{metadata_file}: no per-rank state for rank {source} (saved by "
                              f"{meta['world_size']} processes)")
    # The small non-tensor entries (every rank's RNG/data state, the optimizer's groups) are read here, in this
    # process alone, so a corrupt or crafted one is found before anything is restored, identically on every rank.
    small = read_dcp_state_dict(path / DCP_DIR, {_RANK_STATE, "optim.param_groups"})
    if not all(isinstance(v, dict) for v in small.get(_RANK_STATE, {}).values()):
        raise CheckpointError(f"{path / DCP_DIR}: a per-rank state entry is not a dict")
    state_dir = path / TRAINING_STATE_DIR
    if not isinstance(torch_load(state_dir / SCHEDULER_FILE, lazy=True), dict):
        raise CheckpointError(f"{state_dir / SCHEDULER_FILE}: expected a dict")
    shared = read_json(state_dir / TRAINER_STATE_FILE)
    if not isinstance(shared, dict) or not isinstance(shared.get("train_state"), dict):
        raise CheckpointError(f"{state_dir / TRAINER_STATE_FILE}: no 'train_state' object")


def model_shapes(path: Path, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Key -> global shape of the stored weights (from the metadata)."""
    metadata = read_dcp_metadata(path / DCP_DIR)
    prefix = f"{_MODEL}."
    return {k[len(prefix):]: tuple(md.size) for k, md in metadata.state_dict_metadata.items()
            if k.startswith(prefix) and isinstance(md, TensorStorageMetadata)}


def _rank_state(directory: Path, strategy: DistributedStrategy, saved_world_size: int,
                path: Path) -> dict[str, Any]:
    """This rank's RNG and data state; with another world size, a documented approximation (and a warning)."""
    source = _source_rank(strategy, saved_world_size)
    loaded = load_dcp_keys(directory, {f"{_RANK_STATE}.rank{source}"},
                           process_group=strategy.checkpoint_process_group)
    state = loaded[_RANK_STATE][f"rank{source}"]
    if saved_world_size != strategy.world_size:
        loader = dict(state["dataloader"])
        # With the cyclic sampler, rank r's first p samples of an epoch are the epoch's first p x W samples;
        # rescaling p keeps the global position (exact for cyclic, approximate for block). The per-device
        # batch size may change with the world size (same global batch), so it is not checked here.
        loader["position"] = int(loader["position"]) * saved_world_size // strategy.world_size
        loader.pop("batch_size", None)
        state = {**state, "dataloader": loader}
        if strategy.is_main:
            logger.warning("%s was saved by %d processes and is resumed by %d: model and optimizer are resharded "
                           "exactly, but per-rank RNG and data state need the same world size, so each rank takes "
                           "rank %%W's RNG and the data position is rescaled; the run will not reproduce the "
                           "uninterrupted one bit for bit", path, saved_world_size, strategy.world_size)
    return state


def restore(path: Path, meta: dict[str, Any], strategy: DistributedStrategy, *, model: nn.Module,
            optimizer: torch.optim.Optimizer, scheduler: Any) -> ResumeState:
    """Restores model, optimizer and scheduler from a checked DCP checkpoint; returns ``(rank_state, shared_state)``."""
    directory = path / DCP_DIR
    state_dir = path / TRAINING_STATE_DIR
    strategy.load_sharded_checkpoint(directory, model, optimizer)
    scheduler.load_state_dict(torch_load(state_dir / SCHEDULER_FILE))
    shared_state = read_json(state_dir / TRAINER_STATE_FILE)
    rank_state = _rank_state(directory, strategy, int(meta["world_size"]), path)
    return rank_state, shared_state


DCP_FORMAT = CheckpointFormat(names=("dcp",), writer=DcpCheckpointWriter, check_files=check_files,
                              model_shapes=model_shapes, restore=restore)
"""The sharded format (``--save-format dcp``)."""
