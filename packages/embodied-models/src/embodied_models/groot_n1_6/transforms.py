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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from embodied_core.errors import ConfigError
from embodied_core.model_api import Transforms
from embodied_models.groot.normalize import GrootNormalizer
from embodied_models.groot.transform import GrootSampleTransformBase, make_normalizers
from embodied_models.groot_n1_6.batch import GrootN16Batch
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.embodiments import embodiment_slot
from embodied_models.groot_n1_6.processor import EagleProcessor, check_compatible, load_processor

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["GrootN16Collate", "GrootN16SampleTransform", "make_transforms"]


class GrootN16SampleTransform(GrootSampleTransformBase):
    """The per-sample transform (picklable: runs in DataLoader workers); also takes inference observations
    (the same keys without ``action``).

    Args:
        model_config, data_config: the run's sections.
        processor: the Eagle3 prompt processor.
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
    """

    model_label = "GR00T N1.6"

    def __init__(self, model_config: GrootN16ModelConfig, data_config: GrootN16DataConfig,
                 processor: EagleProcessor, state_norm: GrootNormalizer | None,
                 action_norm: GrootNormalizer | None) -> None:
        super().__init__(model_config, data_config, state_norm, action_norm,
                         slot=embodiment_slot(data_config.embodiment_tag, data_config.embodiment_id))
        self.processor = processor
        self.tokens_per_image = processor.tokens_per_image(*data_config.image_size)

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        images = self.views(sample)
        text = self.instruction(sample)
        ids = self.processor.prompt_ids(text, num_images=images.shape[0], tokens_per_image=self.tokens_per_image)
        return {"images": images, "input_ids": torch.tensor(ids, dtype=torch.long), **self.common_fields(sample)}


class GrootN16Collate:
    """Stacks transformed samples into a GrootN16Batch, left-padding the prompts (picklable; runs in the
    DataLoader workers).

    Args:
        pad_token_id, image_token_id: the processor's padding and ``<IMG_CONTEXT>`` ids.
    """

    def __init__(self, pad_token_id: int, image_token_id: int) -> None:
        self.pad_token_id = pad_token_id
        self.image_token_id = image_token_id

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> GrootN16Batch:
        length = max(int(s["input_ids"].shape[0]) for s in samples)
        ids = torch.full((len(samples), length), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(samples), length, dtype=torch.bool)
        for row, s in enumerate(samples):
            n = int(s["input_ids"].shape[0])
            ids[row, length - n:] = s["input_ids"]
            mask[row, length - n:] = True
        has_actions = "actions" in samples[0]
        return GrootN16Batch(
            images=torch.stack([s["images"] for s in samples]), input_ids=ids, attention_mask=mask,
            image_mask=(ids == self.image_token_id) & mask, state=torch.stack([s["state"] for s in samples]),
            embodiment_id=torch.stack([s["embodiment_id"] for s in samples]),
            actions=torch.stack([s["actions"] for s in samples]) if has_actions else None,
            action_mask=torch.stack([s["action_mask"] for s in samples]) if has_actions else None,
            sample_index=torch.stack([s["sample_index"] for s in samples]))


def make_transforms(model_config: GrootN16ModelConfig, data_config: GrootN16DataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the groot_n1_6 plugins (``ModelSpec.transforms``).

    ``stats`` are the dataset's statistics (resolved by core, or a policy folder's copy). The processor comes from
    ``data.tokenizer_path`` / ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.processor=tiny`` uses the
    built-in one when neither is set. Its image-token size, pixel statistics and vocabulary must fit the model.
    """
    if data_config.camera_keys is None:
        raise ConfigError(["data.camera_keys is not set; GR00T N1.6 needs its views named (data.camera_keys=[...])"])
    processor = load_processor(model_config.processor, data_config.resolved_tokenizer_path())
    problems = check_compatible(processor, patch_size=model_config.vision_patch_size,
                                image_mean=model_config.image_mean, image_std=model_config.image_std,
                                vocab_size=model_config.vocab_size, image_size=tuple(data_config.image_size))
    if problems:
        raise ConfigError(problems)
    state_norm, action_norm = make_normalizers(data_config, stats)
    transform = GrootN16SampleTransform(model_config, data_config, processor, state_norm, action_norm)
    return Transforms(sample_transform=transform,
                      collate_fn=GrootN16Collate(processor.pad_token_id, processor.image_token_id),
                      postprocess_actions=transform.unnormalize_actions)
