"""``load_policy(path)``: a checkpoint (or exported) folder -> a :class:`~embodied_core.protocols.Policy`.

Reads ``policy.json`` and the statistics, finds the recorded model plugin through the registry, and hands a
:class:`PolicyFolder` to the model's policy class, which builds the model (weights loaded strictly from
safetensors, ``torch.load(weights_only=True)`` or a DCP checkpoint gathered in this process) and the
transforms with the stored statistics. Nothing read from the folder can execute code.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from embodied_core.checkpoint.layout import META_FILE, MODEL_PT, MODEL_SAFETENSORS
from embodied_core.config.converter import structure
from embodied_core.errors import CheckpointError
from embodied_core.policy.embodiments import PolicyEmbodiment, read_embodiments, select_embodiment
from embodied_core.policy.folder import (
    ASSETS_DIR,
    POLICY_FILE,
    STATS_FILE,
    read_policy_doc,
    read_stats,
    resolve_policy_dir,
)
from embodied_core.policy.spec import load_policy_class, model_spec_for
from embodied_core.protocols import Policy, PolicyMetadata, Stats
from embodied_core.registry import get_entry
from embodied_core.registry.groups import MODELS
from embodied_core.registry.specs import ModelSpec

if TYPE_CHECKING:
    import torch
    from torch import nn

    from embodied_core.model_api import Transforms

__all__ = ["PolicyFolder", "checkpoint_step", "load_policy", "read_policy_folder", "read_weights"]

logger = logging.getLogger("embodied.policy")

DCP_DIR = "dcp"


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The model weights of a checkpoint or exported folder (safetensors, pt with weights_only, or DCP)."""
    from embodied_core.checkpoint.readers import read_tensors
    from embodied_core.lora.layout import is_adapter_folder

    if is_adapter_folder(folder):
        raise CheckpointError(f"{folder}: holds LoRA adapters and a reference to the base weights, not full weights; "
                              f"`embodied checkpoint merge-lora {folder} DST` writes a policy folder with the merged "
                              "weights (load_policy and embodied serve take the adapter folder as it is)")

    for name in (MODEL_SAFETENSORS, MODEL_PT):
        if (folder / name).is_file():
            return read_tensors(folder / name)
    if (folder / DCP_DIR).is_dir():
        from embodied_core.checkpoint.dcp_reader import read_dcp_state_dict

        state = read_dcp_state_dict(folder / DCP_DIR, {"model"}).get("model")
        if not state:
            raise CheckpointError(f"{folder / DCP_DIR}: the DCP checkpoint holds no model weights")
        return state
    raise CheckpointError(f"{folder}: no weights ({MODEL_SAFETENSORS}, {MODEL_PT} or {DCP_DIR}/)")


def checkpoint_step(folder: Path, doc: dict[str, Any]) -> int | None:
    """The training step of a folder's weights: its ``meta.json``'s, else ``policy.json``'s (None when unknown)."""
    from embodied_core.checkpoint.readers import read_json

    if (folder / META_FILE).is_file():
        meta = read_json(folder / META_FILE)
        if isinstance(meta, dict) and isinstance(meta.get("step"), int):
            return meta["step"]
    step = doc.get("step")
    return step if isinstance(step, int) else None


