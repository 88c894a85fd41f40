"""``embodied data precompute-dreamzero``: the DreamZero precomputed cache (:mod:`.cache`) of a LeRobot dataset.

For every sample of the ``dreamzero`` strategy (the training samples, same crop: the augmentation is seeded per
sample, so ``data.use_sample_transform_seed=true`` is required), encodes with the Wan VAE (diffusers
``AutoencoderKLWan`` from ``--vae-path``, through the shared :mod:`embodied_models.wan` substrate) the sample's
``images`` (``video_latents`` [C, T', h, w], normalized with the VAE's ``latents_mean`` / ``latents_std``) and its
first frame followed by zero frames (``first_frame_latents``, the image condition of I2V backbones), and with UMT5
(``UMT5EncoderModel`` from ``--text-encoder-path``, :class:`embodied_models.wan.text.UMT5TextEncoder`) the sample's
embodiment prompt (``prompt_embs`` [L, D], rows past the prompt's tokens zeroed). One file per flat sample index,
written atomically.

Resumable: files already present are kept. Parallel over ranks: rank r encodes positions r, r + W, ... (under
torchrun RANK / WORLD_SIZE, or ``--rank`` / ``--world-size``); the rank that finds every file present writes the
manifest (manifest.json / .jsonl / .csv) and ``_SUCCESS`` last. A cache begun with other settings or for other
data is refused (``build.json`` records them).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch
import yaml

from embodied_core.cli.arguments import index_list
from embodied_core.errors import DataError, UsageError
from embodied_models.dreamzero.data.cache import (
    KIND,
    LAYOUTS,
    PAYLOAD_KEYS,
    cache_config_block,
    dataset_fingerprint,
    json_sha256,
    sha256_file,
)
from embodied_models.dreamzero.data.collate import DreamZeroCollator
from embodied_models.dreamzero.data.config import CACHE_FEATURES, DreamZeroDataConfig
from embodied_models.dreamzero.data.video import video_from_images

__all__ = ["COMMAND", "PrecomputeResult", "encode_prompt", "encode_video", "main", "precompute_dreamzero"]

logger = logging.getLogger("embodied.dreamzero.precompute")
COMMAND = "embodied data precompute-dreamzero"
BUILD_FILE = "build.json"


@attrs.frozen
class PrecomputeResult:
    """What one rank did: flat indices encoded and skipped (already cached), and whether it finalized."""

    encoded: tuple[int, ...]
    skipped: tuple[int, ...]
    finalized: bool
    cache: Path


@torch.no_grad()
def encode_video(vae: Any, images: torch.Tensor, *, first_frame_only: bool = False,
                 video_size: Sequence[int] | None = None) -> torch.Tensor:
    """Normalized Wan VAE latents ``[C, T', h, w]`` of ``images`` (``[T, H, W, 3]`` uint8, resized to ``video_size``
    as the model's online encoder resizes them; the shared Wan substrate's
    :func:`embodied_models.wan.vae.encode_video`); with ``first_frame_only`` the frames after the first are zeros
    (DreamZero's image-condition latents)."""
    from embodied_models.wan.vae import encode_video as wan_encode

    video = video_from_images(images.unsqueeze(0), video_size)
    if first_frame_only:
        video = torch.cat([video[:, :, :1], torch.zeros_like(video[:, :, 1:])], dim=2)
    return wan_encode(vae, video)[0].float().cpu()


@torch.no_grad()
def encode_prompt(text_encoder: Any, prompt: str, *, text_len: int) -> torch.Tensor:
    """UMT5 last hidden state ``[L, D]`` of one prompt (:class:`embodied_models.wan.text.UMT5TextEncoder`: cleaned,
    tokenized to ``text_len``, rows past its tokens zeroed)."""
    hidden, _ = text_encoder([prompt], text_len=text_len)
    return hidden[0].float().cpu()


def _atomic_bytes(path: Path, payload: bytes) -> None:
    from embodied_core.storage import guard_write

    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with guard_write(path, what="a cache file", needed_bytes=len(payload), cleanup=tmp,
                     after="the cache files written before it are complete; rerun the command once there is room"):
        tmp.write_bytes(payload)
        os.replace(tmp, path)


def _atomic_torch(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    buffer = io.BytesIO()
    torch.save({k: v.contiguous() for k, v in tensors.items()}, buffer)
    _atomic_bytes(path, buffer.getvalue())


def _build_record(meta_root: Path, data: DreamZeroDataConfig, features: Sequence[str], vae_path: Path | None,
                  text_path: Path | None) -> dict[str, Any]:
    return {"dataset_content_sha256": dataset_fingerprint(meta_root)["content_sha256"],
            "config": cache_config_block(image_height=data.image_height, image_width=data.image_width,
                                         crop_scale=data.crop_scale, enable_color_jitter=data.enable_color_jitter,
                                         max_chunk_size=data.max_chunk_size,
                                         language_chunk_sampling=data.language_chunk_sampling,
                                         num_frames=None if data.language_chunk_sampling else data.num_frames),
            "data": {k: v for k, v in attrs.asdict(data).items() if k not in (
                "precomputed_cache_dir", "cache_features", "cache_validate_sample_hash",
                "cache_require_full_coverage", "cache_validation", "tokenizer_path")},
            "features": sorted(features), "cache_template": data.cache_template,
            "vae_path": str(vae_path) if vae_path else None, "text_encoder_path": str(text_path) if text_path else None}


def _check_build(cache: Path, record: dict[str, Any]) -> None:
    record = json.loads(json.dumps(record))
    path = cache / BUILD_FILE
    if not path.exists():
        _atomic_bytes(path, json.dumps(record, indent=2, sort_keys=True).encode())
        return
    old = json.loads(path.read_text())
    flat_old = {**{k: v for k, v in old.items() if k != "data"}, **{f"data.{k}": v for k, v in old["data"].items()}}
    flat_new = {**{k: v for k, v in record.items() if k != "data"},
                **{f"data.{k}": v for k, v in record["data"].items()}}
    changed = sorted(k for k in set(flat_old) | set(flat_new) if k != "config" and flat_old.get(k) != flat_new.get(k))
    if changed:
        detail = "; ".join(f"{k}: {flat_old.get(k)!r} -> {flat_new.get(k)!r}" for k in changed)
        raise UsageError(f"{cache} was begun with other settings ({detail}); finish it with the same settings or "
                         "build into another --output")


def _finalize(cache: Path, *, ds: Any, data: DreamZeroDataConfig, features: Sequence[str], dataset_len: int,
              root: Path) -> bool:
    rows = []
    for position in range(len(ds)):
        info = ds.index.query(position).info if ds.index is not None else {"flat_index": position}
        flat = int(info["flat_index"])
        relative = data.cache_template.format(index=flat, trajectory_id=int(info.get("trajectory_id", 0)),
                                              base_index=int(info.get("base_index", 0)))
        path = cache / relative
        if not path.exists():
            return False
        rows.append({"base_index": int(info.get("base_index", 0)), "bytes": path.stat().st_size,
                     "dataset_index": flat, "path": relative, "sha256": sha256_file(path),
                     "trajectory_id": int(info.get("trajectory_id", 0))})
    jsonl = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["path", "dataset_index", "trajectory_id", "base_index", "bytes", "sha256"])
    for r in rows:
        writer.writerow([r["path"], r["dataset_index"], r["trajectory_id"], r["base_index"], r["bytes"], r["sha256"]])
    csv_bytes = text.getvalue().encode()
    _atomic_bytes(cache / "manifest.jsonl", jsonl)
    _atomic_bytes(cache / "manifest.csv", csv_bytes)
    coverage = {"dataset_len": dataset_len, "processed": len(rows), "saved": len(rows), "selected": len(ds)}
    manifest = {
        "kind": KIND, "version": 2, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cache": {"cache_template": data.cache_template, "output_dir": str(cache), "storage_format": "sample_files",
                  "use_sample_transform_seed": data.use_sample_transform_seed,
                  "sample_transform_seed": data.sample_transform_seed},
        "config": cache_config_block(image_height=data.image_height, image_width=data.image_width,
                                     crop_scale=data.crop_scale, enable_color_jitter=data.enable_color_jitter,
                                     max_chunk_size=data.max_chunk_size,
                                     language_chunk_sampling=data.language_chunk_sampling,
                                     num_frames=None if data.language_chunk_sampling else data.num_frames),
        "coverage": coverage, "dataset": dataset_fingerprint(root),
        "features": {name: {"enabled": name in features, "batch_key": name, "payload_keys": list(PAYLOAD_KEYS[name]),
                            "layout": LAYOUTS[name]} for name in CACHE_FEATURES},
        "files": {"cache_files_count": len(rows), "cache_files_sha256": json_sha256([r["sha256"] for r in rows]),
                  "manifest_jsonl": {"path": "manifest.jsonl", "bytes": len(jsonl),
                                     "sha256": sha256_file(cache / "manifest.jsonl")},
                  "manifest_csv": {"path": "manifest.csv", "bytes": len(csv_bytes),
                                   "sha256": sha256_file(cache / "manifest.csv")}},
        "storage": {"format": "sample_files"},
    }
    _atomic_bytes(cache / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode())
    success = {"ok": True, "manifest": "manifest.json", "manifest_sha256": sha256_file(cache / "manifest.json"),
               "coverage": coverage}
    _atomic_bytes(cache / "_SUCCESS", json.dumps(success, indent=2, sort_keys=True).encode())
    return True


