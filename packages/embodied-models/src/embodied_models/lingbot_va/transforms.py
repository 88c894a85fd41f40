"""LingBot-VA sample transform and collate: latent-window samples -> the model's PreparedBatch.

Per sample (in the DataLoader workers): actions are quantile-normalized with the q01/q99 of the dataset statistics
core hands to ``make_transforms`` (as upstream ``action_norm_method='quantiles'``), scattered into the model's
action channels ``model.used_action_channel_ids`` and laid out as [A, F, n, 1]; ``actions_mask`` marks used
channels of real (not padded) steps; the prompt embedding is zero padded to ``model.text_len``. Collate stacks
tensors (``TensorBatch``). ``postprocess_actions`` maps sampled actions back to dataset units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from embodied_core.errors import DataError
from embodied_core.model_api import Transforms, collate_samples
from embodied_data.normalize import quantile_normalize, quantile_unnormalize
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["LingBotVASampleTransform", "action_quantiles", "make_transforms"]


class LingBotVASampleTransform:
    """Picklable per-sample transform (see the module docstring).

    An inference observation (no ``action``) gives the model inputs without ``actions`` / ``actions_mask``.

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
        mcfg = self.model_config
        text = sample["text_emb"]
        if text.shape[0] > mcfg.text_len:
            raise DataError(f"prompt embedding of {text.shape[0]} tokens exceeds model.text_len={mcfg.text_len}")
        out = {
            "latents": sample["latents"].float(),
            "text_emb": torch.nn.functional.pad(text.float(), (0, 0, 0, mcfg.text_len - text.shape[0])),
            "null_text_emb": sample["null_text_emb"].float(),
        }
        if self.data_config.action_key in sample:
            out["actions"], out["actions_mask"] = self._actions(sample)
        for key in ("episode_index", "index"):
            if key in sample:
                out[key] = torch.as_tensor(sample[key])
        return out

    def _actions(self, sample: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalized actions scattered into the model's channels ``[A, F, n, 1]`` and their mask."""
        mcfg, dcfg = self.model_config, self.data_config
        action = sample[dcfg.action_key].float()
        if self.q01 is not None:
            action = quantile_normalize(action, self.q01, self.q99)
        valid = ~sample[f"{dcfg.action_key}_is_pad"]
        action = action * valid[:, None]
        frames, n = dcfg.num_latent_frames, dcfg.action_per_frame
        full = torch.zeros(frames * n, mcfg.action_dim)
        full[:, self.channels] = action
        mask = torch.zeros(frames * n, mcfg.action_dim, dtype=torch.bool)
        mask[:, self.channels] = valid[:, None]
        return (full.T.reshape(mcfg.action_dim, frames, n, 1), mask.T.reshape(mcfg.action_dim, frames, n, 1))

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``model.sample_actions`` output ``[B, (F-1)*n, D]`` (the used channels, normalized) -> dataset units
        (the transforms' ``postprocess_actions``)."""
        if self.q01 is None:
            return actions
        return quantile_unnormalize(actions.float(), self.q01.to(actions.device), self.q99.to(actions.device))


def action_quantiles(stats: Stats | None, data_config: LingBotVADataConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """q01 / q99 ``[D]`` of ``data.action_key`` from the dataset statistics core resolved."""
    key = data_config.action_key
    entry = (stats or {}).get(key)
    if entry is None or "q01" not in entry or "q99" not in entry:
        have = "no statistics" if stats is None else f"statistics of {', '.join(sorted(stats)) or 'nothing'}"
        raise DataError(f"data.normalize_actions=true needs the q01/q99 statistics of {key!r}, but the dataset gave "
                        f"{have if entry is None else f'{key!r} without q01/q99 ({sorted(entry)})'}; set "
                        "data.normalize_actions=false to train on raw actions")
    return (torch.as_tensor(entry["q01"], dtype=torch.float32).reshape(-1),
            torch.as_tensor(entry["q99"], dtype=torch.float32).reshape(-1))


def make_transforms(model_config: LingBotVAModelConfig, data_config: LingBotVADataConfig, *,
                    stats: Stats | None) -> Transforms:
    """The ``transforms`` factory of the ``lingbot_va_*`` specs (:class:`embodied_core.protocols.MakeTransforms`)."""
    if len(model_config.used_action_channel_ids) != data_config.action_dim:
        raise DataError(f"model.used_action_channel_ids has {len(model_config.used_action_channel_ids)} channels "
                        f"but data.action_dim={data_config.action_dim}; give one model channel per dataset channel")
    q01 = q99 = None
    if data_config.normalize_actions:
        q01, q99 = action_quantiles(stats, data_config)
    transform = LingBotVASampleTransform(model_config, data_config, q01, q99)
    return Transforms(sample_transform=transform, collate_fn=collate_samples,
                      postprocess_actions=transform.unnormalize_actions)
