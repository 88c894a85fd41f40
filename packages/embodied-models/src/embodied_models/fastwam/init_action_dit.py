"""``embodied checkpoint init-fastwam-action-dit SRC OUT``: an action-DiT backbone from a Wan2.2 video DiT.

FastWAM's action expert has the video DiT's depth and attention heads but a narrower width (1024 instead of
3072). It is initialized from the video DiT as LoongForge's ``preprocess_action_dit_backbone.py`` does: every
backbone tensor (text/time embedders and all blocks; not ``action_encoder`` / ``head``) is resized to the action
expert's shape by 1-D linear interpolation along each dimension that differs (``align_corners=True``), and a
tensor of >= 2 dims whose *last* (input) dimension shrank is multiplied by ``sqrt(d_video / d_action)`` of that
dimension, which keeps the variance of its outputs (``--no-alpha-scaling`` turns that off).

SRC is a Wan video DiT: a diffusers ``WanTransformer3DModel`` folder (``transformer/`` of
Wan2.2-TI2V-5B-Diffusers) or a weights file/folder in original Wan names (``blocks.N.self_attn.q.weight``, ...).
OUT is a ``torch.save`` payload ``{"backbone_state_dict", "meta", "policy"}`` (LoongForge's format) that
``model.action_pretrained_path`` loads. The source is read into host memory (bf16 Wan2.2-TI2V-5B: about 10 GB).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch.nn import functional

from embodied_core.errors import CheckpointError, UsageError

__all__ = ["init_action_backbone", "main", "resize_to_shape"]

PROG = "embodied checkpoint init-fastwam-action-dit"
SKIPPED = ("action_encoder.", "head.")


def resize_to_shape(src: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """``src`` resized to ``shape`` by linear interpolation (align_corners=True) along each differing dim, in
    order; leading singleton dims are added or removed to match the rank. Computed in float32, returned in
    ``src``'s dtype."""
    out = src.float()
    while out.dim() < len(shape):
        out = out.unsqueeze(0)
    while out.dim() > len(shape):
        if out.shape[0] != 1:
            raise ValueError(f"cannot reduce {tuple(src.shape)} to rank {len(shape)}")
        out = out.squeeze(0)
    for dim, size in enumerate(shape):
        if out.shape[dim] == size:
            continue
        moved = out.movedim(dim, -1)
        lead = moved.shape[:-1]
        flat = moved.reshape(-1, 1, moved.shape[-1])
        if moved.shape[-1] == 1:
            flat = flat.expand(-1, 1, size)
        else:
            flat = functional.interpolate(flat, size=size, mode="linear", align_corners=True)
        out = flat.reshape(*lead, size).movedim(-1, dim)
    return out.contiguous().to(src.dtype)


