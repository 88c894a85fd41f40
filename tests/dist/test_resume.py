"""Resume bit-exactness and cross-topology loads on 2 processes (torchrun, gloo).

Per group of strategies (DDP/ZeRO-1, FSDP2), launch 1 trains each configuration straight for 4 steps and,
separately, for 2 steps with a save at step 2; launch 2 (fresh processes) resumes the 2-step runs to step 4 and
loads checkpoints into other strategies; a third load happens in this process (1 process, same global batch).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from embodied_core.checkpoint.dcp import load_dcp_keys
from embodied_dist.convert import main as checkpoint_main
from tests.dist._launch import losses, run_single, torchrun, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

CONFIGS = {
    "ddp": {"distributed_strategy": "ddp", "save_format": "dcp"},
    "zero": {"distributed_strategy": "ddp", "zero_optimizer": True, "save_format": "dcp"},
    "zero_fp32_master": {"distributed_strategy": "ddp", "zero_optimizer": True, "zero_master_param_dtype": "fp32",
                         "dtype": "bfloat16", "save_format": "dcp"},
    "fsdp": {"distributed_strategy": "fsdp", "save_format": "dcp"},
    "fsdp_async": {"distributed_strategy": "fsdp", "save_format": "dcp", "async_save": True},
    "fsdp_safetensors": {"distributed_strategy": "fsdp", "save_format": "safetensors"},
    "zero_safetensors": {"distributed_strategy": "ddp", "zero_optimizer": True, "save_format": "safetensors"},
}
# checkpoint of -> loaded by (strategy flags) in launch 2
CROSS = {"fsdp_into_ddp": ("fsdp", {"distributed_strategy": "ddp"}),
         "zero_into_fsdp": ("zero", {"distributed_strategy": "fsdp"}),
         "ddp_into_zero": ("ddp", {"distributed_strategy": "ddp", "zero_optimizer": True})}
STEPS = {"train_iters": 4, "lr_decay_iters": 4}


# The configurations run in two independent groups of two launches each (DDP/ZeRO-1 and FSDP2), so that neither
# group's set-up is one long fixture; a cross-topology load goes with the group that wrote its source checkpoint.
GROUPS = {"ddp_family": ["ddp", "zero", "zero_fp32_master", "zero_safetensors"],
          "fsdp_family": ["fsdp", "fsdp_async", "fsdp_safetensors"]}


def _ckpt(root: Path, name: str) -> Path:
    return root / f"{name}_half" / "checkpoints" / "step_2"


def _group_of(name: str) -> str:
    source = CROSS[name][0] if name in CROSS else "fsdp" if name == "fsdp_into_1proc" else name
    return next(group for group, members in GROUPS.items() if source in members)


def _train_group(root: Path, group: str) -> None:
    configs = {name: CONFIGS[name] for name in GROUPS[group]}
    first = []
    for name, flags in configs.items():
        first.append({"name": f"{name}_straight", "training": training(root / f"{name}_straight", **STEPS, **flags)})
        first.append({"name": f"{name}_half", "training": training(root / f"{name}_half", **{
            **STEPS, **flags, "train_iters": 2, "save_interval": 2})})
    (root / "launch1").mkdir()
    torchrun(first, root / "launch1", nproc=2, timeout=300)
    second = [{"name": f"{name}_resumed", "training": training(root / f"{name}_half", **STEPS, **flags,
                                                                 save_interval=2, resume=True)}
              for name, flags in configs.items()]
    second += [{"name": name, "training": training(root / name, **STEPS, **flags, resume_from=str(_ckpt(root, src)))}
               for name, (src, flags) in CROSS.items() if src in configs]
    (root / "launch2").mkdir()
    torchrun(second, root / "launch2", nproc=2, timeout=300)
    if group == _group_of("fsdp_into_1proc"):
        run_single(training(root / "fsdp_into_1proc", **STEPS, per_device_batch_size=8,
                            resume_from=str(_ckpt(root, "fsdp"))))


@pytest.fixture(scope="module")
def ddp_family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resume_ddp")
    _train_group(root, "ddp_family")
    return root


@pytest.fixture(scope="module")
def fsdp_family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resume_fsdp")
    _train_group(root, "fsdp_family")
    return root


@pytest.fixture
def resumed(request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """``resumed(name)``: the output root of the group that trained configuration (or cross load) ``name``."""
    return lambda name: request.getfixturevalue(_group_of(name))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_resume_in_fresh_processes_is_bit_exact(resumed: Callable[[str], Path], name: str) -> None:
    root = resumed(name)
    straight = losses(root / f"{name}_straight")
    assert len(straight) == 4
    assert losses(root / f"{name}_half") == straight  # steps 1-2, then 3-4 after the resume: bitwise


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", [*CROSS, "fsdp_into_1proc"])
def test_checkpoint_loads_into_another_topology(resumed: Callable[[str], Path], name: str) -> None:
    source = CROSS[name][0] if name in CROSS else "fsdp"
    root = resumed(name)
    # model and optimizer are resharded exactly; only summation order differs between strategies
    assert losses(root / name) == pytest.approx(losses(root / f"{source}_straight")[2:], abs=1e-5, rel=0)


@pytest.mark.timeout(600)
def test_async_save_wrote_complete_sharded_checkpoints(fsdp_family: Path) -> None:
    step = _ckpt(fsdp_family, "fsdp_async")
    assert sorted(p.name for p in (step / "dcp").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    keys = {k for k in load_dcp_keys(step / "dcp", {"rank_state"})["rank_state"]}
    assert keys == {"rank0", "rank1"}  # per-rank RNG/data state under per-rank keys
    assert (step.parent / "latest").resolve() == (step.parent / "step_4").resolve()


@pytest.mark.timeout(600)
def test_convert_dcp_to_one_file_without_a_process_group(fsdp_family: Path, tmp_path: Path) -> None:
    step = _ckpt(fsdp_family, "fsdp")
    full = load_file(str(step.parent.parent.parent / "fsdp_safetensors_half/checkpoints/step_2/model.safetensors"))
    assert checkpoint_main(["convert", str(step), str(tmp_path / "w.safetensors"),
                            "--optimizer", str(tmp_path / "optim.pt")]) == 0
    converted = load_file(str(tmp_path / "w.safetensors"))
    assert converted.keys() == full.keys()  # FSDP with safetensors gathered the same full state on rank 0
    assert all(torch.equal(converted[k], full[k]) for k in full)
    optim = torch.load(tmp_path / "optim.pt", weights_only=True)
    assert set(optim["state"]) == set(full)
    assert checkpoint_main(["convert", str(step / "dcp"), str(tmp_path / "w.pt"), "--format", "pt"]) == 0
    as_pt = torch.load(tmp_path / "w.pt", weights_only=True)
    assert all(torch.equal(as_pt[k], full[k]) for k in full)


@pytest.mark.timeout(600)
def test_convert_consolidates_zero1_optimizer_files(ddp_family: Path, tmp_path: Path) -> None:
    step = _ckpt(ddp_family, "zero_safetensors")
    assert checkpoint_main(["convert", str(step), str(tmp_path / "w.safetensors"),
                            "--optimizer", str(tmp_path / "optim.pt")]) == 0
    optim = torch.load(tmp_path / "optim.pt", weights_only=True)
    weights = load_file(str(step / "model.safetensors"))
    assert set(optim["state"]) == set(weights)
