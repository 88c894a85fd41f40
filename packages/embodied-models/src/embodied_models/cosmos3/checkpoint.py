"""Loading Cosmos3 checkpoints through one declared key map with a strict report.

Layouts (all onto :class:`~embodied_models.cosmos3.modeling.Cosmos3Model`'s names, ``net.*`` = diffusers'
``Cosmos3OmniTransformer``, ``vae.*`` = the Wan2.2 encoder):

- **LoongForge** DCP checkpoint: a folder with ``model/.metadata`` whose keys are ``net.*`` of LoongForge's
  ``Cosmos3VFMNetwork``: ``net.language_model.model.{embed_tokens, layers.N.*, norm, norm_moe_gen}``,
  ``net.language_model.lm_head``, ``net.{vae2llm, llm2vae, time_embedder.mlp.{0,2}, action2llm, llm2action,
  action_modality_embed}``. Layer names: ``self_attn.{q,k,v,o}_proj`` -> ``to_q/to_k/to_v/to_out``,
  ``{q,k,v,o}_proj_moe_gen`` -> ``add_{q,k,v}_proj/to_add_out``, ``{q,k}_norm`` -> ``norm_{q,k}``,
  ``{q,k}_norm_moe_gen`` -> ``norm_added_{q,k}``; MLPs and layer norms keep their names. Read with core's
  restricted DCP reader (``embodied_core.checkpoint.dcp_reader``): the pickled metadata is unpickled with an
  allow-list, nothing from the checkpoint runs. The modules named by ``model.keys_to_skip_loading`` (the action
  heads, by default) are not loaded and keep their fresh initialization, as the reference does.
- **diffusers**: a ``Cosmos3OmniTransformer`` folder (``diffusion_pytorch_model*.safetensors``, sharded index or
  single file) or file; its keys get ``net.`` in front.
- **embodied**: a checkpoint written by ``embodied train`` (our own names, VAE included).

Keys without a counterpart: every LoongForge and diffusers key of the action-policy transformer has one (the map
is one to one). diffusers' sound heads (``audio_proj_in/out``, ``audio_modality_embed``, ``sound_gen=True``
checkpoints) have none in this policy and are ignored; diffusers' optional ``k_norm_und_for_gen`` (only with
``use_und_k_norm_for_gen`` and no text q/k norm) has none in LoongForge and is reported unexpected. Neither
LoongForge's DCP nor a diffusers transformer holds the VAE: ``vae.*`` then comes from ``model.vae_path`` (a
diffusers ``AutoencoderKLWan`` folder; its decoder keys are ignored), and loading without it is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from embodied_core.checkpoint.dcp_reader import check_dcp_dir, load_dcp_keys
from embodied_core.checkpoint.keymap import Allow, KeyMap, LoadReport, Rename, load_state
from embodied_core.checkpoint.pretrained import resolve_weights
from embodied_core.errors import CheckpointError

__all__ = ["KEY_MAP", "LOONGFORGE_RULES", "load_cosmos3_checkpoint", "loongforge_dcp_dir", "map_key"]

_LM = r"net\.language_model\.model\."
_LAYER = _LM + r"layers\.(?P<i>\d+)\."
_R = r"(?P<r>weight|bias)"
LOONGFORGE_RULES: tuple[tuple[str, str], ...] = (
    (_LM + r"embed_tokens\.weight", "net.embed_tokens.weight"),
    (_LAYER + r"self_attn\.(?P<p>[qkv])_proj\." + _R, "net.layers.{i}.self_attn.to_{p}.{r}"),
    (_LAYER + r"self_attn\.o_proj\." + _R, "net.layers.{i}.self_attn.to_out.{r}"),
    (_LAYER + r"self_attn\.(?P<p>[qkv])_proj_moe_gen\." + _R, "net.layers.{i}.self_attn.add_{p}_proj.{r}"),
    (_LAYER + r"self_attn\.o_proj_moe_gen\." + _R, "net.layers.{i}.self_attn.to_add_out.{r}"),
    (_LAYER + r"self_attn\.(?P<p>[qk])_norm\.weight", "net.layers.{i}.self_attn.norm_{p}.weight"),
    (_LAYER + r"self_attn\.(?P<p>[qk])_norm_moe_gen\.weight", "net.layers.{i}.self_attn.norm_added_{p}.weight"),
    (_LAYER + r"(?P<rest>mlp(?:_moe_gen)?\.(?:gate|up|down)_proj\.weight)", "net.layers.{i}.{rest}"),
    (_LAYER + r"(?P<rest>(?:input|post_attention)_layernorm(?:_moe_gen)?\.weight)", "net.layers.{i}.{rest}"),
    (_LM + r"(?P<n>norm|norm_moe_gen)\.weight", "net.{n}.weight"),
    (r"net\.language_model\.lm_head\.weight", "net.lm_head.weight"),
    (r"net\.vae2llm\." + _R, "net.proj_in.{r}"),
    (r"net\.llm2vae\." + _R, "net.proj_out.{r}"),
    (r"net\.time_embedder\.mlp\.0\." + _R, "net.time_embedder.linear_1.{r}"),
    (r"net\.time_embedder\.mlp\.2\." + _R, "net.time_embedder.linear_2.{r}"),
    (r"net\.action2llm\.(?P<p>fc|bias)\.weight", "net.action_proj_in.{p}.weight"),
    (r"net\.llm2action\.(?P<p>fc|bias)\.weight", "net.action_proj_out.{p}.weight"),
    (r"net\.action_modality_embed", "net.action_modality_embed"),
)
"""(LoongForge regex, our template); first match wins."""

_DIFFUSERS_TOP = ("embed_tokens", "layers", "norm", "norm_moe_gen", "lm_head", "proj_in", "proj_out", "time_embedder",
                  "action_proj_in", "action_proj_out", "action_modality_embed")

KEY_MAP = KeyMap(
    renames=(*(Rename(p, t) for p, t in LOONGFORGE_RULES),
             Rename(r"(?P<k>(?:" + "|".join(_DIFFUSERS_TOP) + r")(?:\..+)?)", "net.{k}")),
    keep=("net.*", "vae.*"),
    ignored=("audio_proj_in.*", "audio_proj_out.*", "audio_modality_embed",
             "net.language_model.model.rotary_emb.*"),
)
"""LoongForge, diffusers and our own names onto the module (see the module docstring)."""

LOONGFORGE_MODULES = {"vae2llm": "net.proj_in.*", "llm2vae": "net.proj_out.*", "time_embedder": "net.time_embedder.*",
                      "action2llm": "net.action_proj_in.*", "llm2action": "net.action_proj_out.*",
                      "action_modality_embed": "net.action_modality_embed"}
"""LoongForge's top-level module names (``model.keys_to_skip_loading``) and the names they fill here."""