def _require_folder(path: str | Path | None, flag: str) -> Path:
    if path is None:
        raise UsageError(f"{flag} is required for the requested features")
    folder = Path(path)
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise UsageError(f"{flag} {folder}: not a model folder with config.json (a local diffusers / transformers "
                         "folder; nothing is downloaded)")
    return folder


def precompute_dreamzero(dataset_root: str | Path, *, output: str | Path, data: DreamZeroDataConfig,
                         features: Sequence[str] = ("video_latents", "prompt_embs"), vae_path: str | Path | None = None,
                         text_encoder_path: str | Path | None = None, tokenizer_path: str | Path | None = None,
                         rank: int = 0, world_size: int = 1, video_backend: str = "pyav",
                         device: str | None = None, dtype: torch.dtype = torch.float32,
                         episodes: Sequence[int] | None = None, limit: int | None = None,
                         video_size: Sequence[int] | None = None) -> PrecomputeResult:
    """Encodes this rank's samples (module docstring) of ``episodes`` (default: all); ``limit`` stops after that
    many new files. ``video_size`` (h, w): the model's ``model.target_video_size`` (frames are resized to it before
    the VAE, as the model does online; None keeps the strategy's frame size)."""
    from embodied_data.lerobot.dataset import LeRobotDataset
    from embodied_data.lerobot.metadata import LeRobotMeta
    from embodied_models.dreamzero.data.strategy import plan_dreamzero

    problems = data.validate()
    unknown = [f for f in features if f not in CACHE_FEATURES]
    if unknown or not features:
        problems.append(f"--features {list(features)}: choose among {', '.join(CACHE_FEATURES)}")
    if not data.use_sample_transform_seed:
        problems.append("data.use_sample_transform_seed=true is required: the cached latents must match the crop "
                        "(and jitter) each sample gets in training")
    if not 0 <= rank < world_size:
        problems.append(f"rank {rank} is not in [0, world_size={world_size})")
    if problems:
        raise UsageError("; ".join(problems))
    wants_video = bool({"video_latents", "first_frame_latents"} & set(features))
    vae_folder = _require_folder(vae_path, "--vae-path") if wants_video else None
    text_folder = _require_folder(text_encoder_path, "--text-encoder-path") if "prompt_embs" in features else None
    tokenizer = tokenizer_path or data.tokenizer_path
    if "prompt_embs" in features and not tokenizer:
        raise UsageError("--tokenizer-path (or data.tokenizer_path) is required for prompt_embs")
    meta = LeRobotMeta.load(dataset_root)
    cache = Path(output)
    cache.mkdir(parents=True, exist_ok=True)
    record = _build_record(meta.root, data, features, vae_folder, text_folder)
    record["video_size"] = list(video_size) if video_size is not None else None
    _check_build(cache, record)
    plan = plan_dreamzero(meta, data, with_cache=False)
    ds = LeRobotDataset(meta.root, video_backend=video_backend, camera_keys=plan.camera_keys, transform=plan.transform,
                        sample_index=plan.sample_index, meta=meta, episodes=episodes)
    run_device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    vae = text_encoder = collator = None
    if vae_folder is not None:
        from embodied_models.wan.vae import load_vae

        vae = load_vae(vae_folder, dtype=dtype, device=run_device)
    if text_folder is not None:
        from embodied_models.wan.text import UMT5TextEncoder

        text_encoder = UMT5TextEncoder.from_folders(text_folder, str(tokenizer), dtype=dtype, device=run_device)
        collator = DreamZeroCollator(str(tokenizer), max_length=data.max_text_length, num_views=len(plan.camera_keys),
                                     literal_eval_tasks=data.literal_eval_tasks)
    encoded, skipped = [], []
    for position in range(rank, len(ds), world_size):
        info = ds.index.query(position).info
        flat = int(info["flat_index"])
        target = cache / data.cache_template.format(index=flat, trajectory_id=int(info["trajectory_id"]),
                                                    base_index=int(info["base_index"]))
        if target.exists():
            skipped.append(flat)
            continue
        if limit is not None and len(encoded) >= limit:
            break
        sample = ds[position]
        out: dict[str, torch.Tensor] = {}
        if "video_latents" in features:
            out["video_latents"] = encode_video(vae, sample["images"], video_size=video_size)
        if "first_frame_latents" in features:
            out["first_frame_latents"] = encode_video(vae, sample["images"], first_frame_only=True,
                                                      video_size=video_size)
        if collator is not None:
            prompt = collator.prompt(sample["text"], sample["embodiment_id"])
            out["prompt_embs"] = encode_prompt(text_encoder, prompt, text_len=data.max_text_length)
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_torch(target, out)
        encoded.append(flat)
    finalized = (limit is None or len(encoded) < limit) and _finalize(
        cache, ds=ds, data=data, features=features, dataset_len=meta.total_frames, root=meta.root)
    return PrecomputeResult(encoded=tuple(encoded), skipped=tuple(skipped), finalized=finalized, cache=cache)


