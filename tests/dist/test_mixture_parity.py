"""A dataset mixture on two gloo processes (torchrun) against one process training the same global batch: every
rank reads a disjoint share of whole local batches, together exactly the one-process samples, so the losses match.

The model (``tiny_flow_det``) draws its noise per sample from the sample's index, so how a batch is split over ranks
does not change its loss. The mixture: two shared LeRobot datasets (v3.0 and v2.1) with weights 3 : 1, 64 draws
per epoch (8 global batches), so the 4 steps also cover the ranks' shares within one epoch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.dist._launch import losses, metrics, run_single, torchrun, training
from tests.support import DATASETS_DIR

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

MIXTURE = {"weighting": "dataset", "samples_per_epoch": 64, "entries": [
    {"path": str(DATASETS_DIR / "lerobot_written" / "v30"), "weight": 3},
    {"path": str(DATASETS_DIR / "lerobot_written" / "v21"), "weight": 1, "lerobotdataset_version": "v2.1"}]}


def _flags(out: Path, mixture_file: Path, **extra: object) -> dict:
    # one action per sample: no padded steps, whose count per rank would weigh the ranks' mean losses differently
    config = mixture_file.with_name("config.yaml")
    config.write_text(yaml.safe_dump({"data": {"action_horizon": 1}}))
    flags = training(out, dataset_format="lerobot_datasets", dataset_mixture=str(mixture_file), config_file=str(config),
                     video_backend="pyav", train_iters=4, loss_spike_threshold=1e12, **extra)
    flags.pop("num_samples")  # a dummy_datasets flag
    return flags


@pytest.mark.timeout(300)
def test_two_gloo_processes_train_the_one_process_mixture_exactly(tmp_path: Path) -> None:
    mixture_file = tmp_path / "mix.yaml"
    mixture_file.write_text(yaml.safe_dump(MIXTURE))
    torchrun([{"name": "ddp", "training": _flags(tmp_path / "ddp", mixture_file, distributed_strategy="ddp")}],
             tmp_path, nproc=2, timeout=240)
    run_single(_flags(tmp_path / "ref", mixture_file, per_device_batch_size=8))
    assert len(losses(tmp_path / "ddp")) == 4
    # the actions are raw (up to 3029: no transforms normalize them), so the losses are large: compare relatively
    assert losses(tmp_path / "ddp") == pytest.approx(losses(tmp_path / "ref"), rel=1e-6)
    assert all(row["skipped_updates"] == 0 for row in metrics(tmp_path / "ddp"))
