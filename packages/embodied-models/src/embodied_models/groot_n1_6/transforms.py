"""GR00T N1.6 data pipeline: sample dict -> model inputs (in workers) -> collate -> GrootN16Batch.

Per sample (LoongForge ``GrootN1d6FeatureTransform`` + ``Gr00tN1d6DataCollator`` semantics, ``c6275661``): the
views, the instruction, the padded state and actions, the embodiment slot and the dataset index as
``embodied_models.groot.transform`` builds them for both GR00T ports (N1.6's default normalization is min-max, its
StateActionProcessor default, and its views 252 x 252); the prompt is the Eagle3 chat template of one user turn
``[instruction, view, view, ...]`` with each view's ``<image k><img><IMG_CONTEXT> x n</img>`` span
(:mod:`.processor`). The collate function left-pads the prompts and marks the image tokens.

``postprocess_actions`` keeps the data horizon and the real dims and unnormalizes (clipping to [-1, 1] first, as
LoongForge's ``unapply_action``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from embodied_core.errors import ConfigError
from embodied_core.model_api import Transforms
from embodied_models.groot.transform import (
    GrootCollateBase,
    GrootPromptTransform,
    groot_transforms,
    make_normalizers,
    require_camera_keys,
)
from embodied_models.groot_n1_6.batch import GrootN16Batch
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.embodiments import embodiment_slot
from embodied_models.groot_n1_6.processor import check_compatible, load_processor

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["GrootN16Collate", "GrootN16SampleTransform", "make_transforms"]


class GrootN16SampleTransform(GrootPromptTransform):
    """The per-sample transform (picklable: runs in DataLoader workers); also takes inference observations
    (the same keys without ``action``). Views, state, actions, the instruction and the prompt ids:
    ``embodied_models.groot.transform`` (shared with N1.7); the prompt: the Eagle3 processor.

    Args:
        model_config, data_config: the run's sections.
        processor: the Eagle3 prompt processor.
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
    """

    model_label = "GR00T N1.6"
    embodiment_slot = staticmethod(embodiment_slot)


class GrootN16Collate(GrootCollateBase):
    """Stacks transformed samples into a GrootN16Batch, left-padding the prompts (picklable; runs in the
    DataLoader workers).

    Args:
        pad_token_id, image_token_id: the processor's padding and ``<IMG_CONTEXT>`` ids.
    """

    batch_class = GrootN16Batch


def make_transforms(model_config: GrootN16ModelConfig, data_config: GrootN16DataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the groot_n1_6 plugins (``ModelSpec.transforms``).

    ``stats`` are the dataset's statistics (resolved by core, or a policy folder's copy). The processor comes from
    ``data.tokenizer_path`` / ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.processor=tiny`` uses the
    built-in one when neither is set. Its image-token size, pixel statistics and vocabulary must fit the model.
    """
    require_camera_keys(data_config, "GR00T N1.6")
    processor = load_processor(model_config.processor, data_config.resolved_tokenizer_path())
    problems = check_compatible(processor, patch_size=model_config.vision_patch_size,
                                image_mean=model_config.image_mean, image_std=model_config.image_std,
                                vocab_size=model_config.vocab_size, image_size=tuple(data_config.image_size))
    if problems:
        raise ConfigError(problems)
    state_norm, action_norm = make_normalizers(data_config, stats)
    transform = GrootN16SampleTransform(model_config, data_config, processor, state_norm, action_norm)
    return groot_transforms(transform, GrootN16Collate(processor.pad_token_id, processor.image_token_id))