@attrs.define(kw_only=True)
class PolicyFolder:
    """A policy folder read from disk: what a policy class builds from.

    Attributes:
        path: the folder.
        doc: ``policy.json``.
        spec: the installed model plugin's spec.
        model_config, data_config: the resolved sections of training, as attrs objects.
        stats: the normalization statistics training used (float64).
        step: the training step of the weights (None when unknown).
        embodiments, default_embodiment: a run on a dataset mixture's embodiments by tag and its default tag
            (:mod:`embodied_core.policy.embodiments`); empty and None for a run on one dataset.
    """

    path: Path
    doc: dict[str, Any]
    spec: ModelSpec
    model_config: Any
    data_config: Any
    stats: Stats
    step: int | None
    embodiments: dict[str, PolicyEmbodiment] = attrs.field(factory=dict)
    default_embodiment: str | None = None

    def embodiment(self, tag: str | None = None) -> PolicyEmbodiment | None:
        """Embodiment ``tag`` (None: the default); None for a folder without embodiments. ObservationError for a
        tag the folder does not have."""
        return select_embodiment(self.embodiments, self.default_embodiment, tag)

    @property
    def interface(self) -> dict[str, Any]:
        """The ``interface`` entry: cameras, frame shapes, state/action keys, names and dims, horizon, fps."""
        return self.doc["interface"]

    @property
    def assets(self) -> Path:
        """The folder's ``assets/`` directory (model-specific inference files)."""
        return self.path / ASSETS_DIR

    def metadata(self, *, device: str, embodiment: str | None = None, **overrides: Any) -> PolicyMetadata:
        """The :class:`PolicyMetadata` of this folder, of its embodiment ``embodiment`` (None: the default) for a
        folder with embodiments (``overrides`` replace fields a policy class computes)."""
        chosen = self.embodiment(embodiment)
        io = chosen.interface if chosen is not None else self.interface
        cameras = tuple(io["camera_keys"])
        first = tuple(io["image_shapes"][cameras[0]]) if cameras else (0, 0, 0)
        fields: dict[str, Any] = {
            "model_name": self.doc["model_name"], "plugin_version": str(self.doc.get("plugin", {}).get("version", "")),
            "checkpoint": str(self.path), "step": self.step, "camera_keys": cameras, "image_shape": first,
            "state_key": io["state_key"], "state_dim": int(io["state_dim"]),
            "state_names": tuple(io["state_names"]) if io.get("state_names") else None,
            "action_key": io["action_key"], "action_dim": int(io["action_dim"]),
            "action_names": tuple(io["action_names"]) if io.get("action_names") else None,
            "action_horizon": int(io["action_horizon"]), "fps": io.get("fps"), "needs_task": bool(io["needs_task"]),
            "device": str(device), "embodiment": chosen.tag if chosen is not None else None,
            "embodiments": tuple(self.embodiments),
        }
        return PolicyMetadata(**{**fields, **overrides})

    def tokenizer_path(self) -> str | None:
        """The tokenizer directory to use: the folder's copy, else the recorded source (which must exist)."""
        record = self.doc.get("tokenizer") or {}
        if record.get("files"):
            copy = self.path / record["files"]
            if not copy.is_dir():
                raise CheckpointError(f"{copy}: missing (policy.json says the tokenizer files are there)")
            return str(copy)
        source = record.get("source")
        if source and not Path(source).is_absolute():
            return source  # a hub id: the model's tokenizer code resolves it, as in training
        if source and not Path(source).exists():
            raise CheckpointError(f"{self.path / POLICY_FILE}: the tokenizer {source} it references (too large to "
                                  "copy into the folder) does not exist on this machine; copy it there")
        return source

    def _with_tokenizer(self, data_config: Any) -> Any:
        path = self.tokenizer_path()
        if path is None or "tokenizer_path" not in attrs.fields_dict(type(data_config)):
            return data_config
        return attrs.evolve(data_config, tokenizer_path=path)

    def build_transforms(self, model_config: Any = None, data_config: Any = None, *,
                         embodiment: str | None = None) -> Transforms:
        """The model's transforms built with the stored statistics (and the folder's tokenizer); for a folder with
        embodiments, embodiment ``embodiment``'s (None: the default) data section and statistics."""
        from embodied_core.model_api import Transforms

        make_transforms = self.spec.load_transforms()
        if make_transforms is None:
            return Transforms()
        chosen = self.embodiment(embodiment)
        model_config = self.model_config if model_config is None else model_config
        own = chosen.data_config if chosen is not None else self.data_config
        data_config = self._with_tokenizer(own if data_config is None else data_config)
        return make_transforms(model_config, data_config, stats=chosen.stats if chosen is not None else self.stats)

    def build_model(self, model_config: Any = None, data_config: Any = None, *, device: str = "cpu") -> nn.Module:
        """The model from its plugin factory with the folder's weights loaded strictly, in eval mode.

        A LoRA checkpoint (``adapter_config.json``) builds the base it references and injects its adapters, loaded
        strictly; the adapters stay unmerged, so outputs are those of training (``embodied checkpoint merge-lora``
        folds them into the weights)."""
        import torch

        from embodied_core.lora.layout import is_adapter_folder
        from embodied_core.trainer.model_check import adapt_model

        model = self.spec.load_factory()(self.model_config if model_config is None else model_config,
                                         self.data_config if data_config is None else data_config)
        # the transforms policy calls sample_actions; a model with its own policy class decides what it needs
        model = adapt_model(model, model_name=self.spec.name, policy=self.spec.policy is None)
        if is_adapter_folder(self.path):
            from embodied_core.lora.policy import load_adapter_checkpoint

            load_adapter_checkpoint(model, self.path)
            return model.to(torch.device(device)).eval()
        weights = read_weights(self.path)
        try:
            model.load_state_dict(weights, strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f"{self.path}: the weights do not match {type(model).__name__} built from "
                                  f"{POLICY_FILE} (strict load): {exc}") from None
        return model.to(torch.device(device)).eval()


