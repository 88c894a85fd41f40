"""The declared seams between packages: what a model plugin, a training dataset, a transforms factory and a
policy are.

Each protocol says which members are required and which are optional with a default, in one place here:

- a model needs only ``forward`` (:data:`REQUIRED_MODEL_MEMBERS`), plus ``sample_actions`` to be used as a policy
  (:data:`POLICY_MODEL_MEMBERS`); the optional members (:data:`OPTIONAL_MODEL_MEMBERS`) have the defaults of
  :class:`ModelDefaults`, which :class:`embodied_core.EmbodiedModel` inherits and which core gives any other
  model (a plain ``nn.Module``) when it is built (``embodied_core.trainer.model_check.adapt_model``);
- a dataset needs only ``__len__`` and ``__getitem__`` (:data:`REQUIRED_DATASET_MEMBERS`); the other members of
  :class:`TrainingDataset` (:data:`DATASET_MEMBERS`) have the defaults of :class:`embodied_core.data.MapDataset`,
  which core gives any dataset a format returns (``embodied_core.data.dataset.build_training_dataset``).

Past those two adapters core never probes a plugin for a member (no ``getattr``/``hasattr``): it calls the members
directly. :func:`missing_members` names what an object lacks, so a plugin without a required member is an error
naming the member, raised right after the plugin is built.

This module imports no torch; the types it names are for type checkers and documentation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from embodied_core.checkpoint.keymap import LoadReport
    from embodied_core.model_api import ModelOutput, Transforms

__all__ = [
    "DATASET_MEMBERS",
    "MODEL_MEMBERS",
    "OPTIONAL_MODEL_MEMBERS",
    "POLICY_MEMBERS",
    "POLICY_MODEL_MEMBERS",
    "REQUIRED_DATASET_MEMBERS",
    "REQUIRED_MODEL_MEMBERS",
    "DatasetFeature",
    "MakeTransforms",
    "ModelDefaults",
    "ModelPlugin",
    "Policy",
    "PolicyMetadata",
    "Stats",
    "TrainingDataset",
    "missing_members",
]

Stats = Mapping[str, Mapping[str, "np.ndarray"]]
"""Normalization statistics: ``{feature key: {"mean"|"std"|"min"|"max"|"q01"|"q99"|...: float64 array [D]}}``."""


# ---------------------------------------------------------------------------------------------- models
@runtime_checkable
class ModelPlugin(Protocol):
    """What the ``nn.Module`` a model plugin's factory returns implements (DESIGN 6).

    The factory named by ``ModelSpec.factory`` is ``build_model(model_config, data_config) -> ModelPlugin``.
    Required: ``forward`` (and ``sample_actions`` for a policy); the other members are optional, with the
    defaults of :class:`ModelDefaults`.
    """

    def forward(self, batch: Any) -> ModelOutput:
        """Training loss of one collated batch: ``ModelOutput(loss, metrics)``; no ``.item()`` (no host sync)."""
        ...

    def sample_actions(self, batch: Any, noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        """Inference: the normalized action chunk ``[B, H, D_model]`` for a collated batch without actions.

        ``noise`` (model-specific: a tensor, or a dict of tensors) makes sampling deterministic; ``num_steps``
        overrides the configured number of denoising steps. Postprocessing to dataset units is the
        transforms' job (:attr:`Transforms.postprocess_actions`).
        """
        ...

    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """Module classes that are natural FSDP units (transformer blocks): with ``--distributed-strategy fsdp``
        and no ``--fsdp-wrap-modules``, each instance is sharded on its own; ``()`` when the model declares none
        (FSDP then picks repeated layers by size)."""
        ...

    def no_weight_decay(self) -> frozenset[str]:
        """Parameter names (or module paths) exempt from weight decay under ``--weight-decay-grouping bias_norm``,
        beyond biases and norm weights (adaLN tables, embeddings); ``frozenset()`` when none."""
        ...

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """Loads ``--pretrained-checkpoint`` strictly (official / lerobot layouts through the model's key map,
        or an embodied checkpoint) and returns the report; raises ``CheckpointError`` on any problem. Called
        right after the model is built (not when resuming), before ``--freeze-modules`` and wrapping."""
        ...

    def default_lora_targets(self) -> tuple[str, ...]:
        """``fnmatch`` patterns over ``named_modules()`` names of the linear layers a LoRA adapter wraps by
        default (attention and MLP projections of the towers worth adapting); ``()`` when the model declares
        none. ``--use-lora`` adapts them when ``--lora-target-modules`` is not given (:mod:`embodied_core.lora`)."""
        ...


    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes, in place, the parameters and buffers ``module`` (a submodule, or the model itself) holds, as
        building the model does (its children are initialized by their own calls, which come first). Used by
        ``--init-on-meta``: the model is built on the meta device, materialized (only the local shards under FSDP)
        and every module is initialized this way; a parameter or buffer left uninitialized is an error naming it.
        Must work on plain tensors in place (``torch.nn.init``, ``copy_``, ``fill_``)."""
        ...


