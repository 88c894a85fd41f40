"""Validation of the distributed flags of ../shared/FLAGS_EXTENDED.md (no process group needed): each mistake is
reported with the flag and what would be valid, before anything is built."""

from __future__ import annotations

import re

import pytest
from torch import nn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.validation import distributed_problems, parse_reshard_overrides
from embodied_core.errors import ConfigError
from embodied_dist.wrap import forward_order, unit_reshard_policies

TWO = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
       "MASTER_PORT": "29500"}


def test_reshard_overrides_parse() -> None:
    assert parse_reshard_overrides("Block = false, Encoder=2,Head=None") == {"Block": False, "Encoder": 2, "Head": None}
    assert parse_reshard_overrides(None) == {}


@pytest.mark.parametrize(("flags", "message"), [
    ({"fsdp_reshard_module_overrides": "Block=maybe"},
     "--fsdp-reshard-module-overrides: 'Block=maybe': expected Class=value with value true, false, none or an"),
    ({"fsdp_reshard_module_overrides": "Block=3"},
     "--fsdp-reshard-module-overrides Block=3: an integer reshards to groups of that size and must divide the "
     "shard group size 2"),
    ({"ddp_comm_hook_logging": True, "distributed_strategy": "ddp"},
     "--ddp-comm-hook-logging logs what --ddp-comm-hook does, and none is set"),
    ({"ddp_comm_hook": "bf16_compress_hook"}, "--ddp-comm-hook: not read by --distributed-strategy fsdp"),
    ({"fsdp_forward_prefetch_distance": 1, "distributed_strategy": "ddp"},
     "--fsdp-forward-prefetch-distance: not read by --distributed-strategy ddp"),
])
def test_distributed_flag_mistakes_are_reported(flags: dict, message: str) -> None:
    problems = distributed_problems(TrainingArgs(**flags), environ=TWO)
    assert any(message in p for p in problems), problems


def test_an_override_for_a_class_that_is_no_unit_is_an_error() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    units = [("0", model[0]), ("2", model[2])]
    assert unit_reshard_policies(units, default=None, overrides={"Linear": False}) == {"0": False, "2": False}
    expected = "'Lineer' is the class of no FSDP unit (did you mean 'Linear'?); unit classes: Linear"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        unit_reshard_policies(units, default=None, overrides={"Lineer": False})
    assert forward_order(model, list(reversed(units))) == [model[0], model[2]]
