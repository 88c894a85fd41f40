"""Entry-point specs of the FastWAM model (light: no torch, no diffusers)."""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec, PluginSpec
from embodied_models.fastwam.config import FastWAMModelConfig
from embodied_models.fastwam.data.config import FastWAMDataConfig

__all__ = ["FASTWAM", "FASTWAM_TINY", "INIT_ACTION_DIT_COMMAND"]

_FACTORY = "embodied_models.fastwam.modeling:build_model"
_TRANSFORMS = "embodied_models.fastwam.data.transforms:make_transforms"
_REQUIRES = ("diffusers", "transformers")
_HINT = "pip install 'diffusers>=0.42,<0.43' 'transformers>=5.24,<5.25'"


def _spec(name: str, description: str) -> ModelSpec:
    return ModelSpec(name=name, description=description, factory=_FACTORY, model_config=FastWAMModelConfig,
                     data_config=FastWAMDataConfig, default_yaml=f"embodied_models.fastwam:{name}.yaml",
                     transforms=_TRANSFORMS, requires=_REQUIRES, install_hint=_HINT,
                     checks=("embodied_models.fastwam.config:check_run_config",),
                     policy="embodied_models.fastwam.policy:FastWAMPolicy", needs_task=True)


FASTWAM = _spec("fastwam", "FastWAM 6B world-action model: Wan2.2-TI2V-5B video DiT + 1B action DiT joined per layer "
                "(mixture of transformers), video and action flow matching")
FASTWAM_TINY = _spec("fastwam_tiny", "FastWAM with 2-layer toy experts and a tiny random Wan VAE for CPU tests")

INIT_ACTION_DIT_COMMAND = PluginSpec(
    name="checkpoint-init-fastwam-action-dit",
    description="`embodied checkpoint init-fastwam-action-dit`: a FastWAM action-DiT backbone interpolated from a "
    "Wan2.2 video DiT", factory="embodied_models.fastwam.init_action_dit:main")
