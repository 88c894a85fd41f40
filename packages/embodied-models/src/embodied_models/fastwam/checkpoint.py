"""FastWAM checkpoint layouts, all through core's key-map contract (:mod:`embodied_core.checkpoint.keymap`).

Our module names are lerobot 0.6's ``FastWAM.state_dict()`` (``mot.layers.N.blocks.{video,action}.*``,
``mot.mixtures.{video,action}.*``, ``proprio_encoder.*``), so:

- ``embodied``: identity;
- ``lerobot``: a lerobot policy (leading ``model.`` stripped), also the older ``mot.mixtures.<expert>.blocks.N.*``
  layout (e.g. ``fastwam_libero_uncond_2cam224``);
- ``loongforge``: LoongForge's model state dict, where each expert is reachable under several names
  (``[core.]video_expert.*``, ``[core.]mot.mixtures.video.*``, ``[core.]dit.mixtures.video.*``, and the
  ``mixtures.video.*`` of its ``save_checkpoint`` payload ``{"mot": ..., "proprio_encoder": ...}``). Aliases are
  deduplicated on load (their tensors must be equal, else it is an error naming both); TransformerEngine's
  ``_extra_state`` and VAE/text-encoder weights are ignored. We never write aliases;
- ``diffusers``: the video expert as a diffusers ``WanTransformer3DModel`` folder (Wan2.2-TI2V-5B-Diffusers
  ``transformer/``): :func:`load_video_expert` reads it, :func:`save_video_expert` writes it.

:func:`load_action_backbone` loads the file ``embodied checkpoint init-fastwam-action-dit`` writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import torch
from torch import nn

from embodied_core.checkpoint.keymap import IDENTITY, Allow, KeyMap, LoadReport, Rename, load_state
from embodied_core.checkpoint.readers import iter_tensors, read_json, torch_load
from embodied_core.errors import CheckpointError

__all__ = [
    "DIFFUSERS_VIDEO_KEYMAP",
    "KEY_MAPS",
    "dedupe_aliases",
    "detect_layout",
    "iter_diffusers_folder",
    "load_action_backbone",
    "load_pretrained",
    "load_video_expert",
    "read_checkpoint_items",
    "save_video_expert",
    "to_diffusers_video",
]

_EXPERT_ALIASES = {
    "video": r"(?:video_expert|mot\.mixtures\.video|dit\.mixtures\.video|mixtures\.video)",
    "action": r"(?:action_expert|mot\.mixtures\.action|dit\.mixtures\.action|mixtures\.action)",
}
_IGNORED = ("*._extra_state", "vae.*", "text_encoder.*", "core.vae.*", "core.text_encoder.*")


def _loongforge_map() -> KeyMap:
    renames = []
    for expert, alias in _EXPERT_ALIASES.items():
        renames.append(Rename(rf"{alias}\.blocks\.(?P<n>\d+)\.(?P<rest>.+)",
                              f"mot.layers.{{n}}.blocks.{expert}.{{rest}}"))
        renames.append(Rename(rf"{alias}\.(?P<rest>.+)", f"mot.mixtures.{expert}.{{rest}}"))
    return KeyMap(strip_prefixes=("core.", "model.", "module."), renames=tuple(renames),
                  keep=("proprio_encoder.*",), ignored=_IGNORED)


_LEROBOT = KeyMap(strip_prefixes=("model.",), renames=tuple(
    Rename(rf"mot\.mixtures\.{expert}\.blocks\.(?P<n>\d+)\.(?P<rest>.+)", f"mot.layers.{{n}}.blocks.{expert}.{{rest}}")
    for expert in ("video", "action")), keep=("mot.*", "proprio_encoder.*"))

KEY_MAPS: dict[str, KeyMap] = {"embodied": IDENTITY, "lerobot": _LEROBOT, "loongforge": _loongforge_map()}
"""layout -> its key map onto our module names."""

# (our name, diffusers name) inside one block, and at the expert level.
_BLOCK_PAIRS = (
    *((f"self_attn.{a}", f"attn1.{b}") for a, b in (("q", "to_q"), ("k", "to_k"), ("v", "to_v"), ("o", "to_out.0"),
                                                    ("norm_q", "norm_q"), ("norm_k", "norm_k"))),
    *((f"cross_attn.{a}", f"attn2.{b}") for a, b in (("q", "to_q"), ("k", "to_k"), ("v", "to_v"), ("o", "to_out.0"),
                                                     ("norm_q", "norm_q"), ("norm_k", "norm_k"))),
    ("norm3", "norm2"), ("ffn.0", "ffn.net.0.proj"), ("ffn.2", "ffn.net.2"),
)
_TOP_PAIRS = (
    ("patch_embedding", "patch_embedding"),
    ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
    ("text_embedding.2", "condition_embedder.text_embedder.linear_2"),
    ("time_embedding.0", "condition_embedder.time_embedder.linear_1"),
    ("time_embedding.2", "condition_embedder.time_embedder.linear_2"),
    ("time_projection.1", "condition_embedder.time_proj"),
    ("head.head", "proj_out"),
)


def _diffusers_map() -> KeyMap:
    renames = [Rename(r"blocks\.(?P<n>\d+)\.scale_shift_table", "mot.layers.{n}.blocks.video.modulation"),
               Rename(r"scale_shift_table", "mot.mixtures.video.head.modulation")]
    for ours, theirs in _BLOCK_PAIRS:
        renames.append(Rename(rf"blocks\.(?P<n>\d+)\.{re.escape(theirs)}\.(?P<p>weight|bias)",
                              f"mot.layers.{{n}}.blocks.video.{ours}.{{p}}"))
    for ours, theirs in _TOP_PAIRS:
        renames.append(Rename(rf"{re.escape(theirs)}\.(?P<p>weight|bias)", f"mot.mixtures.video.{ours}.{{p}}"))
    return KeyMap(renames=tuple(renames), keep=())


DIFFUSERS_VIDEO_KEYMAP = _diffusers_map()
"""A diffusers ``WanTransformer3DModel`` state dict onto the video expert's names."""


