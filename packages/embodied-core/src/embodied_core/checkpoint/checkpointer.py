"""Saving and restoring checkpoints of a run (DESIGN 7 layout), through the distributed strategy.

Rank 0 owns the directory: it creates the temporary directory, every rank writes its per-rank files into
it, and rank 0 renames it into place and repoints ``latest`` once all ranks are done. Loading never
unpickles code: safetensors for weights, ``torch.load(weights_only=True)`` for the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from embodied_core.checkpoint.layout import (
    META_FILE,
    MODEL_PT,
    MODEL_SAFETENSORS,
    TRAINING_STATE_DIR,
    checkpoints_root,
    list_checkpoints,
    read_meta,
    step_dir,
)
from embodied_core.checkpoint.writer import fsync_dir, point_latest_to, remove_stale_temporaries
from embodied_core.config.provenance import embodied_versions
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["Checkpointer", "load_model_file", "save_model_file"]

_TMP_PREFIX = ".tmp-"


def _dedupe_shared(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors sharing storage (tied weights); give each key its own copy."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for key, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        ident = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        out[key] = tensor.clone() if ident in seen else tensor
        seen.add(ident)
    return out


def save_model_file(state: dict[str, torch.Tensor], directory: Path, fmt: str) -> Path:
    """Writes ``model.safetensors`` or ``model.pt`` into ``directory``."""
    if fmt == "safetensors":
        path = directory / MODEL_SAFETENSORS
        save_file(_dedupe_shared(state), str(path), metadata={"format": "pt"})
    elif fmt == "pt":
        path = directory / MODEL_PT
        torch.save({k: v.detach().cpu() for k, v in state.items()}, path)
    else:
        raise CheckpointError(f"save format {fmt!r} is not written by the core checkpointer")
    return path


def load_model_file(directory: Path) -> dict[str, torch.Tensor]:
    """Reads the weights file of a checkpoint directory (safetensors, or pt with weights_only=True)."""
    if (directory / MODEL_SAFETENSORS).is_file():
        return load_file(str(directory / MODEL_SAFETENSORS))
    if (directory / MODEL_PT).is_file():
        return torch.load(directory / MODEL_PT, map_location="cpu", weights_only=True)
    raise CheckpointError(f"{directory}: no {MODEL_SAFETENSORS} or {MODEL_PT} found")


def _fsync_files(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())


class Checkpointer:
    """Writes ``checkpoints/step_<N>`` atomically and restores a run from one.

    Args:
        output_dir: the run's ``--output-dir``.
        strategy: provides ranks, barriers and (sharded) state dicts.
        save_format: ``--save-format``.
        save_training_state: ``--save-training-state``.
        keep_last: keep only the newest K checkpoints (None keeps all).
        async_save: write DCP checkpoints in the background (None: the strategy's ``--async-save``);
            :meth:`wait` (or closing the strategy) flushes.
    """

    def __init__(self, output_dir: Path, strategy: DistributedStrategy, *, save_format: str,
                 save_training_state: bool, keep_last: int | None = None,
                 async_save: bool | None = None) -> None:
        self.root = checkpoints_root(output_dir)
        self.strategy = strategy
        self.save_format = save_format
        self.save_training_state = save_training_state
        self.keep_last = keep_last
        self._dcp: Any = None
        if save_format == "dcp":  # sharded: every rank writes (embodied_core.checkpoint.dcp)
            from embodied_core.checkpoint.dcp import DcpCheckpointWriter

            async_save = strategy.args.async_save if async_save is None else async_save
            self._dcp = DcpCheckpointWriter(self.root, strategy, async_save=async_save,
                                            save_training_state=save_training_state, after_commit=self._prune)

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Saves one checkpoint and returns its final path.

        Args:
            rank_state: per-rank state (RNG, dataloader position), stored under the rank's own file.
            shared_state: plain-data counters identical on every rank (stored once, by rank 0).
        """
        if self._dcp is not None:
            return self._dcp.save(step, model=model, optimizer=optimizer, scheduler=scheduler,
                                  rank_state=rank_state, shared_state=shared_state)
        strategy = self.strategy
        final = step_dir(self.root, step)
        tmp = self.root / f"{_TMP_PREFIX}{final.name}"
        if strategy.is_main:
            remove_stale_temporaries(self.root)
            tmp.mkdir(parents=True)
        strategy.barrier()
        started = time.perf_counter()
        model_state = strategy.model_state_dict(model)
        if strategy.is_main:
            save_model_file(model_state, tmp, self.save_format)
        if self.save_training_state:
            state_dir = tmp / TRAINING_STATE_DIR
            state_dir.mkdir(exist_ok=True)
            optimizer_state = strategy.optimizer_state_dict(model, optimizer)
            if optimizer_state is not None:
                name = "optimizer.pt" if strategy.is_main else None
                if getattr(strategy, "optimizer_state_is_sharded", False):
                    name = f"optimizer_rank{strategy.rank}.pt"
                if name:
                    torch.save(optimizer_state, state_dir / name)
            torch.save(rank_state, state_dir / f"rank{strategy.rank}.pt")
            if strategy.is_main:
                torch.save(scheduler.state_dict(), state_dir / "scheduler.pt")
                (state_dir / "trainer_state.json").write_text(json.dumps(shared_state, indent=2))
        _fsync_files(tmp)
        strategy.barrier()
        if strategy.is_main:
            meta = {"step": step, "format": self.save_format, "world_size": strategy.world_size,
                    "training_state": self.save_training_state, "versions": embodied_versions(),
                    "save_seconds": round(time.perf_counter() - started, 3)}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            fsync_dir(self.root)
            point_latest_to(final)
            self._prune()
        strategy.barrier()
        return final

    def wait(self) -> None:
        """Waits for an asynchronous save in flight and commits it (a no-op otherwise)."""
        if self._dcp is not None:
            self._dcp.wait()

    def _prune(self) -> None:
        if self.keep_last is None:
            return
        for _, path in list_checkpoints(self.root)[: -self.keep_last]:
            shutil.rmtree(path, ignore_errors=True)

    def load(self, path: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer,
             scheduler: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Restores model, optimizer and scheduler from ``path``; returns ``(rank_state, shared_state)``."""
        meta = read_meta(path)
        if meta.get("format") == "dcp":
            from embodied_core.checkpoint.dcp import load_dcp_checkpoint

            return load_dcp_checkpoint(path, self.strategy, model=model, optimizer=optimizer, scheduler=scheduler,
                                       meta=meta)
        state_dir = path / TRAINING_STATE_DIR
        if not meta.get("training_state") or not state_dir.is_dir():
            raise CheckpointError(f"{path} holds weights only (saved with --no-save-training-state); it cannot "
                                  "be resumed. Use it as --pretrained-checkpoint instead.")
        if meta["world_size"] != self.strategy.world_size:
            raise CheckpointError(f"{path} was saved by {meta['world_size']} processes, this run has "
                                  f"{self.strategy.world_size}; per-rank RNG and data state need the same world "
                                  "size (save with --save-format dcp to change topology for weights/optimizer)")
        self.strategy.load_model_state_dict(model, load_model_file(path))
        optimizer_file = state_dir / (f"optimizer_rank{self.strategy.rank}.pt"
                                      if getattr(self.strategy, "optimizer_state_is_sharded", False)
                                      else "optimizer.pt")
        self.strategy.load_optimizer_state_dict(
            model, optimizer, torch.load(optimizer_file, map_location="cpu", weights_only=True))
        scheduler.load_state_dict(torch.load(state_dir / "scheduler.pt", weights_only=True))
        rank_state = torch.load(state_dir / f"rank{self.strategy.rank}.pt", weights_only=True)
        shared_state = json.loads((state_dir / "trainer_state.json").read_text())
        return rank_state, shared_state
