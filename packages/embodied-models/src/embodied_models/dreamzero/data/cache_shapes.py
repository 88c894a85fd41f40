"""Shape and dtype checks of cached features, for caches read without a manifest (``data.cache_validation`` 'shapes'
or 'off').

What the data section fixes is checked in every file: the layout's rank (``video_latents`` and
``first_frame_latents`` ``[C, T', h, w]``, ``prompt_embs`` ``[L, D]``), ``T' = 1 + (T - 1) // 4`` latent frames for
the ``T`` video frames of the sample, ``L = data.max_text_length``, both latent features of one file alike. What
only the model fixes (latent channels, latent grid, text width) must be the same in every file of the process as in
the first one read (the model then checks those against its config when it reads the batch). With ``check_dtype``
the tensors must be float32, bfloat16 or float16 (what DreamZero's and LoongForge's writers store).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import DataError
from embodied_models.dreamzero.config import VAE_TEMPORAL_DOWNSAMPLE

__all__ = ["FLOAT_DTYPES", "CacheShapeCheck"]

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
_LAYOUT = {"video_latents": "[C, T', h, w]", "first_frame_latents": "[C, T', h, w]", "prompt_embs": "[L, D]"}


@attrs.define
class CacheShapeCheck:
    """Checks the tensors of one cache file (picklable; the first file read fixes the model-dependent sizes).

    Args:
        prompt_rows: rows ``prompt_embs`` must have (``data.max_text_length``).
        check_dtype: also require a floating dtype (:data:`FLOAT_DTYPES`).
    """

    prompt_rows: int
    check_dtype: bool = True
    _first: dict[str, tuple[tuple[int, ...], Path]] = attrs.field(factory=dict, init=False, repr=False)

    def __call__(self, path: Path, tensors: Mapping[str, Any], keys: Mapping[str, str], *,
                 frames: int | None) -> None:
        """Raise a DataError naming ``path`` and the payload key of the first tensor that does not fit.

        ``tensors``: feature name -> tensor; ``keys``: feature name -> the key it had in the file; ``frames``: video
        frames of the sample (None: the latent frame count is not checked).
        """
        for name, tensor in tensors.items():
            where = f"{path}: {keys[name]!r}"
            shape = tuple(int(n) for n in tensor.shape)
            if self.check_dtype and str(tensor.dtype).removeprefix("torch.") not in FLOAT_DTYPES:
                raise DataError(f"{where} is {tensor.dtype}; cached features are {', '.join(FLOAT_DTYPES)}")
            rank = 2 if name == "prompt_embs" else 4
            if len(shape) != rank:
                raise DataError(f"{where} has shape {list(shape)}; {name} is {_LAYOUT[name]} (one sample, no batch "
                                "dimension)")
            if name == "prompt_embs":
                if shape[0] != self.prompt_rows:
                    raise DataError(f"{where} has {shape[0]} rows (shape {list(shape)}); data.max_text_length="
                                    f"{self.prompt_rows} prompt positions are expected")
                free = shape[1:]
            else:
                if frames is not None and shape[1] != 1 + (frames - 1) // VAE_TEMPORAL_DOWNSAMPLE:
                    raise DataError(f"{where} has {shape[1]} latent frames (shape {list(shape)}); the sample's "
                                    f"{frames} video frames encode to {1 + (frames - 1) // VAE_TEMPORAL_DOWNSAMPLE}")
                free = (shape[0], *shape[2:])
            self._same_as_first(name, where, shape, free, path)
        video, first = tensors.get("video_latents"), tensors.get("first_frame_latents")
        if video is not None and first is not None and tuple(video.shape) != tuple(first.shape):
            raise DataError(f"{path}: {keys['first_frame_latents']!r} has shape {list(first.shape)} but "
                            f"{keys['video_latents']!r} {list(video.shape)}; both are latents of the sample's frames")

    def _same_as_first(self, name: str, where: str, shape: tuple[int, ...], free: tuple[int, ...], path: Path) -> None:
        seen = self._first.setdefault(name, (free, path))
        if seen[0] != free:
            what = "text width D" if name == "prompt_embs" else "channels C and latent grid h, w"
            raise DataError(f"{where} has shape {list(shape)}, whose {what} differ from {seen[1]} "
                            f"({list(seen[0])}): every file of a cache holds features of one model")
