"""A broken checkpoint never ends a run with a traceback.

``--resume`` with a damaged newest checkpoint falls back to the newest complete one (warning naming the step and
the file, ``summary.json`` ``resume_fallbacks``) and then reproduces the uninterrupted run exactly, which shows
nothing of the broken checkpoint was restored. ``--resume-from`` a damaged or empty checkpoint is a
CheckpointError naming the file, found before the model is built. Pruning (``--save-total-limit``) interrupted
inside ``rmtree`` (an exception, and a real kill -9) never leaves a ``step_<N>`` that lost files.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from embodied_core.checkpoint import META_FILE, list_step_dirs
from embodied_core.checkpoint.validate import ResumeSelection
from embodied_core.distributed.base import SingleProcessStrategy
from embodied_core.errors import CheckpointError
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import build, losses, training
from tests.support import REPO_ROOT, clean_env

STEPS = {"train_iters": 4, "save_interval": 2}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 4-step run per format with checkpoints at steps 2 and 4."""
    root = tmp_path_factory.mktemp("pristine")
    for fmt in ("safetensors", "dcp"):
        Trainer({"training": training(root / fmt, save_format=fmt, **STEPS)}).train()
    return {fmt: root / fmt for fmt in ("safetensors", "dcp")}


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(max(path.stat().st_size, 64)))


def _wrong_shapes(path: Path) -> None:
    state = load_file(str(path))
    key = sorted(k for k in state if state[k].ndim == 2)[0]
    state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])
    save_file(state, str(path))


DAMAGE = {  # case -> (format, file under step_4, damage)
    "truncated_weights": ("safetensors", "model.safetensors", _truncate),
    "garbage_weights": ("safetensors", "model.safetensors", _garbage),
    "weights_of_other_shapes": ("safetensors", "model.safetensors", _wrong_shapes),
    "truncated_optimizer": ("safetensors", "training_state/optimizer.pt", _truncate),
    "garbage_rank_state": ("safetensors", "training_state/rank0.pt", _garbage),
    "missing_scheduler": ("safetensors", "training_state/scheduler.pt", Path.unlink),
    "truncated_meta": ("safetensors", META_FILE, _truncate),
    "truncated_trainer_state": ("safetensors", "training_state/trainer_state.json", _truncate),
    "deleted_meta": ("safetensors", META_FILE, Path.unlink),
    "truncated_dcp_shard": ("dcp", "dcp/__0_0.distcp", _truncate),
    "garbage_dcp_metadata": ("dcp", "dcp/.metadata", _garbage),
}


