"""``TransformsPolicy``: any model plugin as a policy, with exactly training's pre- and post-processing.

``predict_action(observation)``: the observation is checked, turned into a sample dict with LeRobot keys (frames
uint8 ``[C, H, W]``, state float32, task), run through the model's ``sample_transform`` and ``collate_fn`` (the
training pipeline), moved to the device, sampled with ``model.sample_actions`` while the policy's own generator
is the torch RNG (the model draws its noise from it; the global RNG is untouched), and mapped back to dataset
units by ``postprocess_actions``. Models trained with ``data.image_history`` / ``data.state_history`` > 1 get
the last observations of the episode, the first one repeated (and marked ``_is_pad``) at its start, as LeRobot
pads at episode boundaries.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from embodied_core.config.run_config import RunConfig
from embodied_core.model_api import Transforms
from embodied_core.policy.embodiments import select_embodiment
from embodied_core.policy.load import PolicyFolder
from embodied_core.policy.observation import TASK_KEY, check_keys, image_frames, state_vector, task_string
from embodied_core.protocols import PolicyMetadata

__all__ = ["EmbodimentView", "NoiseGenerator", "TransformsPolicy"]


class NoiseGenerator:
    """The policy's own random stream on the CPU and the inference device, seeded with ``seed``.

    :meth:`active` makes it the torch default RNG for the duration of a ``sample_actions`` call (models draw
    their noise with ``torch.randn``) and saves where the stream ended, restoring the global RNG after.
    """

    _lock = threading.Lock()  # swapping the process-wide RNG state: one policy at a time

    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        """Restarts the stream at ``seed``."""
        self.cpu = torch.Generator().manual_seed(self.seed)
        self.accelerator = (torch.Generator(device=self.device).manual_seed(self.seed)
                            if self.device.type != "cpu" else None)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The torch default generators follow this stream inside the block."""
        devices = [self.device] if self.accelerator is not None else []
        with self._lock, torch.random.fork_rng(devices=devices, device_type=self.device.type):
            torch.set_rng_state(self.cpu.get_state())
            if self.accelerator is not None:
                _device_module(self.device).set_rng_state(self.accelerator.get_state(), self.device)
            try:
                yield
            finally:
                self.cpu.set_state(torch.get_rng_state())
                if self.accelerator is not None:
                    self.accelerator.set_state(_device_module(self.device).get_rng_state(self.device))


def _device_module(device: torch.device) -> Any:
    return getattr(torch, device.type)


class EmbodimentView:
    """What :class:`TransformsPolicy` serves one embodiment with: its transforms (data section and statistics), its
    metadata (interface) and its frame shapes and histories."""

    def __init__(self, transforms: Transforms, metadata: PolicyMetadata, *,
                 image_shapes: Mapping[str, tuple[int, int, int]], image_history: int, state_history: int) -> None:
        self.transforms = transforms
        self.metadata = metadata
        self.image_shapes = dict(image_shapes)
        self.image_history = image_history
        self.state_history = state_history

    @classmethod
    def of_folder(cls, folder: PolicyFolder, tag: str | None, *, device: str) -> EmbodimentView:
        """Embodiment ``tag`` of ``folder`` (None: its default)."""
        chosen = folder.embodiment(tag)
        io = chosen.interface if chosen is not None else folder.interface
        return cls(folder.build_transforms(embodiment=tag), folder.metadata(device=device, embodiment=tag),
                   image_shapes={k: tuple(v) for k, v in io["image_shapes"].items()},
                   image_history=int(io.get("image_history", 1)), state_history=int(io.get("state_history", 1)))


