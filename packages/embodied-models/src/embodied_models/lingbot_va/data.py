"""``lingbot_va`` dataset strategy: LeRobot actions plus cached VAE latents and text embeddings.

Used with ``--dataset-format lerobot_datasets --dataset-strategy lingbot_va``. No video is decoded at training
time: the strategy reads the cache that ``embodied data precompute-latents`` built (:mod:`.cache`).

Index map: dataset row ``t`` (frame ``t`` of its episode) trains on the window of ``num_latent_frames`` latent
frames that starts at latent frame ``l0 = min(t // (4 video_stride), L - F)``, so every frame is a sample (as
with the default strategy) and each window is drawn about equally often. Episodes shorter than the window
repeat their last latent frame and mark the missing actions as padding. The first latent frame is the
conditioning observation; its actions are padding (upstream pads them with zeros).

Sample keys: ``latents`` [C, F, H, W] (float32), ``text_emb`` [T_task, text_dim], ``null_text_emb``
[T_empty, text_dim], ``action`` [F*n, D] and ``action_is_pad`` [F*n], plus ``task``, ``episode_index``,
``frame_index`` and ``index``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy, require_feature
from embodied_models.lingbot_va.cache import (
    TEXT_NAME,
    cache_dir,
    check_cache_matches,
    episode_file,
    read_cache_meta,
)
from embodied_models.lingbot_va.config import LingBotVADataConfig

__all__ = ["LatentWindowTransform", "LingBotVAStrategy", "build_strategy"]

_HINT = "embodied data precompute-latents <dataset> --base-model-path <BASE_MODEL_PATH> --model-name <model>"


def _margin(cfg: LingBotVADataConfig) -> int:
    # Rows around the current frame that can hold the window's actions (see the index map above).
    return 4 * cfg.video_stride * (cfg.num_latent_frames + 1)


class LatentWindowTransform:
    """Turns a LeRobot row (with a wide ``action`` query) into a latent window sample. Picklable; opens files lazily.

    Args:
        cache: the cache folder.
        data_config: the run's data section.
        tasks: task index -> task string of the dataset.
    """

    def __init__(self, cache: Path, data_config: LingBotVADataConfig, tasks: dict[int, str]) -> None:
        self.cache = cache
        self.cfg = data_config
        self.task_ids = {text: i for i, text in tasks.items()}
        self._texts: dict[str, torch.Tensor] | None = None

    def _text(self, name: str) -> torch.Tensor:
        if self._texts is None:
            from safetensors.torch import load_file

            self._texts = load_file(str(self.cache / TEXT_NAME))
        if name not in self._texts:
            raise DataError(f"{self.cache / TEXT_NAME} has no embedding {name!r}; rebuild the cache with: {_HINT}")
        return self._texts[name]

    def _latents(self, episode: int) -> Any:
        from safetensors import safe_open

        path = episode_file(self.cache, episode)
        if not path.is_file():
            raise DataError(f"{path}: episode {episode} is not in the latent cache; build it with: {_HINT} "
                            f"--episodes {episode}")
        return safe_open(str(path), framework="pt")

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        frames, n, stride = cfg.num_latent_frames, cfg.action_per_frame, 4 * cfg.video_stride
        episode, frame = int(sample["episode_index"]), int(sample["frame_index"])
        with self._latents(episode) as handle:
            total = handle.get_slice("latents").get_shape()[1]
            l0 = max(0, min(frame // stride, total - frames))
            window = handle.get_slice("latents")[:, l0:l0 + frames].float()
        if window.shape[1] < frames:  # short episode: repeat the last latent frame
            window = torch.cat([window, window[:, -1:].expand(-1, frames - window.shape[1], -1, -1)], dim=1)
        # Action of latent frame f (>= 1), step j: row (l0 + f - 1) * stride + j * action_stride of the episode.
        margin = _margin(cfg)
        f_idx = torch.arange(1, frames).repeat_interleave(n)
        j_idx = torch.arange(n).repeat(frames - 1)
        rows = (l0 + f_idx - 1) * stride + j_idx * cfg.action_stride - frame + margin
        actions, pad = sample[cfg.action_key], sample[f"{cfg.action_key}_is_pad"]
        head = torch.zeros(n, actions.shape[-1], dtype=actions.dtype)
        out = {
            "latents": window,
            "text_emb": self._text(f"task_{self.task_ids[sample['task']]}"),
            "null_text_emb": self._text("empty"),
            "action": torch.cat([head, actions[rows]]),
            "action_is_pad": torch.cat([torch.ones(n, dtype=torch.bool), pad[rows] | (f_idx + l0 >= total)]),
            "task": sample["task"],
        }
        for key in ("episode_index", "frame_index", "index"):
            out[key] = sample[key]
        return out


class LingBotVAStrategy(DatasetStrategy):
    """Plans the wide action query and checks the latent cache before any data is read."""

    name = "lingbot_va"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        if not isinstance(data_config, LingBotVADataConfig):
            raise UsageError(f"--dataset-strategy lingbot_va needs a LingBot-VA model (its data section is "
                             f"{type(data_config).__name__}); choose --model-name lingbot_va_*")
        require_feature(meta, data_config.action_key, field="data.action_key")
        width = meta.features[data_config.action_key].shape[-1]
        if width != data_config.action_dim:
            raise UsageError(f"data.action_dim={data_config.action_dim} but {data_config.action_key!r} of {meta.root} "
                             f"has {width} channels; set data.action_dim={width}")
        cache = cache_dir(meta.root, data_config.latent_cache)
        spec = {"camera_keys": list(data_config.camera_keys), "camera_layout": data_config.camera_layout,
                "image_size": list(data_config.image_size), "video_stride": data_config.video_stride}
        check_cache_matches(read_cache_meta(cache, command_hint=_HINT), spec, cache=cache, command_hint=_HINT)
        if not (cache / TEXT_NAME).is_file():
            raise DataError(f"{cache / TEXT_NAME} is missing (rank 0 of the precompute writes it); rerun: {_HINT}")
        margin = _margin(data_config)
        offsets = [k / meta.fps for k in range(-margin, margin + 1)]
        return DatasetPlan(delta_timestamps={data_config.action_key: offsets}, camera_keys=[],
                           transform=LatentWindowTransform(cache, data_config, dict(meta.tasks)))


def build_strategy() -> LingBotVAStrategy:
    """Factory of the ``lingbot_va`` strategy."""
    return LingBotVAStrategy()
