"""Loading lerobot / 2toINF X-VLA checkpoints through a declared key map with a strict report.

Source layouts (after an optional leading ``model.``, which lerobot's ``XVLAPolicy`` adds):

- lerobot 0.6 (native transformers Florence-2): ``vlm.vision_tower.*``, ``vlm.multi_modal_projector.*``,
  ``vlm.language_model.{shared,encoder}.*`` and ``transformer.*``: this module's own names.
- the vendored Microsoft remote-code Florence-2 layout of the official 2toINF X-VLA checkpoints (``X-VLA-0.9B``,
  ``X-VLA-Libero``, ...) and of older lerobot ones: DaViT ``convs.N.proj`` and the ``PreNorm`` / ``Mlp`` wrappers
  (``conv1.fn.dw``, ``window_attn.norm``, ``window_attn.fn``, ``ffn.norm``, ``ffn.fn.net``), the projection
  layers directly under ``vlm.`` (``image_projection`` is a ``[embed, proj]`` Parameter used as ``x @ p``: it is
  transposed into the Linear weight), and BART under ``vlm.language_model.model.``.
- this package's own names (a checkpoint written by ``embodied train``).

Declared, never silent: ``final_logits_bias``, the language-model head and any text-decoder weights are dropped
on purpose (X-VLA deletes the decoder); BART's shared table and the encoder's ``embed_tokens`` are one tensor, so
a checkpoint holding only one of them (safetensors deduplicates tied tensors) fills both and says so in
``report.tied``. Every other key either matches a rule or is unexpected; every model key not filled is missing;
shapes are checked. Any of the three is a CheckpointError unless allowed by a pattern. A reference ``config.json``
beside the weights (lerobot's ``XVLAConfig``) is read field by field first (:mod:`embodied_models.xvla.reference`):
a value this port does not implement, or a field the model config sets differently, is a ConfigError.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

import torch
from torch import nn

from embodied_core.checkpoint.keymap import KeyMap, LoadReport, Rename
from embodied_core.errors import CheckpointError
from embodied_models.vla.checkpoint import Globs, Source, load_mapped
from embodied_models.xvla.config import XvlaModelConfig
from embodied_models.xvla.reference import check_checkpoint_config

__all__ = ["KEY_MAP", "LoadReport", "load_xvla_checkpoint", "map_key", "tied_groups"]

_BLOCK = (r"vlm\.vision_tower\.blocks\.(?P<s>\d+)\.(?P<n>\d+)\.(?P<blk>spatial_block|channel_block)\.")
_NEW_BLOCK = "vlm.vision_tower.blocks.{s}.{n}.{blk}."


def _transpose(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.transpose(0, 1).contiguous()


KEY_RULES: tuple[Rename, ...] = (
    # DaViT stems: ConvEmbed.proj -> Florence2VisionConvEmbed.conv
    Rename(r"vlm\.vision_tower\.convs\.(?P<i>\d+)\.proj\.(?P<rest>weight|bias)",
           "vlm.vision_tower.convs.{i}.conv.{rest}"),
    # DaViT blocks: the PreNorm / DepthWiseConv2d / Mlp wrappers are flat in the native classes
    Rename(_BLOCK + r"(?P<conv>conv1|conv2)\.fn\.dw\.(?P<rest>weight|bias)", _NEW_BLOCK + "{conv}.{rest}"),
    Rename(_BLOCK + r"(?:window_attn|channel_attn)\.norm\.(?P<rest>weight|bias)", _NEW_BLOCK + "norm1.{rest}"),
    Rename(_BLOCK + r"(?P<attn>window_attn|channel_attn)\.fn\.(?P<rest>.+)", _NEW_BLOCK + "{attn}.{rest}"),
    Rename(_BLOCK + r"ffn\.norm\.(?P<rest>weight|bias)", _NEW_BLOCK + "norm2.{rest}"),
    Rename(_BLOCK + r"ffn\.fn\.net\.(?P<rest>fc[12]\.(?:weight|bias))", _NEW_BLOCK + "ffn.{rest}"),
    # projection layers moved into the native multi_modal_projector
    Rename(r"vlm\.image_projection", "vlm.multi_modal_projector.image_projection.weight", _transpose),
    Rename(r"vlm\.image_proj_norm\.(?P<rest>weight|bias)", "vlm.multi_modal_projector.image_proj_norm.{rest}"),
    Rename(r"vlm\.image_pos_embed\.(?P<rest>.+)", "vlm.multi_modal_projector.image_position_embed.{rest}"),
    Rename(r"vlm\.visual_temporal_embed\.(?P<rest>.+)", "vlm.multi_modal_projector.visual_temporal_embed.{rest}"),
    # BART: Florence2LanguageForConditionalGeneration.model -> BartModel
    Rename(r"vlm\.language_model\.model\.(?P<rest>(?:shared|encoder)\..+)", "vlm.language_model.{rest}"),
)
"""The vendored-layout renames; first match wins, native and own keys fall through to ``keep``."""

KEY_MAP = KeyMap(
    strip_prefixes=("model.",),
    renames=KEY_RULES,
    keep=("vlm.vision_tower.*", "vlm.multi_modal_projector.*", "vlm.language_model.shared.*",
          "vlm.language_model.encoder.*", "transformer.*"),
    ignored=("vlm.language_model.final_logits_bias", "vlm.language_model.lm_head.weight",
             "vlm.language_model.decoder.*", "vlm.language_model.model.decoder.*"),
)
"""The declared map of every layout above onto :class:`~embodied_models.xvla.modeling.XvlaModel` names."""

_HINT = ("Allow known differences explicitly (allow_missing=/allow_unexpected=/allow_mismatched= glob patterns) or "
         "check model.* sizes (action_mode, max_state_dim, num_domains, len_soft_prompts) against the checkpoint.")


def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def tied_groups(module: nn.Module) -> list[list[str]]:
    """Names that designate one shared parameter (BART's ``shared`` and ``encoder.embed_tokens``), grouped."""
    by_id: dict[int, list[str]] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(param), []).append(name)
    return [names for names in by_id.values() if len(names) > 1]


def load_xvla_checkpoint(model: nn.Module, source: Source, *, allow_missing: Globs = (),
                         allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> LoadReport:
    """Copies a lerobot / X-VLA / own-layout checkpoint into ``model`` (a materialized XvlaModel), strictly;
    ``source``, the allow patterns, the report and the errors are those of
    :func:`~embodied_models.vla.checkpoint.load_mapped`, plus one error per tied tensor the checkpoint holds under
    none of its names."""
    if not isinstance(source, Mapping) and isinstance(getattr(model, "config", None), XvlaModelConfig):
        check_checkpoint_config(model.config, source)  # a reference config.json beside the weights must agree
    groups = tied_groups(model)
    user_missing = tuple(allow_missing)
    # an alias of a tied tensor may be absent from the file; it is checked per group below
    report, what = load_mapped(model, source, KEY_MAP, label="X-VLA", hint=_HINT,
                               allow_missing=user_missing + tuple(name for group in groups for name in group),
                               allow_unexpected=allow_unexpected, allow_mismatched=allow_mismatched)
    for group in groups:
        loaded = [name for name in group if name in report.loaded]
        if loaded:
            for name in group:
                if name in report.missing:
                    report.missing.remove(name)
                    report.tied.append(f"{loaded[0]} -> {name}")
        elif not all(_allowed(name, user_missing) for name in group):
            raise CheckpointError(f"{what} does not fit {type(model).__name__} (strict load): missing: "
                                  f"{' / '.join(group)} (one tensor, under any of these names)\n{_HINT}")
    return report


def _allowed(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