class TransformsPolicy:
    """A model plugin served through its own transforms (the default policy class of every model).

    Args:
        model: the model with its weights, in eval mode on ``device``.
        transforms: the model's transforms built with the stored statistics.
        metadata: what clients are told.
        image_shapes: ``(H, W, C)`` per camera key.
        image_history, state_history: frames per sample of training (``data.*_history``).
        seed: seed of the noise generator.
    """

    def __init__(self, model: nn.Module, transforms: Transforms, metadata: PolicyMetadata, *,
                 image_shapes: Mapping[str, tuple[int, int, int]], image_history: int = 1, state_history: int = 1,
                 seed: int = 0) -> None:
        self.model = model
        self.transforms = transforms
        self.metadata = metadata
        self.image_shapes = dict(image_shapes)
        self.image_history = image_history
        self.state_history = state_history
        self.device = torch.device(metadata.device)
        self.noise = NoiseGenerator(self.device, seed)
        self._history: dict[str, deque[torch.Tensor]] = {}
        self._folder: PolicyFolder | None = None  # set by from_folder: the other embodiments are built from it
        self._views: dict[str, EmbodimentView] = {}

    # ------------------------------------------------------------------ policy class protocol
    @classmethod
    def write_assets(cls, config: RunConfig, directory: Path) -> dict[str, Any]:
        """The transforms policy needs no files beyond weights, statistics and tokenizer."""
        return {}

    @classmethod
    def from_folder(cls, folder: PolicyFolder, *, device: str, seed: int) -> TransformsPolicy:
        """The model and transforms of ``folder`` on ``device``."""
        default = EmbodimentView.of_folder(folder, None, device=device)
        policy = cls(folder.build_model(device=device), default.transforms, default.metadata,
                     image_shapes=default.image_shapes, image_history=default.image_history,
                     state_history=default.state_history, seed=seed)
        policy._folder = folder
        return policy

    # ------------------------------------------------------------------ Policy
    def reset(self) -> None:
        """New episode: forgets the observation history and restarts the noise stream at ``seed``."""
        self._history.clear()
        self.noise.reset()

    def view(self, embodiment: str | None = None) -> EmbodimentView:
        """What embodiment ``embodiment`` is served with (None: the default one, the policy's own attributes);
        ObservationError for a tag the policy was not trained on."""
        if embodiment is None or embodiment == self.metadata.embodiment:
            return EmbodimentView(self.transforms, self.metadata, image_shapes=self.image_shapes,
                                  image_history=self.image_history, state_history=self.state_history)
        if self._folder is None:  # built without a folder: one embodiment only
            select_embodiment({}, None, embodiment)
        if embodiment not in self._views:
            assert self._folder is not None
            self._views[embodiment] = EmbodimentView.of_folder(self._folder, embodiment, device=str(self.device))
        return self._views[embodiment]

    def observation_to_sample(self, observation: Mapping[str, Any], *,
                              embodiment: str | None = None) -> dict[str, Any]:
        """The checked observation as a training-style sample dict (no ``action``); raises ObservationError."""
        view = self.view(embodiment)
        meta = view.metadata
        required = [*meta.camera_keys, meta.state_key] + ([TASK_KEY] if meta.needs_task else [])
        check_keys(observation, required=required, optional=[] if meta.needs_task else [TASK_KEY])
        sample: dict[str, Any] = {key: image_frames(observation[key], key, view.image_shapes[key])
                                  for key in meta.camera_keys}
        sample[meta.state_key] = state_vector(observation[meta.state_key], meta.state_key, meta.state_dim)
        if TASK_KEY in observation:
            sample[TASK_KEY] = task_string(observation[TASK_KEY])
        return self._with_history(sample, view)

    def _with_history(self, sample: dict[str, Any], view: EmbodimentView | None = None) -> dict[str, Any]:
        """Stacks the last frames per key when training used a history (``[T, ...]`` + ``<key>_is_pad``)."""
        view = view if view is not None else self.view()
        lengths = {key: view.image_history for key in view.metadata.camera_keys}
        lengths[view.metadata.state_key] = view.state_history
        prefix = "" if view.metadata.embodiment in (None, self.metadata.embodiment) else f"{view.metadata.embodiment}/"
        for key, length in lengths.items():
            if length == 1:
                continue
            seen = self._history.setdefault(prefix + key, deque(maxlen=length))
            seen.append(sample[key])
            pads = length - len(seen)
            sample[key] = torch.stack([seen[0]] * pads + list(seen))
            sample[f"{key}_is_pad"] = torch.arange(length) < pads
        return sample

    @torch.no_grad()
    def predict_action(self, observation: Mapping[str, Any], *, embodiment: str | None = None) -> np.ndarray:
        """Raw observation -> float32 ``[action_horizon, action_dim]`` in dataset units (see the module doc);
        ``embodiment``: which of a mixture-trained policy's embodiments the observation comes from (None: the
        default), with its own interface, statistics and action width."""
        transforms = self.view(embodiment).transforms
        sample = self.observation_to_sample(observation, embodiment=embodiment)
        transformed = transforms.sample_transform(sample) if transforms.sample_transform else sample
        batch = transforms.collate_fn([transformed]).to(self.device)
        with self.noise.active():
            actions = self.model.sample_actions(batch)
        if transforms.postprocess_actions is not None:
            actions = transforms.postprocess_actions(actions)
        return actions[0].detach().float().cpu().numpy()
