"""Entry-point specs (light: importing this module imports no torch)."""

from __future__ import annotations

from embodied_core.registry import ModelSpec, PluginSpec
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig

TINY_FLOW_POLICY = ModelSpec(
    name="tiny_flow_policy",
    description="CNN image encoder + MLP flow-matching action-chunk head (~130k parameters)",
    factory="embodied_plugin_template.modeling:build_model",
    model_config=TinyFlowPolicyConfig,
    data_config=TinyFlowDataConfig,
)

LION = PluginSpec(name="Lion", description="Lion optimizer (sign of interpolated momentum)",
                  factory="embodied_plugin_template.optim:build_lion")
