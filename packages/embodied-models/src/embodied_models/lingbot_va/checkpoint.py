"""LingBot-VA checkpoints: key maps, strict load report, diffusers ``transformer/`` folders, Wan2.2 conversion.

Layouts we read (each through a declared key map, never by guessing):

- ``lingbot_va``: the released ``transformer/`` folder of LingBot-VA (diffusers layout; keys are the
  transformer's own: ``blocks.N.attn1.to_q.weight``, ``patch_embedding_mlp.weight``, ...). Identity map.
- ``lerobot``: a lerobot ``lingbot_va`` policy ``model.safetensors`` (the transformer under ``transformer.``).
- ``embodied``: our own model state dict (``LingBotVAModel``; the transformer under ``transformer.``).
- ``wan22``: a raw Wan2.2-TI2V-5B diffusers ``transformer/`` (Conv3d ``patch_embedding``, no action layers),
  converted by :func:`convert_wan22_state_dict`.

A diffusers folder is ``config.json`` plus ``diffusion_pytorch_model.safetensors`` or shards
``diffusion_pytorch_model-0000i-of-0000n.safetensors`` with ``diffusion_pytorch_model.safetensors.index.json``.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from embodied_core.checkpoint.keymap import IDENTITY, Allow, KeyMap, LoadReport, Rename, compare_state, load_state
from embodied_core.checkpoint.readers import iter_tensors, read_json, read_tensors
from embodied_core.errors import CheckpointError
from embodied_models.lingbot_va.config import LingBotVAModelConfig
from embodied_models.wan.patch import conv3d_weight_to_linear

__all__ = ["KEY_MAPS", "LoadReport", "convert_wan22_state_dict", "iter_transformer_folder", "load_pretrained",
           "load_transformer_folder", "map_keys", "read_diffusers_folder", "save_transformer_folder", "strict_report"]

WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"
INDEX_NAME = "diffusion_pytorch_model.safetensors.index.json"
CONFIG_NAME = "config.json"
POLICY_WEIGHTS = "model.safetensors"  # lerobot policy folders and our own checkpoints

_LAYOUT_PREFIXES: dict[str, str] = {"lingbot_va": "", "lerobot": "transformer.", "embodied": "transformer."}
"""layout -> the prefix its keys carry before the transformer's own names."""


def _prefix_map(prefix: str) -> KeyMap:
    if not prefix:
        return IDENTITY
    return KeyMap(renames=(Rename(re.escape(prefix) + r"(?P<rest>.+)", "{rest}"),), keep=())


KEY_MAPS: dict[str, KeyMap] = {layout: _prefix_map(prefix) for layout, prefix in _LAYOUT_PREFIXES.items()}
"""layout -> its declared key map onto the transformer's names (core's KeyMap contract)."""


def _flatten_patch_embedding(weight: torch.Tensor) -> torch.Tensor:
    # Conv3d [D, C, pt, ph, pw] -> Linear [D, C*pt*ph*pw], in the (channel, pt, ph, pw) order our patchify uses
    return conv3d_weight_to_linear(weight) if weight.ndim == 5 else weight


WAN22_KEY_MAP = KeyMap(renames=(Rename(r"patch_embedding\.(?P<rest>.+)", "patch_embedding_mlp.{rest}",
                                       transform=_flatten_patch_embedding),))
"""Raw Wan2.2-TI2V names onto LingBot-VA's (the patch embedding becomes a Linear; everything else is kept)."""


def map_keys(state: Mapping[str, torch.Tensor], layout: str) -> dict[str, torch.Tensor]:
    """Applies the declared key map of ``layout``; a key outside the map's prefix is an error."""
    if layout not in KEY_MAPS:
        raise CheckpointError(f"unknown LingBot-VA checkpoint layout {layout!r}; choose one of {sorted(KEY_MAPS)}")
    mapped, outside = KEY_MAPS[layout].rename_all(state)
    if outside:
        raise CheckpointError(f"layout {layout!r} expects every key to start with {_LAYOUT_PREFIXES[layout]!r}; "
                              f"found {outside[:5]}")
    return mapped


