"""What the GR00T sample transforms share (N1.6 and N1.7): views, the instruction text, state and action targets
normalized and padded to the model's widths, the embodiment slot, and mapping sampled actions back to dataset units.

Per sample (Isaac-GR00T ``Gr00tN1d7Processor`` / LoongForge ``GrootN1d6FeatureTransform`` semantics):

1. views: every ``data.camera_keys`` camera (``video.<name>`` of the groot_n1_7 strategy, or a plain camera key)
   with all its ``data.image_history`` frames, each resized / centre-cropped to ``data.image_size``
   (:mod:`.images`), ordered frame-major then camera (as GR00T stacks ``(T, V)``); uint8 across the worker boundary.
2. instruction: ``sample[data.language_key]``, lower-cased without punctuation with ``data.formalize_language``.
3. state / actions: normalized per dimension with the dataset statistics (:mod:`.normalize`), the state zero-padded
   to ``model.max_state_dim`` ([1, S]); actions zero-padded to ``model.max_action_dim`` and to
   ``model.action_horizon`` steps, with ``action_mask`` = 1 on the real dims of the ``data.action_horizon`` data
   steps (steps past the episode end too, unless ``data.mask_padded_actions``).

Each port turns the instruction and the views into its own prompt (its processor: :class:`GrootPromptTransform`
asks it for the prompt ids) and names itself in messages. :class:`GrootCollateBase` left-pads the prompts, marks
the image tokens and stacks the rest into the port's batch class; :func:`groot_transforms` assembles the
``Transforms``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from embodied_core.errors import ConfigError, DataError
from embodied_core.model_api import Transforms
from embodied_models.groot.images import as_uint8_frames, groot_view
from embodied_models.groot.normalize import GrootNormalizer

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["GrootCollateBase", "GrootPromptTransform", "GrootSampleTransformBase", "camera_candidates", "formalize",
           "groot_transforms", "make_normalizers", "require_camera_keys"]

_PUNCTUATION = re.compile(r"[^\w\s]")


def formalize(text: str) -> str:
    """GR00T's formalize_language: lower case, every character that is neither a word character nor space dropped."""
    return _PUNCTUATION.sub("", text.lower())


def camera_candidates(key: str) -> tuple[str, ...]:
    """Sample keys a configured camera may arrive under: itself, or its ``video.<name>`` form."""
    short = key.removeprefix("video.")
    return (key, f"video.{short}") if key == short else (key, short)


