"""Optimizer plugins, their validation, and parameter groups (--lr-group, --weight-decay-grouping)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch
from torch import nn

from embodied_core import registry
from embodied_core.config.resolve import load_config
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError
from embodied_core.optim import optimizers
from embodied_core.optim.param_groups import build_param_groups, format_group_table, no_decay_names
from embodied_core.registry import groups
from embodied_core.validation import validate_run_config


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 8))
        self.head = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
        self.pos_embed = nn.Parameter(torch.zeros(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x) + self.pos_embed)

    def no_weight_decay(self) -> list[str]:
        return ["pos_embed"]


def _step(optimizer: torch.optim.Optimizer, model: nn.Module) -> None:
    torch.manual_seed(0)
    optimizer.zero_grad()
    model(torch.randn(3, 4)).square().mean().backward()
    optimizer.step()


def _build(name: str, model: nn.Module, **extra: Any) -> torch.optim.Optimizer:
    args = TrainingArgs(optimizer=name, lr_base=1e-2, **extra)
    return registry.load_factory(groups.OPTIMIZERS, name)(build_param_groups(model, args), args)


def test_all_six_optimizers_are_registered() -> None:
    assert {"AdamW", "TorchFusedAdamW", "TEFusedAdamW", "ApexFusedAdamW", "Adam", "SGD"} <= set(
        registry.names(groups.OPTIMIZERS))


@pytest.mark.parametrize(("name", "cls"), [("AdamW", torch.optim.AdamW), ("Adam", torch.optim.Adam),
                                           ("SGD", torch.optim.SGD)])
def test_torch_optimizers_read_their_flags(name: str, cls: type) -> None:
    optimizer = _build(name, Net(), adam_beta1=0.8, adam_beta2=0.95, adam_eps=1e-6, sgd_momentum=0.5,
                       weight_decay=0.1)
    assert type(optimizer) is cls
    group = optimizer.param_groups[0]
    if name == "SGD":
        assert group["momentum"] == 0.5
    else:
        assert group["betas"] == (0.8, 0.95) and group["eps"] == 1e-6
    assert group["weight_decay"] == 0.1 and group["lr"] == 1e-2


def test_torch_fused_adamw_is_fused_and_matches_adamw_on_cpu() -> None:
    torch.manual_seed(0)
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    fused, plain = _build("TorchFusedAdamW", a), _build("AdamW", b)
    assert fused.param_groups[0]["fused"] is True
    for _ in range(3):
        _step(fused, a)
        _step(plain, b)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def _validate(**training: Any) -> None:
    config = load_config(training={"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets",
                                   **training})
    validate_run_config(config, world_size=1)


def test_torch_fused_adamw_validates_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    _validate(optimizer="TorchFusedAdamW")  # CPU fused AdamW exists in this torch
    from embodied_core.trainer import checks

    monkeypatch.setattr(checks, "fused_adamw_devices", lambda: ["cuda"])
    with pytest.raises(ConfigError, match=r"TorchFusedAdamW: torch .* has no fused AdamW kernel for cpu"):
        _validate(optimizer="TorchFusedAdamW")


@pytest.mark.parametrize(("name", "package"), [("TEFusedAdamW", "transformer_engine"), ("ApexFusedAdamW", "apex")])
def test_te_and_apex_name_the_missing_package_at_validation(name: str, package: str) -> None:
    if registry.get_spec(groups.OPTIMIZERS, name).missing_requirements() == []:
        pytest.skip(f"{package} is installed here")
    with pytest.raises(ConfigError, match=rf"--optimizer {name}: needs the package\(s\) {package}, which are not "
                                          "installed"):
        _validate(optimizer=name)


@pytest.mark.parametrize(("name", "module"), [("TEFusedAdamW", "transformer_engine.pytorch.optimizers"),
                                              ("ApexFusedAdamW", "apex.optimizers")])
def test_te_and_apex_factories_use_fused_adam_in_adamw_mode(name: str, module: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    model = Net()
    with pytest.raises(ConfigError, match=f"--optimizer {name}: runs only on CUDA parameters"):
        _build(name, model)
    calls: list[dict[str, Any]] = []

    class FusedAdam(torch.optim.AdamW):  # records the call, then behaves like AdamW
        def __init__(self, params: Any, *, adam_w_mode: bool, **kwargs: Any) -> None:
            calls.append({"adam_w_mode": adam_w_mode, **kwargs})
            super().__init__(params, **kwargs)

    monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(FusedAdam=FusedAdam))
    monkeypatch.setattr(optimizers, "_require_cuda", lambda groups_, name_: None)
    optimizer = _build(name, model, adam_beta1=0.7, adam_eps=1e-7, weight_decay=0.2)
    assert isinstance(optimizer, FusedAdam)
    assert calls == [{"adam_w_mode": True, "lr": 1e-2, "betas": (0.7, 0.999), "eps": 1e-7, "weight_decay": 0.2}]


# ---------------------------------------------------------------- parameter groups
def _groups(model: nn.Module, **extra: Any) -> dict[str, dict[str, Any]]:
    built = build_param_groups(model, TrainingArgs(lr_base=1e-4, weight_decay=0.05, **extra))
    return {g["name"]: g for g in built}


def _names(model: nn.Module, group: dict[str, Any]) -> set[str]:
    ids = {id(p) for p in group["params"]}
    return {n for n, p in model.named_parameters() if id(p) in ids}


def test_default_is_one_group_with_lr_base_and_weight_decay() -> None:
    model = Net()
    built = _groups(model)
    assert list(built) == ["default"]
    assert built["default"]["lr"] == 1e-4 and built["default"]["weight_decay"] == 0.05
    assert len(built["default"]["params"]) == len(list(model.parameters()))


def test_lr_group_first_match_wins_child_before_parent() -> None:
    model = Net()
    built = _groups(model, lr_group="head.2=1e-2,head=1e-3")
    assert _names(model, built["head.2"]) == {"head.2.weight", "head.2.bias"}
    assert built["head.2"]["lr"] == 1e-2
    assert _names(model, built["head"]) == {"head.0.weight", "head.0.bias"}
    assert built["head"]["lr"] == 1e-3
    assert _names(model, built["default"]) == {n for n, _ in model.named_parameters() if not n.startswith("head")}
    assert "head.2" in format_group_table(built.values())


def test_lr_group_parent_before_child_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"'head.2': every parameter under it is already claimed by the earlier "
                                          r"entry 'head'; list the child before its parent"):
        _groups(Net(), lr_group="head=1e-3,head.2=1e-2")


def test_lr_group_unmatched_path_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"--lr-group 'haed': no module or parameter has this path.*did you mean "
                                          r"'head'") as info:
        _groups(Net(), lr_group="haed=1e-3,encoder.9=1e-2")
    assert "'encoder.9'" in str(info.value)  # every bad path is reported at once


def test_bias_norm_exempts_biases_norm_weights_and_no_weight_decay_names() -> None:
    model = Net()
    exempt = no_decay_names(model)
    assert exempt == {"encoder.0.bias", "encoder.1.weight", "encoder.1.bias", "encoder.2.bias", "head.0.bias",
                      "head.2.bias", "pos_embed"}
    built = _groups(model, weight_decay_grouping="bias_norm", lr_group="head=1e-3")
    assert _names(model, built["head (no decay)"]) == {"head.0.bias", "head.2.bias"}
    assert built["head (no decay)"]["weight_decay"] == 0.0 and built["head (no decay)"]["lr"] == 1e-3
    assert _names(model, built["default"]) == {"encoder.0.weight", "encoder.2.weight"}
    assert built["default"]["weight_decay"] == 0.05


def test_frozen_parameters_stay_out_of_the_optimizer() -> None:
    model = Net()
    model.encoder.requires_grad_(False)
    built = _groups(model)
    assert _names(model, built["default"]) == {n for n, _ in model.named_parameters() if not n.startswith("encoder")}
