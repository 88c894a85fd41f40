"""X-VLA data pipeline: sample dict -> model inputs (in workers) -> collate -> XvlaPreparedBatch.

Per sample (lerobot ``processor_xvla.py`` + ``XVLAPolicy._prepare_*`` semantics):

1. cameras fill the views in ``data.camera_keys`` order; each frame is resized to ``data.image_size`` keeping its
   aspect (bilinear, no antialias) and padded on the **left and top** (lerobot's X-VLA convention). It stays uint8
   across the worker boundary; the model scales it to [0, 1], applies the ImageNet normalization and sets the
   padding to 0 (lerobot pads the normalized image with 0). A view without a camera, or a camera the sample
   lacks, is a zero image with mask 0.
2. the instruction is tokenized, truncated and right-padded to ``model.tokenizer_max_length``.
3. state and actions are normalized with the dataset stats core hands to ``make_transforms`` (``none`` by
   default, as X-VLA); the state is zero-padded to ``model.max_state_dim`` and the actions to the action space's
   width. BCE gripper targets must lie in [0, 1] (a DataError names the channel otherwise).
4. the domain id is ``data.domain_id``, or the sample's ``data.domain_id_key``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from embodied_core.errors import DataError
from embodied_core.model_api import Transforms
from embodied_data.normalize import state_action_normalizer
from embodied_models.images import as_uint8_image
from embodied_models.vla.features import task_string
from embodied_models.vla.transform import VLASampleTransform
from embodied_models.xvla.batch import XvlaPreparedBatch
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.layouts import ActionLayout, layout_for
from embodied_models.xvla.tokenizer import InstructionTokenizer, load_tokenizer

if TYPE_CHECKING:
    from embodied_core.protocols import Stats
    from embodied_data.normalize import Normalizer

__all__ = ["XvlaSampleTransform", "collate_xvla", "make_transforms", "resize_with_pad_left_top"]


def resize_with_pad_left_top(image: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, tuple[int, int]]:
    """uint8 [3, h, w] -> (uint8 [3, H, W], (rows padded on top, columns padded on the left)).

    Bilinear without antialias (as lerobot's ``resize_with_pad``), aspect kept, zero padding on the top/left.
    """
    out_h, out_w = size
    h, w = image.shape[-2:]
    if (h, w) == (out_h, out_w):
        return image, (0, 0)
    ratio = max(w / out_w, h / out_h)
    new_h, new_w = int(h / ratio), int(w / ratio)
    resized = F.interpolate(image[None].float(), size=(new_h, new_w), mode="bilinear", align_corners=False)[0]
    out = torch.zeros((image.shape[0], out_h, out_w), dtype=torch.uint8)
    top, left = out_h - new_h, out_w - new_w
    out[:, top:, left:] = resized.round().clamp(0, 255).to(torch.uint8)
    return out, (top, left)


class XvlaSampleTransform(VLASampleTransform):
    """The per-sample transform (picklable: runs in DataLoader workers; the rest of what it holds and does is
    :class:`~embodied_models.vla.transform.VLASampleTransform`'s).

    Training samples and inference observations (the same keys without ``action``) both pass through it.

    Args:
        model_config, data_config: the run's sections.
        tokenizer: the instruction tokenizer (see tokenizer.load_tokenizer).
        normalizer: the state/action normalizer (None with ``data.normalization=none``).
    """

    model_config: XvlaModelConfig
    data_config: XvlaDataConfig
    tokenizer: InstructionTokenizer

    def __init__(self, model_config: XvlaModelConfig, data_config: XvlaDataConfig, tokenizer: InstructionTokenizer,
                 normalizer: Normalizer | None) -> None:
        super().__init__(model_config, data_config, tokenizer, normalizer)
        self.layout: ActionLayout = layout_for(model_config.action_mode, action_dim=data_config.action_dim,
                                               max_action_dim=model_config.max_action_dim)

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        images, masks, pads = self._images(sample)
        out: dict[str, Any] = {"images": images, "image_masks": masks, "image_pad": pads,
                               "tokens": self._tokens(sample), "domain_id": self._domain(sample),
                               "state": self._state(sample)}
        out.update(self.action_targets(sample, self.layout.dim_action))
        return out

    def _images(self, sample: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cfg = self.data_config
        size = tuple(cfg.image_size)
        views = cfg.views()
        images = torch.zeros((views, 3, *size), dtype=torch.uint8)
        masks = torch.zeros(views, dtype=torch.bool)
        pads = torch.zeros((views, 2), dtype=torch.long)
        for view, key in enumerate(cfg.camera_keys):
            if key in sample and sample[key] is not None:
                image, pad = resize_with_pad_left_top(as_uint8_image(sample[key], key), size)
                images[view], masks[view], pads[view] = image, True, torch.tensor(pad)
        return images, masks, pads

    def _state(self, sample: Mapping[str, Any]) -> torch.Tensor:
        width = self.model_config.max_state_dim if self.model_config.use_proprio else 0
        padded = torch.zeros(width, dtype=torch.float32)
        if width:
            state = self.read(sample, "state").reshape(-1)
            padded[: state.shape[0]] = state
        return padded

    def _tokens(self, sample: Mapping[str, Any]) -> torch.Tensor:
        task = task_string(sample, why="X-VLA instructions need one")
        ids = self.tokenizer.encode(task, self.model_config.tokenizer_max_length)
        return torch.tensor(ids, dtype=torch.long)

    def _domain(self, sample: Mapping[str, Any]) -> torch.Tensor:
        key = self.data_config.domain_id_key
        if key is None:
            return torch.tensor(self.data_config.domain_id, dtype=torch.long)
        if key not in sample:
            raise DataError(f"data.domain_id_key={key!r}: the sample has no such key (keys: "
                            f"{', '.join(sorted(sample))})")
        value = torch.as_tensor(sample[key]).reshape(-1)
        domain = int(value[0]) if value.numel() else -1
        if value.numel() != 1 or domain != float(value[0]) or not 0 <= domain < self.model_config.num_domains:
            raise DataError(f"{key}: a domain id must be one integer in [0, {self.model_config.num_domains}) "
                            f"(model.num_domains), got {value.tolist()}")
        return torch.tensor(domain, dtype=torch.long)

    def check_actions(self, sample: Mapping[str, Any], actions: torch.Tensor) -> None:
        """BCE gripper targets must lie in [0, 1] (a DataError names the channel, episode and frame)."""
        channels = [c for c in self.layout.bce_channels() if c < actions.shape[-1]]
        if not channels:
            return
        values = actions[..., channels]
        bad = (values < 0) | (values > 1)
        if bool(bad.any()):
            channel = channels[int(bad.any(dim=0).nonzero()[0, 0])]
            where = f" (episode {int(sample['episode_index'])}, frame {int(sample['frame_index'])})" if (
                "episode_index" in sample and "frame_index" in sample) else ""
            raise DataError(f"{self.data_config.action_key} channel {channel}{where}: model.action_mode="
                            f"{self.layout.name} trains it as a gripper with BCE, so its targets must be in [0, 1] "
                            f"(got {float(values[bad][0]):g}); rescale the gripper or use model.action_mode=auto")


def collate_xvla(samples: Sequence[Mapping[str, Any]]) -> XvlaPreparedBatch:
    """Stacks transformed samples into an XvlaPreparedBatch."""
    has_actions = "actions" in samples[0]

    def stack(key: str) -> torch.Tensor:
        return torch.stack([s[key] for s in samples])

    return XvlaPreparedBatch(
        images=stack("images"), image_masks=stack("image_masks"), image_pad=stack("image_pad"),
        tokens=stack("tokens"), domain_id=stack("domain_id"), state=stack("state"),
        actions=stack("actions") if has_actions else None,
        action_is_pad=stack("action_is_pad") if has_actions else None,
    )


def make_transforms(model_config: XvlaModelConfig, data_config: XvlaDataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the xvla plugins (``ModelSpec.transforms``; see :class:`embodied_core.protocols.MakeTransforms`).

    ``stats`` are the dataset's statistics (resolved by core, or read from a policy folder); they are read only
    when ``data.normalization`` is not ``none``. The tokenizer comes from ``data.tokenizer_path`` or
    ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.tokenizer=bytes`` uses the built-in one when neither
    is set.
    """
    normalizer = state_action_normalizer(data_config.normalization, stats, state_key=data_config.state_key,
                                         action_key=data_config.action_key, raw_hint=" (X-VLA's default)")
    tokenizer = load_tokenizer(model_config.tokenizer, data_config.resolved_tokenizer_path(),
                               vocab_size=model_config.vocab_size)
    transform = XvlaSampleTransform(model_config, data_config, tokenizer, normalizer)
    return Transforms(sample_transform=transform, collate_fn=collate_xvla,
                      postprocess_actions=transform.unnormalize_actions)
