"""``--dataset-strategy dreamzero``: DreamZero's LeRobot v2.x data (GR00T ``meta/modality.json``) for the
DreamZero models.

Plans, before any frame is read: the embodiment's keys (:mod:`.embodiments`, checked against modality.json with
the ``groot_n1_7`` strategy's parser), the sample index (:mod:`.index`: fixed windows, or DROID language chunks),
the normalization statistics (:mod:`.stats`), the per-sample transform (:mod:`.transforms`) and, when
``data.precomputed_cache_dir`` is set, the cache (:mod:`.cache`; validated by its manifest, or file by file
with ``data.cache_validation`` 'shapes' / 'off'). Samples are the golden files' DreamZero
samples (``../shared/datasets/strategies/README.md``); :mod:`.collate` batches them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy
from embodied_data.strategies.groot import ModalityLayout, Slice, load_modality
from embodied_models.dreamzero.data.cache import (
    CacheReader,
    cache_config_block,
    rebuild_hint,
    resolve_cache_dir,
    validate_cache,
)
from embodied_models.dreamzero.data.cache_shapes import CacheShapeCheck
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.embodiments import Embodiment, embodiment
from embodied_models.dreamzero.data.index import CHUNK, LanguageChunkIndexBuilder, WindowIndexBuilder
from embodied_models.dreamzero.data.stats import (
    compute_relative_stats,
    load_relative_stats,
    load_stats,
    part_stats,
)
from embodied_models.dreamzero.data.transforms import DreamZeroSampleTransform, LanguageSource, Part
from embodied_models.dreamzero.data.video import ColorJitter

__all__ = ["DreamZeroStrategy", "build_strategy", "plan_dreamzero", "relative_keys"]

logger = logging.getLogger("embodied.dreamzero.data")
_WARNED: set[str] = set()  # (validation, cache) pairs already warned about, once per process


def relative_keys(data: DreamZeroDataConfig, emb: Embodiment) -> tuple[str, ...]:
    """Action parts made relative: ``data.relative_action_keys``, else every part without 'gripper'."""
    if not data.relative_action:
        return ()
    if data.relative_action_keys is not None:
        unknown = [k for k in data.relative_action_keys if k not in emb.action]
        if unknown:
            raise UsageError(f"data.relative_action_keys {unknown} are not action parts of {emb.tag} "
                             f"({', '.join(emb.action)})")
        return tuple(data.relative_action_keys)
    return tuple(k for k in emb.action if "gripper" not in k.lower())


def _find(parts: tuple[Slice, ...], name: str, *, kind: str, meta: LeRobotMeta) -> Slice:
    for part in parts:
        if part.name == name:
            return part
    raise DataError(f"{meta.root / 'meta' / 'modality.json'}: the DreamZero embodiment needs {kind}.{name}; the file "
                    f"declares {kind} parts {', '.join(p.name for p in parts) or 'none'}")


def _cameras(layout: ModalityLayout, emb: Embodiment, meta: LeRobotMeta) -> tuple[str, ...]:
    missing = [name for name in emb.video if name not in layout.video]
    if missing:
        raise DataError(f"{meta.root / 'meta' / 'modality.json'}: embodiment {emb.tag} needs videos {missing}; the "
                        f"file declares {', '.join(layout.video) or 'none'} (set data.embodiment_tag to the dataset's "
                        "embodiment)")
    return tuple(layout.video[name] for name in emb.video)


def _language(layout: ModalityLayout, emb: Embodiment, meta: LeRobotMeta) -> tuple[LanguageSource, ...]:
    sources = []
    for name in emb.language:
        column = layout.annotation.get(name)
        if column is None:
            raise DataError(f"{meta.root / 'meta' / 'modality.json'}: embodiment {emb.tag} needs annotation.{name}; "
                            f"the file declares {', '.join(layout.annotation) or 'none'}")
        numeric = meta.features[column].dtype != "string"
        sources.append(LanguageSource(name=name, column=column, tasks=dict(meta.tasks) if numeric else None))
    return tuple(sources)


def _parts(meta: LeRobotMeta, data: DreamZeroDataConfig, emb: Embodiment, layout: ModalityLayout
           ) -> tuple[tuple[Part, ...], tuple[Part, ...]]:
    state_slices = [_find(layout.state, n, kind="state", meta=meta) for n in emb.state]
    action_slices = [_find(layout.action, n, kind="action", meta=meta) for n in emb.action]
    columns = list(dict.fromkeys(s.original_key for s in (*state_slices, *action_slices)))
    stats = load_stats(meta, columns, stats_path=data.stats_path)
    relative = relative_keys(data, emb)
    stored_relative = load_relative_stats(meta) if relative else {}
    horizon = CHUNK if data.language_chunk_sampling else data.action_horizon

    def part(s: Slice, rel: bool) -> Part:
        if rel:
            entry = stored_relative.get(s.name)
            if entry is None:
                anchor = _find(layout.state, s.name, kind="state", meta=meta)
                entry = compute_relative_stats(meta, state_column=anchor.original_key,
                                               state_slice=slice(anchor.start, anchor.end),
                                               action_column=s.original_key, action_slice=slice(s.start, s.end),
                                               horizon=horizon)
        else:
            entry = part_stats(stats[s.original_key], slice(s.start, s.end))
        return Part(name=s.name, column=s.original_key, start=s.start, end=s.end,
                    q01=np.asarray(entry["q01"], dtype=np.float64), q99=np.asarray(entry["q99"], dtype=np.float64),
                    relative=rel)

    return (tuple(part(s, False) for s in state_slices),
            tuple(part(s, s.name in relative) for s in action_slices))


def _unchecked_cache(cache: Path, data: DreamZeroDataConfig) -> CacheShapeCheck:
    """The per-file check of a cache read without its manifest ('shapes' / 'off'); 'off', or 'shapes' on a cache that
    has a manifest, warns once per cache what is not checked."""
    if not cache.is_dir():
        raise DataError(f"data.precomputed_cache_dir: {cache} does not exist (or is not a folder)")
    key = f"{data.cache_validation}:{cache}"
    if data.cache_validation == "off" and key not in _WARNED:
        logger.warning("data.cache_validation=off: %s is read without checking its manifest (dataset metadata "
                       "fingerprint, transform settings, sample-transform seed, coverage), the size and sha256 of "
                       "its files, or the dtype of their tensors; only tensor shapes are checked as files are read",
                       cache)
    elif (cache / "manifest.json").exists() and key not in _WARNED:
        logger.warning("data.cache_validation=shapes: %s has a manifest.json, which is not checked (dataset "
                       "metadata, transform settings, seeding, coverage, file hashes); data.cache_validation=manifest "
                       "checks it", cache)
    _WARNED.add(key)
    return CacheShapeCheck(prompt_rows=data.max_text_length, check_dtype=data.cache_validation == "shapes")


def _cache(meta: LeRobotMeta, data: DreamZeroDataConfig) -> CacheReader | None:
    if data.precomputed_cache_dir is None:
        return None
    cache = resolve_cache_dir(meta.root, data.precomputed_cache_dir)
    hint = rebuild_hint(meta.root, cache)
    if data.cache_validation != "manifest":
        return CacheReader(cache=cache, template=data.cache_template, features=tuple(data.cache_features),
                           validate_sample_hash=False, hint=hint, shapes=_unchecked_cache(cache, data))
    config = cache_config_block(image_height=data.image_height, image_width=data.image_width,
                                crop_scale=data.crop_scale, enable_color_jitter=data.enable_color_jitter,
                                max_chunk_size=data.max_chunk_size,
                                language_chunk_sampling=data.language_chunk_sampling,
                                num_frames=None if data.language_chunk_sampling else data.num_frames)
    validate_cache(cache, dataset_root=meta.root, dataset_len=meta.total_frames, features=data.cache_features,
                   template=data.cache_template, transform_config=config,
                   use_sample_transform_seed=data.use_sample_transform_seed,
                   sample_transform_seed=data.sample_transform_seed,
                   require_full_coverage=data.cache_require_full_coverage)
    return CacheReader(cache=cache, template=data.cache_template, features=tuple(data.cache_features),
                       validate_sample_hash=data.validates_sample_hash, hint=hint)


def plan_dreamzero(meta: LeRobotMeta, data: DreamZeroDataConfig, *, training: bool = True,
                   with_cache: bool = True) -> DatasetPlan:
    """The plan of one dataset (see module docstring); ``with_cache=False`` ignores the cache (precompute)."""
    if not meta.root.joinpath("meta", "modality.json").exists():
        raise DataError(f"{meta.root / 'meta' / 'modality.json'} is missing: --dataset-strategy dreamzero reads "
                        "GR00T's modality.json (write it with DreamZero's prepare_dataset.py --embodiment-tag ...)")
    emb = embodiment(data.embodiment_tag)
    layout = load_modality(meta)
    cameras = _cameras(layout, emb, meta)
    state, action = _parts(meta, data, emb, layout)
    shared = {p.column for p in state} & {p.column for p in action}
    if shared:
        raise DataError(f"{meta.root}: state and action parts read the same columns {sorted(shared)}; DreamZero "
                        "reads states and actions at different rows")
    language = _language(layout, emb, meta)
    state_columns = tuple(dict.fromkeys(p.column for p in state))
    action_columns = tuple(dict.fromkeys(p.column for p in action))
    builder: Any
    if data.language_chunk_sampling:
        chunk_length = CHUNK
        builder = LanguageChunkIndexBuilder(
            language_column=language[0].column, max_chunks=data.max_chunk_size, camera_keys=cameras,
            state_columns=state_columns, action_columns=action_columns, keep_empty=data.keep_empty_language_chunks,
            require_full=data.require_full_language_chunks)
    else:
        chunk_length = data.action_horizon
        c, a, sh = data.max_chunk_size, data.action_horizon, data.state_horizon
        state_offsets = tuple(k * a + j for k in range(c) for j in range(sh)) if emb.tag == "libero_sim" \
            else tuple(range(sh * c))
        offsets: dict[str, tuple[int, ...]] = {cam: tuple(range(data.num_frames)) for cam in cameras}
        offsets.update({col: state_offsets for col in state_columns})
        offsets.update({col: tuple(range(a * c)) for col in action_columns})
        builder = WindowIndexBuilder(offsets=offsets)
    transform = DreamZeroSampleTransform(
        embodiment_id=emb.id, layout=emb.layout, cameras=cameras, state=state, action=action, language=language,
        random_language=emb.tag == "oxe_droid", chunk_length=chunk_length, state_horizon=data.state_horizon,
        image_size=(data.image_height, data.image_width), crop_scale=data.crop_scale,
        jitter=ColorJitter() if data.enable_color_jitter else None, max_state_dim=data.max_state_dim,
        max_action_dim=data.max_action_dim, training=training,
        use_sample_transform_seed=data.use_sample_transform_seed, sample_transform_seed=data.sample_transform_seed,
        cache=_cache(meta, data) if with_cache else None)
    return DatasetPlan(delta_timestamps={}, camera_keys=list(cameras), transform=transform, feature_map=transform,
                       sample_index=builder)


class DreamZeroStrategy(DatasetStrategy):
    """The ``dreamzero`` strategy (module docstring)."""

    name = "dreamzero"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        if not isinstance(data_config, DreamZeroDataConfig):
            raise UsageError(f"--dataset-strategy dreamzero needs a DreamZero model (its data section is "
                             f"{type(data_config).__name__}); choose --model-name dreamzero_*")
        return plan_dreamzero(meta, data_config)


def build_strategy() -> DreamZeroStrategy:
    """Factory of the ``dreamzero`` strategy (entry point ``embodied.dataset_strategies``)."""
    return DreamZeroStrategy()
