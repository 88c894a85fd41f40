"""``--save-format dcp``: sharded checkpoints with torch.distributed.checkpoint (DCP).

Every rank writes its own shards into ``step_<N>/dcp/``; DCP records global tensor shapes, so a checkpoint
loads into another strategy or world size (DDP <-> FSDP, 2 -> 1 processes). The state dict is::

    model.<fqn>                  weights (DTensor shards under FSDP, whole tensors otherwise)
    optim.state.<fqn>.<name>     optimizer state keyed by parameter name; optim.param_groups
    rank_state.rank<r>.<...>     RNG and dataloader position of rank r (written by rank r only)

Scheduler and counters are small and identical on every rank: rank 0 writes them into
``training_state/`` like the other formats. With ``--async-save`` the write runs in a background thread
on a dedicated gloo process group; the checkpoint is committed (``meta.json``, rename, ``latest``) when
it completes, and the next save (or the end of training) waits for it first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed.checkpoint as dcp
from torch import nn

from embodied_core.checkpoint.layout import META_FILE, TRAINING_STATE_DIR, step_dir
from embodied_core.checkpoint.writer import fsync_dir, point_latest_to, remove_stale_temporaries
from embodied_core.config.provenance import embodied_versions
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["DCP_DIR", "DcpCheckpointWriter", "dcp_keys", "load_dcp_checkpoint", "load_dcp_keys"]

logger = logging.getLogger("embodied.checkpoint")

DCP_DIR = "dcp"
_TMP_PREFIX = ".tmp-"
_RANK_STATE = "rank_state"


def dcp_keys(directory: Path) -> set[str]:
    """Flattened keys stored in a DCP directory (reads only its metadata file)."""
    from torch.distributed.checkpoint import FileSystemReader

    try:
        return set(FileSystemReader(str(directory)).read_metadata().state_dict_metadata)
    except FileNotFoundError as exc:
        raise CheckpointError(f"{directory}: not a DCP checkpoint directory (no .metadata file)") from exc


def load_dcp_keys(directory: Path, keys: set[str] | None, *, process_group: Any = None) -> dict[str, Any]:
    """Reads ``keys`` (prefixes of flattened keys, e.g. ``"model"``) into a fresh nested dict of CPU tensors.

    Without an initialized process group this reads everything locally (used by ``checkpoint convert``).
    """
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

    with _single_process_is_intended():
        return _load_state_dict_from_keys(keys, checkpoint_id=str(directory), process_group=process_group)


@contextlib.contextmanager
def _single_process_is_intended() -> Iterator[None]:
    """Silences DCP's warning that it runs without a process group: one process is a supported mode."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(disabled|unavailable).*uninitialized.*")
        yield


@attrs.define
class _PendingSave:
    future: Any
    tmp: Path
    final: Path
    meta: dict[str, Any]
    started: float


class DcpCheckpointWriter:
    """Writes ``checkpoints/step_<N>`` in DCP format, synchronously or in the background.

    Args:
        root: ``<output-dir>/checkpoints``.
        strategy: provides ranks, barriers, process groups and the FQN-keyed state.
        async_save: write in a background thread (``--async-save``).
        save_training_state: also write optimizer, scheduler, RNG and data state.
        after_commit: called on rank 0 after a checkpoint is in place (pruning old ones).
    """

    def __init__(self, root: Path, strategy: DistributedStrategy, *, async_save: bool, save_training_state: bool,
                 after_commit: Callable[[], None] = lambda: None) -> None:
        self.root = root
        self.strategy = strategy
        self.async_save = async_save
        self.save_training_state = save_training_state
        self.after_commit = after_commit
        self._pending: _PendingSave | None = None
        self.last_blocking_seconds = 0.0
        strategy.on_close(self.wait)

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Starts (async) or completes (sync) the save of ``step``; returns the final directory."""
        self.wait()  # one save in flight at most: the previous must be committed before the next starts
        strategy = self.strategy
        started = time.perf_counter()
        final = step_dir(self.root, step)
        tmp = self.root / f"{_TMP_PREFIX}{final.name}"
        if strategy.is_main:
            remove_stale_temporaries(self.root)
            (tmp / TRAINING_STATE_DIR).mkdir(parents=True)
        strategy.barrier()
        state = strategy.sharded_state_dict(model, optimizer if self.save_training_state else None)
        if self.save_training_state:
            state[_RANK_STATE] = {f"rank{strategy.rank}": rank_state}
            if strategy.is_main:
                torch.save(scheduler.state_dict(), tmp / TRAINING_STATE_DIR / "scheduler.pt")
                (tmp / TRAINING_STATE_DIR / "trainer_state.json").write_text(json.dumps(shared_state, indent=2))
        meta = {"step": step, "format": "dcp", "world_size": strategy.world_size,
                "strategy": type(strategy).__name__, "training_state": self.save_training_state,
                "async": self.async_save, "versions": embodied_versions()}
        if self.async_save:
            with _single_process_is_intended():
                future = dcp.async_save(state, checkpoint_id=str(tmp / DCP_DIR),
                                        process_group=strategy.async_checkpoint_process_group)
            self._pending = _PendingSave(future=future, tmp=tmp, final=final, meta=meta, started=started)
            self.last_blocking_seconds = time.perf_counter() - started
            return final
        with _single_process_is_intended():
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
        (pending.tmp / META_FILE).write_text(json.dumps(meta, indent=2))
        if pending.final.exists():
            shutil.rmtree(pending.final)
        pending.tmp.rename(pending.final)
        fsync_dir(self.root)
        point_latest_to(pending.final)
        self.after_commit()
        logger.info("checkpoint step %d saved to %s (%s, blocked %.3fs, total %.3fs)", meta["step"], pending.final,
                    "async dcp" if meta["async"] else "dcp", meta["blocking_seconds"], meta["save_seconds"])


def _rank_state(directory: Path, keys: set[str], strategy: DistributedStrategy, saved_world_size: int,
                path: Path) -> dict[str, Any]:
    """This rank's RNG and data state; with another world size, a documented approximation (and a warning)."""
    rank = strategy.rank
    source = rank if rank < saved_world_size else rank % saved_world_size
    if not any(k.startswith(f"{_RANK_STATE}.rank{source}.") for k in keys):
        raise CheckpointError(f"{path}: no per-rank state for rank {source} (saved by {saved_world_size} processes)")
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


def load_dcp_checkpoint(path: Path, strategy: DistributedStrategy, *, model: nn.Module,
                        optimizer: torch.optim.Optimizer, scheduler: Any,
                        meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Restores model, optimizer and scheduler from a DCP checkpoint; returns ``(rank_state, shared_state)``."""
    directory = path / DCP_DIR
    keys = dcp_keys(directory)
    state_dir = path / TRAINING_STATE_DIR
    if not meta.get("training_state") or not any(k.startswith("optim.") for k in keys):
        raise CheckpointError(f"{path} holds weights only (saved with --no-save-training-state); it cannot "
                              "be resumed. Use it as --pretrained-checkpoint instead.")
    with _single_process_is_intended():
        strategy.load_sharded_checkpoint(directory, model, optimizer)
    scheduler.load_state_dict(torch.load(state_dir / "scheduler.pt", weights_only=True))
    shared_state = json.loads((state_dir / "trainer_state.json").read_text())
    rank_state = _rank_state(directory, keys, strategy, int(meta["world_size"]), path)
    return rank_state, shared_state