def _wan_items(src: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Source tensors in original Wan names (diffusers names are converted)."""
    from embodied_core.checkpoint.pretrained import resolve_weights
    from embodied_models.fastwam.checkpoint import DIFFUSERS_VIDEO_KEYMAP, iter_diffusers_folder

    folder = src / "transformer" if (src / "transformer" / "config.json").is_file() else src
    diffusers = folder.is_dir() and any(folder.glob("diffusion_pytorch_model*.safetensors*"))
    items = iter_diffusers_folder(folder) if diffusers else resolve_weights(src).items()
    for key, tensor in items:
        hit = DIFFUSERS_VIDEO_KEYMAP.target(key) if diffusers else None
        if hit is not None:
            name = hit[0]
            key = (name.replace("mot.mixtures.video.", "", 1) if name.startswith("mot.mixtures.video.")
                   else "blocks." + name[len("mot.layers."):].replace(".blocks.video.", ".", 1))
        yield key.removeprefix("model."), tensor


def _target_shapes(*, hidden: int, ffn: int, heads: int, head_dim: int, layers: int, text_dim: int,
                   freq_dim: int, action_dim: int, eps: float) -> dict[str, tuple[int, ...]]:
    """Backbone key (Wan names) -> shape, from an action expert built on the meta device."""
    from embodied_models.fastwam.blocks import DiTBlock
    from embodied_models.fastwam.experts import ActionExpert

    with torch.device("meta"):
        expert = ActionExpert(action_dim=action_dim, dim=hidden, freq_dim=freq_dim, text_dim=text_dim)
        block = DiTBlock(hidden, ffn, heads, head_dim, eps)
    shapes = {k: tuple(v.shape) for k, v in expert.state_dict().items() if not k.startswith(SKIPPED)}
    for n in range(layers):
        shapes.update({f"blocks.{n}.{k}": tuple(v.shape) for k, v in block.state_dict().items()})
    return shapes


def init_action_backbone(src: str | Path, out: str | Path, *, hidden: int = 1024, ffn: int = 4096,
                         action_dim: int = 7, freq_dim: int | None = None, alpha_scaling: bool = True,
                         dtype: torch.dtype = torch.float32) -> dict[str, int]:
    """Writes the backbone payload (see the module docstring); returns counts (copied, interpolated, tensors)."""
    src = Path(src)
    items = dict(_wan_items(src)) if src.exists() else None
    if items is None:
        raise UsageError(f"{src}: no such file or directory (expected a Wan2.2 video DiT)")
    if "blocks.0.self_attn.q.weight" not in items:
        raise CheckpointError(f"{src}: not a Wan video DiT (no blocks.0.self_attn.q.weight / "
                              "blocks.0.attn1.to_q.weight)")
    width = int(items["blocks.0.self_attn.q.weight"].shape[0])  # attention width (heads x head_dim), kept
    layers = 1 + max(int(k.split(".")[1]) for k in items if k.startswith("blocks."))
    dims = {"text_dim": int(items["text_embedding.0.weight"].shape[1]),
            "freq_dim": freq_dim or int(items["time_embedding.0.weight"].shape[1])}
    shapes = _target_shapes(hidden=hidden, ffn=ffn, heads=1, head_dim=width, layers=layers, action_dim=action_dim,
                            eps=1e-6, **dims)
    missing = sorted(k for k in shapes if k not in items)
    if missing:
        raise CheckpointError(f"{src}: lacks {len(missing)} backbone tensor(s) of the action DiT, e.g. {missing[:5]}")
    backbone: dict[str, torch.Tensor] = {}
    copied = interpolated = 0
    for key, shape in sorted(shapes.items()):
        tensor = items[key]
        if tuple(tensor.shape) == shape:
            value = tensor.float()
            copied += 1
        else:
            value = resize_to_shape(tensor.float(), shape)
            if alpha_scaling and tensor.dim() >= 2 and tensor.shape[-1] != shape[-1]:
                value = value * math.sqrt(tensor.shape[-1] / shape[-1])
            interpolated += 1
        backbone[key] = value.to(dtype).contiguous()
    meta = {"hidden_dim": hidden, "ffn_dim": ffn, "num_layers": layers, "attn_width": width,
            "text_dim": dims["text_dim"], "freq_dim": dims["freq_dim"], "eps": 1e-6}
    payload = {"backbone_state_dict": backbone, "meta": meta,
               "policy": {"skip_prefixes": list(SKIPPED), "alpha_scaling": alpha_scaling,
                          "interpolation": "sequential_1d_linear_align_corners_true", "source": str(src)}}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{os.getpid()}-{out.name}")
    torch.save(payload, tmp)
    tmp.replace(out)
    return {"copied": copied, "interpolated": interpolated, "tensors": len(backbone)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1])
    parser.add_argument("src", type=Path, help="Wan video DiT: diffusers transformer/ folder or Wan weights")
    parser.add_argument("out", type=Path, help="output .pt payload (model.action_pretrained_path)")
    parser.add_argument("--action-hidden-dim", type=int, default=1024, help="action expert width (default 1024)")
    parser.add_argument("--action-ffn-dim", type=int, default=4096, help="action expert FFN width (default 4096)")
    parser.add_argument("--action-dim", type=int, default=7, help="action width (action_encoder/head stay random)")
    parser.add_argument("--action-freq-dim", type=int, default=None,
                        help="timestep sinusoid width of the action expert (default: the video DiT's)")
    parser.add_argument("--no-alpha-scaling", action="store_true",
                        help="do not scale by sqrt(d_video / d_action) where the input dim shrinks")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="dtype of OUT")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``embodied checkpoint init-fastwam-action-dit``); returns the exit code."""
    from embodied_core.cli import run_guarded

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))

    def run() -> int:
        for flag in ("action_hidden_dim", "action_ffn_dim", "action_dim"):
            if getattr(args, flag) < 1:
                raise UsageError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
        counts = init_action_backbone(args.src, args.out, hidden=args.action_hidden_dim, ffn=args.action_ffn_dim,
                                      action_dim=args.action_dim, freq_dim=args.action_freq_dim,
                                      alpha_scaling=not args.no_alpha_scaling,
                                      dtype=getattr(torch, args.dtype))
        print(f"wrote {args.out}: {counts['tensors']} backbone tensors ({counts['copied']} copied, "
              f"{counts['interpolated']} interpolated)")
        return 0

    return run_guarded(PROG, run)


if __name__ == "__main__":
    sys.exit(main())
