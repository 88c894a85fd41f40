"""``--save-format safetensors|pt``: the full model in one file, training state in ``training_state/``.

Rank 0 writes the weights (the strategy gathers the full state), the scheduler and the counters; every rank
writes its own RNG/data state (``rank<r>.pt``) and, with a sharded optimizer (ZeRO-1), its part of the
optimizer (``optimizer_rank<r>.pt``; else rank 0 writes ``optimizer.pt``). Reading never unpickles code:
safetensors for weights, ``torch.load(weights_only=True)`` for the rest.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from embodied_core.checkpoint.contract import CheckpointFormat, ResumeState, WriterOptions
from embodied_core.checkpoint.layout import MODEL_PT, MODEL_SAFETENSORS, TRAINING_STATE_DIR, step_dir
from embodied_core.checkpoint.readers import iter_tensors, read_json, read_tensors, safetensors_shapes, torch_load
from embodied_core.checkpoint.writer import TMP_PREFIX, commit_checkpoint, remove_stale_temporaries
from embodied_core.config.provenance import embodied_versions
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["FILE_FORMAT", "FileCheckpointWriter", "check_training_state", "load_model_file", "optimizer_file",
           "restore_training_state", "save_model_file", "stream_model_file", "training_state_files"]

SCHEDULER_FILE = "scheduler.pt"
TRAINER_STATE_FILE = "trainer_state.json"


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
        raise CheckpointError(f"save format {fmt!r} is not a single-file format (safetensors, pt)")
    return path


def _weights_file(directory: Path) -> Path:
    for name in (MODEL_SAFETENSORS, MODEL_PT):
        if (directory / name).is_file():
            return directory / name
    raise CheckpointError(f"{directory / MODEL_SAFETENSORS}: file is missing (and no {MODEL_PT} either)")


def load_model_file(directory: Path) -> dict[str, torch.Tensor]:
    """Reads the weights file of a checkpoint directory (safetensors, or pt with weights_only=True)."""
    return read_tensors(_weights_file(Path(directory)))


def stream_model_file(module: nn.Module, directory: Path) -> None:
    """Loads the weights file of a checkpoint directory into ``module`` strictly, a tensor at a time (only the
    local shard of each parameter under FSDP): no process holds the whole state dict."""
    from embodied_core.checkpoint.keymap import load_state

    file = _weights_file(Path(directory))
    load_state(module, iter_tensors(file), source=file)


def optimizer_file(state_dir: Path, strategy: DistributedStrategy, rank: int | None = None) -> Path:
    """This rank's (or ``rank``'s) optimizer file: one per rank when the optimizer is sharded (ZeRO-1)."""
    if strategy.optimizer_state_is_sharded:
        return state_dir / f"optimizer_rank{strategy.rank if rank is None else rank}.pt"
    return state_dir / "optimizer.pt"


def training_state_files(path: Path, world_size: int, strategy: DistributedStrategy) -> list[Path]:
    """Every file of ``training_state/`` a resume reads (all ranks' files, so every rank decides alike)."""
    state_dir = path / TRAINING_STATE_DIR
    ranks = range(world_size)
    files = [state_dir / SCHEDULER_FILE, *(state_dir / f"rank{r}.pt" for r in ranks)]
    if strategy.optimizer_state_is_sharded:
        files += [optimizer_file(state_dir, strategy, r) for r in ranks]
    else:
        files.append(optimizer_file(state_dir, strategy))
    return files


class FileCheckpointWriter:
    """Writes ``step_<N>`` with ``model.safetensors`` / ``model.pt`` synchronously (every rank calls save)."""

    def __init__(self, options: WriterOptions, strategy: DistributedStrategy) -> None:
        self.options = options
        self.strategy = strategy

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Writes ``step`` and returns its final directory (collective: every rank calls it)."""
        strategy, options = self.strategy, self.options
        final = step_dir(options.root, step)
        tmp = options.root / f"{TMP_PREFIX}{final.name}"
        if strategy.is_main:
            remove_stale_temporaries(options.root)
            tmp.mkdir(parents=True)
        strategy.barrier()
        started = time.perf_counter()
        self.write_weights(model, tmp)
        if options.save_training_state:
            state_dir = tmp / TRAINING_STATE_DIR
            state_dir.mkdir(exist_ok=True)
            optimizer_state = strategy.optimizer_state_dict(model, optimizer)
            if optimizer_state is not None and (strategy.is_main or strategy.optimizer_state_is_sharded):
                torch.save(optimizer_state, optimizer_file(state_dir, strategy))
            torch.save(rank_state, state_dir / f"rank{strategy.rank}.pt")
            if strategy.is_main:
                torch.save(scheduler.state_dict(), state_dir / SCHEDULER_FILE)
                (state_dir / TRAINER_STATE_FILE).write_text(json.dumps(shared_state, indent=2))
        strategy.barrier()
        if strategy.is_main:
            meta = {"step": step, "format": options.save_format, "world_size": strategy.world_size,
                    "training_state": options.save_training_state, "versions": embodied_versions(),
                    "save_seconds": round(time.perf_counter() - started, 3)}
            commit_checkpoint(tmp, final, meta, write_extras=options.write_extras)
            options.on_commit(step)
        strategy.barrier()
        return final

    def write_weights(self, model: nn.Module, directory: Path) -> None:
        """Writes the weights into the temporary ``directory`` (collective; rank 0 writes the gathered model)."""
        model_state = self.strategy.model_state_dict(model)
        if self.strategy.is_main:
            save_model_file(model_state, directory, self.options.save_format)

    def wait(self) -> None:
        """Nothing is ever in flight."""


def check_files(path: Path, meta: dict[str, Any], strategy: DistributedStrategy) -> None:
    """Weights readable; with training state: same world size, every rank's files readable, counters parseable."""
    model_shapes(path, meta)
    check_training_state(path, meta, strategy)


def check_training_state(path: Path, meta: dict[str, Any], strategy: DistributedStrategy) -> None:
    """With training state: same world size, every rank's files readable, counters parseable."""
    if not meta.get("training_state"):
        return
    if meta["world_size"] != strategy.world_size:
        raise CheckpointError(f"{path} was saved by {meta['world_size']} processes, this run has "
                              f"{strategy.world_size}; per-rank RNG and data state need the same world size "
                              "(save with --save-format dcp to change topology for weights/optimizer)")
    if not (path / TRAINING_STATE_DIR).is_dir():
        raise CheckpointError(f"{path / TRAINING_STATE_DIR}: directory is missing although meta.json says the "
                              "training state was saved")
    for file in training_state_files(path, int(meta["world_size"]), strategy):
        loaded = torch_load(file, lazy=True)
        if not isinstance(loaded, dict):
            raise CheckpointError(f"{file}: holds a {type(loaded).__name__}, expected a dict")
    shared = read_json(path / TRAINING_STATE_DIR / TRAINER_STATE_FILE)
    if not isinstance(shared, dict) or not isinstance(shared.get("train_state"), dict):
        raise CheckpointError(f"{path / TRAINING_STATE_DIR / TRAINER_STATE_FILE}: no 'train_state' object")


def model_shapes(path: Path, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Key -> shape of the stored weights (the safetensors header; a memory-mapped load for pt)."""
    if meta["format"] == "safetensors":
        return safetensors_shapes(path / MODEL_SAFETENSORS)
    file = _weights_file(path)
    state = torch_load(file, lazy=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{file}: not a dict of tensors")
    return {k: tuple(v.shape) for k, v in state.items()}


def restore(path: Path, meta: dict[str, Any], strategy: DistributedStrategy, *, model: nn.Module,
            optimizer: torch.optim.Optimizer, scheduler: Any) -> ResumeState:
    """Loads weights, optimizer and scheduler of a checked checkpoint; returns ``(rank_state, shared_state)``.

    The weights stream in a tensor at a time (each rank copies only its shards under FSDP)."""
    stream_model_file(strategy.unwrap_model(model), path)
    return restore_training_state(path, strategy, model=model, optimizer=optimizer, scheduler=scheduler)


def restore_training_state(path: Path, strategy: DistributedStrategy, *, model: nn.Module,
                           optimizer: torch.optim.Optimizer, scheduler: Any) -> ResumeState:
    """Loads optimizer, scheduler and this rank's state from ``training_state/``; ``(rank_state, shared_state)``."""
    state_dir = path / TRAINING_STATE_DIR
    # --init-on-meta: the (full) optimizer file is memory-mapped, so a rank reads the pages its shards need
    optimizer_state = torch_load(optimizer_file(state_dir, strategy), lazy=strategy.args.init_on_meta)
    strategy.load_optimizer_state_dict(model, optimizer, optimizer_state)
    scheduler.load_state_dict(torch_load(state_dir / SCHEDULER_FILE))
    rank_state = torch_load(state_dir / f"rank{strategy.rank}.pt")
    shared_state = read_json(state_dir / TRAINER_STATE_FILE)
    return rank_state, shared_state


FILE_FORMAT = CheckpointFormat(names=("safetensors", "pt"), writer=FileCheckpointWriter, check_files=check_files,
                               model_shapes=model_shapes, restore=restore)
"""The single-file formats (``--save-format safetensors`` / ``pt``)."""
