"""DreamZero checkpoint layouts through core's key-map contract (``embodied_core.checkpoint.keymap``).

Our module names below ``dit.`` are original Wan's / LoongForge's ``CausalWanModel``'s, so:

- ``diffusers``: a Wan DiT release folder (``transformer/`` of Wan2.2-TI2V-5B-Diffusers or Wan2.1-I2V-14B-Diffusers:
  ``diffusion_pytorch_model*.safetensors[.index.json]``) goes through :data:`DIFFUSERS_KEY_MAP` (LoongForge's
  ``_DIT_RENAME_TEMPLATE``, plus the image cross-attention / image embedder names it lacks: diffusers'
  ``attn2.add_k_proj`` / ``add_v_proj`` / ``norm_added_k`` and ``condition_embedder.image_embedder``). A release
  has no state/action encoders nor action decoder (they keep their initialization), and Wan2.2-TI2V-5B none of the
  image-conditioning layers; those are the only keys allowed to be missing. Diffusers' ``blocks.N.norm2`` is Wan's
  ``norm3`` (the affine cross-attention norm).
- ``wan``: original Wan names (``blocks.N.self_attn.q.weight`` ...), prefixed ``dit.``.
- ``loongforge``: a DreamZero checkpoint (``action_head.model.*``; its own frozen encoders are ignored).
- ``embodied``: our checkpoints (core's identity loader).

The frozen encoders (``encoders.*``) load from their own folders (``model.vae_path`` ...), never from these files.
LoRA checkpoints are PEFT adapter folders written by core (``adapter_model.safetensors``); a LoongForge adapter
(``base_model.model.action_head.model.*``) maps onto ours with :data:`LOONGFORGE_ADAPTER_KEY_MAP`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from embodied_core.checkpoint.keymap import Allow, KeyMap, LoadReport, Rename, load_state
from embodied_core.errors import CheckpointError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["DIFFUSERS_KEY_MAP", "KEY_MAPS", "LAYOUT_ALLOW", "LOONGFORGE_ADAPTER_KEY_MAP", "LOONGFORGE_KEY_MAP",
           "WAN_KEY_MAP", "load_pretrained", "resolve_dit_weights"]

logger = logging.getLogger("embodied.train")

_BLOCK = r"blocks\.(?P<n>\d+)\."
_ATTN = {"attn1": "self_attn", "attn2": "cross_attn"}
_PROJ = {"to_q": "q", "to_k": "k", "to_v": "v", r"to_out\.0": "o", "norm_q": "norm_q", "norm_k": "norm_k",
         "add_k_proj": "k_img", "add_v_proj": "v_img", "norm_added_k": "norm_k_img"}


def _diffusers_renames() -> tuple[Rename, ...]:
    renames = [Rename(_BLOCK + rf"{src}\.{proj}\.(?P<p>weight|bias)", f"dit.blocks.{{n}}.{dst}.{ours}.{{p}}")
               for src, dst in _ATTN.items() for proj, ours in _PROJ.items()]
    renames += [
        Rename(_BLOCK + r"ffn\.net\.0\.proj\.(?P<p>weight|bias)", "dit.blocks.{n}.ffn.0.{p}"),
        Rename(_BLOCK + r"ffn\.net\.2\.(?P<p>weight|bias)", "dit.blocks.{n}.ffn.2.{p}"),
        Rename(_BLOCK + r"norm2\.(?P<p>weight|bias)", "dit.blocks.{n}.norm3.{p}"),
        Rename(_BLOCK + r"scale_shift_table", "dit.blocks.{n}.modulation"),
        Rename(r"condition_embedder\.text_embedder\.linear_1\.(?P<p>weight|bias)", "dit.text_embedding.0.{p}"),
        Rename(r"condition_embedder\.text_embedder\.linear_2\.(?P<p>weight|bias)", "dit.text_embedding.2.{p}"),
        Rename(r"condition_embedder\.time_embedder\.linear_1\.(?P<p>weight|bias)", "dit.time_embedding.0.{p}"),
        Rename(r"condition_embedder\.time_embedder\.linear_2\.(?P<p>weight|bias)", "dit.time_embedding.2.{p}"),
        Rename(r"condition_embedder\.time_proj\.(?P<p>weight|bias)", "dit.time_projection.1.{p}"),
        Rename(r"condition_embedder\.image_embedder\.norm1\.(?P<p>weight|bias)", "dit.img_emb.proj.0.{p}"),
        Rename(r"condition_embedder\.image_embedder\.ff\.net\.0\.proj\.(?P<p>weight|bias)", "dit.img_emb.proj.1.{p}"),
        Rename(r"condition_embedder\.image_embedder\.ff\.net\.2\.(?P<p>weight|bias)", "dit.img_emb.proj.3.{p}"),
        Rename(r"condition_embedder\.image_embedder\.norm2\.(?P<p>weight|bias)", "dit.img_emb.proj.4.{p}"),
        Rename(r"patch_embedding\.(?P<p>weight|bias)", "dit.patch_embedding.{p}"),
        Rename(r"scale_shift_table", "dit.head.modulation"),
        Rename(r"proj_out\.(?P<p>weight|bias)", "dit.head.head.{p}"),
    ]
    return tuple(renames)


DIFFUSERS_KEY_MAP = KeyMap(renames=_diffusers_renames(), keep=())
"""diffusers ``WanTransformer3DModel`` keys -> ours."""
WAN_KEY_MAP = KeyMap(renames=(Rename(r"(?P<rest>.+)", "dit.{rest}"),), keep=())
"""Original Wan / ``CausalWanModel`` keys -> ours."""
LOONGFORGE_KEY_MAP = KeyMap(strip_prefixes=("module.",),
                            renames=(Rename(r"action_head\.model\.(?P<rest>.+)", "dit.{rest}"),), keep=(),
                            ignored=("action_head.text_encoder.*", "action_head.image_encoder.*", "action_head.vae.*"))
"""A LoongForge DreamZero checkpoint (``DreamZeroPolicy.state_dict()``) -> ours."""
LOONGFORGE_ADAPTER_KEY_MAP = KeyMap(renames=(Rename(r"base_model\.model\.action_head\.model\.(?P<rest>.+)",
                                                    "base_model.model.dit.{rest}"),), keep=())
"""LoongForge's PEFT adapter keys -> the keys of our adapter folders."""
KEY_MAPS = {"diffusers": DIFFUSERS_KEY_MAP, "wan": WAN_KEY_MAP, "loongforge": LOONGFORGE_KEY_MAP}

