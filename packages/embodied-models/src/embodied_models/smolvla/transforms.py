"""SmolVLA data pipeline: sample dict -> model inputs (in workers) -> collate -> SmolVLAPreparedBatch.

Per sample (lerobot ``processor_smolvla.py`` + ``SmolVLAPolicy.prepare_*`` semantics):

1. every camera of ``data.camera_keys`` (then ``data.empty_cameras`` empty slots) becomes one image slot, a uint8
   [3, h, w] frame at its own resolution; the model resizes it with left/top padding to ``data.image_size`` and maps
   it to [-1, 1] on its device (images are not normalized with dataset stats). A camera the sample lacks and an
   empty slot are black frames with mask 0.
2. state and actions are normalized with the dataset stats core hands to ``make_transforms`` (mean/std by
   default), then zero-padded to ``model.max_state_dim`` / ``model.max_action_dim``; sampled actions go back
   through ``postprocess_actions`` (real dims kept, unnormalized).
3. the task gets a trailing newline, is tokenized with the VLM's tokenizer (its special tokens included),
   truncated to ``model.tokenizer_max_length`` and right-padded to it (lerobot pads to the longest prompt of the
   batch by default; padded tokens are masked and do not advance positions, so the valid outputs are the same).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from embodied_core.errors import DataError
from embodied_core.model_api import Transforms
from embodied_data.normalize import state_action_normalizer
from embodied_models.images import as_uint8_image
from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.tokenizer import TaskTokenizer, load_tokenizer, task_text
from embodied_models.vla.features import pad_last, right_pad_ids, task_string
from embodied_models.vla.transform import VLASampleTransform

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["SmolVLACollate", "SmolVLASampleTransform", "make_transforms"]


class SmolVLASampleTransform(VLASampleTransform):
    """The per-sample transform (picklable: runs in DataLoader workers; the rest of what it holds and does is
    :class:`~embodied_models.vla.transform.VLASampleTransform`'s).

    Training samples and inference observations (the same keys without ``action``) both pass through it.

    Args:
        model_config, data_config: the run's sections (SmolVLAModelConfig, SmolVLADataConfig).
        tokenizer: task tokenizer (see tokenizer.load_tokenizer).
        normalizer: the state/action normalizer (None with ``data.normalization=none``).
    """

    logger = logging.getLogger("embodied.models.smolvla")  # where the truncation warning goes
    model_config: SmolVLAModelConfig
    data_config: SmolVLADataConfig
    tokenizer: TaskTokenizer

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        cfg, model = self.data_config, self.model_config
        images: list[torch.Tensor | None] = []
        masks = torch.zeros(len(cfg.camera_keys) + cfg.empty_cameras, dtype=torch.bool)
        for slot, key in enumerate(cfg.camera_keys):
            present = key in sample and sample[key] is not None
            images.append(as_uint8_image(sample[key], key) if present else None)
            masks[slot] = present
        images.extend([None] * cfg.empty_cameras)
        state = self.read(sample, "state").reshape(-1)
        tokens, token_mask = self._tokens(sample)
        out: dict[str, Any] = {"images": images, "image_masks": masks, "tokens": tokens, "token_mask": token_mask,
                               "state": pad_last(state, model.max_state_dim)}
        out.update(self.action_targets(sample, model.max_action_dim))
        return out

    def _tokens(self, sample: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        task = task_string(sample, why="SmolVLA is conditioned on it")
        ids = self.tokenizer.encode(task_text(task))
        limit = self.model_config.tokenizer_max_length
        ids = self.truncated(ids, limit, what="SmolVLA task", setting="model.tokenizer_max_length")
        return right_pad_ids(ids, limit, self.tokenizer.pad_id)


class SmolVLACollate:
    """Stacks transformed samples into a SmolVLAPreparedBatch (picklable: runs in DataLoader workers).

    Args:
        image_size: the model resolution; a slot no sample of the batch fills is black frames of this size.
    """

    def __init__(self, image_size: tuple[int, int]) -> None:
        self.image_size = (int(image_size[0]), int(image_size[1]))

    def _slot(self, frames: Sequence[torch.Tensor | None], slot: int) -> torch.Tensor:
        """One image slot: present frames stacked, absent ones black frames of the same size."""
        shapes = {tuple(f.shape) for f in frames if f is not None}
        if len(shapes) > 1:
            raise DataError(f"image slot {slot}: the samples of one batch have frames of different sizes "
                            f"{sorted(shapes)}; a camera must keep one resolution")
        shape = shapes.pop() if shapes else (3, *self.image_size)
        return torch.stack([f if f is not None else torch.zeros(shape, dtype=torch.uint8) for f in frames])

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> SmolVLAPreparedBatch:
        slots = len(samples[0]["images"])
        has_actions = "actions" in samples[0]
        return SmolVLAPreparedBatch(
            images=tuple(self._slot([s["images"][i] for s in samples], i) for i in range(slots)),
            image_masks=torch.stack([s["image_masks"] for s in samples]),
            tokens=torch.stack([s["tokens"] for s in samples]),
            token_mask=torch.stack([s["token_mask"] for s in samples]),
            state=torch.stack([s["state"] for s in samples]),
            actions=torch.stack([s["actions"] for s in samples]) if has_actions else None,
            action_is_pad=torch.stack([s["action_is_pad"] for s in samples]) if has_actions else None,
        )


def make_transforms(model_config: SmolVLAModelConfig, data_config: SmolVLADataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the smolvla plugins (``ModelSpec.transforms``, :class:`embodied_core.protocols.MakeTransforms`).

    ``stats`` are the dataset's statistics (resolved by core, or read from a policy folder); the state and action
    keys need the stats of ``data.normalization`` (mean/std by default) unless it is ``none``. The tokenizer comes
    from ``data.tokenizer_path`` or ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.tokenizer=tiny`` uses
    the built-in byte tokenizer when neither is set.
    """
    if data_config.camera_keys is None or data_config.state_dim is None or data_config.action_dim is None:
        raise DataError("SmolVLA transforms need data.camera_keys, data.state_dim and data.action_dim (set them or let "
                        "the dataset format infer them)")
    normalizer = state_action_normalizer(data_config.normalization, stats, state_key=data_config.state_key,
                                         action_key=data_config.action_key)
    tokenizer = load_tokenizer(model_config.tokenizer, data_config.resolved_tokenizer_path(),
                               vocab_size=model_config.vocab_size)
    transform = SmolVLASampleTransform(model_config, data_config, tokenizer, normalizer)
    return Transforms(sample_transform=transform, collate_fn=SmolVLACollate(data_config.image_size),
                      postprocess_actions=transform.unnormalize_actions)
