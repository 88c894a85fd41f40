"""Checks a raw observation against what a policy expects and turns it into sample values.

Every problem is an :class:`~embodied_core.errors.ObservationError` naming the key, what was received and
what is expected, raised before any model work; nothing about the policy changes, so it stays usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from embodied_core.errors import ObservationError

__all__ = ["TASK_KEY", "check_keys", "describe", "image_frames", "state_vector", "task_string"]

TASK_KEY = "task"


def describe(value: Any) -> str:
    """Short description of a received value: ``uint8 array (96, 96, 3)``, ``str``, ``list``."""
    if isinstance(value, (np.ndarray, np.generic, torch.Tensor)):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype} array {tuple(value.shape)}"
    return type(value).__name__


def check_keys(observation: Any, *, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    """Missing and unexpected keys, reported together."""
    if not isinstance(observation, Mapping):
        raise ObservationError(f"observation: expected a mapping of LeRobot keys to values, got "
                               f"{describe(observation)}")
    required, optional = list(required), list(optional)
    missing = [k for k in required if k not in observation]
    extra = sorted(str(k) for k in observation if k not in required and k not in optional)
    problems = []
    if missing:
        problems.append(f"missing key(s) {missing}")
    if extra:
        problems.append(f"unexpected key(s) {extra}")
    if problems:
        accepted = ", ".join(required) + (f" (optional: {', '.join(optional)})" if optional else "")
        raise ObservationError(f"observation: {'; '.join(problems)}; this policy reads {accepted}")


def _as_array(value: Any, key: str, expected: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise ObservationError(f"observation[{key!r}]: got {describe(value)}, expected {expected}")
    return value


def image_frames(value: Any, key: str, shape_hwc: tuple[int, int, int], *,
                 num_frames: int | None = None) -> torch.Tensor:
    """A camera frame as uint8 ``[C, H, W]`` (``num_frames`` given: a stack ``[T, C, H, W]`` of exactly that many).

    Accepts HWC (as robots and openpi clients send) or CHW, with a leading time axis when ``num_frames`` is set.
    """
    h, w, c = shape_hwc
    lead = () if num_frames is None else (num_frames,)
    lead_text = "" if num_frames is None else f"{num_frames} frames "
    expected = (f"uint8 {lead_text}(H, W, C) = {(*lead, h, w, c)} or (C, H, W) = {(*lead, c, h, w)}")
    array = _as_array(value, key, expected)
    if array.dtype != np.uint8:
        raise ObservationError(f"observation[{key!r}]: got {describe(array)}, expected {expected} (images are "
                               "sent as uint8 0..255)")
    if array.shape == (*lead, c, h, w):
        array = np.moveaxis(array, -3, -1)
    elif array.shape != (*lead, h, w, c):
        raise ObservationError(f"observation[{key!r}]: got {describe(array)}, expected {expected}")
    # HWC memory seen as CHW: the layout video decoders hand frames out in, so a batch collated for inference has
    # the memory layout of a training batch (channels-last) and the model's float results are the same. A read-only
    # array (what msgpack hands ``embodied serve``: a view of the request's bytes) is copied, so no tensor aliases
    # memory that must not be written (torch would warn, and an in-place transform would write into the request).
    return torch.from_numpy(np.require(array, requirements=("C", "W"))).movedim(-1, -3)


def state_vector(value: Any, key: str, dim: int) -> torch.Tensor:
    """The raw state as float32 ``[dim]`` (finite numbers of any numeric dtype)."""
    expected = f"a float array of shape ({dim},)"
    array = _as_array(np.asarray(value) if isinstance(value, (list, tuple)) else value, key, expected)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.floating)
                                       or np.issubdtype(array.dtype, np.integer)):
        raise ObservationError(f"observation[{key!r}]: got {describe(array)}, expected {expected}")
    if array.shape != (dim,):
        raise ObservationError(f"observation[{key!r}]: got {describe(array)}, expected {expected}")
    if not np.isfinite(array).all():
        raise ObservationError(f"observation[{key!r}]: holds NaN or infinite values ({array.tolist()})")
    return torch.from_numpy(array.astype(np.float32))


def task_string(value: Any) -> str:
    """The task instruction (a str)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind == "U":
        value = str(value)
    if not isinstance(value, str):
        raise ObservationError(f"observation[{TASK_KEY!r}]: got {describe(value)}, expected the task instruction "
                               "as a str")
    return value