REQUIRED_MODEL_MEMBERS: tuple[str, ...] = ("forward",)
"""What every model implements itself (training calls ``model(batch)``)."""

POLICY_MODEL_MEMBERS: tuple[str, ...] = ("sample_actions",)
"""What a model also implements itself to be served as a policy (``load_policy``, ``embodied serve``/``eval``) by
the transforms policy; a model that lacks it trains, and is refused when loaded as a policy."""


class ModelDefaults:
    """The defaults of the optional members of :class:`ModelPlugin` (a mixin without state; no torch import).

    :class:`embodied_core.EmbodiedModel` inherits them; core gives a model that is no ``EmbodiedModel`` the ones it
    lacks when it is built, so every model written against ``nn.Module`` alone trains.
    """

    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """No declared FSDP units: FSDP picks repeated layers by size (``--fsdp-min-num-params``)."""
        return ()

    def no_weight_decay(self) -> frozenset[str]:
        """No parameters exempt from weight decay beyond biases and norm weights."""
        return frozenset()

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """Strict load of an embodied checkpoint or a plain weights file with this module's own key names."""
        from embodied_core.checkpoint.pretrained import load_pretrained

        return load_pretrained(self, path)  # type: ignore[arg-type]  # mixed into an nn.Module

    def default_lora_targets(self) -> tuple[str, ...]:
        """No declared LoRA targets (``--use-lora`` then needs ``--lora-target-modules``)."""
        return ()

    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes what ``module`` holds the way building does: ``module.reset_parameters()`` for torch's layers
        (Linear, Conv, Embedding, norms); modules holding other parameters or buffers need an override."""
        reset = getattr(module, "reset_parameters", None)  # torch's layers, not a protocol member
        if callable(reset):
            reset()


OPTIONAL_MODEL_MEMBERS: tuple[str, ...] = ("fsdp_units", "no_weight_decay", "load_pretrained_checkpoint",
                                           "default_lora_targets", "init_module_weights")
"""The members with a default (:class:`ModelDefaults`); a model declaring one overrides its default."""

MODEL_MEMBERS: tuple[str, ...] = (*REQUIRED_MODEL_MEMBERS, *POLICY_MODEL_MEMBERS, *OPTIONAL_MODEL_MEMBERS)
"""Every member of :class:`ModelPlugin` (what a built model has once core applied the defaults)."""


# ---------------------------------------------------------------------------------------------- datasets
@attrs.frozen(kw_only=True)
class DatasetFeature:
    """Metadata of one dataset feature (a LeRobot ``info.json`` feature, an HDF5 dataset, ...).

    Attributes:
        key: the sample key (``observation.state``, ``action``, ``observation.images.front``).
        dtype: ``"video"``, ``"image"`` or a numpy dtype name (``"float32"``).
        shape: per-frame shape as stored (``(D,)`` for vectors, ``(H, W, C)`` for frames).
        names: per-dimension names when the dataset declares them (``("x", "y")``), else None.
    """

    key: str
    dtype: str
    shape: tuple[int, ...]
    names: tuple[str, ...] | None = None

    @property
    def is_visual(self) -> bool:
        """Whether the feature is a camera stream (video or image frames)."""
        return self.dtype in ("video", "image")


@runtime_checkable
class TrainingDataset(Protocol):
    """A map-style dataset of sample dicts with LeRobot keys, as core uses it.

    A format's factory returns any object with ``__len__`` and ``__getitem__`` (a list of dicts will do); core
    gives it the members it lacks (see :data:`DATASET_MEMBERS`).

    A sample holds ``observation.images.<cam>`` (uint8 ``[C, H, W]`` or ``[T, C, H, W]``), ``observation.state``,
    ``action`` (``[H, D]`` with ``action_is_pad``), ``task`` (str), ``index``, ``episode_index``,
    ``frame_index``, ``timestamp`` and ``<key>_is_pad`` for every key queried with time offsets (DESIGN 5).
    """

    root: Path | None
    """The dataset's folder (None for generated datasets)."""

    episodes: Sequence[int] | None
    """The selected episode indices (None: every episode, or a dataset without episodes)."""

    def __len__(self) -> int:
        """Number of samples."""
        ...

    def __getitem__(self, index: int) -> dict[str, Any]:
        """One sample dict."""
        ...

    @property
    def stats(self) -> Stats:
        """Normalization statistics of the selected episodes' non-visual features (read from the dataset's
        files, or computed once and cached). Core resolves them once and hands them to ``make_transforms``."""
        ...

    @property
    def features(self) -> Mapping[str, DatasetFeature]:
        """Feature metadata by key, in the dataset's declared order (cameras in their order)."""
        ...

    @property
    def fps(self) -> float | None:
        """Frames per second of the recording (None when the dataset has no time base)."""
        ...

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``[start, end)`` sample-index ranges of the selected episodes, in order (streaming reads these)."""
        ...


REQUIRED_DATASET_MEMBERS: tuple[str, ...] = ("__len__", "__getitem__")
"""What every dataset a format returns implements itself (a list of sample dicts does)."""

DATASET_MEMBERS: tuple[str, ...] = ("root", "episodes", "stats", "features", "fps", "episode_ranges")
"""The members beyond ``__len__`` / ``__getitem__``; each has a default (:class:`embodied_core.data.MapDataset`:
``root`` / ``episodes`` / ``fps`` None, one episode range, features inferred from the first sample, stats computed
from a bounded sample of items), which core applies to a dataset that does not implement it, and which the
format's spec may replace (``DatasetFormatSpec.dataset_defaults``)."""


