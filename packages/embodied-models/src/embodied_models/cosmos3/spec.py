"""Entry-point specs of the Cosmos3 plugins (``embodied.models``: ``cosmos3_nano``, ``cosmos3_tiny``). No torch."""

from __future__ import annotations

from embodied_core.registry import ModelSpec
from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.data.config import Cosmos3DataConfig

__all__ = ["COSMOS3_NANO", "COSMOS3_TINY"]


def _spec(name: str, description: str) -> ModelSpec:
    return ModelSpec(name=name, description=description, factory="embodied_models.cosmos3.modeling:build_model",
                     model_config=Cosmos3ModelConfig, data_config=Cosmos3DataConfig,
                     default_yaml=f"embodied_models.cosmos3:{name}.yaml",
                     transforms="embodied_models.cosmos3.transforms:make_transforms",
                     requires=("diffusers", "transformers"), install_hint="pip install 'diffusers>=0.42' "
                     "'transformers>=5.24,<5.25'", uses_flags=("tokenizer_path",),
                     checks=("embodied_models.cosmos3.checks:check_run_config",), needs_task=True)


COSMOS3_NANO = _spec("cosmos3_nano", "NVIDIA Cosmos3 action policy on DROID (Qwen3-VL-8B mixture of transformers + "
                     "Wan2.2 VAE encoder, ~15.2B transformer params); needs --tokenizer-path and model.vae_path")
COSMOS3_TINY = _spec("cosmos3_tiny", "Cosmos3 architecture at CPU size (2 layers of width 32, 8-channel VAE) for "
                     "tests and demos; needs --tokenizer-path (a Qwen3-VL-style tokenizer with a chat template)")
