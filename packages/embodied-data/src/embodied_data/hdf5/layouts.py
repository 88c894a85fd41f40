"""Recognizing HDF5 episode layouts and mapping their datasets to LeRobot keys.

Two layouts are read:

- **robomimic**: one file, ``data/demo_N`` groups (sorted by N, numerically) each with ``actions [T, A]``
  and ``obs/<key>``; optional ``rewards``/``dones``; splits as ``mask/<split>`` (demo names as bytes).
  ``obs`` entries that are uint8 ``[T, H, W, 3]`` are cameras, ``observation.images.<key>`` with a trailing
  ``_image`` dropped (``agentview_image`` -> ``observation.images.agentview``); the others are low-dim,
  ``observation.<key>``, and ``observation.state`` is their concatenation in name order.
- **ALOHA/ACT**: one file per episode (``episode_N.hdf5`` in a folder, sorted by N) with
  ``/observations/qpos`` (``observation.state``), optional ``qvel``/``effort`` (``observation.velocity``,
  ``observation.effort``), ``/observations/images/<cam>`` (``observation.images.<cam>``) either raw uint8
  ``[T, H, W, 3]`` or JPEG-compressed (variable-length uint8, or zero-padded ``[T, N]`` rows), and
  ``/action``.

Neither layout stores a frame rate reliably: a root (or ``data``) attribute ``fps`` is used when present,
else robomimic's 20 Hz (robosuite's control rate) and ALOHA's 50 Hz.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import DataError, UsageError

__all__ = ["Hdf5Episode", "Hdf5Index", "Source", "scan_hdf5"]

_DEFAULT_FPS = {"robomimic": 20.0, "aloha": 50.0}
_ALOHA_LOWDIM = {"qpos": "observation.state", "qvel": "observation.velocity", "effort": "observation.effort"}
_SUFFIXES = (".hdf5", ".h5", ".hdf")


@attrs.frozen
class Source:
    """How one LeRobot key is read: HDF5 dataset paths (several are concatenated) and their kind."""

    paths: tuple[str, ...]
    kind: str
    """``lowdim``, ``scalar``, ``image`` (raw uint8 frames) or ``jpeg`` (one encoded image per frame)."""
    shape: tuple[int, ...]
    """Per-frame shape (``[H, W, 3]`` for images; unknown sides of JPEG frames are 0)."""


@attrs.frozen
class Hdf5Episode:
    """One episode: its file, the group holding it, length, task and key sources."""

    file: Path
    group: str
    length: int
    task: str
    sources: dict[str, Source]
    index: int = -1
    """Episode id: the number in ``demo_N`` / ``episode_N`` (stable across splits), else the position."""


@attrs.frozen
class Hdf5Index:
    """All episodes of an HDF5 dataset selected by a split, with the layout name and frame rate."""

    root: Path
    layout: str
    fps: float
    episodes: list[Hdf5Episode]

    @property
    def features(self) -> dict[str, Source]:
        """Key -> source of the first episode (all episodes must agree)."""
        return self.episodes[0].sources


def _numeric_suffix(name: str) -> tuple[int, str]:
    match = re.search(r"(\d+)(?!.*\d)", name)
    return (int(match.group(1)) if match else -1, name)


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _fps(h5: Any, layout: str) -> float:
    for holder in (h5, h5.get("data")):
        if holder is not None and "fps" in holder.attrs:
            return float(holder.attrs["fps"])
    return _DEFAULT_FPS[layout]


def _image_source(dataset: Any, path: str) -> Source:
    import h5py

    if dataset.ndim == 4 and dataset.dtype == "uint8":
        return Source((path,), "image", tuple(dataset.shape[1:]))
    if dataset.ndim == 1 and h5py.check_vlen_dtype(dataset.dtype) is not None:
        return Source((path,), "jpeg", (0, 0, 3))
    if dataset.ndim == 2 and dataset.dtype == "uint8":
        return Source((path,), "jpeg", (0, 0, 3))
    raise DataError(f"{dataset.file.filename}:{path}: camera data of shape {dataset.shape} and dtype {dataset.dtype} "
                    "is neither raw uint8 [T, H, W, 3] nor JPEG bytes per frame")


def _lowdim_source(dataset: Any, path: str) -> Source:
    shape = tuple(dataset.shape[1:])
    return Source((path,), "scalar" if shape in ((), (1,)) else "lowdim", shape or (1,))


def _robomimic_episode(h5: Any, file: Path, name: str, task: str) -> Hdf5Episode:
    group = h5["data"][name]
    if "actions" not in group or "obs" not in group:
        raise DataError(f"{file}: data/{name} lacks 'actions' or 'obs' (robomimic layout)")
    length = int(group["actions"].shape[0])
    sources: dict[str, Source] = {"action": _lowdim_source(group["actions"], "actions")}
    lowdim = []
    for key in sorted(group["obs"]):
        dataset = group["obs"][key]
        if dataset.dtype == "uint8" and dataset.ndim == 4:
            camera = key[: -len("_image")] if key.endswith("_image") else key
            sources[f"observation.images.{camera}"] = _image_source(dataset, f"obs/{key}")
        else:
            sources[f"observation.{key}"] = _lowdim_source(dataset, f"obs/{key}")
            lowdim.append(key)
    if lowdim and "observation.state" not in sources:
        dim = sum(int(group["obs"][k].shape[1]) if group["obs"][k].ndim > 1 else 1 for k in lowdim)
        sources["observation.state"] = Source(tuple(f"obs/{k}" for k in lowdim), "lowdim", (dim,))
    for stored, key in (("rewards", "next.reward"), ("dones", "next.done")):
        if stored in group:
            sources[key] = _lowdim_source(group[stored], stored)
    task = _decode(group.attrs.get("task", group.attrs.get("language_instruction", task)))
    return Hdf5Episode(file, f"data/{name}", length, task, sources)


def _robomimic(h5: Any, file: Path, split: str) -> list[Hdf5Episode]:
    demos = sorted(h5["data"].keys(), key=_numeric_suffix)
    if "mask" in h5:
        masks = sorted(h5["mask"].keys())
        if split not in masks:
            raise UsageError(f"--split {split}: {file} has masks {', '.join(masks)} (robomimic mask/<split>)")
        chosen = {_decode(n) for n in h5["mask"][split][()]}
        unknown = sorted(chosen - set(demos))
        if unknown:
            raise DataError(f"{file}: mask/{split} names demos that do not exist: {', '.join(unknown[:5])}")
        demos = [d for d in demos if d in chosen]
    elif split != "train":
        raise UsageError(f"--split {split}: {file} has no mask group, so only the default split 'train' "
                         "(every demo) exists")
    env_args = h5["data"].attrs.get("env_args")
    task = file.stem
    if env_args is not None:
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            task = json.loads(_decode(env_args)).get("env_name", task)
    task = _decode(h5["data"].attrs.get("task", task))
    return [_robomimic_episode(h5, file, name, task) for name in demos]


def _aloha(h5: Any, file: Path) -> Hdf5Episode:
    if "action" not in h5 or "observations" not in h5 or "qpos" not in h5["observations"]:
        raise DataError(f"{file}: an ALOHA episode needs /action and /observations/qpos")
    obs = h5["observations"]
    length = int(h5["action"].shape[0])
    sources: dict[str, Source] = {"action": _lowdim_source(h5["action"], "action")}
    for name, key in _ALOHA_LOWDIM.items():
        if name in obs:
            sources[key] = _lowdim_source(obs[name], f"observations/{name}")
    for cam in sorted(obs.get("images", {})):
        sources[f"observation.images.{cam}"] = _image_source(obs["images"][cam], f"observations/images/{cam}")
    task = _decode(h5.attrs.get("task", h5.attrs.get("language_instruction", file.parent.name)))
    return Hdf5Episode(file, "/", length, task, sources)


def _check_lengths(episode: Hdf5Episode, h5: Any) -> None:
    group = h5[episode.group]
    for key, source in episode.sources.items():
        for path in source.paths:
            if group[path].shape[0] != episode.length:
                raise DataError(f"{episode.file}:{episode.group}/{path} has {group[path].shape[0]} frames, the "
                                f"episode has {episode.length} ({key})")


def scan_hdf5(path: str | Path, *, split: str = "train") -> Hdf5Index:
    """Finds the episodes of ``path`` (a robomimic file, an ALOHA episode file, or a folder of files)."""
    import h5py

    root = Path(path)
    if root.is_dir():
        files = sorted((f for f in root.iterdir() if f.suffix in _SUFFIXES), key=lambda f: _numeric_suffix(f.stem))
        if not files:
            raise DataError(f"{root}: no .hdf5/.h5 files in this folder")
    elif root.is_file():
        files = [root]
    else:
        raise DataError(f"--dataset-path {root}: no such file or folder")
    layouts, episodes, fps = set(), [], None
    for file in files:
        try:
            h5 = h5py.File(file, "r")
        except OSError as exc:
            raise DataError(f"cannot open {file} as HDF5: {exc}") from None
        with h5:
            if "data" in h5:
                layout, found = "robomimic", _robomimic(h5, file, split)
            elif "observations" in h5 or "action" in h5:
                if split != "train":
                    raise UsageError(f"--split {split}: ALOHA episode files have no splits; use --split train")
                layout, found = "aloha", [_aloha(h5, file)]
            else:
                raise DataError(f"{file}: neither robomimic (/data/demo_N) nor ALOHA (/observations, /action) "
                                f"layout; top-level keys: {', '.join(sorted(h5.keys())) or 'none'}")
            for episode in found:
                _check_lengths(episode, h5)
            layouts.add(layout)
            fps = _fps(h5, layout) if fps is None else fps
            episodes.extend(found)
    numbers = [_numeric_suffix(ep.group if ep.group != "/" else ep.file.stem)[0] for ep in episodes]
    if min(numbers, default=0) < 0 or len(set(numbers)) != len(numbers):
        numbers = list(range(len(episodes)))  # no usable numbering: positions
    episodes = [attrs.evolve(ep, index=n) for ep, n in zip(episodes, numbers, strict=True)]
    if len(layouts) > 1:
        raise DataError(f"{root}: mixes robomimic and ALOHA files; keep one layout per dataset")
    if not episodes:
        raise DataError(f"{root}: split {split!r} selects no episodes")
    reference = set(episodes[0].sources)
    for episode in episodes[1:]:
        if set(episode.sources) != reference:
            diff = sorted(reference.symmetric_difference(episode.sources))
            raise DataError(f"{episode.file}:{episode.group}: keys differ from the first episode's ({', '.join(diff)})")
    return Hdf5Index(root=root, layout=layouts.pop(), fps=float(fps or 0.0), episodes=episodes)
