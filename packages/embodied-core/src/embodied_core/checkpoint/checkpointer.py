"""Saving and restoring the checkpoints of a run (DESIGN 7 layout), through the distributed strategy.

``--save-format`` selects the writer (:mod:`~embodied_core.checkpoint.file_format` for safetensors/pt,
:mod:`~embodied_core.checkpoint.dcp` for dcp); a checkpoint's own ``meta.json`` selects how it is read.
Loading checks the whole checkpoint first (:mod:`~embodied_core.checkpoint.validate`) and never unpickles
code. Pruning (``--save-total-limit``) removes old checkpoints atomically. A save that fails for want of space or
because the directory went read-only removes its partial ``.tmp-step_<N>`` and raises a
:class:`~embodied_core.storage.StorageError` naming the path, the bytes needed and free, and the previous checkpoint
(intact, ``latest`` still points to it); the run stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embodied_core.checkpoint.contract import CheckpointWriter, ResumeState, WriterOptions
from embodied_core.checkpoint.file_format import FILE_FORMAT, load_model_file, save_model_file
from embodied_core.checkpoint.layout import META_FILE, checkpoints_root, find_latest, list_step_dirs, step_dir
from embodied_core.checkpoint.validate import check_fits_model, check_resumable, checkpoint_format
from embodied_core.checkpoint.writer import TMP_PREFIX, discard_directory, remove_stale_temporaries
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError, UsageError
from embodied_core.storage import guard_write

__all__ = ["SAVE_FORMATS", "Checkpointer", "load_model_file", "save_model_file"]

SAVE_FORMATS = ("safetensors", "pt", "dcp")
"""Values of ``--save-format``."""


def _writer(options: WriterOptions, strategy: DistributedStrategy) -> CheckpointWriter:
    if options.save_format == "lora":  # every --use-lora run: adapters in PEFT's format (embodied_core.lora)
        from embodied_core.lora.checkpoint import LORA_FORMAT

        return LORA_FORMAT.writer(options, strategy)
    if options.save_format not in SAVE_FORMATS:
        raise UsageError(f"--save-format {options.save_format!r}: valid formats are {', '.join(SAVE_FORMATS)}")
    if options.save_format == "dcp":  # sharded: every rank writes (imports torch.distributed.checkpoint)
        from embodied_core.checkpoint.dcp import DCP_FORMAT

        return DCP_FORMAT.writer(options, strategy)
    if options.async_save:
        raise UsageError(f"--async-save needs --save-format dcp (got {options.save_format})")
    return FILE_FORMAT.writer(options, strategy)


class Checkpointer:
    """Writes ``checkpoints/step_<N>`` atomically and restores a run from one.

    Args:
        output_dir: the run's ``--output-dir``.
        strategy: provides ranks, barriers and (sharded) state dicts.
        save_format: ``--save-format`` (selects the writer), or ``"lora"`` for a ``--use-lora`` run.
        save_training_state: ``--save-training-state``.
        keep_last: keep only the newest K checkpoints (``--save-total-limit``; None keeps all).
        async_save: write DCP checkpoints in the background (``--async-save``); :meth:`wait` (or closing the
            strategy) flushes.
        write_extras: called on rank 0 with the temporary checkpoint directory after the weights are written
            and before ``meta.json`` and the rename, for every format (the policy-artifact files).
    """

    def __init__(self, output_dir: Path, strategy: DistributedStrategy, *, save_format: str,
                 save_training_state: bool, keep_last: int | None = None, async_save: bool = False,
                 write_extras: Callable[[Path], None] | None = None) -> None:
        self.root = checkpoints_root(output_dir)
        self.strategy = strategy
        self.save_format = save_format
        self.save_training_state = save_training_state
        self.keep_last = keep_last
        if strategy.is_main:
            remove_stale_temporaries(self.root)  # what a killed save or prune left behind
        self.writer = _writer(WriterOptions(root=self.root, save_format=save_format,
                                            save_training_state=save_training_state, async_save=async_save,
                                            write_extras=write_extras, on_commit=self._prune), strategy)

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Saves one checkpoint and returns its final path (collective: every rank calls it).

        Args:
            rank_state: per-rank state (RNG, dataloader position), stored under the rank's own file.
            shared_state: plain-data counters identical on every rank (stored once, by rank 0).
        """
        tmp = self.root / f"{TMP_PREFIX}{step_dir(self.root, step).name}"
        with guard_write(tmp, what=f"checkpoint step {step}", needed_bytes=lambda: self._size(model, optimizer),
                         cleanup=tmp if self.strategy.is_main else None, after=self._intact):
            return self.writer.save(step, model=model, optimizer=optimizer, scheduler=scheduler,
                                    rank_state=rank_state, shared_state=shared_state)

    def wait(self) -> None:
        """Waits for an asynchronous save in flight and commits it (a no-op otherwise)."""
        cleanup = (lambda: remove_stale_temporaries(self.root)) if self.strategy.is_main else None
        with guard_write(self.root, what="the asynchronous checkpoint", cleanup=cleanup, after=self._intact):
            self.writer.wait()

    def _size(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
        """Bytes of the weights (and optimizer state) a save writes, for the message of a failed one."""
        tensors = list(self.strategy.unwrap_model(model).state_dict().values())
        if self.save_training_state:
            tensors += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
        return sum(t.numel() * t.element_size() for t in tensors)  # numel of a DTensor is the global one

    def _intact(self) -> str:
        previous = find_latest(self.root)
        if previous is None:
            return "No earlier checkpoint exists; the run stops here"
        return f"The previous checkpoint {previous} is intact ({self.root / 'latest'} points to it); the run stops here"

    def _prune(self, step: int) -> None:
        """Keeps the newest ``keep_last`` complete checkpoints up to ``step``; removes older ones atomically.

        Checkpoints of later steps (left by a run that resumed from an earlier one) are not touched: they are
        replaced when training reaches their step.
        """
        if self.keep_last is None:
            return
        older = [path for s, path in list_step_dirs(self.root) if s <= step]
        keep = set([path for path in older if (path / META_FILE).is_file()][-self.keep_last:])
        for path in older:
            if path not in keep:
                discard_directory(path)

    def load(self, path: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer,
             scheduler: Any) -> ResumeState:
        """Checks ``path`` completely, then restores model, optimizer and scheduler from it.

        Returns ``(rank_state, shared_state)``. Raises CheckpointError naming the file at fault; nothing is
        restored unless every check passed.
        """
        path = Path(path)
        meta = check_resumable(path, self.strategy)
        check_fits_model(path, meta, model, optimizer, self.strategy)
        try:
            return checkpoint_format(path, meta).restore(path, meta, self.strategy, model=model,
                                                         optimizer=optimizer, scheduler=scheduler)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"{path}: restoring failed after every check passed ({type(exc).__name__}: "
                                  f"{exc}); the checkpoint does not match this run's model or optimizer") from exc
