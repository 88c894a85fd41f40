"""``embodied data precompute-latents``: build the LingBot-VA latent cache (see :mod:`.cache`).

Encodes each episode's camera videos with the Wan2.2 VAE (``AutoencoderKLWan`` from ``<base>/vae``) and each
task prompt with UMT5 (``<base>/text_encoder`` + ``<base>/tokenizer``), where ``<base>`` is a
``BASE_MODEL_PATH``-style folder (the layout of Wan2.2-TI2V-5B-Diffusers / lingbot-va-base). Resumable: finished
episodes are skipped. Parallel over ranks: rank r encodes episodes r, r + W, ...; rank 0 also writes
``meta.json`` and the text embeddings. Run it under ``torchrun`` (RANK/WORLD_SIZE) or with ``--rank/--world-size``.
Frames are resized (bilinear) and scaled to [-1, 1] and latents normalized with the VAE's ``latents_mean/std``, as
in the LingBot-VA reference (lerobot ``LingBotVAPolicy._encode_training_latents``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from embodied_core.cli.arguments import index_list
from embodied_core.errors import DataError, UsageError
from embodied_models.lingbot_va.cache import (
    META_NAME,
    TEXT_NAME,
    cache_dir,
    check_cache_matches,
    episode_file,
    num_latent_frames,
    read_cache_meta,
    write_atomic_safetensors,
    write_cache_meta,
)
from embodied_models.lingbot_va.config import LingBotVADataConfig
from embodied_models.lingbot_va.vae import encode_cameras, normalize_latents
from embodied_models.wan.text import UMT5TextEncoder, clean_prompt

__all__ = ["PrecomputeResult", "clean_prompt", "main", "precompute_latents"]

logger = logging.getLogger("embodied.lingbot_va.precompute")
COMMAND = "embodied data precompute-latents"


@attrs.frozen
class PrecomputeResult:
    """What one rank did."""

    encoded: tuple[int, ...]
    skipped: tuple[int, ...]
    cache: Path


def _cache_spec(data_config: LingBotVADataConfig, base_model_path: Path) -> dict[str, Any]:
    return {"camera_keys": list(data_config.camera_keys), "camera_layout": data_config.camera_layout,
            "image_size": list(data_config.image_size), "video_stride": data_config.video_stride,
            "base_model_path": str(base_model_path)}


def _require_folder(base: Path, name: str) -> Path:
    path = base / name
    if not (path / "config.json").is_file() and not any(path.glob("*.json")):
        raise UsageError(f"{path}: missing; BASE_MODEL_PATH must hold the diffusers sub-folders vae/, "
                         "text_encoder/ and tokenizer/ (as Wan2.2-TI2V-5B-Diffusers or lingbot-va-base)")
    return path


def encode_texts(base: Path, prompts: dict[str, str], *, text_len: int, device: torch.device,
                 dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """UMT5 embeddings trimmed to each prompt's valid tokens, name -> [T_i, text_dim] (bf16 on CPU)."""
    _require_folder(base, "tokenizer")
    _require_folder(base, "text_encoder")
    text = UMT5TextEncoder.from_base(base, dtype=dtype, device=device)
    out = {}
    for name, prompt in prompts.items():  # one at a time: the embeddings do not depend on what else is encoded
        hidden, mask = text([prompt], text_len=text_len)
        out[name] = hidden[0, : int(mask.sum())].to(torch.bfloat16).cpu()
    return out


class _EpisodeEncoder:
    """Decodes an episode's strided frames per camera and VAE-encodes the whole clip (see :mod:`.vae`)."""

    def __init__(self, meta: Any, data_config: LingBotVADataConfig, vae: Any, *, video_backend: str,
                 tolerance_s: float) -> None:
        from embodied_data.video.backends import make_backend

        self.meta, self.cfg, self.vae = meta, data_config, vae
        self.backend = make_backend(video_backend, cache_size=2)
        self.tolerance_s = tolerance_s

    def frame_ids(self, episode: int) -> torch.Tensor:
        length = self.meta.episodes[episode].length
        count = 4 * (num_latent_frames(length, self.cfg.video_stride) - 1) + 1
        return torch.arange(count) * self.cfg.video_stride

    def _frames(self, episode: int, camera: str, frame_ids: torch.Tensor) -> torch.Tensor:
        path = self.meta.video_file(episode, camera)
        start = self.meta.video_from_timestamp(episode, camera)
        query = [start + int(i) / self.meta.fps for i in frame_ids]
        decoded = self.backend.decode(path, query)
        worst = max(abs(p - t) for p, t in zip(decoded.pts, query, strict=True))
        if worst > self.tolerance_s:
            raise DataError(f"{path}: episode {episode}, camera {camera}: decoded frames are up to {worst:.2e}s away "
                            f"from the requested timestamps (tolerance_s={self.tolerance_s})")
        return decoded.frames  # [N, 3, H, W] uint8

    def _encode(self, video: torch.Tensor, group: str) -> torch.Tensor:
        param = next(self.vae.parameters())
        with torch.no_grad():
            mu = self.vae.encode(video.to(param.device, param.dtype)).latent_dist.mode()
        return normalize_latents(mu, self.vae).cpu()

    def __call__(self, episode: int) -> dict[str, torch.Tensor]:
        ids = self.frame_ids(episode)
        clips = [self._frames(episode, cam, ids) for cam in self.cfg.camera_keys]
        latents = encode_cameras(clips, self.cfg, self._encode)
        return {"latents": latents.to(torch.bfloat16), "frame_index": ids}


