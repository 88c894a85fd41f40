"""Entry-point specs of LingBot-VA (light: no torch, no diffusers)."""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec, PluginSpec
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig

__all__ = ["LINGBOT_VA_LIBERO", "LINGBOT_VA_ROBOTWIN", "LINGBOT_VA_STRATEGY", "LINGBOT_VA_TINY", "LINGBOT_VA_TRAINER",
           "PRECOMPUTE_COMMAND"]

_FACTORY = "embodied_models.lingbot_va.modeling:build_model"
_TRANSFORMS = "embodied_models.lingbot_va.transforms:make_transforms"
_REQUIRES = ("diffusers",)
_HINT = "pip install 'diffusers>=0.35'"


def _spec(name: str, description: str) -> ModelSpec:
    return ModelSpec(name=name, description=description, factory=_FACTORY, model_config=LingBotVAModelConfig,
                     data_config=LingBotVADataConfig, default_yaml=f"embodied_models.lingbot_va:{name}.yaml",
                     transforms=_TRANSFORMS, requires=_REQUIRES, install_hint=_HINT,
                     checks=("embodied_models.lingbot_va.config:check_run_config",),
                     policy="embodied_models.lingbot_va.policy:LingBotVAPolicy", needs_task=True)


LINGBOT_VA_LIBERO = _spec("lingbot_va_libero", "LingBot-VA 5B video-action model, LIBERO layout (2 cameras side by "
                          "side, 7 action channels)")
LINGBOT_VA_ROBOTWIN = _spec("lingbot_va_robotwin", "LingBot-VA 5B video-action model, RoboTwin layout (T-shaped "
                            "head + wrist cameras, 16 action channels)")
LINGBOT_VA_TINY = _spec("lingbot_va_tiny", "LingBot-VA with a 2-block toy transformer for CPU tests")

LINGBOT_VA_TRAINER = PluginSpec(name="lingbot_va",
                                description="FinetuneTrainer that also seeds and checkpoints the LingBot-VA model's "
                                "own RNG", factory="embodied_models.lingbot_va.trainer:build_trainer")

LINGBOT_VA_STRATEGY = PluginSpec(name="lingbot_va",
                                 description="LeRobot actions + cached Wan2.2 VAE latents and UMT5 text embeddings",
                                 factory="embodied_models.lingbot_va.data:build_strategy",
                                 checks=("embodied_models.lingbot_va.config:check_strategy_model",))

PRECOMPUTE_COMMAND = PluginSpec(name="data-precompute-latents",
                                description="`embodied data precompute-latents`: Wan2.2 VAE latents + UMT5 text "
                                "embeddings of a LeRobot dataset for LingBot-VA",
                                factory="embodied_models.lingbot_va.precompute:main")
