"""Writes the policy files into a checkpoint directory (the Checkpointer's ``write_extras``).

The trainer builds one :class:`PolicyWriter` after the dataset and transforms exist (the statistics are the
ones handed to ``make_transforms``); rank 0 calls it with each checkpoint's temporary directory.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core.config.converter import unstructure
from embodied_core.config.provenance import embodied_versions
from embodied_core.config.run_config import RunConfig
from embodied_core.data.image_augmentation import augmentation_record
from embodied_core.policy.folder import (
    ASSETS_DIR,
    EMBODIMENT_STATS_DIR,
    POLICY_FILE,
    POLICY_FORMAT,
    STATS_FILE,
    TOKENIZER_DIR,
    copy_if_small,
    write_stats,
)
from embodied_core.policy.spec import load_policy_class, plugin_record
from embodied_core.protocols import DatasetFeature, Stats
from embodied_core.registry.specs import ModelSpec

__all__ = ["PolicyWriter", "embodiments_record", "frame_shape", "interface_record", "tokenizer_source"]

logger = logging.getLogger("embodied.policy")


def frame_shape(feature: DatasetFeature | None, image_size: tuple[int, int]) -> tuple[int, int, int]:
    """(H, W, C) of a camera's frames as a client sends them: the dataset's stored frame shape, or the data
    config's ``image_size`` with 3 channels for datasets that declare none (generated data)."""
    if feature is None or len(feature.shape) != 3:
        return int(image_size[0]), int(image_size[1]), 3
    a, b, c = (int(x) for x in feature.shape)
    names = [n.lower() for n in feature.names or ()]
    channels_first = (names[:1] in (["channel"], ["channels"])) or (c not in (1, 3, 4) and a in (1, 3, 4))
    return (b, c, a) if channels_first else (a, b, c)


def _names(configured: list[str] | None, features: Mapping[str, DatasetFeature], key: str) -> list[str] | None:
    """Per-dimension names: the data config's (set or inferred), else the dataset feature's, else None."""
    if configured:
        return list(configured)
    feature = features.get(key)
    return list(feature.names) if feature is not None and feature.names else None


def interface_record(config: RunConfig, spec: ModelSpec, features: Mapping[str, DatasetFeature],
                     fps: float | None) -> dict[str, Any]:
    """What a client must send and gets back (the ``interface`` entry of ``policy.json``)."""
    data = config.data
    cameras = list(data.camera_keys)
    return {
        "camera_keys": cameras,
        "image_shapes": {key: list(frame_shape(features.get(key), data.image_size)) for key in cameras},
        "image_size": list(data.image_size),
        "image_history": data.image_history,
        "state_key": data.state_key, "state_dim": data.state_dim,
        "state_names": _names(data.state_names, features, data.state_key),
        "state_history": data.state_history,
        "action_key": data.action_key, "action_dim": data.action_dim,
        "action_names": _names(data.action_names, features, data.action_key),
        "action_horizon": data.action_horizon,
        "fps": float(fps) if fps is not None else None,
        "needs_task": spec.needs_task,
    }


def tokenizer_source(config: RunConfig) -> str | None:
    """The tokenizer training read: the data config's ``tokenizer_path``, else ``--tokenizer-path`` (only for data
    configs that declare a ``tokenizer_path`` field), as an absolute path when it is on disk, else as given (a hub
    id); None for built-in tokenizers."""
    if "tokenizer_path" not in attrs.fields_dict(type(config.data)):
        return None
    path = config.data.tokenizer_path or config.training.tokenizer_path
    if not path:
        return None
    local = Path(path).expanduser()
    return str(local.resolve()) if local.exists() else str(path)


