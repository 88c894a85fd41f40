"""LoRA on 2 processes (torchrun, gloo): DDP, ZeRO-1 and FSDP2 train the adapters like one process, resume
bit-exactly, and FSDP2 shards units that mix a bf16 frozen base with fp32 adapters.

One launch trains each strategy straight for 4 steps and, separately, for 2 steps with a save at step 2, then
resumes those with new trainers (new model, optimizer and data loader, everything restored from the files), plus
a bf16-base FSDP run. The reference is one process with the same global batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.dist._launch import losses, run_single, torchrun, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

LORA = {"use_lora": True, "lora_r": 4, "lora_alpha": 8, "lora_target_modules": "head.0,head.2",
        "lora_modules_to_save": "head.4", "lr_base": 1e-2, "train_iters": 4, "lr_decay_iters": 4}
STRATEGIES = {"ddp": {"distributed_strategy": "ddp"},
              "zero": {"distributed_strategy": "ddp", "zero_optimizer": True},
              "fsdp": {"distributed_strategy": "fsdp", "fsdp_min_num_params": 100}}
# bf16 frozen base, fp32 adapters in the same FSDP units; also --freeze-modules and --lr-group on adapters
MIXED = {"distributed_strategy": "fsdp", "fsdp_min_num_params": 100, "fsdp_original_param_dtype": "bf16",
         "dtype": "bfloat16", "freeze_modules": "head.0.lora_A", "lr_group": "head.2=1e-3"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("lora")
    first = []
    for name, flags in STRATEGIES.items():
        first.append({"name": f"{name}_straight", "training": training(root / f"{name}_straight", **LORA, **flags)})
        first.append({"name": f"{name}_half", "training": training(root / f"{name}_half", **{
            **LORA, **flags, "train_iters": 2, "save_interval": 2})})
    first.append({"name": "mixed", "training": training(root / "mixed", **LORA, **MIXED, save_interval=4)})
    first += [{"name": f"{name}_resumed", "training": training(root / f"{name}_half", **LORA, **flags,
                                                                 save_interval=2, resume=True)}
              for name, flags in STRATEGIES.items()]
    (root / "launch").mkdir()
    built = torchrun(first, root / "launch", nproc=2, timeout=300)
    run_single(training(root / "single", **LORA, per_device_batch_size=8))
    return root, built


def test_every_strategy_trains_the_adapters_like_one_process(runs: tuple[Path, dict]) -> None:
    root, _ = runs
    reference = losses(root / "single")
    for name in STRATEGIES:
        assert losses(root / f"{name}_straight") == pytest.approx(reference, rel=1e-5), name
    assert reference[-1] != reference[0]  # the adapters (and head.4) do train


def test_resume_continues_bit_exactly(runs: tuple[Path, dict]) -> None:
    root, _ = runs
    for name in STRATEGIES:
        assert losses(root / f"{name}_half") == losses(root / f"{name}_straight"), name


def test_checkpoints_hold_only_adapters_and_agree_across_strategies(runs: tuple[Path, dict]) -> None:
    root, _ = runs
    saved = {name: load_file(root / f"{name}_half" / "checkpoints" / "step_4" / "adapter_model.safetensors")
             for name in STRATEGIES}
    keys = set(saved["ddp"])
    assert keys == {f"base_model.model.head.{i}.lora_{ab}.weight" for i in (0, 2) for ab in "AB"} \
        | {"base_model.model.head.4.weight", "base_model.model.head.4.bias"}
    for name in ("zero", "fsdp"):
        assert set(saved[name]) == keys
        for key in keys:
            torch.testing.assert_close(saved[name][key], saved["ddp"][key], rtol=1e-5, atol=1e-6, msg=name + key)


def test_fsdp_units_with_a_bf16_base_and_fp32_adapters(runs: tuple[Path, dict]) -> None:
    root, built = runs
    assert built["mixed"]["param_dtypes"] == ["torch.bfloat16", "torch.float32"]
    values = losses(root / "mixed")
    assert len(values) == 4 and all(v == v for v in values)
    adapters = load_file(root / "mixed" / "checkpoints" / "step_4" / "adapter_model.safetensors")
    frozen = "base_model.model.head.0.lora_A.weight"  # --freeze-modules head.0.lora_A: frozen, so cast to bf16
    assert adapters.pop(frozen).dtype == torch.bfloat16
    assert {t.dtype for t in adapters.values()} == {torch.float32}  # what trains keeps fp32 master weights
    assert adapters["base_model.model.head.2.lora_B.weight"].abs().sum() > 0  # B starts at zero: it trained