def _copy_run(source: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(source, out, symlinks=True)
    return out


@pytest.mark.parametrize("case", list(DAMAGE))
def test_every_kind_of_damage_is_found_and_named_before_anything_is_restored(pristine: dict[str, Path],
                                                                             tmp_path: Path, case: str) -> None:
    fmt, name, damage = DAMAGE[case]
    out = _copy_run(pristine[fmt], tmp_path)
    broken = out / "checkpoints" / "step_4" / name
    damage(broken)
    trainer = build(out, save_format=fmt, resume=True, **STEPS)
    strategy = SingleProcessStrategy(trainer.args)
    selection = ResumeSelection(out / "checkpoints", strategy)
    model = trainer.build_model()
    chosen = selection.confirm(selection.first_complete(), model, None)
    assert chosen == out / "checkpoints" / "step_2"
    [fallback] = selection.fallbacks
    assert fallback.step == 4 and str(broken) in fallback.problem


@pytest.mark.parametrize("case", ["truncated_weights", "weights_of_other_shapes", "garbage_rank_state",
                                  "deleted_meta", "truncated_dcp_shard"])
def test_resume_falls_back_to_the_newest_complete_checkpoint(pristine: dict[str, Path], tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture, case: str) -> None:
    fmt, name, damage = DAMAGE[case]
    out = _copy_run(pristine[fmt], tmp_path)
    broken = out / "checkpoints" / "step_4" / name
    damage(broken)
    with caplog.at_level(logging.WARNING, logger="embodied.checkpoint"):
        result = Trainer({"training": training(out, save_format=fmt, resume=True, **STEPS)}).train()
    assert result.step == 4
    assert losses(out) == losses(pristine[fmt])  # resumed from step 2 and trained steps 3-4 again, bitwise equal
    warning = next(r.getMessage() for r in caplog.records if "skipping broken checkpoint" in r.getMessage())
    assert "step 4" in warning and str(broken) in warning
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from"].endswith("step_2")
    [fallback] = summary["resume_fallbacks"]
    assert fallback["step"] == 4 and str(broken) in fallback["problem"]
    # the broken step_4 was replaced atomically by a complete one
    assert (out / "checkpoints" / "step_4" / META_FILE).is_file()
    assert not [p for p in (out / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def test_resume_from_a_damaged_checkpoint_names_the_file_and_does_not_fall_back(pristine: dict[str, Path],
                                                                                tmp_path: Path) -> None:
    out = _copy_run(pristine["safetensors"], tmp_path)
    broken = out / "checkpoints" / "step_4" / "training_state" / "optimizer.pt"
    _truncate(broken)
    with pytest.raises(CheckpointError, match="--resume-from") as info:
        Trainer({"training": training(tmp_path / "new", resume_from=str(broken.parent.parent), **STEPS)}).train()
    assert str(broken) in str(info.value)
    assert not (tmp_path / "new" / "config.yaml").exists()  # found before the model was built


def test_every_checkpoint_broken_is_an_error_listing_each(pristine: dict[str, Path], tmp_path: Path) -> None:
    out = _copy_run(pristine["safetensors"], tmp_path)
    for step in (2, 4):
        _garbage(out / "checkpoints" / f"step_{step}" / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"no checkpoint under .* can be resumed") as info:
        Trainer({"training": training(out, resume=True, **STEPS)}).train()
    assert "step_4:" in str(info.value) and "step_2:" in str(info.value)


def test_resume_from_an_empty_directory_is_reported_before_building_anything(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "run"
    with pytest.raises(CheckpointError) as info:  # an EmbodiedError: exit 1 with the message, no traceback
        Trainer({"training": training(out, resume_from=str(empty), train_iters=2)}).train()
    assert f"--resume-from {empty}" in str(info.value) and str(empty / META_FILE) in str(info.value)
    assert not (out / "config.yaml").exists()


def _complete_or_gone(root: Path) -> None:
    for _, path in list_step_dirs(root):
        if (path / META_FILE).is_file():
            assert (path / "model.safetensors").is_file(), f"{path} has meta.json but lost its weights"


def test_pruning_interrupted_inside_rmtree_never_leaves_a_half_deleted_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    real_rmtree = shutil.rmtree

    def dies_halfway(path: str | Path, *args: object, **kwargs: object) -> None:
        (Path(path) / "model.safetensors").unlink(missing_ok=True)  # deletes the weights first, then dies
        raise KeyboardInterrupt("killed inside rmtree")

    monkeypatch.setattr(shutil, "rmtree", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        Trainer({"training": training(out, train_iters=3, save_interval=1, save_total_limit=1)}).train()
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    root = out / "checkpoints"
    _complete_or_gone(root)
    assert [s for s, _ in list_step_dirs(root)] == [2]  # step_1 was renamed away before the deletion started
    assert [p.name for p in root.iterdir() if p.name.startswith(".tmp-removed-step_1")]
    result = Trainer({"training": training(out, train_iters=3, save_interval=1, save_total_limit=1,
                                           resume=True)}).train()
    assert result.step == 3
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_3"]  # leftover cleaned at the start


# Prunes step_1 after step_2 is saved; the deletion removes the weights first, announces it and stalls, so the
# test can kill -9 the process in the middle of the rmtree.
_CHILD = """
import shutil, sys, time
from pathlib import Path
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import training

out = Path(sys.argv[1])
real_rmtree = shutil.rmtree

def slow_rmtree(path, *args, **kwargs):
    path = Path(path)
    if "step_1" in path.name:
        for weights in path.rglob("model.safetensors"):
            weights.unlink()
        (out / "PRUNING").write_text(str(path))
        time.sleep(600)
    return real_rmtree(path, *args, **kwargs)

shutil.rmtree = slow_rmtree
Trainer({"training": training(out, train_iters=3, save_interval=1, save_total_limit=1)}).train()
"""


@pytest.mark.timeout(300)
def test_kill_9_during_pruning_keeps_every_step_directory_complete(tmp_path: Path) -> None:
    """Before: 3 of 57 kill -9 trials left a ``step_N`` with meta.json but no weights."""
    out = tmp_path / "run"
    out.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(out)], cwd=REPO_ROOT,
                             env=clean_env(PYTHONPATH=str(REPO_ROOT)), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "PRUNING").exists():
            assert child.poll() is None, f"trainer exited early:\n{child.stdout.read() if child.stdout else ''}"
            assert time.monotonic() < deadline, "pruning never started"
            time.sleep(0.1)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=60)
    root = out / "checkpoints"
    pruned = Path((out / "PRUNING").read_text())
    assert pruned.name.startswith(".tmp-removed-step_1")  # the directory being deleted was no longer a step_N
    _complete_or_gone(root)
    assert [s for s, _ in list_step_dirs(root)] == [2]
    result = Trainer({"training": training(out, train_iters=3, save_interval=1, save_total_limit=1,
                                           resume=True)}).train()
    assert result.step == 3 and not pruned.exists()
