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

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from embodied_core.errors import ConfigError, DataError
from embodied_core.model_api import Transforms
from embodied_models.groot.images import as_uint8_frames, groot_view
from embodied_models.groot.normalize import GrootNormalizer
from embodied_models.groot_n1_7.batch import GrootBatch
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.embodiments import embodiment_slot
from embodied_models.groot_n1_7.positions import mrope_positions
from embodied_models.groot_n1_7.processor import VLProcessor, check_compatible, load_processor

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["GrootCollate", "GrootSampleTransform", "camera_candidates", "formalize", "make_transforms"]

_PUNCTUATION = re.compile(r"[^\w\s]")


def formalize(text: str) -> str:
    """GR00T's formalize_language: lower case, every character that is neither a word character nor space dropped."""
    return _PUNCTUATION.sub("", text.lower())


def camera_candidates(key: str) -> tuple[str, ...]:
    """Sample keys a configured camera may arrive under: itself, or its ``video.<name>`` form."""
    short = key.removeprefix("video.")
    return (key, f"video.{short}") if key == short else (key, short)


class GrootSampleTransform:
    """The per-sample transform (picklable: runs in DataLoader workers); also takes inference observations
    (the same keys without ``action``).

    Args:
        model_config, data_config: the run's sections.
        processor: the Qwen3-VL prompt processor.
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
    """

    def __init__(self, model_config: GrootModelConfig, data_config: GrootDataConfig, processor: VLProcessor,
                 state_norm: GrootNormalizer | None, action_norm: GrootNormalizer | None) -> None:
        self.model_config = model_config
        self.data_config = data_config
        self.processor = processor
        self.state_norm = state_norm
        self.action_norm = action_norm
        self.slot = embodiment_slot(data_config.embodiment_tag, data_config.embodiment_id)
        self.tokens_per_image = processor.tokens_per_image(*data_config.image_size)

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        cfg, mcfg = self.data_config, self.model_config
        images = self._views(sample)
        text = sample.get(cfg.language_key)
        if not isinstance(text, str):
            raise DataError(f"sample has no instruction string under data.language_key={cfg.language_key!r} "
                            f"(got {type(text).__name__}; keys: {', '.join(sorted(sample))})")
        text = formalize(text) if cfg.formalize_language else text
        ids = self.processor.prompt_ids(text, num_images=images.shape[0], tokens_per_image=self.tokens_per_image)
        state = self._vector(sample, cfg.state_key, cfg.state_dim, self.state_norm).reshape(-1)
        padded_state = torch.zeros(1, mcfg.max_state_dim, dtype=torch.float32)
        padded_state[0, : state.shape[0]] = state
        index = sample.get("index")
        out: dict[str, Any] = {
            "images": images, "input_ids": torch.tensor(ids, dtype=torch.long), "state": padded_state,
            "embodiment_id": torch.tensor(self.slot, dtype=torch.long),
            "sample_index": torch.as_tensor(index if index is not None else -1, dtype=torch.long).reshape(()),
        }
        if cfg.action_key in sample:
            out.update(self._actions(sample))
        return out

    def _views(self, sample: Mapping[str, Any]) -> torch.Tensor:
        cfg = self.data_config
        per_camera = []
        for key in cfg.camera_keys:
            found = next((k for k in camera_candidates(key) if sample.get(k) is not None), None)
            if found is None:
                raise DataError(f"sample has no camera {key!r} (tried {', '.join(camera_candidates(key))}; keys: "
                                f"{', '.join(sorted(sample))}); GR00T N1.7 needs every view of data.camera_keys")
            frames = as_uint8_frames(sample[found], found)
            per_camera.append(torch.stack([
                groot_view(frame, size=tuple(cfg.image_size), resize_edge=cfg.resize_edge,
                           crop_fraction=cfg.crop_fraction) for frame in frames]))
        lengths = {v.shape[0] for v in per_camera}
        if len(lengths) != 1:
            raise DataError(f"cameras {cfg.camera_keys} carry different numbers of frames {sorted(lengths)}")
        return torch.stack(per_camera, dim=1).flatten(0, 1)  # frame-major, then camera

    def _vector(self, sample: Mapping[str, Any], key: str, dim: int | None, norm: GrootNormalizer | None
                ) -> torch.Tensor:
        if key not in sample:
            raise DataError(f"sample has no {key!r} (keys: {', '.join(sorted(sample))}); set data.state_key / "
                            "data.action_key to the dataset's names")
        value = torch.as_tensor(sample[key]).float()
        if dim is not None and value.shape[-1] != dim:
            kind = "state" if key == self.data_config.state_key else "action"
            raise DataError(f"{key}: last dimension is {value.shape[-1]} but data.{kind}_dim is {dim}; set "
                            f"data.{kind}_dim={value.shape[-1]}")
        return norm.normalize(value) if norm is not None else value

    def _actions(self, sample: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        cfg, mcfg = self.data_config, self.model_config
        actions = self._vector(sample, cfg.action_key, cfg.action_dim, self.action_norm)
        if actions.ndim == 1:
            actions = actions[None]
        steps, dims = min(actions.shape[0], cfg.action_horizon), actions.shape[1]
        padded = torch.zeros(mcfg.action_horizon, mcfg.max_action_dim, dtype=torch.float32)
        padded[:steps, :dims] = actions[:steps]
        mask = torch.zeros_like(padded)
        mask[:steps, :dims] = 1.0
        is_pad = sample.get(f"{cfg.action_key}_is_pad")
        if cfg.mask_padded_actions and is_pad is not None:
            mask[:steps] *= (~torch.as_tensor(is_pad, dtype=torch.bool)[:steps]).float()[:, None]
        return {"actions": padded, "action_mask": mask}

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Model actions [B, model.action_horizon, max_action_dim] -> dataset units [B, data.action_horizon,
        action_dim] (the transforms' ``postprocess_actions``)."""
        cfg = self.data_config
        real = actions[:, : cfg.action_horizon, : cfg.action_dim]
        return self.action_norm.unnormalize(real) if self.action_norm is not None else real.float()


class GrootCollate:
    """Stacks transformed samples into a GrootBatch, left-padding the prompts and computing their multimodal RoPE
    positions (picklable; runs in the DataLoader workers).

    Args:
        pad_token_id, image_token_id: the processor's padding and image placeholder ids.
        grid: merged token grid (rows, cols) of one view.
    """

    def __init__(self, pad_token_id: int, image_token_id: int, grid: tuple[int, int]) -> None:
        self.pad_token_id = pad_token_id
        self.image_token_id = image_token_id
        self.grid = tuple(grid)

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> GrootBatch:
        length = max(int(s["input_ids"].shape[0]) for s in samples)
        ids = torch.full((len(samples), length), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(samples), length, dtype=torch.bool)
        for row, s in enumerate(samples):
            n = int(s["input_ids"].shape[0])
            ids[row, length - n:] = s["input_ids"]
            mask[row, length - n:] = True
        has_actions = "actions" in samples[0]
        image_mask = (ids == self.image_token_id) & mask
        return GrootBatch(
            images=torch.stack([s["images"] for s in samples]), input_ids=ids, attention_mask=mask,
            image_mask=image_mask, position_ids=mrope_positions(mask, image_mask, self.grid),
            state=torch.stack([s["state"] for s in samples]),
            embodiment_id=torch.stack([s["embodiment_id"] for s in samples]),
            actions=torch.stack([s["actions"] for s in samples]) if has_actions else None,
            action_mask=torch.stack([s["action_mask"] for s in samples]) if has_actions else None,
            sample_index=torch.stack([s["sample_index"] for s in samples]))


def _normalizers(data_config: GrootDataConfig, stats: Stats | None
                 ) -> tuple[GrootNormalizer | None, GrootNormalizer | None]:
    mode = data_config.normalization
    if mode == "none":
        return None, None
    if stats is None:
        raise DataError(f"data.normalization={mode} needs the dataset statistics of {data_config.state_key!r} and "
                        f"{data_config.action_key!r}, but none were given; set data.normalization=none to train on "
                        "raw values")
    return tuple(GrootNormalizer.from_stats(stats, key, mode, clip=data_config.clip_outliers,
                                            setting="data.normalization")
                 for key in (data_config.state_key, data_config.action_key))  # type: ignore[return-value]


def make_transforms(model_config: GrootModelConfig, data_config: GrootDataConfig, *,
                    stats: Stats | None) -> Transforms:
    """Transforms of the groot_n1_7 plugins (``ModelSpec.transforms``).

    ``stats`` are the dataset's statistics (resolved by core, or a policy folder's copy). The processor comes from
    ``data.tokenizer_path`` / ``--tokenizer-path`` (environment TOKENIZER_PATH); ``model.processor=tiny`` uses the
    built-in one when neither is set. Its patch/merge sizes, pixel statistics and vocabulary must fit the model.
    """
    if data_config.camera_keys is None:
        raise ConfigError(["data.camera_keys is not set; GR00T N1.7 needs its views named (data.camera_keys=[...])"])
    processor = load_processor(model_config.processor, data_config.resolved_tokenizer_path())
    problems = check_compatible(processor, patch_size=model_config.vision_patch_size,
                                merge_size=model_config.vision_merge_size,
                                temporal_patch_size=model_config.vision_temporal_patch_size,
                                image_mean=model_config.image_mean, image_std=model_config.image_std,
                                vocab_size=model_config.vocab_size, image_size=tuple(data_config.image_size))
    if problems:
        raise ConfigError(problems)
    state_norm, action_norm = _normalizers(data_config, stats)
    for kind, norm, dim in (("state", state_norm, data_config.state_dim), ("action", action_norm,
                                                                          data_config.action_dim)):
        if norm is not None and dim is not None and norm.dim != dim:
            raise DataError(f"the statistics of data.{kind}_key have {norm.dim} dimensions but data.{kind}_dim is "
                            f"{dim}")
    transform = GrootSampleTransform(model_config, data_config, processor, state_norm, action_norm)
    step = model_config.vision_patch_size * model_config.vision_merge_size
    grid = (data_config.image_size[0] // step, data_config.image_size[1] // step)
    return Transforms(sample_transform=transform,
                      collate_fn=GrootCollate(processor.pad_token_id, processor.image_token_id, grid),
                      postprocess_actions=transform.unnormalize_actions)
