"""--init-on-meta under FSDP on 2 gloo processes (one torchrun launch): weights streamed into the local shards from
a safetensors file, a sharded safetensors folder and a DCP checkpoint are bit-identical to the non-meta path, with
the same first losses; --resume restores the same way (dcp and safetensors) and continues exactly; a run
without a checkpoint initializes to the same weights as one process does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from embodied_core import registry
from embodied_core.config.resolve import load_config
from embodied_core.trainer.api import Trainer
from embodied_models.pi05.modeling import build_model as build_pi05
from tests.dist._det_model import NAME, SPEC
from tests.dist._launch import MODEL, free_port, losses, training
from tests.support import clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

WORKER = Path(__file__).resolve().parent / "_probe_worker.py"
FSDP = {"distributed_strategy": "fsdp", "init_on_meta": True}


def _pretrained(tmp: Path) -> tuple[Path, Path]:
    """A pi05_tiny state dict as one safetensors file and as an index with two shards."""
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"})
    torch.manual_seed(7)
    state = {k: v.contiguous() for k, v in build_pi05(config.model, config.data).state_dict().items()}
    single = tmp / "pi05.safetensors"
    save_file(state, str(single))
    sharded = tmp / "sharded"
    sharded.mkdir()
    keys = sorted(state)
    halves = {"model-00001-of-00002.safetensors": keys[::2], "model-00002-of-00002.safetensors": keys[1::2]}
    for name, part in halves.items():
        save_file({k: state[k] for k in part}, str(sharded / name))
    index = {"weight_map": {k: name for name, part in halves.items() for k in part}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    return single, sharded


def _runs(tmp: Path, single: Path, sharded: Path) -> list[dict[str, Any]]:
    pi05 = {"model_name": "pi05_tiny", "per_device_batch_size": 2, "train_iters": 1}
    resume = {"train_iters": 4, "save_interval": 2}
    step2 = str(tmp / "dcp/checkpoints/step_2")
    return [
        {"name": "pi05_file", "training": training(tmp / "a", **pi05, distributed_strategy="fsdp",
                                                    pretrained_checkpoint=str(single))},
        {"name": "pi05_file_meta", "training": training(tmp / "b", **pi05, **FSDP, pretrained_checkpoint=str(single))},
        {"name": "pi05_sharded_meta", "training": training(tmp / "c", **pi05, **FSDP,
                                                            pretrained_checkpoint=str(sharded))},
        {"name": "dcp", "training": training(tmp / "dcp", **resume, distributed_strategy="fsdp", save_format="dcp")},
        {"name": "dcp_pretrained", "training": training(tmp / "d", distributed_strategy="fsdp", train_iters=1,
                                                         pretrained_checkpoint=step2)},
        {"name": "dcp_pretrained_meta", "training": training(tmp / "e", **FSDP, train_iters=1,
                                                              pretrained_checkpoint=step2)},
        {"name": "dcp_resumed_meta", "training": training(tmp / "dcp_r", **resume, **FSDP, save_format="dcp",
                                                           resume_from=step2)},
        {"name": "file", "training": training(tmp / "file", **resume, distributed_strategy="fsdp")},
        {"name": "file_resumed_meta", "training": training(tmp / "file_r", **resume, **FSDP,
                                                            resume_from=str(tmp / "file/checkpoints/step_2"))},
        {"name": "scratch_meta", "training": training(tmp / "scratch", **FSDP, train_iters=1)},
    ]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("meta")
    single, sharded = _pretrained(tmp)
    spec, out = tmp / "spec.json", tmp / "results"
    spec.write_text(json.dumps({"runs": [{"model": MODEL, **run} if not run["name"].startswith("pi05") else run
                                         for run in _runs(tmp, single, sharded)], "results": str(out)}))
    proc = run_torchrun("--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={free_port()}",
                        str(WORKER), str(spec), env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp, timeout=420)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]
    return tmp, [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


@pytest.mark.parametrize("run", ["pi05_file_meta", "pi05_sharded_meta"])
def test_streamed_safetensors_weights_and_first_loss_are_bit_identical(launched: tuple, run: str) -> None:
    tmp, records = launched
    assert records[0][run]["param_digest"] == records[0]["pi05_file"]["param_digest"]
    folder = {"pi05_file_meta": "b", "pi05_sharded_meta": "c"}[run]
    assert losses(tmp / folder) == losses(tmp / "a")


def test_streamed_dcp_weights_are_bit_identical(launched: tuple) -> None:
    tmp, records = launched
    assert records[0]["dcp_pretrained_meta"]["param_digest"] == records[0]["dcp_pretrained"]["param_digest"]
    assert losses(tmp / "e") == losses(tmp / "d")


@pytest.mark.parametrize(("run", "folder", "reference"), [("dcp_resumed_meta", "dcp_r", "dcp"),
                                                          ("file_resumed_meta", "file_r", "file")])
def test_resume_on_meta_continues_exactly(launched: tuple, run: str, folder: str, reference: str) -> None:
    tmp, _ = launched
    assert losses(tmp / folder) == losses(tmp / reference)[2:]


def _digest(tensor: torch.Tensor) -> float:  # as _probe_worker.py computes it
    return float(tensor.double().flatten().mul(torch.arange(1, tensor.numel() + 1, dtype=torch.float64)).sum())


def test_initialization_without_a_checkpoint_equals_one_process(launched: tuple, tmp_path: Path) -> None:
    _, records = launched
    assert records[0]["scratch_meta"]["param_digest"] == records[1]["scratch_meta"]["param_digest"]
    registry.register("embodied.models", NAME, SPEC, replace=True)
    trainer = Trainer({"training": training(tmp_path / "single", train_iters=1, init_on_meta=True),
                       "model": MODEL}).build()
    try:
        trainer.setup()  # one process: the whole model materialized before wrapping, same seed, same order
        digest = sum(_digest(p.detach()) for p in trainer.model.parameters())
    finally:
        trainer.close()
    assert digest == records[0]["scratch_meta"]["param_digest"]
