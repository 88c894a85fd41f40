"""Full disks and read-only output directories for real (a small tmpfs; ext4 on a loop device switched read-only
by its own error path), mid-run: the save fails with a StorageError naming the path, the bytes needed and free, the
partial write is removed, the previous checkpoint stays intact and ``--resume`` continues from it with the losses of
an uninterrupted run; the same for the policy export and the precompute-text cache. Needs root to mount (skips
with the reason otherwise)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from embodied_core.checkpoint import find_latest
from embodied_core.policy import export_policy, load_policy
from embodied_core.storage import StorageError
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import losses, training
from tests.reliability.fault_hooks import FillDiskAtStep, ReadOnlyAtStep
from tests.reliability.mounts import fill, loop_ext4, require_mounts, tmpfs
from tests.support import DATASETS_DIR, clean_env, run_embodied

RUN = {"train_iters": 6, "save_interval": 2, "save_format": "safetensors"}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> list[float]:
    """The losses of the uninterrupted run."""
    out = tmp_path_factory.mktemp("straight") / "run"
    Trainer({"training": training(out, **RUN)}).train()
    return losses(out)


@pytest.fixture
def mounts_ok(tmp_path):
    require_mounts(tmp_path)


def _no_partials(out: Path) -> list[str]:
    return [p.name for p in (out / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def _resume_elsewhere(out: Path, target: Path) -> list[float]:
    """Copies the interrupted run off the faulty filesystem and resumes it there (``--resume``)."""
    shutil.copytree(out, target, symlinks=True)
    Trainer({"training": training(target, **RUN, resume=True)}).train()
    return losses(target)


def test_a_full_disk_mid_run_keeps_the_previous_checkpoint_and_resume_is_exact(mounts_ok, tmp_path, straight):
    with tmpfs(tmp_path / "disk", 8 * 2**20) as disk:
        out = disk / "run"
        hook = FillDiskAtStep(3, disk, leave_bytes=8192)
        with pytest.raises(StorageError) as info:
            Trainer({"training": training(out, **RUN)}, plugins=(hook,)).train()
        text = str(info.value)
        assert f"{out / 'checkpoints' / '.tmp-step_4'}: writing checkpoint step 4 failed: no space left on device" \
            in text, text
        assert re.search(r"needs about [\d,]+ bytes \([\d.]+ MiB\), [\d,]+ bytes \(.*\) free there", text), text
        assert info.value.needed_bytes > info.value.free_bytes
        assert f"The previous checkpoint {out / 'checkpoints' / 'step_2'} is intact" in text
        assert not _no_partials(out) and find_latest(out / "checkpoints") == (out / "checkpoints" / "step_2")
        resumed = _resume_elsewhere(out, tmp_path / "resumed")
    assert resumed == straight  # steps 1-2 logged before the fault, 3-6 after the resume from step_2


def test_the_output_directory_going_read_only_mid_run(mounts_ok, tmp_path, straight):
    with loop_ext4(tmp_path / "ext4", 24 * 2**20) as device:
        out = tmp_path / "ext4" / "run"
        hook = ReadOnlyAtStep(3, device)
        with pytest.raises(StorageError) as info:
            Trainer({"training": training(out, **RUN, log_interval=100)}, plugins=(hook,)).train()
        text = str(info.value)
        assert "writing checkpoint step 4 failed: read-only file system" in text, text
        assert f"The previous checkpoint {out / 'checkpoints' / 'step_2'} is intact" in text
        resumed = _resume_elsewhere(out, tmp_path / "resumed")
    assert resumed[-4:] == straight[-4:]  # metrics of steps 1-2 were not logged (log_interval): the resumed ones


def test_embodied_train_on_a_full_disk_exits_1_with_the_message(mounts_ok, tmp_path):
    with tmpfs(tmp_path / "disk", 8 * 2**20) as disk:
        out = disk / "run"
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in training(out, **RUN).items()]
        env = clean_env(EMBODIED_PLUGINS="embodied.hooks:h28_fill=tests.reliability.fault_hooks:ENV_FILL",
                        H28_FILL_STEP="3", H28_FILL_DIR=str(disk), H28_FILL_LEAVE="4096")
        done = run_embodied("train", *flags, env=env)
        assert done.returncode == 1, done.stderr[-3000:]
        assert "embodied train: failed:" in done.stderr and "no space left on device" in done.stderr
        assert "Traceback" not in done.stderr
        assert (out / "checkpoints" / "step_2" / "meta.json").is_file() and not _no_partials(out)


def test_export_to_a_full_disk_names_the_destination_and_leaves_nothing(mounts_ok, checkpoint, tmp_path):
    with tmpfs(tmp_path / "small", 256 * 1024) as small:
        with pytest.raises(StorageError) as info:
            export_policy(checkpoint, small / "exported")
        text = str(info.value)
        assert f"{small / 'exported'}: writing the policy folder failed: no space left on device" in text, text
        assert info.value.needed_bytes > 700_000 and f"{checkpoint.resolve()} is unchanged" in text
        assert list(small.iterdir()) == []
    with tmpfs(tmp_path / "roomy", 8 * 2**20) as roomy:
        export_policy(checkpoint, roomy / "exported")
        assert load_policy(roomy / "exported").metadata.action_horizon == 10


def test_precompute_text_on_a_full_disk_then_with_room(mounts_ok, tmp_path):
    from embodied_models.wan.text import build_tiny_umt5

    root = DATASETS_DIR / "strategies"
    encoder = build_tiny_umt5(tmp_path / "umt5" / "base", root / "tokenizers" / "umt5_tiny")
    with tmpfs(tmp_path / "cachefs", 2**20) as cachefs:
        argv = ["data", "precompute-text", str(root / "fastwam_v30"), "--text-encoder-path", str(encoder), "--out",
                str(cachefs / "cache"), "--text-len", "24", "--encoder-id", "tiny", "--dtype", "float32",
                "--device", "cpu"]
        (cachefs / "cache").mkdir()
        filler = fill(cachefs)
        done = run_embodied(*argv)
        assert done.returncode == 1 and "writing a text-cache file failed: no space left on device" in done.stderr
        assert "Traceback" not in done.stderr and list((cachefs / "cache").iterdir()) == []  # no partial files
        filler.unlink()
        done = run_embodied(*argv)
        assert done.returncode == 0, done.stderr[-2000:]
        written = sorted(p.name for p in (cachefs / "cache").iterdir())
        assert len([n for n in written if not n.startswith(".")]) >= 3, written
        assert json.loads((cachefs / "cache" / next(n for n in written if n.endswith(".json"))).read_text())