def strict_report(module: nn.Module, state: Mapping[str, torch.Tensor]) -> LoadReport:
    """Compares ``state`` with ``module.state_dict()`` by name and shape (core's strict report, nothing copied)."""
    return compare_state(module, state)


def load_state_strict(module: nn.Module, state: Mapping[str, torch.Tensor], *, source: str,
                      allow_missing: Iterable[str] = ()) -> LoadReport:
    """Loads ``state`` into ``module``; any difference not explicitly allowed raises CheckpointError.

    Everything is compared before anything is copied. ``allow_missing``: glob patterns over the module's names.
    """
    allow = Allow(missing=tuple(allow_missing))
    report = strict_report(module, state)
    if report.problems(allow):
        missing = [k for k in report.missing if not any(fnmatch.fnmatchcase(k, p) for p in allow.missing)]
        bad = LoadReport(missing=missing, unexpected=report.unexpected, mismatched=report.mismatched)
        raise CheckpointError(f"{source}: checkpoint does not match the model: {bad.describe()}")
    return load_state(module, state, source=source, allow=allow)


# ---------------------------------------------------------------------------------------------- folders
def _resolve_folder(path: str | Path) -> Path:
    path = Path(path)
    if (path / "transformer" / CONFIG_NAME).is_file():
        return path / "transformer"
    if (path / CONFIG_NAME).is_file() or (path / POLICY_WEIGHTS).is_file():
        return path
    raise CheckpointError(f"{path}: not a transformer folder (no {CONFIG_NAME} or {POLICY_WEIGHTS} here or in "
                          f"{path / 'transformer'})")


