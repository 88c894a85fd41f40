"""The model-plugin protocol: only ``forward`` is required (``sample_actions`` too for a policy), the optional
members get core's defaults on any model (a plain ``nn.Module`` trains), a missing required member or a mistyped
one is an error naming the plugin and the member right after it is built; the first-party models implement it with
one return type each; core calls the members directly (no optional-member probing in the seams)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig
from torch import nn

from embodied_core import EmbodiedModel, ModelOutput, registry
from embodied_core.errors import PluginError
from embodied_core.protocols import MODEL_MEMBERS, OPTIONAL_MODEL_MEMBERS, missing_members
from embodied_core.registry import ModelSpec, groups
from embodied_core.trainer.model_check import adapt_model, check_model_plugin
from tests.core.trainer_support import training
from tests.support import REPO_ROOT, clean_env, run_embodied


class ForwardOnly(nn.Module):
    """A third-party model written against nn.Module only."""

    def __init__(self, config: Any, data: Any) -> None:
        super().__init__()
        self.linear = nn.Linear(data.state_dim, data.action_dim)

    def forward(self, batch: Any) -> ModelOutput:
        return ModelOutput(loss=self.linear(batch["observation.state"].float()).square().mean())


class ListDecay(EmbodiedModel, ForwardOnly):
    """Every member present, but ``no_weight_decay`` returns a list (as API 1.0 plugins did)."""

    def sample_actions(self, batch: Any, noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        return self.linear(batch["observation.state"].float())[:, None]

    def no_weight_decay(self) -> list[str]:  # type: ignore[override]
        return ["linear.bias"]


class StrDecay(ListDecay):
    """``no_weight_decay`` returns a string: no container to convert."""

    def no_weight_decay(self) -> str:  # type: ignore[override]
        return "linear.bias"


class NoForward(nn.Module):
    """Samples actions but defines no training forward."""

    def __init__(self, config: Any, data: Any) -> None:
        super().__init__()
        self.linear = nn.Linear(data.state_dim, data.action_dim)

    def sample_actions(self, batch: Any, noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        return self.linear(batch["observation.state"].float())[:, None]


HERE = "tests.core.test_model_protocol"  # importable from the repository root, also by the CLI subprocess
SPECS = {name: ModelSpec(name=name, description="third-party test model", factory=f"{HERE}:{cls}",
                         model_config=TinyFlowPolicyConfig, data_config=TinyFlowDataConfig)
         for name, cls in (("forward_only", "ForwardOnly"), ("list_decay", "ListDecay"), ("str_decay", "StrDecay"),
                           ("no_forward", "NoForward"))}
NO_FORWARD = SPECS["no_forward"]
"""The spec EMBODIED_PLUGINS names (one spec per entry)."""

_DATA = {"camera_keys": ["observation.images.front"], "state_dim": 8, "action_dim": 8}


def _train(out: Path, model_name: str, **extra: Any) -> Any:
    from embodied_core.trainer.api import Trainer

    return Trainer({"training": training(out, model_name=model_name, train_iters=1, **extra), "data": _DATA}).train()


@pytest.fixture
def third_party() -> Any:
    for name, spec in SPECS.items():
        registry.register(groups.MODELS, name, spec, replace=True)
    yield
    for name in SPECS:
        registry.unregister(groups.MODELS, name)


def test_a_plain_module_gets_the_defaults_of_the_optional_members() -> None:
    model = ForwardOnly(None, TinyFlowDataConfig(**_DATA))
    assert missing_members(model, OPTIONAL_MODEL_MEMBERS) == list(OPTIONAL_MODEL_MEMBERS)
    assert adapt_model(model, model_name="forward_only") is model
    assert isinstance(model, ForwardOnly) and type(model).__name__ == "ForwardOnly"
    assert missing_members(model, MODEL_MEMBERS) == []
    assert (model.fsdp_units(), model.no_weight_decay(), model.default_lora_targets()) == ((), frozenset(), ())
    before = model.linear.weight.detach().clone()
    model.init_module_weights(model.linear)  # torch's reset_parameters, as EmbodiedModel's default
    assert not torch.equal(before, model.linear.weight)
    with pytest.raises(PluginError, match="ForwardOnly implements no sample_actions, which inference needs"):
        model.sample_actions({})
    with pytest.raises(PluginError, match=r"lacks sample_actions .* requires forward, sample_actions"):
        adapt_model(ForwardOnly(None, TinyFlowDataConfig(**_DATA)), model_name="forward_only", policy=True)
    assert type(adapt_model(ForwardOnly(None, TinyFlowDataConfig(**_DATA)), model_name="forward_only")) \
        is type(model)  # one adapted class per plugin class


def test_a_plain_module_trains_and_is_refused_as_a_policy(third_party: Any, tmp_path: Path) -> None:
    from embodied_core import load_policy

    result = _train(tmp_path, "forward_only", save_interval=1)
    assert result.step == 1 and result.checkpoint is not None and "loss" in result.last_metrics
    with pytest.raises(PluginError, match=r"--model-name forward_only: .*\(ForwardOnly\) lacks sample_actions"):
        load_policy(tmp_path)


def test_a_model_without_forward_is_an_error_naming_it(third_party: Any, tmp_path: Path) -> None:
    with pytest.raises(PluginError) as info:
        _train(tmp_path / "a", "no_forward")
    message = str(info.value)
    assert "--model-name no_forward" in message and "(NoForward)" in message
    assert "lacks forward of the model-plugin protocol" in message and "are optional, with core's defaults" in message
    assert not (tmp_path / "a" / "checkpoints").exists()


def test_a_list_is_converted_with_a_warning_and_another_type_is_an_error(third_party: Any, tmp_path: Path) -> None:
    with pytest.warns(FutureWarning, match=r"--model-name list_decay: .*no_weight_decay\(\) returned a list; the "
                                           r"model-plugin protocol declares frozenset"):
        model = adapt_model(ListDecay(None, TinyFlowDataConfig(**_DATA)), model_name="list_decay")
    assert model.no_weight_decay() == frozenset({"linear.bias"})
    with pytest.raises(PluginError, match=r"--model-name str_decay: .*no_weight_decay\(\) returned a str, the "
                                          r"protocol declares frozenset"):
        _train(tmp_path, "str_decay")


@pytest.mark.timeout(120)
def test_cli_names_the_plugin_and_members_with_exit_2(tmp_path: Path) -> None:
    env = clean_env(EMBODIED_PLUGINS=f"models:no_forward={HERE}:NO_FORWARD")
    result = run_embodied("train", "--model-name", "no_forward", "--dataset-format", "dummy_datasets",
                          "--num-samples", "8", "--train-iters", "1", "--per-device-batch-size", "4",
                          "--output-dir", str(tmp_path), "data.state_dim=8", "data.action_dim=8",
                          "data.camera_keys=[observation.images.front]", env=env, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "(NoForward) lacks forward" in result.stderr and "Traceback" not in result.stderr


def _linear_names(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]


def test_first_party_models_implement_the_protocol_with_their_lora_targets() -> None:
    from embodied_plugin_template.modeling import build_model as build_flow

    from embodied_core.config.resolve import load_config
    from embodied_models.lingbot_va.modeling import build_model as build_lingbot
    from embodied_models.pi05.modeling import build_model as build_pi05

    pi05_config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"},
                              data={"camera_keys": ["observation.images.front"], "state_dim": 2, "action_dim": 2})
    lingbot_config = load_config(training={"model_name": "lingbot_va_tiny"})
    flow_config = load_config(training={"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets"},
                              data={"camera_keys": ["observation.images.front"], "state_dim": 2, "action_dim": 2})
    torch.manual_seed(0)
    models = {"pi05_tiny": build_pi05(pi05_config.model, pi05_config.data),
              "lingbot_va_tiny": build_lingbot(lingbot_config.model, lingbot_config.data),
              "tiny_flow_policy": build_flow(flow_config.model, flow_config.data)}
    for name, model in models.items():
        check_model_plugin(model, model_name=name)
        assert isinstance(model, EmbodiedModel)
        assert model.no_weight_decay() <= {n for n, _ in model.named_parameters()}
    assert models["tiny_flow_policy"].default_lora_targets() == ()
    for name in ("pi05_tiny", "lingbot_va_tiny"):
        linears = _linear_names(models[name])
        targets = models[name].default_lora_targets()
        for pattern in targets:  # each pattern adapts at least one projection of every block
            assert fnmatch.filter(linears, pattern), (name, pattern)
        adapted = {n for n in linears if any(fnmatch.fnmatch(n, p) for p in targets)}
        assert not any(n.startswith("vision_tower") or "embedder" in n or "proj_out" in n for n in adapted), name
    pi05_adapted = [n for n in _linear_names(models["pi05_tiny"])
                    if any(fnmatch.fnmatch(n, p) for p in models["pi05_tiny"].default_lora_targets())]
    assert {"layers.0.vlm.self_attn.q_proj", "layers.0.expert.mlp.down_proj"} <= set(pi05_adapted)


SEAMS = ["packages/embodied-core/src/embodied_core/trainer/base.py",
         "packages/embodied-core/src/embodied_core/trainer/components.py",
         "packages/embodied-core/src/embodied_core/optim/param_groups.py",
         "packages/embodied-core/src/embodied_core/data/streaming.py",
         "packages/embodied-core/src/embodied_core/data/loader.py",
         "packages/embodied-dist/src/embodied_dist/wrap.py",
         "packages/embodied-dist/src/embodied_dist/fsdp.py",
         "packages/embodied-models/src/embodied_models/pi05/transforms.py",
         "packages/embodied-models/src/embodied_models/lingbot_va/transforms.py"]
MEMBERS = ("forward", "sample_actions", "fsdp_units", "no_weight_decay", "load_pretrained_checkpoint",
           "default_lora_targets", "init_module_weights", "root", "episodes", "stats", "features", "fps",
           "episode_ranges", "meta")


def test_no_probe_of_a_protocol_member_is_left_in_the_seams() -> None:
    """In addition to the behavioural tests above: the seams call the declared members, never probe them."""
    probe = re.compile(r"""(?:getattr|hasattr)\(\s*[\w.]+\s*,\s*["'](\w+)["']""")
    found = [(path, name) for path in SEAMS for name in probe.findall((REPO_ROOT / path).read_text())
             if name in MEMBERS]
    assert found == []
