"""kill -9 in the middle of a save: the previous checkpoint stays complete and --resume continues from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embodied_core.checkpoint import find_latest, read_meta
from embodied_core.checkpoint.file_format import load_model_file
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import losses, training
from tests.support import REPO_ROOT, clean_env

# Runs the real trainer; the save of step 4 stops after writing the weights file (as a slow disk would) and
# announces it, so the test can kill the process while the checkpoint is half written.
_CHILD = """
import sys, time
from pathlib import Path
from embodied_core.checkpoint import file_format
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import training

out = Path(sys.argv[1])
real_save = file_format.save_model_file

def slow_save(state, directory, fmt):
    path = real_save(state, directory, fmt)
    if directory.name.endswith("step_4"):
        (out / "SAVING").write_text(str(directory))
        time.sleep(600)
    return path

file_format.save_model_file = slow_save
Trainer({"training": training(out, train_iters=6, save_interval=2, save_format=sys.argv[2])}).train()
"""


@pytest.mark.timeout(300)
def test_kill_9_during_save_keeps_previous_checkpoint_and_resume_uses_it(tmp_path: Path) -> None:
    fmt = "pt"  # the weights format only changes which file is written first (resume of both: test_checkpoint_formats)
    out, straight = tmp_path / "run", tmp_path / "straight"
    out.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), fmt], cwd=REPO_ROOT,
                             env=clean_env(PYTHONPATH=str(REPO_ROOT)), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "SAVING").exists():
            assert child.poll() is None, f"trainer exited early:\n{child.stdout.read() if child.stdout else ''}"
            assert time.monotonic() < deadline, "the save of step 4 never started"
            time.sleep(0.1)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    root = out / "checkpoints"
    partial = Path((out / "SAVING").read_text())
    assert partial.parent == root and partial.name.startswith(".tmp-") and any(partial.iterdir())
    assert not (root / "step_4").exists()
    assert find_latest(root) == (root / "step_2").resolve() == (root / "latest").resolve()
    assert read_meta(root / "step_2")["step"] == 2 and load_model_file(root / "step_2")  # loadable

    result = Trainer({"training": training(out, train_iters=6, save_interval=2, save_format=fmt,
                                           resume=True)}).train()
    Trainer({"training": training(straight, train_iters=6, save_interval=2, save_format=fmt)}).train()
    assert result.step == 6
    assert losses(out) == losses(straight)  # resumed from step 2, as if never interrupted
    assert not partial.exists() and find_latest(root) == (root / "step_6").resolve()
