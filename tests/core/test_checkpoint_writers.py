"""The Checkpointer and its writers: ``write_extras`` for every save mode, explicit ``async_save``, pruning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embodied_core.checkpoint import META_FILE, list_step_dirs
from embodied_core.checkpoint.checkpointer import Checkpointer
from embodied_core.checkpoint.dcp import DcpCheckpointWriter
from embodied_core.checkpoint.file_format import FileCheckpointWriter
from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.base import SingleProcessStrategy
from embodied_core.errors import UsageError


def _parts() -> tuple[SingleProcessStrategy, torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    strategy = SingleProcessStrategy(TrainingArgs())
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3)).sum().backward()
    optimizer.step()
    return strategy, model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)


def _save(checkpointer: Checkpointer, step: int, parts: tuple) -> Path:
    _, model, optimizer, scheduler = parts
    path = checkpointer.save(step, model=model, optimizer=optimizer, scheduler=scheduler,
                             rank_state={"dataloader": {"position": step}},
                             shared_state={"train_state": {"step": step}})
    checkpointer.wait()
    return path


@pytest.mark.parametrize(("save_format", "async_save", "weights"), [
    ("safetensors", False, "model.safetensors"), ("pt", False, "model.pt"), ("dcp", False, "dcp/.metadata"),
    ("dcp", True, "dcp/.metadata")])
def test_write_extras_runs_on_the_temporary_directory_after_the_weights(tmp_path: Path, save_format: str,
                                                                         async_save: bool, weights: str) -> None:
    seen: list[dict] = []

    def write_extras(directory: Path) -> None:
        seen.append({"name": directory.name, "weights": (directory / weights).is_file(),
                     "meta": (directory / META_FILE).exists()})
        (directory / "policy_extra.json").write_text("{}")

    parts = _parts()
    checkpointer = Checkpointer(tmp_path, parts[0], save_format=save_format, save_training_state=True,
                                async_save=async_save, write_extras=write_extras)
    assert isinstance(checkpointer.writer, DcpCheckpointWriter if save_format == "dcp" else FileCheckpointWriter)
    final = _save(checkpointer, 3, parts)
    assert seen == [{"name": ".tmp-step_3", "weights": True, "meta": False}]
    assert (final / "policy_extra.json").is_file() and (final / META_FILE).is_file()
    assert json.loads((final / META_FILE).read_text()).get("async", False) is async_save
    parts[0].close()


def test_async_save_is_explicit_and_only_for_dcp(tmp_path: Path) -> None:
    strategy = SingleProcessStrategy(TrainingArgs(async_save=True))  # the strategy's flag is not read
    checkpointer = Checkpointer(tmp_path, strategy, save_format="dcp", save_training_state=True)
    assert checkpointer.writer.options.async_save is False
    with pytest.raises(UsageError, match="--async-save needs --save-format dcp"):
        Checkpointer(tmp_path, strategy, save_format="safetensors", save_training_state=True, async_save=True)


def test_pruning_keeps_the_newest_k_and_never_touches_later_steps(tmp_path: Path) -> None:
    parts = _parts()
    checkpointer = Checkpointer(tmp_path, parts[0], save_format="safetensors", save_training_state=False,
                                keep_last=2)
    for step in (1, 2, 9):  # step_9: left by an earlier attempt that went further before it broke
        _save(checkpointer, step, parts)
    (tmp_path / "checkpoints" / "step_9" / META_FILE).unlink()
    for step in (3, 4):
        _save(checkpointer, step, parts)
    assert [s for s, _ in list_step_dirs(tmp_path / "checkpoints")] == [3, 4, 9]
    again = _save(checkpointer, 4, parts)  # the same step saved again replaces the old directory whole
    assert (again / META_FILE).is_file() and not [p for p in again.parent.iterdir() if p.name.startswith(".tmp-")]
