"""xvla_tiny through the real CLI: two gloo processes (DDP, and FSDP2 with the declared units) equal one process
training the same global batch.

X-VLA draws one flow time per batch, stratified over its samples, so a batch split over ranks would get other times
than the same batch in one process. ``xvla_tiny_det`` (defined here, loaded through EMBODIED_PLUGINS) draws the
noise and the time of each sample from a hash of its state instead, which makes the loss of a global batch
independent of the split; dropout is off. Each launch runs under a subprocess timeout, so a hung collective fails
the test instead of the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from embodied_core import registry
from embodied_core.model_api import ModelOutput
from embodied_core.registry import ModelSpec
from embodied_core.trainer.api import Trainer
from embodied_models.xvla.batch import XvlaPreparedBatch
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.modeling import XvlaModel
from tests.models.test_pi05_distributed import _free_port
from tests.support import REPO_ROOT, clean_env

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

DET = "xvla_tiny_det"
MODULE = "tests.models.test_xvla_distributed"  # as the launched processes import it (PYTHONPATH=repo)


class XvlaDet(XvlaModel):
    """xvla_tiny with per-sample draws: noise and flow time seeded from the sample's state bytes."""

    def forward(self, batch: XvlaPreparedBatch) -> ModelOutput:
        noise = torch.empty_like(batch.actions, dtype=torch.float32)
        times = torch.empty(batch.actions.shape[0])
        for row, state in enumerate(batch.state.cpu()):
            seed = int(hashlib.sha1(state.numpy().tobytes()).hexdigest()[:12], 16)
            generator = torch.Generator().manual_seed(seed)
            noise[row] = torch.randn(noise.shape[1:], generator=generator)
            times[row] = torch.rand((), generator=generator)
        losses, _ = self.training_outputs(batch, noise=noise, times=times)
        return ModelOutput(loss=sum(losses.values()), metrics={k: v.detach() for k, v in losses.items()})


def build_det(model_config: XvlaModelConfig, data_config: XvlaDataConfig) -> XvlaDet:
    """Factory of DET_SPEC."""
    return XvlaDet(model_config, data_config)


DET_SPEC = ModelSpec(name=DET, description="xvla_tiny with per-sample draws (tests)",
                     factory=f"{MODULE}:build_det", model_config=XvlaModelConfig, data_config=XvlaDataConfig,
                     default_yaml="embodied_models.xvla:xvla_tiny.yaml",
                     transforms="embodied_models.xvla.transforms:make_transforms")

_OVERRIDES = ["model.dropout=0", "model.text_dropout=0", "model.vision_drop_path_rate=0"]


_TRAINING = {"dataset_format": "dummy_datasets", "num_samples": 16, "train_iters": 3, "num_workers": 0,
             "dtype": "float32", "lr_base": 1e-3, "lr_warmup_iters": 0, "save_interval": 0, "log_interval": 1,
             "seed": 7}


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _single(out: Path, *, batch: int) -> list[dict]:
    """The reference: one process (this one), unwrapped."""
    registry.register("embodied.models", DET, DET_SPEC, replace=True)
    Trainer({"training": {"model_name": DET, "per_device_batch_size": batch, "output_dir": str(out), **_TRAINING},
             "model": {"dropout": 0.0, "text_dropout": 0.0, "vision_drop_path_rate": 0.0}}).train()
    return _metrics(out)


def _launch(out: Path, *, batch: int, strategy: str) -> list[dict]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in _TRAINING.items()]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           "-m", "embodied_core.cli.main", "train", "--model-name", DET, *flags, "--per-device-batch-size",
           str(batch), "--output-dir", str(out), "--distributed-strategy", strategy, *_OVERRIDES]
    env = clean_env(OMP_NUM_THREADS="1", EMBODIED_PLUGINS=f"models:{DET}={MODULE}:DET_SPEC",
                    PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    log = out.with_suffix(".log")
    out.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        # own session: on timeout the whole group (torchrun and both ranks) is killed, no orphans
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
                                start_new_session=True)
        try:
            returncode = proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{strategy} launch hung for 240 s:\n{log.read_text()[-4000:]}")
    assert returncode == 0, log.read_text()[-4000:]
    return _metrics(out)


@pytest.mark.timeout(600)
def test_two_processes_equal_one_process(tmp_path):
    single = _single(tmp_path / "single", batch=4)
    ddp = _launch(tmp_path / "ddp", batch=2, strategy="ddp")
    fsdp = _launch(tmp_path / "fsdp", batch=2, strategy="fsdp")
    assert [r["step"] for r in single] == [1, 2, 3]
    assert single[0]["loss"] != pytest.approx(single[-1]["loss"], rel=1e-3)  # the updates change the loss
    for name, rows in (("ddp", ddp), ("fsdp", fsdp)):
        for ref, row in zip(single, rows, strict=True):
            assert row["loss"] == pytest.approx(ref["loss"], rel=1e-5), (name, row["step"])
            assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4), (name, row["step"])
            assert row["joints_loss"] == pytest.approx(ref["joints_loss"], rel=1e-5), (name, row["step"])