def _data_config(args: argparse.Namespace) -> tuple[DreamZeroDataConfig, tuple[int, int] | None]:
    """The data section and the frame size the model encodes at (``--model-name``'s ``model.target_video_size``,
    else ``--video-size``)."""
    bad = [o for o in args.overrides if not o.startswith("data.") or "=" not in o]
    if bad:
        raise UsageError(f"only data.x=value overrides are accepted, got {bad}")
    if args.model_name:
        from embodied_core.config.resolve import load_config

        config = load_config(training={"model_name": args.model_name}, overrides=args.overrides)
        if not isinstance(config.data, DreamZeroDataConfig):
            raise UsageError(f"--model-name {args.model_name} is not a DreamZero model (data section "
                             f"{type(config.data).__name__})")
        if args.video_size is not None:
            raise UsageError(f"--video-size: the frame size comes from --model-name {args.model_name} "
                             f"(model.target_video_size={config.model.target_video_size}); give one of the two")
        size = config.model.target_video_size
        return config.data, (tuple(size) if size is not None else None)
    fields = {f.name for f in attrs.fields(DreamZeroDataConfig)}
    values: dict[str, Any] = {}
    for item in args.overrides:
        key, _, raw = item.removeprefix("data.").partition("=")
        if key not in fields:
            raise UsageError(f"data.{key}: not a field of the DreamZero data section (fields: "
                             f"{', '.join(sorted(fields))})")
        values[key] = yaml.safe_load(raw)
    try:
        return DreamZeroDataConfig(**values), (tuple(args.video_size) if args.video_size is not None else None)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"data section: {exc}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="LeRobot v2.x dataset directory with meta/modality.json")
    parser.add_argument("overrides", nargs="*", help="data.x=value overrides of the DreamZero data section")
    parser.add_argument("--output", required=True, help="cache folder (then data.precomputed_cache_dir)")
    parser.add_argument("--model-name", help="DreamZero model preset whose data section is used (default: the "
                        "DreamZeroDataConfig defaults + overrides)")
    parser.add_argument("--features", default="video_latents,prompt_embs",
                        help=f"comma-separated, among {', '.join(CACHE_FEATURES)}")
    parser.add_argument("--vae-path", help="local diffusers AutoencoderKLWan folder (vae/ of a Wan model)")
    parser.add_argument("--video-size", type=int, nargs=2, metavar=("H", "W"),
                        help="frame size the model encodes at, without --model-name (its model.target_video_size; "
                             "default: the strategy's frame size)")
    parser.add_argument("--text-encoder-path", help="local transformers UMT5EncoderModel folder (text_encoder/)")
    parser.add_argument("--tokenizer-path", help="local UMT5 tokenizer folder (default: data.tokenizer_path)")
    parser.add_argument("--video-backend", default="pyav", help="frame decoder (embodied.video_backends)")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda:LOCAL_RANK when available)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    parser.add_argument("--episodes", type=index_list,
                        help="episodes to encode, e.g. '0-9,12' (default: all; the cache then covers only their "
                             "samples)")
    parser.add_argument("--limit", type=int, help="stop after this many new files (partial builds, tests)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``embodied data precompute-dreamzero``); returns the exit code."""
    from embodied_core.cli import run_guarded

    args = _parser().parse_intermixed_args(list(sys.argv[1:] if argv is None else argv))

    def run() -> int:
        data, video_size = _data_config(args)
        device = args.device
        if device is None and torch.cuda.is_available():
            device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
        if not Path(args.dataset).is_dir():
            raise DataError(f"dataset {args.dataset}: no such directory")
        result = precompute_dreamzero(
            args.dataset, output=args.output, data=data, features=[f for f in args.features.split(",") if f],
            vae_path=args.vae_path, text_encoder_path=args.text_encoder_path, tokenizer_path=args.tokenizer_path,
            rank=args.rank, world_size=args.world_size, video_backend=args.video_backend, device=device,
            dtype=getattr(torch, args.dtype), episodes=args.episodes, limit=args.limit,
            video_size=video_size)
        state = "wrote the manifest and _SUCCESS" if result.finalized else "cache not complete yet"
        print(f"rank {args.rank}/{args.world_size}: encoded {len(result.encoded)} sample(s), kept "
              f"{len(result.skipped)} already cached; {state}; cache {result.cache}")
        return 0

    return run_guarded(COMMAND, run)


if __name__ == "__main__":
    sys.exit(main())