def declared_references(spec: ModelSpec, doc: dict[str, Any]) -> dict[str, str]:
    """What the model's own policy class reads besides core's files (its optional ``references``), else nothing."""
    if spec.policy is None:
        return {}
    policy_class = load_policy_class(spec)
    declare = getattr(policy_class, "references", None)
    return dict(declare(doc)) if declare is not None else {}


def read_policy_folder(path: str | Path, *, allow_external_references: bool = False) -> PolicyFolder:
    """Reads and checks the folder ``path`` designates (see :func:`resolve_policy_dir`).

    Every file the folder makes us read must lie inside it (see :mod:`embodied_core.policy.references`); with
    ``allow_external_references`` the ones outside are read and logged instead of refused.
    """
    from embodied_core.policy.references import check_references, collect_references

    folder = resolve_policy_dir(path).resolve()
    doc = read_policy_doc(folder)
    spec = model_spec_for(doc, source=folder / POLICY_FILE)
    refs = collect_references(folder, doc, declared=declared_references(spec, doc))
    check_references(folder, refs, allow_external=allow_external_references)  # before any of them is read
    recorded = str(doc.get("plugin", {}).get("version", ""))
    installed = get_entry(MODELS, spec.name).version
    if recorded and recorded != installed:
        logger.warning("%s was trained with %s %s; %s is installed", folder, spec.name, recorded, installed)
    source = f"{folder / POLICY_FILE}"
    model_config = structure(doc["model_config"], spec.model_config, path="model", source=source)
    data_config = structure(doc["data_config"], spec.data_config, path="data", source=source)
    stats = read_stats(folder / doc.get("stats_file", STATS_FILE))
    embodiments, default = read_embodiments(folder, doc, spec.data_config, default_stats=stats)
    return PolicyFolder(path=folder, doc=doc, spec=spec, model_config=model_config, data_config=data_config,
                        stats=stats, step=checkpoint_step(folder, doc), embodiments=embodiments,
                        default_embodiment=default)


def load_policy(path: str | Path, *, device: str = "cpu", seed: int = 0,
                allow_external_references: bool = False) -> Policy:
    """Loads a trained policy for inference.

    Args:
        path: a checkpoint directory (``checkpoints/step_<N>``), a run's ``--output-dir`` (its newest
            checkpoint) or a folder written by ``embodied checkpoint export``.
        device: where inference runs (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        seed: seed of the policy's noise generator (at load and at every ``reset()``).
        allow_external_references: read what the folder references outside itself (its tokenizer, LoRA base
            weights, linked files: the error without it lists them); off by default, since a folder may come
            from someone else.

    Returns:
        A :class:`~embodied_core.protocols.Policy`: ``predict_action(observation)`` -> float32 ``[H, action_dim]``.

    Raises:
        CheckpointError: the folder is missing, incomplete, of an unknown ``policy_format``, or its weights do
            not match the model.
        PluginError: the model plugin it records is not installed.
        ExternalReferenceError: the folder references files outside itself and ``allow_external_references`` is
            False.
    """
    folder = read_policy_folder(path, allow_external_references=allow_external_references)
    policy_class = load_policy_class(folder.spec)
    return policy_class.from_folder(folder, device=str(device), seed=int(seed))
