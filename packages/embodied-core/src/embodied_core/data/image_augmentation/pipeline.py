"""The augmentation a training loader applies to each sample's camera frames (``data.image_augmentation``).

One sample's draws come from torch's global RNG reseeded for that sample (inside ``fork_rng``, so nothing outside
sees it): from ``augmentation_seed(--seed, epoch, index)``, the same on any number of workers and ranks and again
after a resume, or from the sample index alone (``deterministic_seed: sample_index`` under --deterministic-mode,
LoongForge's ``torch.manual_seed(index)``). The global RNG is what torchvision's transforms draw from, so an op
that wraps one draws exactly what the reference draws under ``torch.manual_seed`` of the same number, in the same
order: for each camera, the subset of ops (``torch.multinomial`` over the weights, as lerobot's
``RandomSubsetApply``), then per op its probability (only when ``p < 1``) and its own parameters, each drawn on
the frames as the previous op left them. Every frame of a camera's ``[T, C, H, W]`` window gets the camera's
draw; with ``camera_draws: shared`` the first augmented camera's draws are replayed on the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from embodied_core.data.image_augmentation.resolve import IMAGE_PREFIX, OpEntry, ResolvedAugmentation, camera_name
from embodied_core.data.loader import sample_seed
from embodied_core.errors import DataError

__all__ = ["AppliedOp", "ImageAugmentation", "ImageOp", "augmentation_seed"]

_SALT = 0x5A17C0DED00DF00D
"""Mixed into the sample seed so augmentation draws are a stream of their own, not the first numbers the model's
sample transform draws from the same per-sample seed."""


def augmentation_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of one sample's augmentation draws in one epoch (stable across processes and worker counts)."""
    return (sample_seed(seed, epoch, index) ^ _SALT) % (2**63 - 1)


class ImageOp(Protocol):
    """What an op plugin's factory builds (``ImageOpSpec.factory``)."""

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        """The op's random parameters for ``frames`` ``[..., C, H, W]``, drawn from torch's global RNG; plain JSON
        values. ``input_size`` is ``(H, W)`` of the camera's frames before the first op."""

    def apply(self, frames: torch.Tensor, params: Mapping[str, Any]) -> torch.Tensor:
        """``frames`` transformed with ``params`` (same dtype)."""

    # Optional: ``size_dependent = False`` on an op whose params fit frames of any size (colour changes), and
    # ``input_size_dependent = True`` on one whose params depend on the camera's size before the first op (a resize
    # back to it). A shared draw is replayed on another camera only where these sizes agree.


AppliedOp = dict[str, Any]
"""One applied op as recorded: ``{"op": name, "params": {...}}``."""

_Step = tuple[int, Any, Any]
"""One drawn op: its entry's position, its params (None: its ``p`` said no) and the (input size, frame size) it was
drawn on, which a shared draw checks before it is replayed on another camera."""


