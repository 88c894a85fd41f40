"""Entry-point specs (light: importing this module imports no torch)."""

from __future__ import annotations

from embodied_core.registry import ModelSpec, PluginSpec
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig
from embodied_plugin_template.csv_logger import CsvMetricsOptions
from embodied_plugin_template.schedules import WarmupStableDecayOptions

TINY_FLOW_POLICY = ModelSpec(
    name="tiny_flow_policy",
    description="CNN image encoder + MLP flow-matching action-chunk head (~130k parameters)",
    factory="embodied_plugin_template.modeling:build_model",
    model_config=TinyFlowPolicyConfig,
    data_config=TinyFlowDataConfig,
    # the plugin-API versions this package is written for: another embodied-core refuses it with a clear message
    requires_api=">=1.1,<2",
)

LION = PluginSpec(name="Lion", description="Lion optimizer (sign of interpolated momentum)",
                  factory="embodied_plugin_template.optim:build_lion")

WARMUP_STABLE_DECAY = PluginSpec(
    name="warmup_stable_decay",
    description="warmup, plateau at the peak LR, decay to --min-lr over the last plugins.<name>.decay_fraction",
    factory="embodied_plugin_template.schedules:build_warmup_stable_decay",
    options=WarmupStableDecayOptions,
    checks=("embodied_plugin_template.checks:check_warmup_stable_decay",),
)

CSV_METRICS = PluginSpec(name="csv_metrics", description="step,metric,value rows in <output-dir>/<filename> (off "
                         "until plugins.csv_metrics.filename is set)",
                         factory="embodied_plugin_template.csv_logger:build_csv_metrics", options=CsvMetricsOptions)