def embodiments_record(config: RunConfig, spec: ModelSpec, mixture: Any) -> dict[str, Any]:
    """The ``embodiments`` entry of ``policy.json`` for a run on a dataset mixture: the default tag and, per tag,
    its data section, inference interface, statistics file and the entries (datasets) it was trained on."""
    tags: dict[str, Any] = {}
    entries = mixture.mixture.entries
    for number, (tag, record) in enumerate(mixture.embodiments.items()):
        tags[tag] = {
            "data_config": unstructure(record.data_config),
            "interface": interface_record(attrs.evolve(config, data=record.data_config), spec, record.features,
                                          record.fps),
            "stats_file": STATS_FILE if tag == mixture.default_embodiment
            else f"{EMBODIMENT_STATS_DIR}/embodiment_{number}.safetensors",
            "entries": [{"path": entries[i].path, "name": entries[i].name, "weight": entries[i].weight}
                        for i in record.entries],
        }
    return {"default": mixture.default_embodiment, "stats": mixture.mixture.stats, "tags": tags}


class PolicyWriter:
    """Writes ``policy.json``, ``stats.safetensors``, ``tokenizer/`` and ``assets/`` into a checkpoint directory.

    Args:
        config: the run's resolved configuration.
        spec: the model plugin's spec.
        stats: the normalization statistics passed to ``make_transforms`` (None when the model uses none).
        features: the dataset's feature metadata.
        fps: the dataset's frame rate.
        mixture: the run's dataset mixture (``embodied_core.data.mixture.MixtureData``) when it trains on one: the
            folder then records every embodiment (:func:`embodiments_record`); ``stats``, ``features`` and ``fps``
            are its default embodiment's, and so are the top-level ``interface`` and ``stats.safetensors``.
    """

    def __init__(self, config: RunConfig, spec: ModelSpec, *, stats: Stats | None,
                 features: Mapping[str, DatasetFeature], fps: float | None, mixture: Any = None) -> None:
        self.config = config
        self.spec = spec
        self.stats = {key: dict(entry) for key, entry in (stats or {}).items()}
        self.mixture = mixture
        self.policy_class = load_policy_class(spec)
        self.doc: dict[str, Any] = {
            "policy_format": POLICY_FORMAT,
            "model_name": config.model_name,
            "plugin": plugin_record(config.model_name),
            "model_config": unstructure(config.model),
            "data_config": unstructure(config.data),
            "interface": interface_record(config, spec, features, fps),
            "stats_file": STATS_FILE,
            "features": {key: {"dtype": f.dtype, "shape": list(f.shape), "names": list(f.names or []) or None}
                         for key, f in features.items()},
            "dataset": {"format": config.training.dataset_format, "path": config.training.dataset_path},
            # what training augmented with, the preset expanded (a record only: policies never augment)
            "training_image_augmentation": augmentation_record(config),
            "versions": embodied_versions(),
        }
        if mixture is not None:
            default = mixture.default
            self.doc["interface"] = interface_record(attrs.evolve(config, data=default.data_config), spec,
                                                     default.features, default.fps)
            self.doc["embodiments"] = embodiments_record(config, spec, mixture)
        self.tokenizer = tokenizer_source(config)

    def __call__(self, directory: Path) -> None:
        """Writes the policy files into ``directory`` (rank 0, before the checkpoint is committed)."""
        directory = Path(directory)
        doc = dict(self.doc)
        write_stats(self.stats, directory / STATS_FILE)
        if self.mixture is not None:
            (directory / EMBODIMENT_STATS_DIR).mkdir(exist_ok=True)
            for tag, record in doc["embodiments"]["tags"].items():
                if record["stats_file"] != STATS_FILE:
                    write_stats(self.mixture.embodiments[tag].stats or {}, directory / record["stats_file"])
        copied = False
        if self.tokenizer is not None and Path(self.tokenizer).is_dir():  # a hub id stays a reference
            copied = copy_if_small(Path(self.tokenizer), directory / TOKENIZER_DIR, what="tokenizer")
        doc["tokenizer"] = {"source": self.tokenizer, "files": TOKENIZER_DIR if copied else None}
        assets = directory / ASSETS_DIR
        assets.mkdir(exist_ok=True)
        doc["assets"] = self.policy_class.write_assets(self.config, assets)
        if not any(assets.iterdir()):
            assets.rmdir()
        tmp = directory / f".{POLICY_FILE}.tmp-{os.getpid()}"
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=False))
        tmp.replace(directory / POLICY_FILE)