_HINT = ("Check the model.* sizes (hidden_size, num_hidden_layers, max_action_dim, num_embodiment_domains, "
         "vocab_size) against the checkpoint; a LoongForge or diffusers transformer holds no VAE (set "
         "model.vae_path).")


def map_key(key: str) -> str | None:
    """Our parameter name for a source key (LoongForge, diffusers or ours), or None when no rule applies."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def loongforge_dcp_dir(path: str | Path) -> Path | None:
    """``path/model`` when ``path`` is a LoongForge DCP checkpoint (``model/.metadata``), else None."""
    folder = Path(path) / "model"
    return folder if (folder / ".metadata").is_file() else None


def _skipped(name: str, skip: tuple[str, ...]) -> bool:
    return any(re.search(rf"(^|\.){re.escape(s)}(\.|$)", name) for s in skip)


def _loongforge_items(folder: Path, skip: tuple[str, ...], *, max_bytes: int = 256 * 2**20
                      ) -> Iterator[tuple[str, torch.Tensor]]:
    """``(fqn, full CPU tensor)`` of a LoongForge DCP folder (flat ``net.*`` keys), about ``max_bytes`` at a time,
    through core's restricted reader; keys of skipped modules are not read."""
    metadata = check_dcp_dir(folder)
    paths = metadata.planner_data or {}
    sizes = {fqn: md.size.numel() * md.properties.dtype.itemsize for fqn, md in metadata.state_dict_metadata.items()
             if isinstance(md, TensorStorageMetadata) and not _skipped(fqn, skip)}
    batch: list[str] = []
    for fqn in [*sorted(sizes), None]:
        if batch and (fqn is None or sum(sizes[k] for k in batch) + sizes[fqn] > max_bytes):
            loaded = load_dcp_keys(folder, batch, no_dist=True)
            for key in batch:
                node: Any = loaded
                for part in paths.get(key) or (key,):
                    node = node[part]
                yield key, node
            batch = []
        if fqn is not None:
            batch.append(fqn)


def _diffusers_source(path: Path) -> Path:
    """A diffusers folder's weights file / index (``transformer/`` looked into), else ``path`` itself."""
    for folder in (path, path / "transformer"):
        for name in ("diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.safetensors"):
            if (folder / name).is_file():
                return folder / name
    return path


def load_cosmos3_checkpoint(model: torch.nn.Module, path: str | Path) -> LoadReport:
    """Copies a LoongForge / diffusers / embodied checkpoint into ``model`` (strict; see the module docstring).

    The VAE comes from the checkpoint when it holds ``vae.*``, else from ``model.vae_path``.
    """
    config = model.config
    path = Path(path)
    dcp_dir = loongforge_dcp_dir(path)
    allow_missing: list[str] = []
    if dcp_dir is not None:
        unknown = [s for s in config.keys_to_skip_loading if s not in LOONGFORGE_MODULES]
        if unknown:
            raise CheckpointError(f"model.keys_to_skip_loading names {unknown}, not LoongForge Cosmos3 modules; "
                                  f"valid: {sorted(LOONGFORGE_MODULES)}")
        allow_missing += [LOONGFORGE_MODULES[s] for s in config.keys_to_skip_loading]
        items, source = _loongforge_items(dcp_dir, tuple(config.keys_to_skip_loading)), f"LoongForge DCP {dcp_dir}"
    else:
        weights = resolve_weights(_diffusers_source(path) if path.is_dir() else path)
        items, source = weights.items(), f"Cosmos3 checkpoint {weights}"
    if config.vae_path is not None:
        allow_missing.append("vae.*")
    report = load_state(model, items, KEY_MAP, source=source, allow=Allow(missing=tuple(allow_missing)), hint=_HINT)
    if config.vae_path is not None and any(k.startswith("vae.") for k in report.missing):
        from embodied_models.cosmos3.vae import load_vae_weights

        load_vae_weights(model.vae, config.vae_path)
    return report
