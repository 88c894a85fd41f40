"""Two processes (torchrun, gloo) against one process training the same global batch.

Losses are compared, not AdamW parameters (AdamW amplifies rounding in near-zero gradients); the model
draws its noise per sample (``_det_model``), so how a batch is split over ranks does not change it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.dist._launch import losses, metrics, run_single, torchrun, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

# name -> (flags of the 2-process run, name of the 1-process reference with the same global batch)
RUNS: dict[str, tuple[dict, str]] = {
    "ddp": ({"distributed_strategy": "ddp", "save_interval": 3}, "ref"),
    "ddp_options": ({"distributed_strategy": "ddp", "ddp_find_unused_parameters": False, "ddp_static_graph": True,
                     "ddp_gradient_as_bucket_view": True, "ddp_bucket_cap_mb": 1}, "ref"),
    "ddp_ga": ({"distributed_strategy": "ddp", "gradient_accumulation_steps": 2}, "ref_ga"),
    "zero": ({"distributed_strategy": "ddp", "zero_optimizer": True, "save_interval": 3}, "ref"),
    "zero_bucket_view": ({"distributed_strategy": "ddp", "zero_optimizer": True,
                          "zero_parameters_as_bucket_view": True}, "ref"),
    "fsdp_reshard": ({"distributed_strategy": "fsdp", "fsdp_reshard_default": True, "fsdp_reshard_root": True}, "ref"),
    "fsdp_no_reshard": ({"distributed_strategy": "fsdp", "fsdp_reshard_default": False,
                         "fsdp_wrap_modules": "Sequential,LayerNorm"}, "ref"),
    "fsdp_ga_every": ({"distributed_strategy": "fsdp", "gradient_accumulation_steps": 2}, "ref_ga"),
    "fsdp_ga_last": ({"distributed_strategy": "fsdp", "gradient_accumulation_steps": 2,
                      "fsdp_reduce_every_microbatch": False}, "ref_ga"),
    "fsdp_bf16": ({"distributed_strategy": "fsdp", "dtype": "bfloat16"}, "ref_bf16"),
    "zero_fp32_master": ({"distributed_strategy": "ddp", "zero_optimizer": True, "zero_master_param_dtype": "fp32",
                          "dtype": "bfloat16"}, "ref_bf16"),
}
# bf16 sharded parameters (no fp32 masters): the updates themselves round, so only the first loss (before
# any update) is comparable with the fp32-master reference
PURE_BF16 = {"distributed_strategy": "fsdp", "dtype": "bfloat16", "fsdp_original_param_dtype": "bf16",
             "fsdp_unsharded_param_dtype": "bf16", "fsdp_reduce_dtype": "bf16", "fsdp_cast_forward_inputs": False}
REFERENCES = {"ref": {"per_device_batch_size": 8}, "ref_ga": {"per_device_batch_size": 8,
                                                               "gradient_accumulation_steps": 2},
              "ref_bf16": {"per_device_batch_size": 8, "dtype": "bfloat16"}}


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("parity")
    runs = [{"name": name, "training": training(root / name, **flags)} for name, (flags, _) in RUNS.items()]
    runs.append({"name": "fsdp_pure_bf16", "training": training(root / "fsdp_pure_bf16", **PURE_BF16)})
    info = torchrun(runs, root, nproc=2, timeout=300)
    for name, flags in REFERENCES.items():
        run_single(training(root / name, **flags))
    return root, info


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(RUNS))
def test_losses_and_clip_norm_match_one_process(parity: tuple[Path, dict], name: str) -> None:
    root, _ = parity
    reference = RUNS[name][1]
    tolerance = 1e-3 if reference == "ref_bf16" else 1e-5
    assert losses(root / name) == pytest.approx(losses(root / reference), abs=tolerance, rel=0)
    # --clip-grad 0.1 is active at these norms: the clipped norm is the global one, counted once.
    norms = [row["grad_norm"] for row in metrics(root / name)]
    assert min(norms) > 0.1
    assert norms == pytest.approx([row["grad_norm"] for row in metrics(root / reference)], rel=tolerance * 10)


@pytest.mark.timeout(420)
def test_zero1_is_bitwise_ddp(parity: tuple[Path, dict]) -> None:
    root, info = parity
    assert info["zero"]["optimizer"] == "ZeroRedundancyOptimizer"
    assert losses(root / "zero") == losses(root / "ddp")
    ddp = load_file(str(root / "ddp/checkpoints/step_3/model.safetensors"))
    zero = load_file(str(root / "zero/checkpoints/step_3/model.safetensors"))
    assert ddp.keys() == zero.keys()
    assert all(torch.equal(ddp[k], zero[k]) for k in ddp)
    # ZeRO-1 saves each rank's optimizer part under its own name, never a consolidated file
    state_dir = root / "zero/checkpoints/step_3/training_state"
    assert sorted(p.name for p in state_dir.glob("optimizer*.pt")) == ["optimizer_rank0.pt", "optimizer_rank1.pt"]
    parts = [torch.load(state_dir / f"optimizer_rank{r}.pt", weights_only=True)["state"] for r in range(2)]
    assert parts[0].keys().isdisjoint(parts[1].keys())
    assert set(parts[0]) | set(parts[1]) == set(ddp)


@pytest.mark.timeout(420)
def test_strategies_built_what_was_asked(parity: tuple[Path, dict]) -> None:
    _, info = parity
    assert info["ddp"]["wrapper"] == "_DDP"
    assert info["fsdp_reshard"]["mesh"] == [2]
    assert info["fsdp_bf16"]["wrapper"].startswith("FSDP")
    assert info["fsdp_bf16"]["param_dtypes"] == ["torch.float32"]  # fp32 masters by default with bf16 compute
    assert info["zero_fp32_master"]["param_dtypes"] == ["torch.bfloat16"]  # stored in --dtype, masters in ZeRO


@pytest.mark.timeout(420)
def test_fsdp_bf16_sharded_parameters(parity: tuple[Path, dict]) -> None:
    root, info = parity
    assert info["fsdp_pure_bf16"]["param_dtypes"] == ["torch.bfloat16"]  # --fsdp-original-param-dtype bf16
    assert losses(root / "fsdp_pure_bf16")[0] == pytest.approx(losses(root / "ref_bf16")[0], abs=1e-3, rel=0)
