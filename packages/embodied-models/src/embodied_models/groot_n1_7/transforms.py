"""GR00T N1.7 data pipeline: sample dict -> model inputs (in workers) -> collate -> GrootBatch.

Per sample (Isaac-GR00T ``Gr00tN1d7Processor`` semantics; lerobot 0.6.1 ``processor_groot.py`` for N1.7):

1. views: every ``data.camera_keys`` camera (``video.<name>`` of the groot_n1_7 strategy, or a plain camera key)
   with all its ``data.image_history`` frames, each resized / centre-cropped to ``data.image_size``
   (:mod:`.images`), ordered frame-major then camera (as GR00T stacks ``(T, V)``); uint8 across the worker boundary.
2. prompt: the instruction ``sample[data.language_key]`` (lower-cased, punctuation removed with
   ``data.formalize_language``) after one image entry per view in a single user turn of the Qwen3-VL chat template,
   image placeholders expanded to the views' token counts (:mod:`.processor`).
3. state / actions: normalized per dimension with the dataset statistics core hands to ``make_transforms``
   (``percentile`` = GR00T's ``use_percentiles``: [q01, q99] -> [-1, 1], clipped; :mod:`.normalize`), the state
   zero-padded to ``model.max_state_dim`` ([1, S]); actions zero-padded to ``model.max_action_dim`` and to
   ``model.action_horizon`` steps, with ``action_mask`` = 1 on the real dims of the ``data.action_horizon`` data
   steps (steps past the episode end too, unless ``data.mask_padded_actions``).
4. embodiment slot from ``data.embodiment_tag`` (or ``data.embodiment_id``), the sample's dataset ``index``.

``postprocess_actions`` keeps the data horizon and the real dims and unnormalizes (clipping to [-1, 1] first, as
GR00T's decoder does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from embodied_core.errors import ConfigError
from embodied_core.model_api import Transforms
from embodied_models.groot.transform import (
    GrootCollateBase,
    GrootPromptTransform,
    camera_candidates,
    formalize,
    groot_transforms,
    make_normalizers,
    require_camera_keys,
)
from embodied_models.groot_n1_7.batch import GrootBatch
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.embodiments import embodiment_slot
from embodied_models.groot_n1_7.positions import mrope_positions
from embodied_models.groot_n1_7.processor import check_compatible, load_processor

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["GrootCollate", "GrootSampleTransform", "camera_candidates", "formalize", "make_transforms"]


class GrootSampleTransform(GrootPromptTransform):
    """The per-sample transform (picklable: runs in DataLoader workers); also takes inference observations
    (the same keys without ``action``). Views, state, actions, the instruction and the prompt ids:
    ``embodied_models.groot.transform`` (shared with N1.6); the prompt: the Qwen3-VL processor.

    Args:
        model_config, data_config: the run's sections.
        processor: the Qwen3-VL prompt processor.
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
    """

    model_label = "GR00T N1.7"
    embodiment_slot = staticmethod(embodiment_slot)


class GrootCollate(GrootCollateBase):
    """Stacks transformed samples into a GrootBatch, left-padding the prompts and computing their multimodal RoPE
    positions (picklable; runs in the DataLoader workers).

    Args:
        pad_token_id, image_token_id: the processor's padding and image placeholder ids.
        grid: merged token grid (rows, cols) of one view.
    """

    batch_class = GrootBatch

    def __init__(self, pad_token_id: int, image_token_id: int, grid: tuple[int, int]) -> None:
        super().__init__(pad_token_id, image_token_id)
        self.grid = tuple(grid)

    def extra_fields(self, attention_mask: torch.Tensor, image_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """``position_ids``: the multimodal RoPE positions of the left-padded prompts."""
        return {"position_ids": mrope_positions(attention_mask, image_mask, self.grid)}


def make_transforms(model_config: GrootModelConfig, data_config: GrootDataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the groot_n1_7 plugins (``ModelSpec.transforms``).

    ``stats`` are the dataset's statistics (resolved by core, or a policy folder's copy). The processor comes from
    ``data.tokenizer_path`` / ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.processor=tiny`` uses the
    built-in one when neither is set. Its patch/merge sizes, pixel statistics and vocabulary must fit the model.
    """
    require_camera_keys(data_config, "GR00T N1.7")
    processor = load_processor(model_config.processor, data_config.resolved_tokenizer_path())
    problems = check_compatible(processor, patch_size=model_config.vision_patch_size,
                                merge_size=model_config.vision_merge_size,
                                temporal_patch_size=model_config.vision_temporal_patch_size,
                                image_mean=model_config.image_mean, image_std=model_config.image_std,
                                vocab_size=model_config.vocab_size, image_size=tuple(data_config.image_size))
    if problems:
        raise ConfigError(problems)
    state_norm, action_norm = make_normalizers(data_config, stats)
    transform = GrootSampleTransform(model_config, data_config, processor, state_norm, action_norm)
    step = model_config.vision_patch_size * model_config.vision_merge_size
    grid = (data_config.image_size[0] // step, data_config.image_size[1] // step)
    return groot_transforms(transform, GrootCollate(processor.pad_token_id, processor.image_token_id, grid))
