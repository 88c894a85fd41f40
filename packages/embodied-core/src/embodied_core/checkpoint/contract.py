"""The contract between the Checkpointer and the checkpoint formats (``--save-format``).

A format is a :class:`CheckpointFormat`: a writer for saving and three functions for resuming. The
Checkpointer picks the writer by ``--save-format`` and the reader by the checkpoint's ``meta.json``
``format``, so a run saved in one format resumes whatever ``--save-format`` the new run uses.

Every writer follows the same protocol (DESIGN 7): rank 0 creates ``<root>/.tmp-step_<N>``, every rank
writes its files into it, rank 0 calls ``write_extras(tmp)`` (the policy-artifact files), writes
``meta.json`` and renames the directory to ``step_<N>``, then ``on_commit(step)`` (pruning).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import attrs
import torch
from torch import nn

from embodied_core.distributed.base import DistributedStrategy

__all__ = ["CheckpointFormat", "CheckpointWriter", "ResumeState", "WriterOptions"]

ResumeState = tuple[dict[str, Any], dict[str, Any]]
"""``(rank_state, shared_state)`` returned by a restore: this rank's RNG/data state and the shared counters."""


@attrs.frozen
class WriterOptions:
    """What every writer is constructed with.

    Attributes:
        root: ``<output-dir>/checkpoints``.
        save_format: ``--save-format``.
        save_training_state: ``--save-training-state`` (optimizer, scheduler, RNG, data position).
        async_save: write in the background (``--async-save``; DCP only).
        write_extras: called on rank 0 with the temporary checkpoint directory after the weights are written
            and before ``meta.json`` and the rename (policy-artifact files).
        on_commit: called on rank 0 with the step once ``step_<N>`` is in place (pruning old checkpoints).
    """

    root: Path
    save_format: str
    save_training_state: bool
    async_save: bool = False
    write_extras: Callable[[Path], None] | None = None
    on_commit: Callable[[int], None] = lambda step: None


class CheckpointWriter(Protocol):
    """Writes ``step_<N>`` checkpoints of one format."""

    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             rank_state: dict[str, Any], shared_state: dict[str, Any]) -> Path:
        """Writes (or, asynchronously, starts writing) ``step`` and returns its final directory."""
        ...

    def wait(self) -> None:
        """Completes and commits a save still in flight (a no-op for synchronous writers)."""
        ...


@attrs.frozen
class CheckpointFormat:
    """One checkpoint format: how to write it and how to check and restore it.

    Attributes:
        names: ``meta.json`` ``format`` values (and ``--save-format`` values) this format covers.
        writer: ``(options, strategy) -> CheckpointWriter``.
        check_files: ``(path, meta, strategy)`` raises CheckpointError naming the first file that is missing,
            unreadable or inconsistent; reads no more than headers and metadata where it can.
        model_shapes: ``(path, meta) -> {key: shape}`` of the stored weights (after ``check_files``).
        restore: ``(path, meta, strategy, model, optimizer, scheduler) -> ResumeState``; called only after
            both checks passed, so a restore never starts from a checkpoint that cannot finish.
        expected_shapes: ``(module) -> {key: shape}`` the format stores for the (unwrapped) model, compared with
            ``model_shapes``; None: the whole ``state_dict()`` (formats that store part of the model, such as LoRA
            adapters, say which part).
    """

    names: tuple[str, ...]
    writer: Callable[[WriterOptions, DistributedStrategy], CheckpointWriter]
    check_files: Callable[[Path, dict[str, Any], DistributedStrategy], None]
    model_shapes: Callable[[Path, dict[str, Any]], dict[str, tuple[int, ...]]]
    restore: Callable[..., ResumeState]
    expected_shapes: Callable[[nn.Module], dict[str, tuple[int, ...]]] | None = None
