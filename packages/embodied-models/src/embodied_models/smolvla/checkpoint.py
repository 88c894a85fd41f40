"""Loading lerobot SmolVLA checkpoints through a declared key map with a strict report.

Source layouts (after an optional leading ``model.``, which ``SmolVLAPolicy.state_dict()`` and every lerobot
``pretrained_model/model.safetensors`` carry):

- lerobot ``VLAFlowMatching``: ``vlm_with_expert.vlm.model.{vision_model,connector}.*``,
  ``vlm_with_expert.vlm.model.text_model.{embed_tokens,layers.N,norm}.*`` (only the kept layers are stored),
  ``vlm_with_expert.vlm.lm_head.weight``, ``vlm_with_expert.lm_expert.{layers.J,norm}.*`` and the projections
  ``state_proj``, ``action_in_proj``, ``action_out_proj``, ``action_time_mlp_{in,out}``;
- this package's own names (a checkpoint written by ``embodied train``).

Expert layer J pairs with VLM layer ``J * stride`` (stride = num_vlm_layers / num_expert_layers), so the map is
built from the model config. The VLM's ``lm_head`` maps onto ours (``model.keep_lm_head``, the default) or is
ignored on purpose. Everything else either matches a rule or is unexpected; every model key not filled is missing;
shapes are checked. Any of the three is a CheckpointError unless allowed by a pattern.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from embodied_core.checkpoint.keymap import KeyMap, LoadReport, Rename
from embodied_models.smolvla.config import SmolVLAModelConfig
from embodied_models.smolvla.reference import check_checkpoint_config
from embodied_models.vla.checkpoint import Globs, Source, load_mapped

__all__ = ["LoadReport", "key_map", "load_smolvla_checkpoint"]

_VLM = r"vlm_with_expert\.vlm\.model\."
_EXPERT = r"vlm_with_expert\.lm_expert\."
_LM_HEAD = "vlm_with_expert.vlm.lm_head.weight"
_OWN_PREFIXES = ("vision_model.", "connector.", "embed_tokens.", "layers.", "vlm_norm.", "expert_norm.", "lm_head.",
                 "state_proj.", "action_in_proj.", "action_out_proj.", "action_time_mlp_in.", "action_time_mlp_out.")
_HINT = ("Check the model.* sizes (num_vlm_layers, num_expert_layers, attention_mode, data.image_size) against the "
         "checkpoint's config.json, or allow known differences explicitly (allow_missing=/allow_unexpected=/"
         "allow_mismatched= glob patterns).")


def key_map(config: SmolVLAModelConfig) -> KeyMap:
    """The declared map of the lerobot layout (and our own names) onto SmolVLAModel names for ``config``."""
    stride = config.expert_layer_stride()
    expert_layers = config.num_vlm_layers // stride
    renames = [
        Rename(_VLM + r"vision_model\.(?P<rest>.+)", "vision_model.{rest}"),
        Rename(_VLM + r"connector\.(?P<rest>.+)", "connector.{rest}"),
        Rename(_VLM + r"text_model\.embed_tokens\.weight", "embed_tokens.weight"),
        Rename(_VLM + r"text_model\.layers\.(?P<i>\d+)\.(?P<rest>.+)", "layers.{i}.vlm.{rest}"),
        Rename(_VLM + r"text_model\.norm\.weight", "vlm_norm.weight"),
        Rename(_EXPERT + r"norm\.weight", "expert_norm.weight"),
    ]
    if stride == 1:
        renames.append(Rename(_EXPERT + r"layers\.(?P<i>\d+)\.(?P<rest>.+)", "layers.{i}.expert.{rest}"))
    else:
        renames += [Rename(_EXPERT + rf"layers\.{j}\.(?P<rest>.+)", f"layers.{j * stride}.expert.{{rest}}")
                    for j in range(expert_layers)]
    ignored: tuple[str, ...] = ()
    if config.keep_lm_head:
        renames.append(Rename(_LM_HEAD.replace(".", r"\."), "lm_head.weight"))
    else:
        ignored = (_LM_HEAD, "lm_head.weight")
    return KeyMap(strip_prefixes=("model.",), renames=tuple(renames),
                  keep=tuple(f"{prefix}*" for prefix in _OWN_PREFIXES), ignored=ignored)


def load_smolvla_checkpoint(model: nn.Module, source: Source, *, allow_missing: Globs = (),
                            allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> LoadReport:
    """Copies a lerobot / own-layout SmolVLA checkpoint into ``model`` (a materialized SmolVLAModel), strictly;
    ``source``, the allow patterns, the report and the errors are those of
    :func:`~embodied_models.vla.checkpoint.load_mapped`, plus a ConfigError when a lerobot ``config.json`` beside
    the weights describes another network (:mod:`embodied_models.smolvla.reference`)."""
    if not isinstance(source, Mapping) and isinstance(getattr(model, "config", None), SmolVLAModelConfig):
        check_checkpoint_config(model.config, source)  # a lerobot config.json beside the weights must agree
    report, _ = load_mapped(model, source, key_map(model.config),  # type: ignore[arg-type]
                            label="SmolVLA", hint=_HINT, allow_missing=allow_missing,
                            allow_unexpected=allow_unexpected, allow_mismatched=allow_mismatched)
    return report