class GrootSampleTransformBase:
    """The port-independent steps of a GR00T sample transform (picklable: runs in DataLoader workers).

    Args:
        model_config, data_config: the run's sections (``max_state_dim``, ``max_action_dim``, ``action_horizon``;
            the data fields of the module docstring).
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
        slot: the embodiment slot of every sample.
    """

    model_label: ClassVar[str] = "GR00T"
    """The port as messages name it."""

    def __init__(self, model_config: Any, data_config: Any, state_norm: GrootNormalizer | None,
                 action_norm: GrootNormalizer | None, *, slot: int) -> None:
        self.model_config = model_config
        self.data_config = data_config
        self.state_norm = state_norm
        self.action_norm = action_norm
        self.slot = slot

    def instruction(self, sample: Mapping[str, Any]) -> str:
        """The sample's instruction, formalized when ``data.formalize_language``."""
        cfg = self.data_config
        text = sample.get(cfg.language_key)
        if not isinstance(text, str):
            raise DataError(f"sample has no instruction string under data.language_key={cfg.language_key!r} "
                            f"(got {type(text).__name__}; keys: {', '.join(sorted(sample))})")
        return formalize(text) if cfg.formalize_language else text

    def common_fields(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        """The padded state, the embodiment slot, the dataset index and (when the sample has actions) the padded
        actions and their mask."""
        cfg, mcfg = self.data_config, self.model_config
        state = self.vector(sample, cfg.state_key, cfg.state_dim, self.state_norm).reshape(-1)
        padded_state = torch.zeros(1, mcfg.max_state_dim, dtype=torch.float32)
        padded_state[0, : state.shape[0]] = state
        index = sample.get("index")
        out: dict[str, Any] = {
            "state": padded_state, "embodiment_id": torch.tensor(self.slot, dtype=torch.long),
            "sample_index": torch.as_tensor(index if index is not None else -1, dtype=torch.long).reshape(()),
        }
        if cfg.action_key in sample:
            out.update(self.actions(sample))
        return out

    def views(self, sample: Mapping[str, Any]) -> torch.Tensor:
        """uint8 [V x T, 3, H, W]: every camera's frames resized and cropped, frame-major then camera."""
        cfg = self.data_config
        per_camera = []
        for key in cfg.camera_keys:
            found = next((k for k in camera_candidates(key) if sample.get(k) is not None), None)
            if found is None:
                raise DataError(f"sample has no camera {key!r} (tried {', '.join(camera_candidates(key))}; keys: "
                                f"{', '.join(sorted(sample))}); {self.model_label} needs every view of "
                                "data.camera_keys")
            frames = as_uint8_frames(sample[found], found)
            per_camera.append(torch.stack([
                groot_view(frame, size=tuple(cfg.image_size), resize_edge=cfg.resize_edge,
                           crop_fraction=cfg.crop_fraction) for frame in frames]))
        lengths = {v.shape[0] for v in per_camera}
        if len(lengths) != 1:
            raise DataError(f"cameras {cfg.camera_keys} carry different numbers of frames {sorted(lengths)}")
        return torch.stack(per_camera, dim=1).flatten(0, 1)  # frame-major, then camera

    def vector(self, sample: Mapping[str, Any], key: str, dim: int | None, norm: GrootNormalizer | None
               ) -> torch.Tensor:
        """``sample[key]`` as float32, checked against ``dim`` and normalized."""
        if key not in sample:
            raise DataError(f"sample has no {key!r} (keys: {', '.join(sorted(sample))}); set data.state_key / "
                            "data.action_key to the dataset's names")
        value = torch.as_tensor(sample[key]).float()
        if dim is not None and value.shape[-1] != dim:
            kind = "state" if key == self.data_config.state_key else "action"
            raise DataError(f"{key}: last dimension is {value.shape[-1]} but data.{kind}_dim is {dim}; set "
                            f"data.{kind}_dim={value.shape[-1]}")
        return norm.normalize(value) if norm is not None else value

    def actions(self, sample: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """``actions`` [model.action_horizon, max_action_dim] (normalized, zero-padded) and ``action_mask``."""
        cfg, mcfg = self.data_config, self.model_config
        actions = self.vector(sample, cfg.action_key, cfg.action_dim, self.action_norm)
        if actions.ndim == 1:
            actions = actions[None]
        steps, dims = min(actions.shape[0], cfg.action_horizon), actions.shape[1]
        padded = torch.zeros(mcfg.action_horizon, mcfg.max_action_dim, dtype=torch.float32)
        padded[:steps, :dims] = actions[:steps]
        mask = torch.zeros_like(padded)
        mask[:steps, :dims] = 1.0
        is_pad = sample.get(f"{cfg.action_key}_is_pad")
        if cfg.mask_padded_actions and is_pad is not None:
            mask[:steps] *= (~torch.as_tensor(is_pad, dtype=torch.bool)[:steps]).float()[:, None]
        return {"actions": padded, "action_mask": mask}

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Model actions [B, model.action_horizon, max_action_dim] -> dataset units [B, data.action_horizon,
        action_dim] (the transforms' ``postprocess_actions``)."""
        cfg = self.data_config
        real = actions[:, : cfg.action_horizon, : cfg.action_dim]
        return self.action_norm.unnormalize(real) if self.action_norm is not None else real.float()


def make_normalizers(data_config: Any, stats: Stats | None) -> tuple[GrootNormalizer | None, GrootNormalizer | None]:
    """The state and action normalizers of ``data.normalization`` (both None for ``none``); DataError when the
    statistics are missing or their widths disagree with data.state_dim / data.action_dim."""
    mode = data_config.normalization
    if mode == "none":
        return None, None
    if stats is None:
        raise DataError(f"data.normalization={mode} needs the dataset statistics of {data_config.state_key!r} and "
                        f"{data_config.action_key!r}, but none were given; set data.normalization=none to train on "
                        "raw values")
    norms = tuple(GrootNormalizer.from_stats(stats, key, mode, clip=data_config.clip_outliers,
                                             setting="data.normalization")
                  for key in (data_config.state_key, data_config.action_key))
    for kind, norm, dim in (("state", norms[0], data_config.state_dim), ("action", norms[1], data_config.action_dim)):
        if dim is not None and norm.dim != dim:
            raise DataError(f"the statistics of data.{kind}_key have {norm.dim} dimensions but data.{kind}_dim is "
                            f"{dim}")
    return norms  # type: ignore[return-value]


class GrootPromptTransform(GrootSampleTransformBase):
    """A GR00T sample transform whose prompt comes from a processor with ``tokens_per_image(height, width)`` and
    ``prompt_ids(text, num_images=, tokens_per_image=)`` (picklable: runs in DataLoader workers); also takes
    inference observations (the same keys without ``action``). A port sets :attr:`model_label` and
    :attr:`embodiment_slot` (its tag table).

    Args:
        model_config, data_config: the run's sections.
        processor: the port's prompt processor.
        state_norm, action_norm: normalizers of ``data.state_key`` / ``data.action_key`` (None: raw values).
    """

    embodiment_slot: ClassVar[Callable[[str, int | None], int]]
    """``(data.embodiment_tag, data.embodiment_id) -> slot`` of the port's table (a staticmethod)."""

    def __init__(self, model_config: Any, data_config: Any, processor: Any, state_norm: GrootNormalizer | None,
                 action_norm: GrootNormalizer | None) -> None:
        super().__init__(model_config, data_config, state_norm, action_norm,
                         slot=self.embodiment_slot(data_config.embodiment_tag, data_config.embodiment_id))
        self.processor = processor
        self.tokens_per_image = processor.tokens_per_image(*data_config.image_size)

    def __call__(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        images = self.views(sample)
        text = self.instruction(sample)
        ids = self.processor.prompt_ids(text, num_images=images.shape[0], tokens_per_image=self.tokens_per_image)
        return {"images": images, "input_ids": torch.tensor(ids, dtype=torch.long), **self.common_fields(sample)}


class GrootCollateBase:
    """Stacks transformed samples into the port's :attr:`batch_class`, left-padding the prompts with
    ``pad_token_id`` and marking the ``image_token_id`` tokens of the real ones (picklable; runs in the DataLoader
    workers). A port adds fields of its own with :meth:`extra_fields`.

    Args:
        pad_token_id, image_token_id: the processor's padding and image-token ids.
    """

    batch_class: ClassVar[type]
    """The port's batch (fields of :class:`~embodied_models.groot.batch.GrootBatchFields`, plus its own)."""

    def __init__(self, pad_token_id: int, image_token_id: int) -> None:
        self.pad_token_id = pad_token_id
        self.image_token_id = image_token_id

    def extra_fields(self, attention_mask: torch.Tensor, image_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The port's own batch fields from the padded masks (none here)."""
        return {}

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> Any:
        length = max(int(s["input_ids"].shape[0]) for s in samples)
        ids = torch.full((len(samples), length), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(samples), length, dtype=torch.bool)
        for row, s in enumerate(samples):
            n = int(s["input_ids"].shape[0])
            ids[row, length - n:] = s["input_ids"]
            mask[row, length - n:] = True
        has_actions = "actions" in samples[0]
        image_mask = (ids == self.image_token_id) & mask
        return self.batch_class(
            images=torch.stack([s["images"] for s in samples]), input_ids=ids, attention_mask=mask,
            image_mask=image_mask, state=torch.stack([s["state"] for s in samples]),
            embodiment_id=torch.stack([s["embodiment_id"] for s in samples]),
            actions=torch.stack([s["actions"] for s in samples]) if has_actions else None,
            action_mask=torch.stack([s["action_mask"] for s in samples]) if has_actions else None,
            sample_index=torch.stack([s["sample_index"] for s in samples]), **self.extra_fields(mask, image_mask))


def require_camera_keys(data_config: Any, label: str) -> None:
    """ConfigError unless ``data.camera_keys`` names the views (``label``: the port, e.g. ``GR00T N1.6``)."""
    if data_config.camera_keys is None:
        raise ConfigError([f"data.camera_keys is not set; {label} needs its views named (data.camera_keys=[...])"])


def groot_transforms(transform: GrootSampleTransformBase, collate: GrootCollateBase) -> Transforms:
    """The ``Transforms`` of a GR00T port: its sample transform, its collate function, and unnormalizing sampled
    actions to dataset units."""
    return Transforms(sample_transform=transform, collate_fn=collate, postprocess_actions=transform.unnormalize_actions)