class ImageAugmentation:
    """``augmentation(sample, epoch=, index=) -> sample`` with its cameras augmented. Picklable.

    Args:
        settings: the resolved ``data.image_augmentation`` (:func:`~.resolve.resolve_augmentation`).
        ops: the built op of each entry of ``settings.ops``.
        seed: the run's ``--seed`` (not offset by rank: a sample's draw does not depend on which rank reads it).
        seed_by_index: seed each sample with its index alone (``deterministic_seed: sample_index`` under
            --deterministic-mode).
        camera_keys: the dataset's camera keys (its visual features); None: the sample keys under
            ``observation.images.``.
    """

    def __init__(self, settings: ResolvedAugmentation, ops: Sequence[ImageOp], *, seed: int,
                 seed_by_index: bool = False, camera_keys: Sequence[str] | None = None) -> None:
        if len(ops) != len(settings.ops):
            raise ValueError(f"{len(settings.ops)} op entries but {len(ops)} built ops")
        pairs = [(entry, op) for entry, op in zip(settings.ops, ops, strict=True) if entry.weight > 0]
        self.entries: tuple[OpEntry, ...] = tuple(entry for entry, _ in pairs)  # weight 0: never drawn (lerobot)
        self.ops: tuple[ImageOp, ...] = tuple(op for _, op in pairs)
        self.settings = settings
        self.seed = seed
        self.seed_by_index = seed_by_index
        self.camera_keys = None if camera_keys is None else tuple(camera_keys)
        total = sum(entry.weight for entry in self.entries)
        self._probabilities = [entry.weight / total for entry in self.entries]
        self._subset = settings.max_num_ops is not None or settings.random_order
        self._num_ops = min(len(self.entries), settings.max_num_ops or len(self.entries))

    def sample_key(self, *, epoch: int, index: int) -> int:
        """The seed of sample ``index``'s draws in ``epoch``."""
        return index if self.seed_by_index else augmentation_seed(self.seed, epoch, index)

    def cameras(self, sample: Mapping[str, Any]) -> list[str]:
        """The camera keys of ``sample`` this augmentation changes, in the sample's order."""
        excluded = set(self.settings.exclude_cameras)
        present = [key for key in sample if (key in self.camera_keys if self.camera_keys is not None
                                             else key.startswith(IMAGE_PREFIX))]
        return [key for key in present if key not in excluded and camera_name(key) not in excluded]

    def __call__(self, sample: dict[str, Any], *, epoch: int, index: int) -> dict[str, Any]:
        return self.augment(sample, epoch=epoch, index=index)[0]

    def augment(self, sample: dict[str, Any], *, epoch: int, index: int) -> tuple[dict[str, Any],
                                                                                 dict[str, list[AppliedOp]]]:
        """``(sample with its cameras augmented, {camera key: ops applied with their params})``."""
        out = dict(sample)
        record: dict[str, list[AppliedOp]] = {}
        shared: list[tuple[int, dict[str, Any]]] | None = None
        cameras = self.cameras(sample)
        if not cameras and not self.settings.exclude_cameras:
            raise DataError(f"image augmentation: sample {index} holds none of the cameras "
                            f"{list(self.camera_keys or [IMAGE_PREFIX + '*'])} (its keys: {sorted(sample)}); this "
                            "model's data pipeline turns the frames into other keys before the augmentation layer "
                            "runs, so unset data.image_augmentation (a model that augments inside its own transforms "
                            "has a data option for it)")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.sample_key(epoch=epoch, index=index))
            for key in cameras:
                frames = self._frames(sample[key], key, index)
                plan = shared if self.settings.camera_draws == "shared" else None
                result, plan = self._run(frames, key, plan)
                if self.settings.camera_draws == "shared" and shared is None:
                    shared = plan
                out[key] = result
                record[key] = [{"op": self.entries[i].name, "params": params} for i, params, _ in plan
                               if not self.entries[i].skips(key)]
        return out, record

    def transform(self, frames: torch.Tensor, *, camera_key: str = "") -> tuple[torch.Tensor, list[AppliedOp]]:
        """Draws and applies the ops to ``frames`` as given (any dtype, no conversion or quantization) from torch's
        global RNG as the caller seeded it: for a model that augments inside its own transforms at the place its
        reference does (cosmos3's float stack of views). Returns the frames and the ops applied."""
        out, plan = self._apply(frames, camera_key, None)
        return out, [{"op": self.entries[i].name, "params": params} for i, params, _ in plan]

    def _frames(self, value: Any, key: str, index: int) -> torch.Tensor:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.ndim not in (3, 4):
            kind = f"{value.dtype} {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise DataError(f"image augmentation: sample {index} {key!r} is {kind}; expected uint8 frames [C, H, W] "
                            "or [T, C, H, W] (as decoded)")
        return value

    def _order(self) -> list[int]:
        if not self._subset:
            return list(range(len(self.entries)))
        chosen = torch.multinomial(torch.tensor(self._probabilities), self._num_ops)
        if not self.settings.random_order:
            chosen = chosen.sort().values
        return [int(i) for i in chosen]

    def _run(self, frames: torch.Tensor, key: str, plan: list[_Step] | None) -> tuple[torch.Tensor, list[_Step]]:
        """Draws (unless ``plan`` replays a shared draw) and applies the ops to one camera's uint8 frames, in the
        compute dtype, back to uint8."""
        x = frames if self.settings.compute_dtype == "uint8" else frames.to(torch.float32) / 255.0
        x, drawn = self._apply(x, key, plan)
        if x.dtype != torch.uint8:
            x = x.mul(255.0)
            x = (x.round() if self.settings.quantize == "round" else x).clamp(0.0, 255.0).to(torch.uint8)
        return x, drawn

    def _apply(self, x: torch.Tensor, key: str, plan: list[_Step] | None) -> tuple[torch.Tensor, list[_Step]]:
        # a decoded frame is an HWC buffer seen as CHW: torchvision's colour kernels run up to 2x faster on a
        # contiguous copy (the same pixels; the copy costs ~0.2 ms per 480x640 frame)
        x = x.contiguous()
        input_size = (int(x.shape[-2]), int(x.shape[-1]))
        drawn: list[_Step] = []
        steps = plan if plan is not None else [(i, None, None) for i in self._order()]
        for i, params, sizes in steps:
            entry, op = self.entries[i], self.ops[i]
            here = (input_size, (int(x.shape[-2]), int(x.shape[-1])))
            if params is None:
                if entry.skips(key) and self.settings.camera_draws != "shared":
                    continue  # a skipped op draws nothing for this camera (openpi: wrist cameras)
                applies = entry.p >= 1.0 or bool(torch.rand(()) < entry.p)
                drawn.append((i, op.draw(x, input_size=input_size) if applies else None, here))
                params = drawn[-1][1]
            elif _mismatch(op, sizes, here):
                raise DataError(f"image augmentation: camera_draws shared replays the {entry.name} drawn on "
                                f"frames of {list(sizes[1])} (input {list(sizes[0])}) on {key!r}, whose frames are "
                                f"{list(here[1])} (input {list(here[0])}); use camera_draws: independent, or "
                                "exclude_cameras")
            if params is not None and not entry.skips(key):
                x = op.apply(x, params)
        if plan is not None:
            drawn = list(plan)
        return x, [step for step in drawn if step[1] is not None]


def _mismatch(op: ImageOp, drawn_on: Any, here: Any) -> bool:
    """Whether a shared draw of ``op`` made on ``drawn_on`` ((input size, frame size)) does not fit ``here``."""
    return ((getattr(op, "size_dependent", True) and drawn_on[1] != here[1])
            or (getattr(op, "input_size_dependent", False) and drawn_on[0] != here[0]))