def read_diffusers_folder(path: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config, state dict) of a diffusers model folder (single file or sharded with an index), or of a folder
    with one ``model.safetensors`` (lerobot policy, embodied checkpoint; config may then be empty).

    Reads through core's guarded readers: a missing, truncated or corrupt file is a CheckpointError naming it.
    """
    folder = _resolve_folder(path)
    config = read_json(folder / CONFIG_NAME) if (folder / CONFIG_NAME).is_file() else {}
    if not isinstance(config, dict):
        raise CheckpointError(f"{folder / CONFIG_NAME}: expected a JSON object")
    if (folder / INDEX_NAME).is_file():
        index = read_json(folder / INDEX_NAME)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{folder / INDEX_NAME}: not a safetensors index (needs a 'weight_map')")
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(weight_map.values())):
            if not (folder / shard).is_file():
                raise CheckpointError(f"{folder / INDEX_NAME} names shard {shard}, which is missing")
            state.update(read_tensors(folder / shard))
        absent = set(weight_map) - set(state)
        if absent:
            raise CheckpointError(f"{folder}: keys listed in {INDEX_NAME} are in no shard: {sorted(absent)[:5]}")
        return config, state
    for name in (WEIGHTS_NAME, POLICY_WEIGHTS):
        if (folder / name).is_file():
            return config, read_tensors(folder / name)
    raise CheckpointError(f"{folder}: none of {INDEX_NAME}, {WEIGHTS_NAME}, {POLICY_WEIGHTS} found")


def save_transformer_folder(state: Mapping[str, torch.Tensor], config: Mapping, out_dir: str | Path, *,
                            max_shard_bytes: int = 5 * 2**30) -> Path:
    """Writes ``<out_dir>/transformer/`` in the diffusers layout (sharded with an index when large).

    Args:
        state: the transformer's state dict (LingBot-VA keys).
        config: the transformer config (``LingBotVATransformer.config``) written as ``config.json``.
        max_shard_bytes: largest shard size.

    Returns:
        the ``transformer/`` folder, loadable by ``LingBotVATransformer.from_pretrained``.
    """
    folder = Path(out_dir) / "transformer"
    folder.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = tensor.clone() if tensor.untyped_storage().nbytes() != nbytes else tensor
        size += nbytes
    cfg = {"_class_name": "LingBotVATransformer", **{k: v for k, v in dict(config).items() if not k.startswith("_")}}
    (folder / CONFIG_NAME).write_text(json.dumps(cfg, indent=2, default=list))
    if len(shards) == 1:
        save_file(shards[0], str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
        return folder
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, start=1):
        name = f"diffusion_pytorch_model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(folder / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
        total += sum(t.numel() * t.element_size() for t in shard.values())
    (folder / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                                                indent=2))
    return folder


def load_transformer_folder(transformer: nn.Module, path: str | Path, *, layout: str = "lingbot_va") -> LoadReport:
    """Loads a LingBot-VA ``transformer/`` folder (or a folder holding one) with a strict report."""
    _, state = read_diffusers_folder(path)
    if "patch_embedding.weight" in state and layout != "wan22":
        raise CheckpointError(f"{path} is a raw Wan2.2 transformer (Conv3d patch_embedding, no action layers); set "
                              "model.pretrained_layout=wan22 to convert it on load")
    dtype = next(transformer.parameters()).dtype
    mapped = {k: v.to(dtype) for k, v in map_keys(state, layout).items()}
    return load_state_strict(transformer, mapped, source=str(path))


# ---------------------------------------------------------------------------------------------- Wan2.2
def convert_wan22_state_dict(wan_state: Mapping[str, torch.Tensor], transformer: nn.Module) -> dict[str, torch.Tensor]:
    """Maps a raw Wan2.2 TI2V diffusers transformer state dict onto LingBot-VA keys.

    - ``patch_embedding`` (Conv3d [D, C, pt, ph, pw]) becomes ``patch_embedding_mlp`` (Linear [D, C*pt*ph*pw]);
      the reshape keeps the (channel, pt, ph, pw) feature order our patchify uses, so outputs are identical;
    - ``condition_embedder.*`` is copied to ``condition_embedder_action.*`` (actions start from the video's
      timestep embedding);
    - ``action_embedder`` keeps ``transformer``'s fresh initialization and ``action_proj_out`` is zeroed, so the
      initial action velocity is 0 and the video behaviour of the base model is untouched;
    - every other key must exist in both with the same shape (strict report on the result).
    """
    target = transformer.state_dict()
    out, _ = WAN22_KEY_MAP.rename_all(wan_state)  # keep="*": every key is covered
    for key, value in list(out.items()):
        if key.startswith("condition_embedder."):
            out[key.replace("condition_embedder.", "condition_embedder_action.", 1)] = value.clone()
    for key in ("action_embedder.weight", "action_embedder.bias"):
        out[key] = target[key].detach().clone()
    out["action_proj_out.weight"] = torch.zeros_like(target["action_proj_out.weight"])
    out["action_proj_out.bias"] = torch.zeros_like(target["action_proj_out.bias"])
    report = strict_report(transformer, out)
    if not report.ok:
        raise CheckpointError(f"Wan2.2 checkpoint does not convert onto this LingBot-VA config: {report.describe()}")
    return out


def convert_wan22_folder(src: str | Path, transformer: nn.Module, out_dir: str | Path, *,
                         max_shard_bytes: int = 5 * 2**30) -> Path:
    """Reads a Wan2.2-TI2V ``transformer/`` folder, converts it, loads it strictly and saves a LingBot-VA folder."""
    _, wan_state = read_diffusers_folder(src)
    state = convert_wan22_state_dict(wan_state, transformer)
    load_state_strict(transformer, state, source=str(src))
    return save_transformer_folder(transformer.state_dict(), transformer.config, out_dir,
                                   max_shard_bytes=max_shard_bytes)


def num_parameters(module: nn.Module) -> int:
    """Parameter count (works on the meta device)."""
    return sum(math.prod(p.shape) for p in module.parameters())


# ---------------------------------------------------------------------------------------------- streaming
def _is_transformer_folder(path: Path) -> bool:
    """A diffusers ``transformer/`` folder (or a folder holding one), as opposed to a whole-model checkpoint."""
    folder = path / "transformer" if (path / "transformer" / CONFIG_NAME).is_file() else path
    return path.is_dir() and any((folder / name).is_file() for name in (CONFIG_NAME, WEIGHTS_NAME, INDEX_NAME))


def iter_transformer_folder(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """``(key, tensor)`` of a diffusers transformer folder a tensor at a time, shard after shard (guarded readers:
    a missing or corrupt file is a CheckpointError naming it)."""
    folder = _resolve_folder(path)
    if (folder / INDEX_NAME).is_file():
        weight_map = read_json(folder / INDEX_NAME).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{folder / INDEX_NAME}: not a safetensors index (needs a 'weight_map')")
        files = [folder / shard for shard in sorted(set(weight_map.values()))]
    else:
        files = [folder / name for name in (WEIGHTS_NAME, POLICY_WEIGHTS) if (folder / name).is_file()][:1]
        if not files:
            raise CheckpointError(f"{folder}: none of {INDEX_NAME}, {WEIGHTS_NAME}, {POLICY_WEIGHTS} found")
    for file in files:
        yield from iter_tensors(file)


def _guard_raw_wan22(items: Iterable[tuple[str, torch.Tensor]], path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    for key, tensor in items:
        if key == "patch_embedding.weight":
            raise CheckpointError(f"{path} is a raw Wan2.2 transformer (Conv3d patch_embedding, no action layers); set "
                                  "model.pretrained_layout=wan22 to convert it on load")
        yield key, tensor


def _wan22_items(items: Iterable[tuple[str, torch.Tensor]],
                 transformer: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The conversion of :func:`convert_wan22_state_dict` a tensor at a time: the action timestep embedder starts
    as a copy of the video one, ``action_proj_out`` at zero, ``action_embedder`` keeps its initialization."""
    for key, tensor in items:
        yield key, tensor
        if key.startswith("condition_embedder."):
            yield key.replace("condition_embedder.", "condition_embedder_action.", 1), tensor
    for name in ("action_proj_out.weight", "action_proj_out.bias"):
        yield name, torch.zeros(transformer.get_parameter(name).shape)


