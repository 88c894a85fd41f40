"""FastWAM's collator: transformed samples -> the batch the FastWAM model consumes.

Fields (a :class:`~embodied_core.model_api.TensorBatch`, names/dtypes/shapes of LoongForge's
``FastWAMPreparedBatch``):

- ``video`` float32 [B, 3, F, H, W * n_cam] in [-1, 1];
- ``action`` float32 [B, H, A] and ``action_is_pad`` bool [B, H] (only when the samples carry actions; all-False
  when they carry no pad mask);
- ``context`` float32 [B, text_len, text_dim] (zero past each prompt's tokens) and ``context_mask`` bool
  [B, text_len] from the text cache;
- ``proprio`` float32 [B, H, D]: the current state repeated over the horizon (H = ``data.action_horizon`` for
  inference observations);
- ``image_is_pad`` bool [B, F]: the samples' masks (all-False with ``data.image_pad_mode=always_false``);
- extra: ``prompt`` (list of str) and, for dataset samples, ``sample_index`` (list of int: their dataset
  indices, which key the model's training draws).

A prompt without a cache entry (or an unset ``data.text_cache_dir``) is a DataError naming it and the command that
makes it; ``data.missing_text_cache=zeros`` / ``data.context_mask_mode=all_true`` reproduce LoongForge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from embodied_core.errors import DataError
from embodied_core.model_api import TensorBatch
from embodied_models.fastwam.data.config import FastWAMDataConfig
from embodied_models.fastwam.data.prompts import find_cache_file, missing_prompts_error
from embodied_models.fastwam.data.text_cache import TextEntry, read_entry

__all__ = ["BATCH_FIELDS", "FastWAMCollator"]

BATCH_FIELDS = ("video", "action", "context", "context_mask", "proprio", "action_is_pad", "image_is_pad")
"""The model-facing fields (LoongForge's ``FastWAMPreparedBatch``)."""


class FastWAMCollator:
    """Stacks FastWAM samples and looks up their prompts' text embeddings (entries are read once per process).

    Args:
        data_config: the run's data section (text cache folder, lengths, reference switches).
    """

    def __init__(self, data_config: FastWAMDataConfig) -> None:
        self.cfg = data_config
        self._entries: dict[str, TextEntry] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg, "_entries": {}}  # workers read the files they need themselves

    def _entry(self, prompt: str) -> TextEntry:
        entry = self._entries.get(prompt)
        if entry is not None:
            return entry
        cfg = self.cfg
        path = (None if cfg.text_cache_dir is None else
                find_cache_file(Path(cfg.text_cache_dir), prompt, text_len=cfg.text_len, encoder_id=cfg.encoder_id))
        if path is None:
            raise missing_prompts_error([prompt], cache_dir=cfg.text_cache_dir, dataset=None, text_len=cfg.text_len,
                                        encoder_id=cfg.encoder_id)
        entry = read_entry(path, prompt=prompt, text_len=cfg.text_len, text_dim=cfg.text_dim)
        self._entries[prompt] = entry
        return entry

    def _context(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.cfg
        if cfg.text_cache_dir is None and cfg.missing_text_cache == "zeros":
            shape = (len(prompts), cfg.text_len)
            return torch.zeros((*shape, cfg.text_dim)), torch.ones(shape, dtype=torch.bool)
        entries = [self._entry(p) for p in prompts]
        context = torch.stack([e.context for e in entries])
        mask = torch.stack([e.mask for e in entries])
        context[~mask] = 0.0
        if cfg.context_mask_mode == "all_true":
            mask = torch.ones_like(mask)
        return context, mask

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> TensorBatch:
        if not samples:
            raise DataError("FastWAMCollator: empty batch")
        missing = [k for k in ("video", "prompt") if k not in samples[0]]
        if missing:
            raise DataError(f"FastWAM samples lack {missing} (have {sorted(samples[0])}); they must come from the "
                            "FastWAM sample transform")
        video = torch.stack([s["video"].float() for s in samples])
        batch = TensorBatch(video=video)
        has_action = all(s.get("action") is not None for s in samples)
        horizon = self.cfg.action_horizon
        if has_action:
            batch["action"] = torch.stack([s["action"].float() for s in samples])
            horizon = batch["action"].shape[1]
        prompts = [str(s["prompt"]) for s in samples]
        batch["context"], batch["context_mask"] = self._context(prompts)
        if any("proprio" in s for s in samples):  # absent only with model.use_proprio=false (then in none)
            proprio = torch.stack([s["proprio"].float().reshape(-1, s["proprio"].shape[-1])[0] for s in samples])
            batch["proprio"] = proprio[:, None, :].expand(-1, horizon, -1).contiguous()
        if has_action:
            pads = [s.get("action_is_pad") for s in samples]
            batch["action_is_pad"] = (torch.stack([p.bool() for p in pads]) if all(p is not None for p in pads)
                                      else torch.zeros(batch["action"].shape[:2], dtype=torch.bool))
        image_pads = [s.get("image_is_pad") for s in samples]
        if self.cfg.image_pad_mode == "real" and all(p is not None for p in image_pads):
            batch["image_is_pad"] = torch.stack([p.bool() for p in image_pads])
        else:
            batch["image_is_pad"] = torch.zeros(video.shape[0], video.shape[2], dtype=torch.bool)
        batch["prompt"] = prompts
        if all("index" in s for s in samples):
            batch["sample_index"] = [int(s["index"]) for s in samples]
        return batch
