"""LingBot-VA sample transform and collate: latent-window samples -> the model's PreparedBatch.

Per sample (in the DataLoader workers): actions are quantile-normalized with the dataset's q01/q99 (as upstream
``action_norm_method='quantiles'``), scattered into the model's action channels ``model.used_action_channel_ids``
and laid out as [A, F, n, 1]; ``actions_mask`` marks used channels of real (not padded) steps; the prompt
embedding is zero padded to ``model.text_len``. Collate stacks tensors (``TensorBatch``).
"""

from __future__ import annotations

from typing import Any

import torch

from embodied_core.errors import DataError
from embodied_core.model_api import Transforms, collate_samples
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig

__all__ = ["LingBotVASampleTransform", "make_transforms"]

_MODEL_KEYS = ("latents", "actions", "actions_mask", "text_emb", "null_text_emb", "episode_index", "index")


class LingBotVASampleTransform:
    """Picklable per-sample transform (see the module docstring).

    Args:
        model_config, data_config: the run's sections.
        q01, q99: per-channel action quantiles [D] (None: no normalization).
    """

    def __init__(self, model_config: LingBotVAModelConfig, data_config: LingBotVADataConfig,
                 q01: torch.Tensor | None, q99: torch.Tensor | None) -> None:
        self.model_config = model_config
        self.data_config = data_config
        self.q01, self.q99 = q01, q99
        self.channels = torch.tensor(model_config.used_action_channel_ids)

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        mcfg, dcfg = self.model_config, self.data_config
        action = sample[dcfg.action_key].float()
        if self.q01 is not None:
            action = (action - self.q01) / (self.q99 - self.q01 + 1e-6) * 2.0 - 1.0
        valid = ~sample[f"{dcfg.action_key}_is_pad"]
        action = action * valid[:, None]
        frames, n = dcfg.num_latent_frames, dcfg.action_per_frame
        full = torch.zeros(frames * n, mcfg.action_dim)
        full[:, self.channels] = action
        mask = torch.zeros(frames * n, mcfg.action_dim, dtype=torch.bool)
        mask[:, self.channels] = valid[:, None]
        text = sample["text_emb"]
        if text.shape[0] > mcfg.text_len:
            raise DataError(f"prompt embedding of {text.shape[0]} tokens exceeds model.text_len={mcfg.text_len}")
        out = {
            "latents": sample["latents"].float(),
            "actions": full.T.reshape(mcfg.action_dim, frames, n, 1),
            "actions_mask": mask.T.reshape(mcfg.action_dim, frames, n, 1),
            "text_emb": torch.nn.functional.pad(text.float(), (0, 0, 0, mcfg.text_len - text.shape[0])),
            "null_text_emb": sample["null_text_emb"].float(),
        }
        for key in ("episode_index", "index"):
            out[key] = torch.as_tensor(sample[key])
        return out


def _action_quantiles(dataset: Any, data_config: LingBotVADataConfig) -> tuple[torch.Tensor, torch.Tensor]:
    from embodied_data.stats import dataset_stats

    root = getattr(dataset, "root", None)
    if root is None:
        raise DataError(f"{type(dataset).__name__} has no dataset root to read action stats from; set "
                        "data.normalize_actions=false or use --dataset-format lerobot_datasets")
    stats = dataset_stats(root, episodes=getattr(dataset, "episodes", None)).stats
    if data_config.action_key not in stats:
        raise DataError(f"{root}: no stats for {data_config.action_key!r}")
    entry = stats[data_config.action_key]
    return (torch.as_tensor(entry["q01"], dtype=torch.float32).reshape(-1),
            torch.as_tensor(entry["q99"], dtype=torch.float32).reshape(-1))


def make_transforms(model_config: LingBotVAModelConfig, data_config: LingBotVADataConfig,
                    dataset: Any) -> Transforms:
    """The ``transforms`` factory of the ``lingbot_va_*`` specs."""
    if len(model_config.used_action_channel_ids) != data_config.action_dim:
        raise DataError(f"model.used_action_channel_ids has {len(model_config.used_action_channel_ids)} channels "
                        f"but data.action_dim={data_config.action_dim}; give one model channel per dataset channel")
    q01 = q99 = None
    if data_config.normalize_actions:
        q01, q99 = _action_quantiles(dataset, data_config)
    return Transforms(sample_transform=LingBotVASampleTransform(model_config, data_config, q01, q99),
                      collate_fn=collate_samples)