_INTO_MODEL = KeyMap(renames=(Rename(r"(?P<rest>.+)", "transformer.{rest}"),), keep=())
_WAN22_INTO_MODEL = KeyMap(renames=(Rename(r"patch_embedding\.(?P<rest>.+)", "transformer.patch_embedding_mlp.{rest}",
                                           transform=_flatten_patch_embedding),
                                    Rename(r"(?P<rest>.+)", "transformer.{rest}")), keep=())


def load_pretrained(model: nn.Module, path: str | Path, *, layout: str) -> LoadReport:
    """Loads ``--pretrained-checkpoint`` into a LingBot-VA model strictly, a tensor at a time (under FSDP only
    each rank's shards are copied): a diffusers transformer folder in ``layout``, or a whole-model checkpoint
    (embodied, lerobot policy) through core's identity loader."""
    from embodied_core.checkpoint.pretrained import load_pretrained as load_whole_model
    from embodied_models.lingbot_va.reference import check_checkpoint_config

    path = Path(path)
    if isinstance(getattr(model, "config", None), LingBotVAModelConfig):
        check_checkpoint_config(model.config, path)  # a lerobot config.json beside it must describe this network
    if not _is_transformer_folder(path):
        return load_whole_model(model, path)
    if layout not in KEY_MAPS and layout != "wan22":
        raise CheckpointError(f"unknown LingBot-VA checkpoint layout {layout!r}; choose one of "
                              f"{sorted([*KEY_MAPS, 'wan22'])}")
    items = iter_transformer_folder(path)
    if layout == "wan22":
        return load_state(model, _wan22_items(items, model.transformer), _WAN22_INTO_MODEL, source=str(path),
                          allow=Allow(missing=("transformer.action_embedder.*",)))
    keymap = _INTO_MODEL if layout == "lingbot_va" else IDENTITY  # lerobot / embodied keys carry transformer.
    return load_state(model, _guard_raw_wan22(items, path), keymap, source=str(path))
