"""smolvla_tiny through the real CLI on two gloo processes (DDP, and FSDP2 with the declared units) equals one
process training the same global batch.

SmolVLA draws noise and flow time for a whole micro-batch, so a batch split over ranks would get other draws than
the same batch in one process. ``smolvla_tiny_det`` (defined here, loaded through EMBODIED_PLUGINS) seeds each
sample's noise and time from a hash of its state instead; the loss of a global batch is then independent of the
split. The default expert-only training leaves most of each joint layer frozen, which DDP and FSDP2 must handle
without ``find_unused_parameters``. Each launch runs under a subprocess timeout.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from embodied_core import registry
from embodied_core.model_api import ModelOutput
from embodied_core.registry import ModelSpec
from embodied_core.trainer.api import Trainer
from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.modeling import SmolVLAModel
from tests.models.test_pi05_distributed import _free_port
from tests.support import REPO_ROOT, clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

DET = "smolvla_tiny_det"
MODULE = "tests.models.test_smolvla_distributed"  # as the launched processes import it (PYTHONPATH=repo)


class SmolVLADet(SmolVLAModel):
    """smolvla_tiny whose noise and flow time of each sample come from a generator seeded by its state bytes."""

    def forward(self, batch: SmolVLAPreparedBatch) -> ModelOutput:
        assert batch.actions is not None
        noise = torch.empty(batch.actions.shape)
        time = torch.empty(batch.actions.shape[0])
        for row, state in enumerate(batch.state.cpu()):
            generator = torch.Generator().manual_seed(int(hashlib.sha1(state.numpy().tobytes()).hexdigest()[:12], 16))
            noise[row] = torch.randn(noise.shape[1:], generator=generator)
            time[row] = 0.001 + 0.998 * torch.rand((), generator=generator)
        device = batch.actions.device
        elements = self.loss_elements(batch, noise=noise.to(device), time=time.to(device))
        return ModelOutput(loss=self.reduce_loss(elements, batch.action_is_pad), metrics={})


def build_det(model_config: SmolVLAModelConfig, data_config: SmolVLADataConfig) -> SmolVLADet:
    """Factory of DET_SPEC."""
    return SmolVLADet(model_config, data_config)


DET_SPEC = ModelSpec(name=DET, description="smolvla_tiny with per-sample draws (tests)",
                     factory=f"{MODULE}:build_det", model_config=SmolVLAModelConfig, data_config=SmolVLADataConfig,
                     default_yaml="embodied_models.smolvla:smolvla_tiny.yaml",
                     transforms="embodied_models.smolvla.transforms:make_transforms", needs_task=True)

_TRAINING = {"dataset_format": "dummy_datasets", "num_samples": 16, "train_iters": 3, "num_workers": 0,
             "dtype": "float32", "lr_base": 1e-3, "lr_warmup_iters": 0, "save_interval": 0, "log_interval": 1,
             "seed": 7}


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _single(out: Path, *, batch: int) -> list[dict]:
    """The reference: one process (this one), unwrapped, one intra-op thread like the launched ranks."""
    registry.register("embodied.models", DET, DET_SPEC, replace=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        Trainer({"training": {"model_name": DET, "per_device_batch_size": batch, "output_dir": str(out),
                              **_TRAINING}}).train()
    finally:
        torch.set_num_threads(threads)
    return _metrics(out)


def _launch(out: Path, *, batch: int, strategy: str, extra: tuple[str, ...] = ()) -> list[dict]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in _TRAINING.items()] + list(extra)
    args = ["--nproc_per_node", "2", "--master_port", str(_free_port()),
            "-m", "embodied_core.cli.main", "train", "--model-name", DET, *flags, "--per-device-batch-size", str(batch),
            "--output-dir", str(out), "--distributed-strategy", strategy]
    env = clean_env(OMP_NUM_THREADS="1", EMBODIED_PLUGINS=f"models:{DET}={MODULE}:DET_SPEC")
    out.parent.mkdir(parents=True, exist_ok=True)
    result = run_torchrun(*args, env=env, cwd=REPO_ROOT, timeout=240, log=out.with_suffix(".log"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return _metrics(out)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> list[dict]:
    rows = _single(tmp_path_factory.mktemp("smolvla_single") / "single", batch=4)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[0]["loss"] != pytest.approx(rows[-1]["loss"], rel=1e-3)  # the updates change the loss
    return rows


# no unused-parameter search under DDP: every parameter that requires a gradient gets one on every rank
STRATEGY_FLAGS = {"ddp": ("--no-ddp-find-unused-parameters",), "fsdp": ()}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", list(STRATEGY_FLAGS))
def test_two_processes_equal_one_process(single, strategy, tmp_path):
    rows = _launch(tmp_path / strategy, batch=2, strategy=strategy, extra=STRATEGY_FLAGS[strategy])
    for ref, row in zip(single, rows, strict=True):
        assert row["loss"] == pytest.approx(ref["loss"], rel=1e-5), (strategy, row["step"])
        assert row["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4), (strategy, row["step"])
