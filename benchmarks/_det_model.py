"""``tiny_flow_det`` for the benchmarks: tiny_flow_policy with noise and flow time drawn per sample.

The plain model draws them from the global RNG for the whole micro-batch, so a batch split over ranks gets other
noise than the same batch in one process. Drawing per sample from its dataset index makes the loss of a global
batch independent of how it is split: what the GPU parity check compares. (Benchmarks never import from tests/;
the distributed tests use this model through ``tests/dist/_det_model.py``.)
"""

from __future__ import annotations

from typing import Any

import torch
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig
from embodied_plugin_template.modeling import TinyFlowPolicy

from embodied_core import ModelOutput
from embodied_core.registry import ModelSpec

__all__ = ["NAME", "SPEC", "TinyFlowDet"]

NAME = "tiny_flow_det"


class TinyFlowDet(TinyFlowPolicy):
    """Same network and loss as tiny_flow_policy; noise and t depend only on the sample index.

    Observations are normalized in the norm's own dtype, so the model also trains with bf16 parameters
    (``--zero-master-param-dtype fp32``): CPU autocast does not upcast layer_norm the way CUDA's does.
    """

    def encode(self, batch: dict[str, Any]) -> torch.Tensor:
        features = [self.encoder(batch[key].float() / 127.5 - 1.0) for key in self.data.camera_keys]
        obs = torch.cat([*features, batch[self.data.state_key].float()], dim=-1)
        return self.obs_norm(obs.to(self.obs_norm.weight.dtype))

    def forward(self, batch: dict[str, Any]) -> ModelOutput:
        actions = batch[self.data.action_key].float()
        noise = torch.empty_like(actions)
        t = torch.empty(actions.shape[0], device=actions.device)
        for row, index in enumerate(batch["index"].tolist()):
            generator = torch.Generator().manual_seed(1000 + int(index))
            noise[row] = torch.randn(actions.shape[1:], generator=generator)
            t[row] = torch.rand((), generator=generator)
        obs = self.encode(batch)
        x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
        error = (self.velocity(obs, x_t, t) - (noise - actions)) ** 2
        weight = (~batch[f"{self.data.action_key}_is_pad"]).float()[..., None]
        loss = (error * weight).sum() / (weight.sum() * actions.shape[-1]).clamp(min=1.0)
        return ModelOutput(loss=loss, metrics={"action_mse": loss.detach()})


def build(config: TinyFlowPolicyConfig, data: TinyFlowDataConfig) -> TinyFlowDet:
    """Factory of :data:`SPEC`."""
    return TinyFlowDet(config, data)


SPEC = ModelSpec(name=NAME, description="tiny_flow_policy with per-sample noise (benchmarks)",
                 factory=f"{__name__}:build", model_config=TinyFlowPolicyConfig, data_config=TinyFlowDataConfig)
