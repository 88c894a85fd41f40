"""``--dataset-strategy fastwam``: LoongForge's FastWAM sampling on LeRobot v2.1 / v3.0 datasets.

Every frame is a sample. For each camera (sorted by key) the dataset reads the frames at
:attr:`FastWAMDataConfig.video_frame_offsets` from the current one, for ``action`` the ``action_horizon`` rows from
the current one, and the current ``observation.state``; reads past the episode end repeat its last row and are
marked in ``<key>_is_pad``. The model's per-sample transform (:mod:`.transforms`) then builds the video, normalizes
and formats the prompt; the collator (:mod:`.collator`) adds the text embeddings.

Before any data is read, :meth:`FastWAMStrategy.plan` checks the keys, the window geometry and that every task of
the dataset has a text-cache entry (a DataError naming the prompts and the ``embodied data precompute-text`` command).

With ``data.stats_source=loongforge`` the dataset reports LoongForge's statistics (:class:`LoongForgeStats`).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import UsageError
from embodied_core.protocols import DatasetFeature, Stats
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.stats.io import read_stats_json
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy, require_feature
from embodied_models.fastwam.data.config import FastWAMDataConfig
from embodied_models.fastwam.data.prompts import find_cache_file, format_prompt, missing_prompts_error

__all__ = ["FastWAMStrategy", "LoongForgeStats", "build_strategy", "camera_order", "check_text_cache"]


def camera_order(data_config: FastWAMDataConfig, available: list[str] | None = None) -> list[str]:
    """The cameras joined left to right: ``data.camera_keys`` (else ``available``), sorted unless
    ``data.sort_cameras`` is off."""
    keys = list(data_config.camera_keys) if data_config.camera_keys is not None else list(available or [])
    return sorted(keys) if data_config.sort_cameras else keys


def check_text_cache(prompts: list[str], data_config: FastWAMDataConfig, *, dataset: str | Path | None) -> None:
    """Raises the DataError of :func:`~.prompts.missing_prompts_error` when a prompt has no cache entry (or the
    folder is unset while ``data.missing_text_cache=error``)."""
    cfg = data_config
    if cfg.text_cache_dir is None:
        if cfg.missing_text_cache == "zeros" or not prompts:
            return
        raise missing_prompts_error(prompts, cache_dir=None, dataset=dataset, text_len=cfg.text_len,
                                    encoder_id=cfg.encoder_id)
    cache = Path(cfg.text_cache_dir)
    missing = [p for p in prompts
               if find_cache_file(cache, p, text_len=cfg.text_len, encoder_id=cfg.encoder_id) is None]
    if missing:
        raise missing_prompts_error(missing, cache_dir=cache, dataset=dataset, text_len=cfg.text_len,
                                    encoder_id=cfg.encoder_id)


@attrs.frozen
class LoongForgeStats:
    """LoongForge's normalization statistics for ``keys`` (``data.stats_source=loongforge``), as a feature map.

    LoongForge reads ``meta/stats.json`` as stored when it exists (lerobot v3.0 writes it, with quantiles averaged
    over episodes); otherwise it aggregates ``episodes_stats.jsonl`` and uses **min as q01 and max as q99**. Our
    aggregation of the per-episode min/max/mean/std gives the same numbers, so only q01/q99 are replaced.
    """

    keys: tuple[str, ...]
    stored: dict[str, dict[str, np.ndarray]] | None = None
    """``meta/stats.json`` entries of ``keys`` (None: the dataset has no stats.json)."""

    @classmethod
    def from_meta(cls, meta: LeRobotMeta, keys: tuple[str, ...]) -> LoongForgeStats:
        """Reads ``meta/stats.json`` when present."""
        path = meta.root / "meta" / "stats.json"
        if not path.is_file():
            return cls(keys=keys)
        stored = read_stats_json(path)
        return cls(keys=keys, stored={k: stored[k] for k in keys if k in stored})

    def map_stats(self, stats: Stats) -> dict[str, dict[str, np.ndarray]]:
        """The stats with LoongForge's entries for :attr:`keys`."""
        out = {key: dict(entry) for key, entry in stats.items()}
        for key in self.keys:
            if self.stored is not None and key in self.stored:
                out[key] = {name: np.asarray(value) for name, value in self.stored[key].items()}
            elif key in out and "min" in out[key] and "max" in out[key]:
                out[key]["q01"] = np.asarray(out[key]["min"])
                out[key]["q99"] = np.asarray(out[key]["max"])
        return out

    def map_features(self, features: dict[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        """The features are not reshaped."""
        return dict(features)


class FastWAMStrategy(DatasetStrategy):
    """Plans FastWAM's video window and action chunk, and checks the text cache before any data is read."""

    name = "fastwam"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        if not isinstance(data_config, FastWAMDataConfig):
            raise UsageError(f"--dataset-strategy fastwam needs a FastWAM model (its data section is "
                             f"{type(data_config).__name__}); choose --model-name fastwam or fastwam_tiny")
        cfg = data_config
        problems = cfg.geometry_problems()
        if problems:
            raise UsageError("; ".join(problems))
        require_feature(meta, cfg.action_key, field="data.action_key")
        require_feature(meta, cfg.state_key, field="data.state_key")
        for key in cfg.camera_keys or []:
            require_feature(meta, key, field="data.camera_keys", cameras=True)
        cameras = camera_order(cfg, [k for k, f in meta.features.items() if f.is_video or f.is_image])
        if not cameras:
            raise UsageError(f"--dataset-strategy fastwam: {meta.root} has no camera features (FastWAM needs video)")
        width = int(meta.features[cfg.action_key].shape[-1])
        if cfg.max_action_dim is not None and cfg.max_action_dim < width:
            raise UsageError(f"data.max_action_dim={cfg.max_action_dim} is smaller than the {width} channels of "
                             f"{cfg.action_key!r} in {meta.root}; set data.max_action_dim>={width} or unset it")
        fps = meta.fps
        video = [k / fps for k in cfg.video_frame_offsets]
        delta_timestamps = {cam: list(video) for cam in cameras}
        delta_timestamps[cfg.action_key] = [k / fps for k in range(cfg.action_horizon)]
        tasks = [task for _, task in sorted(meta.tasks.items())]
        prompts = list(dict.fromkeys(format_prompt(task, cfg.prompt_template) for task in tasks))
        check_text_cache(prompts, cfg, dataset=meta.root)
        feature_map = (LoongForgeStats.from_meta(meta, (cfg.action_key, cfg.state_key))
                       if cfg.stats_source == "loongforge" else None)
        return DatasetPlan(delta_timestamps=delta_timestamps, camera_keys=cameras, transform=None,
                           feature_map=feature_map)


def build_strategy() -> FastWAMStrategy:
    """Factory of the ``fastwam`` strategy."""
    return FastWAMStrategy()
