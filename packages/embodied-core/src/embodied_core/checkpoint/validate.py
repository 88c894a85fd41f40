"""Checking a checkpoint before any of it is restored, and choosing the one ``--resume`` continues from.

A resume restores model, optimizer, scheduler, RNG and data position; failing halfway would leave a mix of
two states. So every check runs first: ``meta.json``, every file the restore will read (all ranks' files,
so every rank reaches the same verdict without communicating), and the stored shapes against the model.
``--resume`` walks the run's checkpoints newest first and skips the broken ones with a warning
(:class:`ResumeSelection`); ``--resume-from`` names one, so a broken one is an error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

from embodied_core.checkpoint.contract import CheckpointFormat
from embodied_core.checkpoint.layout import META_FILE, list_step_dirs, read_meta
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["Fallback", "ResumeSelection", "check_fits_model", "check_resumable", "checkpoint_format"]

logger = logging.getLogger("embodied.checkpoint")

_SHOW = 5


def checkpoint_format(path: Path, meta: dict[str, Any]) -> CheckpointFormat:
    """The format that reads the checkpoint ``path`` (by its ``meta.json`` ``format``)."""
    from embodied_core.checkpoint.dcp import DCP_FORMAT
    from embodied_core.checkpoint.file_format import FILE_FORMAT
    from embodied_core.lora.checkpoint import LORA_FORMAT

    for fmt in (FILE_FORMAT, DCP_FORMAT, LORA_FORMAT):
        if meta["format"] in fmt.names:
            return fmt
    raise CheckpointError(f"{path / META_FILE}: unknown format {meta['format']!r} (known: safetensors, pt, dcp, "
                          "lora)")


def check_resumable(path: Path, strategy: DistributedStrategy) -> dict[str, Any]:
    """Checks everything a resume reads except the model fit; returns ``meta.json``.

    Raises:
        CheckpointError: naming the first file that is missing, truncated, unreadable or inconsistent, or
            saying that the checkpoint holds weights only.
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint directory")
    meta = read_meta(path)
    if not meta.get("training_state"):
        raise CheckpointError(f"{path} holds weights only (saved with --no-save-training-state); it cannot "
                              "be resumed. Use it as --pretrained-checkpoint instead.")
    checkpoint_format(path, meta).check_files(path, meta, strategy)
    return meta


def _weights_name(path: Path, meta: dict[str, Any]) -> Path:
    from embodied_core.checkpoint.dcp import DCP_DIR
    from embodied_core.checkpoint.layout import MODEL_PT, MODEL_SAFETENSORS
    from embodied_core.lora.layout import ADAPTER_WEIGHTS

    names = {"safetensors": MODEL_SAFETENSORS, "pt": MODEL_PT, "lora": ADAPTER_WEIGHTS}
    return path / names.get(meta["format"], f"{DCP_DIR}/.metadata")


def _shown(keys: list[str]) -> str:
    return ", ".join(keys[:_SHOW]) + (f" ... and {len(keys) - _SHOW} more" if len(keys) > _SHOW else "")