def to_diffusers_video(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict -> the video expert in diffusers ``WanTransformer3DModel`` names (other keys dropped)."""
    out: dict[str, torch.Tensor] = {}
    block = re.compile(r"mot\.layers\.(\d+)\.blocks\.video\.(.+)\.(weight|bias)")
    for key, tensor in state.items():
        if (match := re.fullmatch(r"mot\.layers\.(\d+)\.blocks\.video\.modulation", key)):
            out[f"blocks.{match.group(1)}.scale_shift_table"] = tensor
        elif key == "mot.mixtures.video.head.modulation":
            out["scale_shift_table"] = tensor
        elif (match := block.fullmatch(key)):
            theirs = dict(_BLOCK_PAIRS).get(match.group(2))
            if theirs is not None:
                out[f"blocks.{match.group(1)}.{theirs}.{match.group(3)}"] = tensor
        elif key.startswith("mot.mixtures.video."):
            stem, _, param = key[len("mot.mixtures.video."):].rpartition(".")
            theirs = dict(_TOP_PAIRS).get(stem)
            if theirs is not None:
                out[f"{theirs}.{param}"] = tensor
    return out


def detect_layout(keys: Iterable[str]) -> str:
    """``loongforge``, ``lerobot`` or ``embodied``, told by the keys."""
    keys = list(keys)
    if any(re.match(r"(core\.)?(video_expert|action_expert|dit\.|mixtures\.)", k) for k in keys):
        return "loongforge"
    if any(k.startswith("model.") or ".mixtures.video.blocks." in k for k in keys):
        return "lerobot"
    return "embodied"


def dedupe_aliases(items: Iterable[tuple[str, torch.Tensor]], keymap: KeyMap,
                   aliases: list[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Drops keys that map onto a target an earlier key filled, if their tensors are equal (names go to
    ``aliases``); unequal aliases are a CheckpointError naming both."""
    first: dict[str, tuple[str, torch.Tensor]] = {}
    for key, tensor in items:
        hit = keymap.target(key)
        if hit is None:
            yield key, tensor
            continue
        seen = first.get(hit[0])
        if seen is None:
            first[hit[0]] = (key, tensor)
            yield key, tensor
            continue
        if seen[1].shape != tensor.shape or not torch.equal(seen[1], tensor):
            raise CheckpointError(f"checkpoint keys {seen[0]} and {key} both name {hit[0]} but hold different "
                                  "tensors; the checkpoint mixes two models")
        if aliases is not None:
            aliases.append(key)


def read_checkpoint_items(path: str | Path) -> list[tuple[str, torch.Tensor]]:
    """(key, tensor) pairs of a FastWAM checkpoint: any weights source of core, or a LoongForge
    ``save_checkpoint`` payload ``{"mot": {...}, "proprio_encoder": {...}}`` (read without running code)."""
    from embodied_core.checkpoint.pretrained import resolve_weights

    path = Path(path)
    if path.is_file() and path.suffix in (".pt", ".pth", ".bin"):
        payload = torch_load(path)
        if isinstance(payload, dict) and isinstance(payload.get("mot"), dict):
            items = list(payload["mot"].items())  # MoT.state_dict(): mixtures.<expert>.*
            items += [(f"proprio_encoder.{k}", v) for k, v in (payload.get("proprio_encoder") or {}).items()]
            return items
    return list(resolve_weights(path).items())


def load_pretrained(model: nn.Module, path: str | Path, *, layout: str = "auto") -> LoadReport:
    """Strict load of an embodied / lerobot / LoongForge FastWAM checkpoint into ``model`` (see module doc); a
    lerobot ``config.json`` beside it must describe the model's network (:mod:`embodied_models.fastwam.reference`,
    a ConfigError otherwise)."""
    from embodied_models.fastwam.config import FastWAMModelConfig
    from embodied_models.fastwam.reference import check_checkpoint_config

    if isinstance(getattr(model, "config", None), FastWAMModelConfig):
        check_checkpoint_config(model.config, path)
    items = read_checkpoint_items(path)
    if layout == "auto":
        layout = detect_layout(k for k, _ in items)
    keymap = KEY_MAPS[layout]
    # Dropped before the renames see them (an alias pattern would otherwise claim e.g. TE's _extra_state).
    ignored = [key for key, _ in items if keymap.is_ignored(key)]
    kept = [(key, tensor) for key, tensor in items if not keymap.is_ignored(key)]
    aliases: list[str] = []
    report = load_state(model, list(dedupe_aliases(kept, keymap, aliases)), keymap, source=path,
                        hint=f"(read as the {layout} layout; set model.pretrained_layout to choose another)")
    report.ignored.extend(ignored + aliases)
    return report


def iter_diffusers_folder(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) of a diffusers model folder (``diffusion_pytorch_model.safetensors`` or a sharded index; a
    folder holding ``transformer/`` also works), one tensor at a time."""
    folder = Path(path)
    if (folder / "transformer" / "config.json").is_file():
        folder = folder / "transformer"
    index = folder / "diffusion_pytorch_model.safetensors.index.json"
    single = folder / "diffusion_pytorch_model.safetensors"
    if index.is_file():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index}: not a safetensors index (needs a 'weight_map')")
        files = [folder / name for name in sorted(set(weight_map.values()))]
    elif single.is_file():
        files = [single]
    else:
        raise CheckpointError(f"{folder}: not a diffusers model folder (no {single.name} or {index.name})")
    for file in files:
        yield from iter_tensors(file)


def load_video_expert(model: nn.Module, path: str | Path) -> LoadReport:
    """Loads a diffusers ``WanTransformer3DModel`` folder into the video expert (strict over the video expert;
    the action expert and the proprio encoder are left as they are)."""
    return load_state(model, iter_diffusers_folder(path), DIFFUSERS_VIDEO_KEYMAP, source=path,
                      allow=Allow(missing=("mot.layers.*.blocks.action.*", "mot.mixtures.action.*",
                                           "proprio_encoder.*")),
                      hint="expected the transformer/ folder of Wan2.2-TI2V-5B-Diffusers (or one of the same shape)")


def save_video_expert(model: nn.Module, out_dir: str | Path) -> Path:
    """Writes the video expert as a diffusers ``WanTransformer3DModel`` folder (config + safetensors)."""
    from safetensors.torch import save_file

    cfg = model.config  # type: ignore[attr-defined]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in to_diffusers_video(model.state_dict()).items()}
    save_file(state, str(out / "diffusion_pytorch_model.safetensors"))
    config = {"_class_name": "WanTransformer3DModel", "patch_size": list(cfg.patch_size),
              "num_attention_heads": cfg.num_heads, "attention_head_dim": cfg.attn_head_dim,
              "in_channels": cfg.in_channels, "out_channels": cfg.out_channels, "text_dim": cfg.text_dim,
              "freq_dim": cfg.video_freq_dim, "ffn_dim": cfg.video_ffn_dim, "num_layers": cfg.num_layers,
              "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": cfg.eps, "rope_max_seq_len": 1024}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def load_action_backbone(model: nn.Module, path: str | Path) -> LoadReport:
    """Loads an action-DiT backbone (``embodied checkpoint init-fastwam-action-dit``, or LoongForge's
    ``backbone_state_dict`` payload) into the action expert; its ``action_encoder`` and ``head`` stay as built."""
    payload = torch_load(Path(path))
    state = payload.get("backbone_state_dict") if isinstance(payload, dict) else None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not an action-DiT backbone file (needs a 'backbone_state_dict'); make one "
                              "with `embodied checkpoint init-fastwam-action-dit`")
    keymap = KeyMap(renames=(Rename(r"blocks\.(?P<n>\d+)\.(?P<rest>.+)", "mot.layers.{n}.blocks.action.{rest}"),
                             Rename(r"(?P<rest>.+)", "mot.mixtures.action.{rest}")), keep=(),
                    ignored=("*._extra_state",))
    return load_state(model, state.items(), keymap, source=path,
                      allow=Allow(missing=("mot.layers.*.blocks.video.*", "mot.mixtures.video.*", "proprio_encoder.*",
                                           "mot.mixtures.action.action_encoder.*", "mot.mixtures.action.head.*")))
