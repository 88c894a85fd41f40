"""The DreamZero precomputed cache: one file per flat sample index plus a manifest.

Layout (DreamZero's ``precompute_features.py`` layout, so caches of either tool are read by both)::

    <cache>/index_00000042.pt     {"video_latents": [C, T', h, w], "first_frame_latents": [C, 1, h, w],
                                   "prompt_embs": [L, D]}  (the enabled features)
    <cache>/manifest.json         kind, version, features, config (transform), dataset (fingerprint),
                                  cache (template, use_sample_transform_seed, sample_transform_seed), coverage, files
    <cache>/manifest.jsonl|.csv   one row per file: path, dataset_index, trajectory_id, base_index, bytes, sha256
    <cache>/_SUCCESS              {"ok": true, "manifest_sha256": ..., "coverage": ...}

:func:`validate_cache` runs before any sample is read (``data.cache_validation=manifest``, the default): a missing or
incomplete cache, or one built for other data or other transform settings, is a :class:`DataError` that names what
changed and the command that rebuilds it. Caches without a manifest (LoongForge's own writer stores only the sample
files, ``torch.save({"video_latents": ..., "prompt_embs": ...})`` in bfloat16, under any ``cache_template``) are read
with ``cache_validation`` 'shapes' or 'off': each file's tensors are checked when read (:mod:`.cache_shapes`).
Files are read with ``torch.load(weights_only=True)`` (tensors only, no code); a ``.npy`` file (``np.load`` without
pickles) holds ``video_latents`` alone, as LoongForge reads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import DataError
from embodied_models.dreamzero.data.cache_shapes import CacheShapeCheck

__all__ = ["KIND", "MANIFESTLESS_HINT", "META_FILES", "PAYLOAD_KEYS", "CacheReader", "cache_config_block",
           "dataset_fingerprint", "json_sha256", "rebuild_hint", "resolve_cache_dir", "sha256_file", "validate_cache"]

KIND = "dreamzero_precomputed_features"
COMMAND = "embodied data precompute-dreamzero"
META_FILES = ("meta/info.json", "meta/episodes.jsonl", "meta/tasks.jsonl", "meta/step_filter.jsonl",
              "meta/modality.json", "meta/relative_stats_dreamzero.json", "meta/relative_horizon_stats_dreamzero.json")
"""The metadata files whose content fixes the sample order (the dataset fingerprint)."""
PAYLOAD_KEYS: dict[str, tuple[str, ...]] = {
    "video_latents": ("video_latents", "latents"),
    "first_frame_latents": ("first_frame_latents", "image_latents", "y_latents"),
    "prompt_embs": ("prompt_embs", "prompt_embeddings", "text_embs"),
}
"""Names a feature may have inside a cache file (DreamZero's accepted aliases), first one written."""
MANIFESTLESS_HINT = ("a cache without a manifest (e.g. written by LoongForge's own tools) is read with "
                     "data.cache_validation=shapes (or off) instead of the default 'manifest'")
"""What to do with a cache that has no manifest."""
LAYOUTS = {"video_latents": "bcthw", "first_frame_latents": "bcthw", "prompt_embs": "blc"}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def json_sha256(payload: Any) -> str:
    """sha256 of the canonical JSON of ``payload`` (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def dataset_fingerprint(root: Path) -> dict[str, Any]:
    """Path, size and sha256 of each :data:`META_FILES` present, and their combined ``content_sha256``."""
    files = []
    for relative in META_FILES:
        path = root / relative
        if path.is_file():
            files.append({"path": str(path), "relative_path": relative, "bytes": path.stat().st_size,
                          "sha256": sha256_file(path)})
    content = json_sha256([{"relative_path": f["relative_path"], "bytes": f["bytes"], "sha256": f["sha256"]}
                           for f in files])
    return {"data_path": str(root), "files": files, "sha256": content, "content_sha256": content,
            "path_sha256": json_sha256(files)}


def cache_config_block(*, image_height: int, image_width: int, crop_scale: float, enable_color_jitter: bool,
                       max_chunk_size: int, language_chunk_sampling: bool, num_frames: int | None = None
                       ) -> dict[str, Any]:
    """The transform settings a cache depends on (manifest ``config``; ``num_frames`` is ours: caches written by
    DreamZero's tool lack it and are not checked for it)."""
    extra = {} if num_frames is None else {"num_frames": int(num_frames)}
    return {**extra, "image_height": int(image_height), "image_width": int(image_width),
            "crop_scale": float(crop_scale), "enable_color_jitter": bool(enable_color_jitter),
            "max_chunk_size": int(max_chunk_size),
            "language_chunk_sampling": bool(language_chunk_sampling), "resize_interpolation": "linear",
            "color_jitter": ({"brightness": 0.3, "contrast": 0.4, "saturation": 0.5, "hue": 0.08}
                             if enable_color_jitter else None)}


def resolve_cache_dir(dataset_root: Path, cache_dir: str) -> Path:
    """``cache_dir``, relative paths under the dataset root."""
    path = Path(cache_dir)
    return path if path.is_absolute() else dataset_root / path


def rebuild_hint(dataset_root: Path, cache: Path) -> str:
    """The command line that rebuilds ``cache``."""
    return f"rebuild it with `{COMMAND} {dataset_root} --output {cache} --model-name <model> [data.x=...]`"


def _read_json(path: Path, *, hint: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path} is missing: the cache is incomplete; {hint}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); {hint}") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object; {hint}")
    return value