_ACTION_STATE = ("dit.state_encoder.*", "dit.action_encoder.*", "dit.action_decoder.*")
_IMAGE_LAYERS = ("dit.img_emb.*", "dit.blocks.*.cross_attn.k_img.*", "dit.blocks.*.cross_attn.v_img.*",
                 "dit.blocks.*.cross_attn.norm_k_img.*")
LAYOUT_ALLOW = {
    "diffusers": Allow(missing=("encoders.*", *_ACTION_STATE, *_IMAGE_LAYERS)),
    "wan": Allow(missing=("encoders.*", *_ACTION_STATE, *_IMAGE_LAYERS)),
    "loongforge": Allow(missing=("encoders.*",)),
}
"""What each layout cannot hold (reported in the log, not an error)."""

_DIT_FILES = ("diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.safetensors")


def resolve_dit_weights(path: str | Path) -> Path:
    """The weights file of a diffusers DiT folder (``path`` or ``path/transformer``), or ``path`` itself."""
    path = Path(path)
    for folder in (path, path / "transformer"):
        for name in _DIT_FILES:
            if (folder / name).is_file():
                return folder / name
    return path


def load_pretrained(model: nn.Module, path: str | Path, *, layout: str) -> LoadReport:
    """Loads ``--pretrained-checkpoint`` (a tensor at a time; under FSDP only local shards) in ``layout``; strict
    apart from :data:`LAYOUT_ALLOW`."""
    from embodied_core.checkpoint.pretrained import load_pretrained as load_whole_model
    from embodied_core.checkpoint.pretrained import resolve_weights

    if layout == "embodied":
        return load_whole_model(model, path)
    if layout not in KEY_MAPS:
        raise CheckpointError(f"model.pretrained_layout={layout!r}: valid are {', '.join([*KEY_MAPS, 'embodied'])}")
    source = resolve_weights(resolve_dit_weights(path) if layout == "diffusers" else path)
    hint = ("" if layout != "diffusers" else "a diffusers Wan DiT folder is expected (transformer/ of a Wan "
            "release); use model.pretrained_layout=embodied for our checkpoints, loongforge for DreamZero's")
    report = load_state(model, source.items(), KEY_MAPS[layout], source=source.location, allow=LAYOUT_ALLOW[layout],
                        hint=hint)
    kept = [key for key in report.missing if not key.startswith("encoders.")]
    if kept:
        logger.info("dreamzero: %d tensors not in %s keep their initialization (%s ...)", len(kept),
                    source.location, ", ".join(kept[:4]))
    return report