class MakeTransforms(Protocol):
    """Signature of the factory named by ``ModelSpec.transforms``.

    ``stats`` are the statistics core resolved from the dataset (:attr:`TrainingDataset.stats`) at training
    time, or the ones stored in a policy folder at inference time; a model never reads dataset internals.
    The returned :class:`~embodied_core.model_api.Transforms` is used unchanged for training and inference.
    """

    def __call__(self, model_config: Any, data_config: Any, *, stats: Stats | None) -> Transforms: ...


# ---------------------------------------------------------------------------------------------- policies
@attrs.frozen(kw_only=True)
class PolicyMetadata:
    """What a client needs to know about a policy (sent by ``embodied serve`` on connect).

    Attributes:
        model_name: the model plugin (``pi05_tiny``).
        plugin_version: version of the distribution providing it.
        checkpoint: the folder the policy was loaded from.
        step: the training step of the checkpoint (None for an exported folder without one).
        camera_keys: LeRobot camera keys the policy reads, in the order of training.
        image_shape: ``(H, W, C)`` of the frames a client sends (the dataset's frame size).
        state_key, state_dim, state_names: the proprioceptive input.
        action_key, action_dim, action_names: the output.
        action_horizon: number of actions per predicted chunk (H).
        fps: the control rate of the training data.
        needs_task: whether observations must carry a ``task`` string.
        device: where inference runs.
        embodiment: the embodiment these fields describe (a policy trained on a dataset mixture), else None.
        embodiments: every embodiment ``predict_action(obs, embodiment=...)`` accepts (empty: trained on one
            dataset).
    """

    model_name: str
    plugin_version: str
    checkpoint: str
    step: int | None
    camera_keys: tuple[str, ...]
    image_shape: tuple[int, int, int]
    state_key: str
    state_dim: int
    state_names: tuple[str, ...] | None
    action_key: str
    action_dim: int
    action_names: tuple[str, ...] | None
    action_horizon: int
    fps: float | None
    needs_task: bool
    device: str
    embodiment: str | None = None
    embodiments: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/msgpack-serializable data (tuples become lists)."""
        return attrs.asdict(self, value_serializer=lambda _, __, v: list(v) if isinstance(v, tuple) else v)


@runtime_checkable
class Policy(Protocol):
    """A trained checkpoint as a robot runs it (``embodied_core.load_policy``)."""

    metadata: PolicyMetadata

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """Raw observation in, raw action chunk out.

        ``observation`` has LeRobot keys: ``observation.images.<cam>`` (uint8, HWC or CHW), ``observation.state``
        (float ``[state_dim]``) and ``task`` (str) when :attr:`PolicyMetadata.needs_task`. Returns float32
        ``[action_horizon, action_dim]`` in dataset units, with exactly training's pre- and post-processing.
        A bad observation raises ``ObservationError`` naming the key and what is expected; the policy stays
        usable. Noise comes from the policy's own generator (seeded at load and by :meth:`reset`).

        A policy trained on a dataset mixture (:attr:`PolicyMetadata.embodiments` not empty) also takes the
        keyword ``embodiment=TAG``: the observation is then read with that embodiment's interface and statistics
        and the actions come back in its units (None: the default embodiment, the one ``metadata`` describes).
        """
        ...

    def reset(self) -> None:
        """Starts a new episode: clears closed-loop state and reseeds the noise generator."""
        ...


POLICY_MEMBERS: tuple[str, ...] = ("metadata", "predict_action", "reset")


def missing_members(obj: Any, members: Sequence[str]) -> list[str]:
    """The names in ``members`` that ``obj`` does not define (attributes, methods or properties)."""
    defined = set(dir(obj))
    return [name for name in members if name not in defined]
