"""The model-plugin protocol: a third-party model lacking a member (or returning another type than the declared
one) is an error naming the plugin and each member, right after it is built; the first-party models implement it
with one return type each; core calls the members directly (no optional-member probing in the seams)."""

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
from embodied_core.registry import ModelSpec, groups
from embodied_core.trainer.model_check import check_model_plugin
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
    """Every member present, but ``no_weight_decay`` returns a list."""

    def sample_actions(self, batch: Any, noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        return self.linear(batch["observation.state"].float())[:, None]

    def no_weight_decay(self) -> list[str]:  # type: ignore[override]
        return ["linear.bias"]


HERE = "tests.core.test_model_protocol"  # importable from the repository root, also by the CLI subprocess
SPECS = {name: ModelSpec(name=name, description="third-party test model", factory=f"{HERE}:{cls}",
                         model_config=TinyFlowPolicyConfig, data_config=TinyFlowDataConfig)
         for name, cls in (("forward_only", "ForwardOnly"), ("list_decay", "ListDecay"))}
FORWARD_ONLY = SPECS["forward_only"]
"""The spec EMBODIED_PLUGINS names (one spec per entry)."""

_MISSING = ("sample_actions, fsdp_units, no_weight_decay, load_pretrained_checkpoint, default_lora_targets, "
            "init_module_weights")


def _train(out: Path, model_name: str) -> Any:
    from embodied_core.trainer.api import Trainer

    data = {"camera_keys": ["observation.images.front"], "state_dim": 8, "action_dim": 8}
    return Trainer({"training": training(out, model_name=model_name, train_iters=1), "data": data}).train()


@pytest.fixture
def third_party() -> Any:
    for name, spec in SPECS.items():
        registry.register(groups.MODELS, name, spec, replace=True)
    yield
    for name in SPECS:
        registry.unregister(groups.MODELS, name)


def test_a_model_lacking_members_is_an_error_naming_each(third_party: Any, tmp_path: Path) -> None:
    with pytest.raises(PluginError) as info:
        _train(tmp_path / "a", "forward_only")
    message = str(info.value)
    assert "--model-name forward_only" in message and "(ForwardOnly)" in message
    assert f"lacks {_MISSING} of the model-plugin protocol" in message
    assert "subclass embodied_core.EmbodiedModel" in message
    assert not (tmp_path / "a" / "checkpoints").exists()


def test_a_member_returning_another_type_is_an_error(third_party: Any, tmp_path: Path) -> None:
    with pytest.raises(PluginError, match=r"--model-name list_decay: .*no_weight_decay\(\) returned a list, the "
                                          r"protocol declares frozenset"):
        _train(tmp_path, "list_decay")


@pytest.mark.timeout(120)
def test_cli_names_the_plugin_and_members_with_exit_2(tmp_path: Path) -> None:
    env = clean_env(EMBODIED_PLUGINS=f"models:forward_only={HERE}:FORWARD_ONLY")
    result = run_embodied("train", "--model-name", "forward_only", "--dataset-format", "dummy_datasets",
                          "--num-samples", "8", "--train-iters", "1", "--per-device-batch-size", "4",
                          "--output-dir", str(tmp_path), "data.state_dim=8", "data.action_dim=8",
                          "data.camera_keys=[observation.images.front]", env=env, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"lacks {_MISSING}" in result.stderr and "Traceback" not in result.stderr


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