def validate_cache(cache: Path, *, dataset_root: Path, dataset_len: int, features: Sequence[str], template: str,
                   transform_config: Mapping[str, Any], use_sample_transform_seed: bool, sample_transform_seed: int,
                   require_full_coverage: bool = False) -> dict[str, Any]:
    """Checks the manifest of ``cache`` against the current dataset and settings; returns the manifest.

    Raises a DataError naming the first difference (missing ``_SUCCESS``, manifest changed after it was written,
    other dataset metadata, template, features, transform setting, seeding, coverage) and the rebuild command.
    """
    hint = rebuild_hint(dataset_root, cache)
    if not cache.is_dir():
        raise DataError(f"data.precomputed_cache_dir: {cache} does not exist; build it with "
                        f"`{COMMAND} {dataset_root} --output {cache} --model-name <model>`")
    manifest_path = cache / "manifest.json"
    if not manifest_path.exists() and not (cache / "_SUCCESS").exists():
        raise DataError(f"{cache} has no manifest.json (data.cache_validation=manifest checks the cache against it); "
                        f"{MANIFESTLESS_HINT}; or {hint}")
    manifest = _read_json(manifest_path, hint=hint)
    success = _read_json(cache / "_SUCCESS", hint=hint)
    if not success.get("ok", False):
        raise DataError(f"{cache / '_SUCCESS'} says the build did not finish (ok=false); {hint}")
    if success.get("manifest_sha256") and success["manifest_sha256"] != sha256_file(manifest_path):
        raise DataError(f"{manifest_path} changed after the build finished (its sha256 differs from _SUCCESS); {hint}")
    if manifest.get("kind") != KIND:
        raise DataError(f"{manifest_path}: kind {manifest.get('kind')!r} is not {KIND!r}; {hint}")
    recorded = (manifest.get("dataset") or {}).get("content_sha256")
    current = dataset_fingerprint(dataset_root)
    if recorded and recorded != current["content_sha256"]:
        old = {f["relative_path"]: f.get("sha256") for f in (manifest.get("dataset") or {}).get("files", [])}
        new = {f["relative_path"]: f["sha256"] for f in current["files"]}
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise DataError(f"{cache} was built for other dataset metadata: {', '.join(changed) or 'the file list'} of "
                        f"{dataset_root} changed since (dataset fingerprint {recorded[:12]} -> "
                        f"{current['content_sha256'][:12]}); {hint}")
    meta = manifest.get("cache") or {}
    if meta.get("cache_template", template) != template:
        raise DataError(f"{cache}: built with cache_template {meta['cache_template']!r}, data.cache_template is "
                        f"{template!r}; {hint}")
    recorded_features = manifest.get("features") or {}
    for name in features:
        if not (recorded_features.get(name) or {}).get("enabled", False):
            enabled = [n for n, f in recorded_features.items() if (f or {}).get("enabled")]
            raise DataError(f"{cache} has no {name!r} (it holds {', '.join(enabled) or 'nothing'}); set "
                            f"data.cache_features or {hint}")
        layout = (recorded_features[name] or {}).get("layout", LAYOUTS[name]) or LAYOUTS[name]
        if layout != LAYOUTS[name]:
            raise DataError(f"{cache}: feature {name} has layout {layout!r}, expected {LAYOUTS[name]!r}; {hint}")
    if "use_sample_transform_seed" in meta and bool(meta["use_sample_transform_seed"]) != use_sample_transform_seed:
        raise DataError(f"{cache}: built with use_sample_transform_seed={bool(meta['use_sample_transform_seed'])}, "
                        f"this run has data.use_sample_transform_seed={use_sample_transform_seed}; {hint}")
    if use_sample_transform_seed and int(meta.get("sample_transform_seed", sample_transform_seed)) != \
            sample_transform_seed:
        raise DataError(f"{cache}: built with sample_transform_seed={meta['sample_transform_seed']}, this run has "
                        f"data.sample_transform_seed={sample_transform_seed}; {hint}")
    recorded_config = manifest.get("config") or {}
    for key, value in transform_config.items():
        if key not in recorded_config or key == "color_jitter":
            continue
        old = recorded_config[key]
        same = abs(float(old) - float(value)) <= 1e-8 if key == "crop_scale" else type(value)(old) == value
        if not same:
            raise DataError(f"{cache}: built with {key}={old!r}, this run has data.{key}={value!r}; {hint}")
    coverage = manifest.get("coverage") or {}
    if coverage.get("dataset_len") is not None and int(coverage["dataset_len"]) != dataset_len:
        raise DataError(f"{cache}: built for {coverage['dataset_len']} flat samples, the dataset has {dataset_len} "
                        f"now; {hint}")
    processed, selected = int(coverage.get("processed", -1)), int(coverage.get("selected", -1))
    if selected <= 0 or processed <= 0 or processed > selected:
        raise DataError(f"{manifest_path}: invalid coverage {coverage}; {hint}")
    if require_full_coverage and (processed != selected or selected != dataset_len):
        raise DataError(f"{cache} covers {processed} of {dataset_len} samples (data.cache_require_full_coverage="
                        f"true); {hint}")
    return manifest


