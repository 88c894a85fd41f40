"""What the Cosmos3 model reads of a collated batch: the golden ``Cosmos3Batch`` field names.

Per-sample fields, each a list with one entry per sample or a tensor stacked over samples:

- ``videos``: uint8 ``[3, T, H, W]`` (the resolution-bucket canvas; content at the top left);
- ``image_sizes``: float ``[4]`` = ``(canvas_h, canvas_w, content_h, content_w)``;
- ``text_token_ids``: the chat-templated caption ids (list of ints or a 1-D tensor; the model appends EOS and
  start-of-generation);
- ``actions``: float ``[T_a, max_action_dim]`` (row 0 the observed state, rows 1.. the commands), with
  ``raw_action_dims`` int ``[]``; training needs them, inference batches may lack them (or hold only the observed
  row);
- ``action_domain_ids`` int ``[]`` (or the stacked ``domain_id`` [B]); ``fps_values``: float;
- ``sequence_plans`` (optional): objects or mappings with ``condition_frame_indexes_vision``,
  ``condition_frame_indexes_action`` and ``action_start_frame_offset`` (default ``[0]``, ``[0]``, 0, the
  action policy's plan);
- ``dataset_indices`` (optional): int ``[]``; keys the per-sample training draws (else the position in the batch).

A missing field is a :class:`~embodied_core.errors.DataError` naming it and the fields present.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch

from embodied_core.errors import DataError

__all__ = ["Cosmos3Inputs", "SamplePlan", "read_batch"]

_REQUIRED = ("videos", "image_sizes", "text_token_ids", "fps_values")


@attrs.define
class SamplePlan:
    """Which latent frames / action rows are clean conditioning, and where action row 0 sits in time."""

    condition_frames_vision: tuple[int, ...] = (0,)
    condition_rows_action: tuple[int, ...] = (0,)
    action_start_frame_offset: int = 0


@attrs.define
class Cosmos3Inputs:
    """The batch as per-sample lists."""

    videos: list[torch.Tensor]
    content_hw: list[tuple[int, int]]
    text_ids: list[list[int]]
    actions: list[torch.Tensor] | None
    raw_action_dims: list[int] | None
    domain_ids: list[torch.Tensor]
    fps: list[float]
    plans: list[SamplePlan]
    sample_keys: list[int]

    @property
    def size(self) -> int:
        """Number of samples."""
        return len(self.videos)


def _get(batch: Any, name: str) -> Any:
    if isinstance(batch, Mapping):
        return batch.get(name)
    return getattr(batch, name, None)


def _names(batch: Any) -> list[str]:
    if isinstance(batch, Mapping):
        return sorted(batch)
    return sorted(k for k in vars(batch) if not k.startswith("_")) if hasattr(batch, "__dict__") else []


def _items(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return list(value.unbind(0))
    return list(value)


def _plan(plan: Any) -> SamplePlan:
    if plan is None:
        return SamplePlan()

    def field(name: str, default: Any) -> Any:
        value = plan.get(name) if isinstance(plan, Mapping) else getattr(plan, name, None)
        return default if value is None else value

    return SamplePlan(tuple(int(i) for i in field("condition_frame_indexes_vision", (0,))),
                      tuple(int(i) for i in field("condition_frame_indexes_action", (0,))),
                      int(field("action_start_frame_offset", 0)))


def read_batch(batch: Any) -> Cosmos3Inputs:
    """Reads the per-sample fields (DataError naming the missing ones)."""
    missing = [name for name in _REQUIRED if _get(batch, name) is None]
    if missing:
        raise DataError(f"Cosmos3 batch lacks {', '.join(missing)} (has: {', '.join(_names(batch)) or 'nothing'}); "
                        "build batches with the cosmos3 transforms (--dataset-strategy cosmos3_droid)")
    videos = _items(_get(batch, "videos"))
    sizes = _items(_get(batch, "image_sizes"))
    content = [(int(s[2]), int(s[3])) for s in (torch.as_tensor(x).reshape(-1) for x in sizes)]
    texts = [x.tolist() if isinstance(x, torch.Tensor) else list(x) for x in _items(_get(batch, "text_token_ids"))]
    plans_value = _get(batch, "sequence_plans")
    plans = [_plan(p) for p in plans_value] if plans_value is not None else [SamplePlan() for _ in videos]
    indices = _get(batch, "dataset_indices")
    keys = list(range(len(videos)))
    if indices is not None and all(i is not None for i in _items(indices)):
        keys = [int(i) for i in _items(indices)]
    domains = _get(batch, "action_domain_ids")
    domains = domains if domains is not None else _get(batch, "domain_id")
    if domains is None:
        raise DataError(f"Cosmos3 batch lacks action_domain_ids (or domain_id) (has: {', '.join(_names(batch))})")
    actions, dims = _get(batch, "actions"), _get(batch, "raw_action_dims")
    inputs = Cosmos3Inputs(
        videos=videos, content_hw=content, text_ids=texts,
        actions=_items(actions) if actions is not None else None,
        raw_action_dims=[int(x) for x in _items(dims)] if dims is not None else None,
        domain_ids=[torch.as_tensor(x).reshape(()) for x in _items(domains)],
        fps=[float(x) for x in _items(_get(batch, "fps_values"))], plans=plans, sample_keys=keys)
    names = ["videos", "content_hw", "text_ids", "domain_ids", "fps", "plans", "sample_keys"]
    names += [n for n in ("actions", "raw_action_dims") if getattr(inputs, n) is not None]
    lengths = {name: len(getattr(inputs, name)) for name in names}
    if len(set(lengths.values())) != 1:
        raise DataError(f"Cosmos3 batch fields disagree on the number of samples: {lengths}")
    return inputs
