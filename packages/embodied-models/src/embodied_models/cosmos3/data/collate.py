"""``Cosmos3Batch`` and its collate function: transformed samples (:mod:`.transform`) -> the model's batch.

Fields named as LoongForge's ``Cosmos3Batch`` (per-sample lists, what the golden files record): ``videos``,
``text_token_ids``, ``sequence_plans``, ``fps_values``, ``actions``, ``raw_action_dims``, ``action_domain_ids``,
``idle_frames``, ``dataset_indices``, ``episode_indices``, ``start_frames``, ``task_indices``, ``image_sizes``,
and its deferred-video fields ``video_stacks``, ``view_splits``, ``video_ops``, ``video_rng_states``,
``video_pipeline`` (always None: the video is finished in the worker).

Stacked extras (the list entries above are views of these, so nothing is stored twice):

- ``video`` [B, 3, T, H, W] uint8 (samples of one run share the bucket; differing shapes are an error);
- ``action`` [B, T, max_action_dim] float32 and ``action_channel_mask`` [B, max_action_dim] bool (channels below
  each sample's ``raw_action_dim``); None when the samples carry no actions;
- ``text_ids`` [B, L] int64 (right-padded with 0) and ``text_mask`` [B, L] bool (True on real ids), L the longest;
- ``domain_id`` [B] int64, ``fps`` [B] float32, ``image_size`` [B, 4] float32.

``to(device)`` moves every tensor (and the list views with them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from embodied_core.errors import DataError
from embodied_models.cosmos3.data.plan import SequencePlan

__all__ = ["Cosmos3Batch", "collate_cosmos3"]


@attrs.define(kw_only=True, slots=False)
class Cosmos3Batch:
    """One Cosmos3 training batch (see the module docstring); a plain attribute object (``vars(batch)`` lists the
    fields)."""

    videos: list[torch.Tensor] | None
    text_token_ids: list[list[int]]
    sequence_plans: list[SequencePlan]
    fps_values: list[float]
    actions: list[torch.Tensor] | None = None
    raw_action_dims: list[torch.Tensor] | None = None
    action_domain_ids: list[torch.Tensor] | None = None
    idle_frames: list[torch.Tensor] | None = None
    dataset_indices: list[Any] | None = None
    episode_indices: list[Any] | None = None
    start_frames: list[Any] | None = None
    task_indices: list[Any] | None = None
    image_sizes: list[torch.Tensor] | None = None
    video_stacks: None = None
    view_splits: None = None
    video_ops: None = None
    video_rng_states: None = None
    video_pipeline: None = None
    video: torch.Tensor | None = None
    action: torch.Tensor | None = None
    action_channel_mask: torch.Tensor | None = None
    text_ids: torch.Tensor | None = None
    text_mask: torch.Tensor | None = None
    domain_id: torch.Tensor | None = None
    fps: torch.Tensor | None = None
    image_size: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        """Number of samples."""
        return len(self.text_token_ids)

    def to(self, device: torch.device | str) -> Cosmos3Batch:
        """A batch with every tensor on ``device`` (the per-sample lists as views of the moved stacks)."""
        views = {"videos": "video", "actions": "action", "image_sizes": "image_size"}
        moved = {f.name: _move(getattr(self, f.name), device) for f in attrs.fields(type(self))
                 if getattr(self, views.get(f.name, f.name)) is None or f.name not in views}
        for listed, stacked in views.items():
            if listed not in moved:  # a view of a stacked tensor: moved with it
                moved[listed] = list(moved[stacked].unbind(0))
        return Cosmos3Batch(**moved)


def _move(value: Any, device: torch.device | str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, list):
        return [_move(v, device) for v in value]
    return value


def _stack(samples: Sequence[Mapping[str, Any]], key: str) -> torch.Tensor:
    values = [s[key] for s in samples]
    shapes = {tuple(v.shape) for v in values}
    if len(shapes) > 1:
        where = ", ".join(f"dataset_index {int(s['dataset_index'])}: {list(s[key].shape)}"
                          for s in samples if s.get("dataset_index") is not None)
        raise DataError(f"Cosmos3 batch: the samples' {key!r} shapes differ ({where or sorted(shapes)}); samples "
                        "of one batch must share the resolution bucket and window length")
    return torch.stack(values)


def collate_cosmos3(samples: Sequence[Mapping[str, Any]]) -> Cosmos3Batch:
    """Collects transformed samples into a :class:`Cosmos3Batch` (lists plus the stacked extras)."""
    if not samples:
        raise DataError("Cosmos3 batch: no samples")
    video = _stack(samples, "video")
    has_action = all("action" in s and s["sequence_plan"].has_action for s in samples)
    action = _stack(samples, "action") if has_action else None
    mask = None
    if action is not None:
        dims = torch.stack([torch.as_tensor(s["raw_action_dim"]) for s in samples])
        mask = torch.arange(action.shape[-1])[None, :] < dims[:, None]
    ids = [list(s["text_token_ids"]) for s in samples]
    longest = max(len(i) for i in ids)
    text_ids = torch.zeros(len(ids), longest, dtype=torch.long)
    text_mask = torch.zeros(len(ids), longest, dtype=torch.bool)
    for row, tokens in enumerate(ids):
        text_ids[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        text_mask[row, :len(tokens)] = True
    image_size = _stack(samples, "image_size")

    def listed(key: str) -> list[Any]:
        return [s.get(key) for s in samples]

    return Cosmos3Batch(
        videos=list(video.unbind(0)), text_token_ids=ids, sequence_plans=listed("sequence_plan"),
        fps_values=[float(s["fps"]) for s in samples],
        actions=list(action.unbind(0)) if action is not None else None,
        raw_action_dims=listed("raw_action_dim") if has_action else None,
        action_domain_ids=listed("domain_id") if has_action else None,
        idle_frames=listed("idle_frames") if has_action else None,
        dataset_indices=listed("dataset_index"), episode_indices=listed("episode_index"),
        start_frames=listed("start_frame"), task_indices=listed("task_index"),
        image_sizes=list(image_size.unbind(0)),
        video=video, action=action, action_channel_mask=mask, text_ids=text_ids, text_mask=text_mask,
        domain_id=torch.stack([torch.as_tensor(s["domain_id"], dtype=torch.long) for s in samples]),
        fps=torch.tensor([float(s["fps"]) for s in samples], dtype=torch.float32), image_size=image_size)