@attrs.define
class CacheReader:
    """Reads the cached features of one flat sample index (picklable; manifest rows loaded on first use).

    ``shapes``: the check of each file read when the cache has no manifest to trust (``data.cache_validation``
    'shapes' / 'off'; see :mod:`.cache_shapes`); None: the manifest was validated instead.
    """

    cache: Path
    template: str
    features: tuple[str, ...]
    validate_sample_hash: bool = True
    hint: str = ""
    shapes: CacheShapeCheck | None = None
    _rows: dict[str, dict[str, Any]] | None = attrs.field(default=None, init=False, repr=False)

    def path(self, flat_index: int, *, trajectory_id: int = 0, base_index: int = 0) -> Path:
        """The file of ``flat_index``."""
        return self.cache / self.template.format(index=int(flat_index), trajectory_id=int(trajectory_id),
                                                 base_index=int(base_index))

    def _manifest_rows(self) -> dict[str, dict[str, Any]]:
        if self._rows is None:
            rows: dict[str, dict[str, Any]] = {}
            path = self.cache / "manifest.jsonl"
            if path.exists():
                for line in path.read_text().splitlines():
                    if line.strip():
                        row = json.loads(line)
                        rows[str(row.get("path"))] = row
            self._rows = rows
        return self._rows

    def load(self, flat_index: int, *, trajectory_id: int = 0, base_index: int = 0,
             frames: int | None = None) -> dict[str, Any]:
        """``{feature: tensor}`` of one sample; a DataError when the file is missing, altered or lacks a feature
        (or, with :attr:`shapes`, holds a tensor that does not fit the sample's ``frames`` video frames)."""
        import torch

        path = self.path(flat_index, trajectory_id=trajectory_id, base_index=base_index)
        if not path.exists():
            raise DataError(f"{path}: no cached features for flat sample index {flat_index} (trajectory "
                            f"{trajectory_id}, base index {base_index}; the cache does not cover it); {self.hint}")
        if self.validate_sample_hash:
            row = self._manifest_rows().get(path.relative_to(self.cache).as_posix())
            if row is None:
                raise DataError(f"{path} is not listed in {self.cache / 'manifest.jsonl'}; {self.hint}")
            if int(row.get("bytes", path.stat().st_size)) != path.stat().st_size or (
                    row.get("sha256") and row["sha256"] != sha256_file(path)):
                raise DataError(f"{path} differs from its manifest.jsonl entry (size or sha256): the file changed "
                                f"after the cache was built; {self.hint}")
        try:
            if path.suffix == ".npy":  # LoongForge also reads bare video latents saved by numpy
                import numpy as np

                payload = {"video_latents": torch.from_numpy(np.load(path, allow_pickle=False))}
            else:
                payload = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # any unpickling failure means a bad cache file
            raise DataError(f"{path}: not a tensor-only {'numpy' if path.suffix == '.npy' else 'torch'} file "
                            f"({type(exc).__name__}: {exc}); {self.hint}") from None
        if torch.is_tensor(payload):
            payload = {"video_latents": payload}
        if not isinstance(payload, dict):
            raise DataError(f"{path} holds a {type(payload).__name__}, not a dict of tensors; {self.hint}")
        out, keys = {}, {}
        for name in self.features:
            key = next((k for k in PAYLOAD_KEYS[name] if k in payload), None)
            if key is None or not torch.is_tensor(payload[key]):
                raise DataError(f"{path} has no tensor {name!r} (keys: {', '.join(map(str, payload))}); {self.hint}")
            out[name], keys[name] = payload[key], key
        if self.shapes is not None:
            self.shapes(path, out, keys, frames=frames)
        return out
