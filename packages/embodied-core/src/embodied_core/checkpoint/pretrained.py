"""``--pretrained-checkpoint``: initialize model weights with a strict load report.

Accepted sources: a weights file (``.safetensors``, or ``.pt``/``.pth``/``.bin`` read with
``weights_only=True``), a sharded safetensors index (``*.safetensors.index.json``), a checkpoint directory
(``checkpoints/step_N`` with ``model.safetensors`` or ``model.pt``), a directory holding one weights file
or index, or a run's ``--output-dir`` / ``checkpoints`` folder (its newest complete checkpoint).

Missing keys, unexpected keys and shape mismatches are all errors, reported together.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from embodied_core.checkpoint.layout import MODEL_PT, MODEL_SAFETENSORS, checkpoints_root, find_latest
from embodied_core.errors import CheckpointError

__all__ = ["LoadReport", "load_pretrained", "read_state_dict", "resolve_weights"]

_PT_SUFFIXES = (".pt", ".pth", ".bin")
_SHOW = 10


def _is_weights_file(path: Path) -> bool:
    return path.suffix in (".safetensors", *_PT_SUFFIXES) or path.name.endswith(".safetensors.index.json")


def resolve_weights(path: str | Path) -> Path:
    """The weights file (or safetensors index) that ``path`` designates; CheckpointError if none."""
    path = Path(path)
    if path.is_file():
        if not _is_weights_file(path):
            raise CheckpointError(f"{path}: not a weights file (expected .safetensors, .safetensors.index.json, "
                                  f"{', '.join(_PT_SUFFIXES)})")
        return path
    if not path.is_dir():
        raise CheckpointError(f"--pretrained-checkpoint {path}: no such file or directory")
    for name in (MODEL_SAFETENSORS, MODEL_PT, "model.safetensors.index.json"):
        if (path / name).is_file():
            return path / name
    for root in (path, checkpoints_root(path)):
        latest = find_latest(root)
        if latest is not None:
            return resolve_weights(latest)
    if (path / "dcp").is_dir():
        raise CheckpointError(f"{path} holds a DCP checkpoint; convert it first: embodied checkpoint convert "
                              f"{path} {path}/model.safetensors")
    files = sorted(p for p in path.iterdir() if p.is_file() and _is_weights_file(p))
    if len(files) == 1:
        return files[0]
    found = ", ".join(p.name for p in files) or "no weights files"
    raise CheckpointError(f"--pretrained-checkpoint {path}: cannot tell which weights to load ({found}); "
                          "name the file")


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """Reads a weights file or safetensors index onto the CPU without unpickling code."""
    if path.name.endswith(".safetensors.index.json"):
        index = json.loads(path.read_text())
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(index["weight_map"].values())):
            state.update(load_file(str(path.parent / shard)))
        return state
    if path.suffix == ".safetensors":
        return load_file(str(path))
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickles with code, corrupt files
        raise CheckpointError(f"{path}: cannot be read as a plain tensor file with weights_only=True ({exc})") \
            from exc
    if isinstance(loaded, dict) and not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        for key in ("model", "state_dict", "module"):
            if isinstance(loaded.get(key), dict):
                return loaded[key]
        raise CheckpointError(f"{path}: a dict whose values are not all tensors and that has no 'model' or "
                              "'state_dict' entry")
    if not isinstance(loaded, dict):
        raise CheckpointError(f"{path}: holds a {type(loaded).__name__}, expected a dict of tensors")
    return loaded


class LoadReport:
    """Differences between a checkpoint's keys and the model's state dict."""

    def __init__(self, model_state: dict[str, torch.Tensor], loaded: dict[str, torch.Tensor]) -> None:
        self.missing = sorted(set(model_state) - set(loaded))
        self.unexpected = sorted(set(loaded) - set(model_state))
        self.mismatched = sorted(
            f"{k}: checkpoint {tuple(loaded[k].shape)} vs model {tuple(model_state[k].shape)}"
            for k in set(model_state) & set(loaded) if tuple(loaded[k].shape) != tuple(model_state[k].shape))
        self.loaded = len(set(model_state) & set(loaded)) - len(self.mismatched)

    @property
    def ok(self) -> bool:
        """True when every key matches in name and shape."""
        return not (self.missing or self.unexpected or self.mismatched)

    def problems(self) -> list[str]:
        """One line per kind of difference, listing the first keys."""
        lines = []
        for label, keys in (("missing in checkpoint", self.missing), ("unexpected in checkpoint", self.unexpected),
                            ("shape mismatch", self.mismatched)):
            if keys:
                more = f" ... and {len(keys) - _SHOW} more" if len(keys) > _SHOW else ""
                lines.append(f"{len(keys)} {label}: {', '.join(keys[:_SHOW])}{more}")
        return lines


def load_pretrained(model: nn.Module, path: str | Path) -> LoadReport:
    """Loads weights strictly into ``model`` (cast to each parameter's dtype) and returns the report.

    Raises:
        CheckpointError: the source cannot be found or read, or any key is missing, unexpected or of
            another shape (all differences listed).
    """
    weights = resolve_weights(path)
    loaded = read_state_dict(weights)
    model_state = model.state_dict()
    report = LoadReport(model_state, loaded)
    if not report.ok:
        raise CheckpointError(f"--pretrained-checkpoint {weights} does not match {type(model).__name__} "
                              "(strict load):\n  " + "\n  ".join(report.problems()))
    model.load_state_dict({k: v.to(model_state[k].dtype) for k, v in loaded.items()}, strict=True)
    return report