def precompute_latents(dataset_root: str | Path, *, base_model_path: str | Path, data_config: LingBotVADataConfig,
                       text_len: int = 512, rank: int = 0, world_size: int = 1, episodes: Sequence[int] | None = None,
                       device: str | torch.device | None = None, dtype: torch.dtype = torch.bfloat16,
                       video_backend: str = "pyav", tolerance_s: float = 1e-4) -> PrecomputeResult:
    """Builds (or completes) the latent cache of one dataset; see the module docstring.

    Args:
        dataset_root: a LeRobot dataset (v2.x or v3.0) directory.
        base_model_path: folder with ``vae/``, ``text_encoder/`` and ``tokenizer/``.
        data_config: cameras, layout, image size, stride and cache folder (``data.latent_cache``).
        text_len: tokenizer max length (UMT5: 512).
        rank, world_size: this process's share of the episodes.
        episodes: episodes to encode (default: every episode of the dataset).
        device, dtype: where and in which dtype the VAE and UMT5 run.
    """
    from diffusers import AutoencoderKLWan

    from embodied_data.lerobot.metadata import LeRobotMeta

    problems = data_config.validate()
    if problems:
        raise UsageError("; ".join(problems))
    if not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} is not in [0, world_size={world_size})")
    base = Path(base_model_path)
    meta = LeRobotMeta.load(dataset_root)
    missing = [c for c in data_config.camera_keys if c not in meta.camera_keys]
    if missing:
        raise UsageError(f"data.camera_keys {missing} are not cameras of {meta.root} (cameras: {meta.camera_keys})")
    selected = sorted(meta.episodes) if episodes is None else sorted(set(episodes))
    unknown = [e for e in selected if e not in meta.episodes]
    if unknown:
        raise UsageError(f"episodes {unknown[:10]} are not in {meta.root}")
    cache = cache_dir(meta.root, data_config.latent_cache)
    cache.mkdir(parents=True, exist_ok=True)
    spec = _cache_spec(data_config, base)
    if (cache / META_NAME).is_file():
        check_cache_matches(read_cache_meta(cache, command_hint=COMMAND), spec, cache=cache, command_hint=COMMAND)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    vae = AutoencoderKLWan.from_pretrained(str(_require_folder(base, "vae")), torch_dtype=dtype).to(device).eval()
    if rank == 0:
        if not (cache / TEXT_NAME).is_file():
            prompts = {f"task_{i}": text for i, text in meta.tasks.items()} | {"empty": ""}
            texts = encode_texts(base, prompts, text_len=text_len, device=device, dtype=dtype)
            write_atomic_safetensors(texts, cache / TEXT_NAME)
        write_cache_meta(cache, {**spec, "z_dim": vae.config.z_dim, "text_len": text_len})
    encoder = _EpisodeEncoder(meta, data_config, vae, video_backend=video_backend, tolerance_s=tolerance_s)
    encoded, skipped = [], []
    for episode in selected[rank::world_size]:
        target = episode_file(cache, episode)
        if target.is_file():
            skipped.append(episode)
            continue
        write_atomic_safetensors(encoder(episode), target)
        encoded.append(episode)
        logger.info("rank %d: episode %d -> %s", rank, episode, target)
    return PrecomputeResult(encoded=tuple(encoded), skipped=tuple(skipped), cache=cache)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="LeRobot dataset directory")
    parser.add_argument("overrides", nargs="*", help="data.x=value overrides of the model's data section")
    parser.add_argument("--base-model-path", default=os.environ.get("BASE_MODEL_PATH"),
                        help="folder with vae/, text_encoder/, tokenizer/ (default: $BASE_MODEL_PATH)")
    parser.add_argument("--model-name", default="lingbot_va_libero",
                        help="model preset whose data section gives cameras, layout, image size and stride")
    parser.add_argument("--episodes", type=index_list, help="episodes to encode, e.g. '0-9,12' (default: all)")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda:LOCAL_RANK when available)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--video-backend", default="pyav", help="frame decoder (embodied.video_backends)")
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``embodied data precompute-latents``); returns the exit code."""
    from embodied_core.cli import run_guarded
    from embodied_core.config.resolve import load_config

    args = _parser().parse_intermixed_args(list(sys.argv[1:] if argv is None else argv))

    def run() -> int:
        if not args.base_model_path:
            raise UsageError("--base-model-path (or BASE_MODEL_PATH) is required")
        bad = [o for o in args.overrides if not o.startswith("data.")]
        if bad:
            raise UsageError(f"only data.x=value overrides are accepted, got {bad}")
        config = load_config(training={"model_name": args.model_name}, overrides=args.overrides)
        device = args.device
        if device is None and torch.cuda.is_available():
            device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
        result = precompute_latents(args.dataset, base_model_path=args.base_model_path, data_config=config.data,
                                    text_len=config.model.text_len, rank=args.rank, world_size=args.world_size,
                                    episodes=args.episodes, device=device,
                                    dtype=getattr(torch, args.dtype), video_backend=args.video_backend)
        print(f"rank {args.rank}/{args.world_size}: encoded {len(result.encoded)} episode(s), skipped "
              f"{len(result.skipped)} already cached, cache {result.cache}")
        return 0

    return run_guarded(COMMAND, run)


if __name__ == "__main__":
    sys.exit(main())
