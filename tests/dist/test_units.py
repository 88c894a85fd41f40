"""In-process checks of embodied-dist that need no process group: launch environment and flag
validation, FSDP unit selection, and the checkpoint command's usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.validation import (
    distributed_problems,
    launch_env,
    launch_problems,
    shard_group_size,
)
from embodied_core.errors import ConfigError, UsageError
from embodied_dist.convert import main as checkpoint_main
from embodied_dist.wrap import select_units
from tests.dist._launch import losses, run_single, training
from tests.support import clean_env, run_embodied

TORCHRUN_4x2 = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "2",
                "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def test_half_set_environment_names_what_is_missing() -> None:
    (problem,) = launch_problems({"RANK": "0"})
    assert "WORLD_SIZE, MASTER_ADDR, MASTER_PORT missing" in problem and "torchrun" in problem
    assert launch_problems({"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}) == [
        "environment RANK=3 is outside WORLD_SIZE=2"]
    assert launch_problems({"WORLD_SIZE": "two"}) == ["environment WORLD_SIZE='two' is not an integer"]
    assert launch_problems({}) == [] and launch_problems({"WORLD_SIZE": "1"}) == []


def test_launch_env_and_hsdp_auto_follow_the_nodes() -> None:
    env = launch_env(TORCHRUN_4x2)
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.num_nodes) == (5, 8, 1, 4, 2)
    assert shard_group_size(TrainingArgs(hsdp_shard_size="auto"), env) == 4  # processes per node
    one_node = launch_env({**TORCHRUN_4x2, "LOCAL_WORLD_SIZE": "8", "GROUP_WORLD_SIZE": "1"})
    assert shard_group_size(TrainingArgs(hsdp_shard_size="auto"), one_node) == 8  # plain FSDP on one node
    assert shard_group_size(TrainingArgs(), env) == 8


@pytest.mark.parametrize(("flags", "expected"), [
    ({"hsdp_shard_size": 3}, "--hsdp-shard-size 3 does not divide the world size 8"),
    ({"fsdp_reshard_default": 8}, "--fsdp-reshard-default 8: an integer reshards to groups of that size and must "
                                  "divide the shard group size 4; valid integers: [2, 4]"),
    ({"fsdp_reshard_root": 3}, "--fsdp-reshard-root 3"),
    ({"zero_optimizer": True}, "--zero-optimizer: not read by --distributed-strategy fsdp"),
    ({"distributed_strategy": "ddp", "fsdp_wrap_modules": "Block"}, "--fsdp-wrap-modules: not read by"),
    ({"distributed_strategy": "ddp", "zero_master_param_dtype": "fp32", "dtype": "float32"},
     "--zero-master-param-dtype fp32 needs --zero-optimizer"),
])
def test_distributed_flag_problems(flags: dict, expected: str) -> None:
    args = TrainingArgs(**{"hsdp_shard_size": "auto", **flags}) if "hsdp_shard_size" not in flags \
        else TrainingArgs(**flags)
    problems = distributed_problems(args, TORCHRUN_4x2)
    assert any(expected in p for p in problems), problems


def test_valid_topology_has_no_problems() -> None:
    args = TrainingArgs(hsdp_shard_size=4, fsdp_reshard_default=2, fsdp_reshard_root=True)
    assert distributed_problems(args, TORCHRUN_4x2) == []
    assert distributed_problems(TrainingArgs(fsdp_reshard_default=3), {}) == []  # one process: unwrapped


@pytest.mark.timeout(60)
def test_cli_rejects_half_set_environment_before_any_process_group(tmp_path: Path) -> None:
    result = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets",
                          "--output-dir", str(tmp_path), env=clean_env(RANK="1", WORLD_SIZE="2"), timeout=60)
    assert result.returncode == 2, result.stderr
    assert "half-set launch environment" in result.stderr and "MASTER_ADDR, MASTER_PORT missing" in result.stderr


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))
        self.norm = nn.LayerNorm(width)


class Net(nn.Module):
    def __init__(self, units: list[type[nn.Module]] | None = None) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 32)
        self.blocks = nn.ModuleList(Block(32) for _ in range(3))
        self.head = nn.Linear(32, 600)
        self._units = units or []

    def fsdp_units(self) -> list[type[nn.Module]]:
        return self._units


def _names(units: list[tuple[str, nn.Module]]) -> list[str]:
    return [name for name, _ in units]


def _select(model: nn.Module, **flags: object) -> list[str]:
    options = {"wrap_modules": None, "no_wrap_modules": None, "min_num_params": 1000,
               "leftover_min_num_params": 10_000, **flags}
    return _names(select_units(model, **options))  # type: ignore[arg-type]


def test_units_explicit_then_plugin_then_automatic() -> None:
    assert _select(Net(), wrap_modules="Block") == ["blocks.0", "blocks.1", "blocks.2"]
    assert _select(Net(units=[nn.LayerNorm])) == ["blocks.0.norm", "blocks.1.norm", "blocks.2.norm"]
    # automatic: the repeated Block (>= 1000 params, outermost) and the big leftover head (>= 10k)
    assert _select(Net()) == ["blocks.0", "blocks.1", "blocks.2", "head"]
    assert _select(Net(), no_wrap_modules="Block", min_num_params=1000)[:3] == [
        "blocks.0.mlp", "blocks.1.mlp", "blocks.2.mlp"]
    assert _select(Net(), min_num_params=10**9, leftover_min_num_params=10**9) == []


def test_units_are_innermost_first() -> None:
    names = _select(Net(), wrap_modules="Block,Linear")
    assert names.index("blocks.0.mlp.0") < names.index("blocks.0")


def test_unknown_wrap_class_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        _select(Net(), wrap_modules="Blok")
    assert "no module of class 'Blok'" in str(err.value) and "did you mean 'Block'" in str(err.value)
    with pytest.raises(ConfigError, match="--fsdp-no-wrap-modules"):
        _select(Net(), no_wrap_modules="Transformer")


def test_convert_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a DCP checkpoint"):
        checkpoint_main(["convert", str(tmp_path), str(tmp_path / "out.safetensors")])
    assert checkpoint_main(["convert", "--format", "npz", str(tmp_path), "x"]) == 2


@pytest.mark.timeout(120)
def test_one_process_async_dcp_resume_is_exact(tmp_path: Path) -> None:
    steps = {"train_iters": 4, "lr_decay_iters": 4, "save_format": "dcp", "async_save": True, "save_interval": 2}
    run_single(training(tmp_path / "straight", **steps))
    run_single(training(tmp_path / "split", **{**steps, "train_iters": 2}))
    run_single(training(tmp_path / "split", **steps, resume=True))
    assert losses(tmp_path / "split") == losses(tmp_path / "straight")
    meta = (tmp_path / "split/checkpoints/step_4/meta.json").read_text()
    assert '"async": true' in meta and '"blocking_seconds"' in meta
