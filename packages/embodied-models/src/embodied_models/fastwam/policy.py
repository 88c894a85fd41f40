"""FastWAM as a policy: the plain transforms path, plus the files inference needs beyond the weights.

Inference runs the model's own transforms (camera frames -> video, state -> proprio, task -> prompt, prompt -> UMT5
embedding from the text cache) and ``sample_actions`` (the first frame through the Wan VAE, then Euler steps of the
action expert). So that a checkpoint serves on its own, every policy folder carries:

- ``assets/text_cache/``: a copy of ``data.text_cache_dir`` (the embeddings of the training prompts; a few KB
  each); a task outside it is an error naming the prompt and `embodied data precompute-text`;
- ``assets/vae/``: a copy of ``model.vae_path`` when it is small, else its path is recorded (the Wan2.2 VAE is
  about 2.8 GB); the tiny preset's random VAE is rebuilt from its seed.

``model.video_pretrained_path`` / ``action_pretrained_path`` are not reloaded: the folder's weights replace them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from embodied_core.policy.folder import ASSETS_DIR, copy_if_small
from embodied_core.policy.runtime import TransformsPolicy

if TYPE_CHECKING:
    from embodied_core.config.run_config import RunConfig
    from embodied_core.policy.load import PolicyFolder

__all__ = ["FastWAMPolicy"]

logger = logging.getLogger("embodied.models.fastwam")

TEXT_CACHE = "text_cache"
VAE = "vae"


class FastWAMPolicy(TransformsPolicy):
    """:class:`~embodied_core.policy.runtime.TransformsPolicy` with the text cache (and a small VAE) in the folder."""

    @classmethod
    def write_assets(cls, config: RunConfig, directory: Path) -> dict[str, Any]:
        """Copies the text cache and, when small, the VAE folder into ``directory``; records what was copied."""
        record: dict[str, Any] = {"text_cache": None, "vae": None}
        cache = config.data.text_cache_dir
        if cache and Path(cache).is_dir():
            record["text_cache"] = TEXT_CACHE if copy_if_small(Path(cache), directory / TEXT_CACHE,
                                                               what="FastWAM text cache") else None
            record["text_cache_source"] = str(Path(cache).resolve())
        vae = config.model.vae_path
        if vae and Path(vae).is_dir():
            record["vae"] = VAE if copy_if_small(Path(vae), directory / VAE, what="Wan VAE") else None
            record["vae_source"] = str(Path(vae).resolve())
        return record

    @classmethod
    def references(cls, doc: dict[str, Any]) -> dict[str, str]:
        """What :meth:`from_folder` reads besides core's files: the folder's copies of the text cache and the VAE,
        else the training-time ``data.text_cache_dir`` / ``model.vae_path`` they were too large to be copied from."""
        record = doc.get("assets") or {}
        sources = {"text_cache": ("data_config", "text_cache_dir"), "vae": ("model_config", "vae_path")}
        refs = {}
        for name, (section, field) in sources.items():
            if record.get(name):
                refs[f"policy.json assets.{name}"] = f"{ASSETS_DIR}/{record[name]}"
            elif (doc.get(section) or {}).get(field):
                refs[f"policy.json {section}.{field}"] = str(doc[section][field])
        return refs

    @classmethod
    def from_folder(cls, folder: PolicyFolder, *, device: str, seed: int) -> FastWAMPolicy:
        """Model and transforms of ``folder`` on ``device``, reading the folder's copies where it has them."""
        record = folder.doc.get("assets") or {}
        data_config = folder.data_config
        if record.get("text_cache"):
            data_config = attrs.evolve(data_config, text_cache_dir=str(folder.assets / record["text_cache"]))
        model_config = attrs.evolve(folder.model_config, video_pretrained_path=None, action_pretrained_path=None)
        if record.get("vae"):
            model_config = attrs.evolve(model_config, vae_path=str(folder.assets / record["vae"]))
        io = folder.interface
        return cls(folder.build_model(model_config, data_config, device=device),
                   folder.build_transforms(model_config, data_config), folder.metadata(device=device),
                   image_shapes={k: tuple(v) for k, v in io["image_shapes"].items()},
                   image_history=int(io.get("image_history", 1)), state_history=int(io.get("state_history", 1)),
                   seed=seed)
