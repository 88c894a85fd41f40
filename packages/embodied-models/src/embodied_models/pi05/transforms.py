"""pi0.5 data pipeline: sample dict -> model inputs (in workers) -> collate -> Pi05PreparedBatch.

Per sample (openpi ``transforms.py`` / lerobot ``processor_pi05.py`` semantics):

1. cameras fill the image slots in ``data.camera_keys`` order; each frame is resized with padding (aspect
   kept, centred, black bars as openpi's ``resize_with_pad``) to ``data.image_size`` and stays uint8 (it
   crosses the worker boundary as bytes; the model maps it to [-1, 1]). A slot without a camera, or a
   camera the sample lacks, is an all-zero image (= -1 after scaling) with mask 0.
2. state and actions are normalized with the dataset stats core hands to ``make_transforms`` (quantile:
   q01..q99 -> -1..1); sampled actions go back through ``postprocess_actions`` (unnormalize, drop padding).
3. the state is zero-padded to ``model.max_state_dim``, clipped to [-1, 1] and discretized into 256 bins;
   the prompt is ``"Task: <task>, State: <bins>;\\nAction: "``, tokenized and right-padded to
   ``model.max_token_len`` (longer prompts are truncated with a warning). openpi does not clip, so a
   value below q01 would become bin -1 there; we clip it to bin 0.
4. actions are zero-padded to ``model.max_action_dim``; ``action_is_pad`` is kept for the optional mask.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from embodied_core.model_api import Transforms
from embodied_data.normalize import state_action_normalizer
from embodied_models.images import as_uint8_image
from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.tokenizer import PAD_ID, PromptTokenizer, load_tokenizer
from embodied_models.vla.features import right_pad_ids, task_string
from embodied_models.vla.transform import VLASampleTransform

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["Pi05SampleTransform", "collate_pi05", "discretize_state", "make_transforms", "pi05_prompt",
           "resize_with_pad"]

NUM_STATE_BINS = 256


def resize_with_pad(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 [3, h, w] -> uint8 [3, H, W]: bilinear (antialiased) resize keeping the aspect, centred zero pad."""
    out_h, out_w = size
    h, w = image.shape[-2:]
    if (h, w) == (out_h, out_w):
        return image
    ratio = max(w / out_w, h / out_h)
    new_h, new_w = max(1, int(h / ratio)), max(1, int(w / ratio))
    resized = F.interpolate(image[None].float(), size=(new_h, new_w), mode="bilinear", align_corners=False,
                            antialias=True)[0]
    resized = resized.round().clamp(0, 255).to(torch.uint8)
    top, left = (out_h - new_h) // 2, (out_w - new_w) // 2
    out = torch.zeros((image.shape[0], out_h, out_w), dtype=torch.uint8)
    out[:, top: top + new_h, left: left + new_w] = resized
    return out


def discretize_state(state: np.ndarray) -> np.ndarray:
    """Normalized state in [-1, 1] -> bin indices 0..255 (values outside are clipped first)."""
    edges = np.linspace(-1.0, 1.0, NUM_STATE_BINS + 1)[:-1]
    return np.digitize(np.clip(state, -1.0, 1.0), bins=edges) - 1


def pi05_prompt(task: str, bins: Sequence[int]) -> str:
    """The pi0.5 prompt: cleaned task text and the discretized state."""
    cleaned = task.strip().replace("_", " ").replace("\n", " ")
    return f"Task: {cleaned}, State: {' '.join(str(int(b)) for b in bins)};\nAction: "


class Pi05SampleTransform(VLASampleTransform):
    """The per-sample transform (picklable: runs in DataLoader workers; the rest of what it holds and does is
    :class:`~embodied_models.vla.transform.VLASampleTransform`'s).

    Training samples and inference observations (the same keys without ``action``) both pass through it.

    Args:
        model_config, data_config: the run's sections (Pi05ModelConfig, Pi05DataConfig).
        tokenizer: prompt tokenizer (see tokenizer.load_tokenizer).
        normalizer: the state/action normalizer (None with ``data.normalization=none``).
    """

    logger = logging.getLogger("embodied.models.pi05")  # where the truncation warning goes
    model_config: Pi05ModelConfig
    data_config: Pi05DataConfig
    tokenizer: PromptTokenizer

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        images, masks = self._images(sample)
        tokens, token_mask = self._tokens(sample, self.read(sample, "state").reshape(-1))
        out: dict[str, Any] = {"images": images, "image_masks": masks, "tokens": tokens, "token_mask": token_mask}
        out.update(self.action_targets(sample, self.model_config.max_action_dim))
        return out

    def _images(self, sample: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.data_config
        size = tuple(cfg.image_size)
        images = torch.zeros((cfg.num_image_slots, 3, *size), dtype=torch.uint8)
        masks = torch.zeros(cfg.num_image_slots, dtype=torch.bool)
        for slot, key in enumerate(cfg.camera_keys):
            if key in sample and sample[key] is not None:
                images[slot] = resize_with_pad(as_uint8_image(sample[key], key), size)
                masks[slot] = True
        return images, masks

    def _tokens(self, sample: Mapping[str, Any], state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        task = task_string(sample, why="pi0.5 prompts need one")
        padded = np.zeros(self.model_config.max_state_dim, dtype=np.float64)
        padded[: state.shape[0]] = state.double().numpy()
        ids = self.tokenizer.encode(pi05_prompt(task, discretize_state(padded)))
        limit = self.model_config.max_token_len
        return right_pad_ids(self.truncated(ids, limit, what="pi0.5 prompt", setting="model.max_token_len"), limit,
                             PAD_ID)


def collate_pi05(samples: Sequence[Mapping[str, Any]]) -> Pi05PreparedBatch:
    """Stacks transformed samples into a Pi05PreparedBatch."""
    has_actions = "actions" in samples[0]
    return Pi05PreparedBatch(
        images=torch.stack([s["images"] for s in samples]),
        image_masks=torch.stack([s["image_masks"] for s in samples]),
        tokens=torch.stack([s["tokens"] for s in samples]),
        token_mask=torch.stack([s["token_mask"] for s in samples]),
        actions=torch.stack([s["actions"] for s in samples]) if has_actions else None,
        action_is_pad=torch.stack([s["action_is_pad"] for s in samples]) if has_actions else None,
    )


def make_transforms(model_config: Pi05ModelConfig, data_config: Pi05DataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the pi05 plugins (``ModelSpec.transforms``; see :class:`embodied_core.protocols.MakeTransforms`).

    ``stats`` are the dataset's statistics (resolved by core, or read from a policy folder); the state and
    action keys need the stats of ``data.normalization`` (q01/q99 for quantile) unless it is ``none``. The
    tokenizer comes from ``data.tokenizer_path`` or ``--tokenizer-path`` (environment TOKENIZER_PATH);
    ``model.tokenizer=tiny`` uses the built-in tokenizer when neither is set.
    """
    normalizer = state_action_normalizer(data_config.normalization, stats, state_key=data_config.state_key,
                                         action_key=data_config.action_key)
    tokenizer = load_tokenizer(model_config.tokenizer, data_config.resolved_tokenizer_path(),
                               vocab_size=model_config.vocab_size)
    transform = Pi05SampleTransform(model_config, data_config, tokenizer, normalizer)
    return Transforms(sample_transform=transform, collate_fn=collate_pi05,
                      postprocess_actions=transform.unnormalize_actions)