def check_fits_model(path: Path, meta: dict[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer | None,
                     strategy: DistributedStrategy) -> None:
    """The stored weights have the model's keys and (global) shapes, and the optimizer's group count.

    Raises:
        CheckpointError: naming the weights file and every kind of difference.
    """
    fmt = checkpoint_format(path, meta)
    stored = fmt.model_shapes(path, meta)
    module = strategy.unwrap_model(model)
    expected = (fmt.expected_shapes(module) if fmt.expected_shapes is not None
                else {k: tuple(v.shape) for k, v in module.state_dict().items()})
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(set(stored) - set(expected))
    mismatched = sorted(f"{k}: checkpoint {stored[k]} vs model {expected[k]}" for k in set(stored) & set(expected)
                        if stored[k] != expected[k])
    problems = [f"{len(keys)} {label}: {_shown(keys)}" for label, keys in
                (("missing", missing), ("unexpected", unexpected), ("shape mismatch", mismatched)) if keys]
    if problems:
        raise CheckpointError(f"{_weights_name(path, meta)}: does not fit {type(module).__name__} ("
                              + "; ".join(problems) + ")")
    if optimizer is not None:
        _check_optimizer_groups(path, meta, optimizer, strategy)


def _check_optimizer_groups(path: Path, meta: dict[str, Any], optimizer: torch.optim.Optimizer,
                            strategy: DistributedStrategy) -> None:
    from embodied_core.checkpoint.dcp import DCP_DIR
    from embodied_core.checkpoint.dcp_reader import read_dcp_metadata
    from embodied_core.checkpoint.file_format import optimizer_file
    from embodied_core.checkpoint.layout import TRAINING_STATE_DIR
    from embodied_core.checkpoint.readers import torch_load

    if meta["format"] == "dcp":
        keys = read_dcp_metadata(path / DCP_DIR).state_dict_metadata
        saved = len({k.split(".")[2] for k in keys if k.startswith("optim.param_groups.")})
        file = path / DCP_DIR / ".metadata"
    elif strategy.optimizer_state_is_sharded:
        return  # per-rank parts keyed by parameter name; the groups are checked when they are applied
    else:
        file = optimizer_file(path / TRAINING_STATE_DIR, strategy)
        groups = torch_load(file, lazy=True).get("param_groups")
        if not isinstance(groups, list):
            raise CheckpointError(f"{file}: no 'param_groups' list")
        saved = len(groups)
    if saved != len(optimizer.param_groups):
        raise CheckpointError(f"{file}: {saved} optimizer parameter group(s), this run builds "
                              f"{len(optimizer.param_groups)} (--lr-group / --weight-decay-grouping changed?)")


@attrs.frozen
class Fallback:
    """A checkpoint ``--resume`` skipped: its step, directory and the problem (which names the file)."""

    step: int
    path: Path
    problem: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``summary.json``."""
        return {"step": self.step, "path": str(self.path), "problem": self.problem}


class ResumeSelection:
    """The checkpoints of a run, newest first; hands out the newest that passes every check.

    Args:
        root: ``<output-dir>/checkpoints``.
        strategy: ranks and optimizer layout (every rank checks every rank's files, so all agree).
    """

    def __init__(self, root: Path, strategy: DistributedStrategy) -> None:
        self.root = Path(root)
        self.strategy = strategy
        self.fallbacks: list[Fallback] = []
        self._candidates = [(step, path) for step, path in reversed(list_step_dirs(self.root))]

    @property
    def found_any(self) -> bool:
        """True when the run has at least one ``step_<N>`` directory (usable or not)."""
        return bool(self._candidates or self.fallbacks)

    def _skip(self, step: int, path: Path, error: CheckpointError) -> None:
        self.fallbacks.append(Fallback(step=step, path=path, problem=str(error)))
        if self.strategy.is_main:
            logger.warning("--resume: skipping broken checkpoint step %d (%s); trying the next newest", step, error)

    def first_complete(self) -> Path | None:
        """The newest checkpoint whose files all pass :func:`check_resumable` (None when there is none)."""
        while self._candidates:
            step, path = self._candidates[0]
            try:
                check_resumable(path, self.strategy)
            except CheckpointError as exc:
                self._candidates.pop(0)
                self._skip(step, path, exc)
                continue
            return path
        return None

    def confirm(self, path: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> Path:
        """``path`` if it also fits the model, else the next newest that passes every check.

        Raises:
            CheckpointError: no checkpoint of the run can be resumed (each one's problem listed).
        """
        current: Path | None = path
        while current is not None:
            try:
                check_fits_model(current, read_meta(current), model, optimizer, self.strategy)
                return current
            except CheckpointError as exc:
                step = next(s for s, p in self._candidates if p == current)
                self._candidates = [(s, p) for s, p in self._candidates if p != current]
                self._skip(step, current, exc)
            current = self.first_complete()
        raise self.nothing_usable()

    def nothing_usable(self) -> CheckpointError:
        """The error when every checkpoint of the run was skipped."""
        lines = "\n  ".join(f"step_{f.step}: {f.problem}" for f in self.fallbacks)
        return CheckpointError(f"--resume: no checkpoint under {self.root} can be resumed:\n  {lines}\n"
                               "Remove the broken ones, or start a new run without --resume.")
