"""LingBot-VA as a policy: closed-loop control from raw camera frames, one action chunk per ``predict_action``.

Glue of :class:`.vae.StreamingVAEEncoder` (frames -> latents with the causal VAE cache), the model's transforms
(prompt padding, action (un)normalization with the stored statistics) and :class:`.streaming.StreamingSession`
(KV-cached prediction), following the reference client loop (lerobot ``LingBotVAPolicy.select_action``; upstream
``evaluation/libero/client.py``). One episode, per camera:

1. first call (after ``load_policy`` or ``reset()``): one frame ``(H, W, C)`` (or ``(C, H, W)``) - the first
   observation; returns the first chunk, ``(F - 1) * n`` actions (frame 0 is the observation and has none);
2. every later call: the keyframes seen while the previous chunk was executed, every ``data.video_stride``-th
   frame, ``(T, H, W, C)`` (or ``(T, C, H, W)``) with ``T = 4 (F - 1)`` after the first chunk and ``4 F`` after
   the others, optionally ``action`` - the executed actions ``[steps, action_dim]`` (default: the predicted
   ones); the keyframes and actions are written into the cache, then the next chunk (``F * n`` actions,
   ``metadata.action_horizon``) is predicted.

``F`` is ``data.num_latent_frames`` and ``n`` ``data.action_per_frame``. The prompt embedding comes from the
folder's ``assets/text.safetensors`` (the training tasks, as the latent cache holds them); another task is encoded
with the UMT5 text encoder when the folder holds one (or references one that exists).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import torch

from embodied_core.errors import CheckpointError, ObservationError
from embodied_core.policy.folder import ASSETS_DIR, copy_if_small
from embodied_core.policy.observation import (
    TASK_KEY,
    check_keys,
    describe,
    image_frames,
    state_vector,
    task_string,
)
from embodied_core.policy.writer import frame_shape
from embodied_core.protocols import DatasetFeature, PolicyMetadata
from embodied_data.normalize import quantile_normalize
from embodied_models.lingbot_va.streaming import StreamingSession
from embodied_models.lingbot_va.vae import StreamingVAEEncoder

if TYPE_CHECKING:
    from embodied_core.config.run_config import RunConfig
    from embodied_core.model_api import Transforms
    from embodied_core.policy.load import PolicyFolder
    from embodied_models.lingbot_va.modeling import LingBotVAModel

__all__ = ["LingBotVAPolicy", "PromptEmbeddings"]

logger = logging.getLogger("embodied.models.lingbot_va")

_TEXTS = "text.safetensors"
_EMPTY = "empty"
_BASE_PARTS = ("vae", "text_encoder", "tokenizer")


@attrs.define
class PromptEmbeddings:
    """UMT5 embeddings of prompts: the training tasks' (from the latent cache), others encoded on demand.

    Attributes:
        texts: name -> embedding ``[T, text_dim]`` (``"empty"`` is the empty prompt).
        tasks: cleaned task text -> name in ``texts``.
        encoder_base: a folder with ``text_encoder/`` and ``tokenizer/`` for unseen prompts (None: none available).
        text_len: tokenizer length of the cache.
    """

    texts: dict[str, torch.Tensor]
    tasks: dict[str, str]
    encoder_base: Path | None
    text_len: int

    def __call__(self, task: str) -> torch.Tensor:
        """The embedding of ``task``; ObservationError when it is unknown and no text encoder is available."""
        from embodied_models.lingbot_va.precompute import clean_prompt, encode_texts

        name = self.tasks.get(clean_prompt(task))
        if name is not None:
            return self.texts[name]
        if self.encoder_base is None:
            known = sorted(self.tasks)
            raise ObservationError(f"observation[{TASK_KEY!r}]: {task!r} is not a training task and the policy folder "
                                   f"holds no text encoder to embed it; known tasks: {known[:10]}"
                                   + (f" ... ({len(known)} in all)" if len(known) > 10 else ""))
        emb = encode_texts(self.encoder_base, {"prompt": task}, text_len=self.text_len, device=torch.device("cpu"),
                           dtype=torch.float32)["prompt"]
        self.texts[f"prompt:{clean_prompt(task)}"] = emb
        self.tasks[clean_prompt(task)] = f"prompt:{clean_prompt(task)}"
        return emb


class LingBotVAPolicy:
    """LingBot-VA closed loop behind the :class:`~embodied_core.protocols.Policy` interface (see the module doc).

    Args:
        model: the trained model (eval mode, on the inference device).
        vae: the Wan2.2 ``AutoencoderKLWan`` the training latents were made with (eval mode, same device).
        transforms: the model's transforms built with the stored statistics.
        prompts: the prompt embeddings.
        metadata: what clients are told.
        image_shapes: ``(H, W, C)`` per camera of the frames clients send.
        action_quantiles: q01 / q99 ``[action_dim]`` for normalizing fed-back actions (None: not normalized).
        seed: seed of the noise generator.
        max_chunks, num_steps: see :class:`StreamingSession`.
    """

    def __init__(self, model: LingBotVAModel, *, vae: Any, transforms: Transforms, prompts: PromptEmbeddings,
                 metadata: PolicyMetadata, image_shapes: Mapping[str, tuple[int, int, int]],
                 action_quantiles: tuple[torch.Tensor, torch.Tensor] | None, seed: int = 0,
                 max_chunks: int | None = None,
                 num_steps: int | None = None) -> None:
        self.model, self.vae, self.transforms, self.prompts = model, vae, transforms, prompts
        self.metadata = metadata
        self.image_shapes = dict(image_shapes)
        self.action_quantiles = action_quantiles
        self.seed, self.max_chunks, self.num_steps = seed, max_chunks, num_steps
        self.device = torch.device(metadata.device)
        self.encoder = StreamingVAEEncoder(vae, model.data_config)
        self.generator = torch.Generator()
        self.reset()

    # ------------------------------------------------------------------ policy class protocol
    @classmethod
    def write_assets(cls, config: RunConfig, directory: Path) -> dict[str, Any]:
        """Copies the training tasks' prompt embeddings and (when small) the VAE, text encoder and tokenizer of the
        latent cache's base model into ``directory``; records the base model path either way."""
        from safetensors.torch import load_file, save_file

        from embodied_data.lerobot.metadata import LeRobotMeta
        from embodied_models.lingbot_va.cache import TEXT_NAME, cache_dir, read_cache_meta
        from embodied_models.lingbot_va.precompute import COMMAND, clean_prompt

        if config.training.dataset_format != "lerobot_datasets" or not config.training.dataset_path:
            reason = (f"trained on --dataset-format {config.training.dataset_format}, not on a LeRobot dataset with a "
                      "latent cache: no VAE or prompt embeddings to record")
            logger.warning("the policy folder cannot serve LingBot-VA: %s", reason)
            return {"unavailable": reason}
        root = Path(config.training.dataset_path)
        cache = cache_dir(root, config.data.latent_cache)
        meta = read_cache_meta(cache, command_hint=COMMAND)
        texts = load_file(str(cache / TEXT_NAME))
        save_file({k: v.contiguous() for k, v in texts.items()}, str(directory / _TEXTS))
        dataset = LeRobotMeta.load(root)
        tasks = {clean_prompt(text): f"task_{i}" for i, text in dataset.tasks.items() if f"task_{i}" in texts}
        # the latent-window dataset has no camera features: the frame sizes clients send come from info.json
        shapes = {}
        for key in config.data.camera_keys:
            info = dataset.features[key]
            feature = DatasetFeature(key=key, dtype=info.dtype, shape=tuple(info.shape), names=info.names)
            shapes[key] = list(frame_shape(feature, config.data.image_size))
        base = Path(meta["base_model_path"]).resolve()
        copied = {part: copy_if_small(base / part, directory / part, what=f"LingBot-VA {part}")
                  for part in _BASE_PARTS if (base / part).is_dir()}
        return {"base_model_path": str(base), "copied": sorted(p for p, done in copied.items() if done),
                "texts": _TEXTS, "tasks": tasks, "text_len": int(meta.get("text_len", config.model.text_len)),
                "image_shapes": shapes}

    @classmethod
    def references(cls, doc: dict[str, Any]) -> dict[str, str]:
        """What :meth:`from_folder` reads besides core's files: the prompt embeddings in ``assets/`` and the base
        model's parts that were too large to copy (read from the recorded ``base_model_path``)."""
        record = doc.get("assets") or {}
        refs = {"policy.json assets.texts": f"{ASSETS_DIR}/{record.get('texts', _TEXTS)}"}
        base = record.get("base_model_path")
        for part in _BASE_PARTS:
            if part not in record.get("copied", ()) and base:
                refs[f"policy.json assets.base_model_path ({part})"] = str(Path(base) / part)
        return refs

    @classmethod
    def from_folder(cls, folder: PolicyFolder, *, device: str, seed: int) -> LingBotVAPolicy:
        """Model, VAE, transforms and prompt embeddings of ``folder`` on ``device``."""
        from diffusers import AutoencoderKLWan
        from safetensors.torch import load_file

        from embodied_models.lingbot_va.transforms import action_quantiles

        record = folder.doc.get("assets") or {}
        if "unavailable" in record:
            raise CheckpointError(f"{folder.path}: not servable as a LingBot-VA policy: {record['unavailable']}")
        base = Path(record.get("base_model_path", ""))
        part_dirs = {part: folder.assets / part if part in record.get("copied", ()) else base / part
                     for part in _BASE_PARTS}
        if not (part_dirs["vae"] / "config.json").is_file():
            raise CheckpointError(f"{folder.path}: LingBot-VA needs the Wan2.2 VAE its latents were made with; "
                                  f"neither the folder's assets/vae nor the recorded {base / 'vae'} holds one")
        model_config = attrs.evolve(folder.model_config, pretrained_path=None)  # the folder's weights replace it
        model = folder.build_model(model_config, device=device)
        vae = AutoencoderKLWan.from_pretrained(str(part_dirs["vae"])).to(device).eval()
        has_encoder = all((part_dirs[p]).is_dir() for p in ("text_encoder", "tokenizer"))
        encoder_base = None
        if has_encoder:
            encoder_base = folder.assets if "text_encoder" in record.get("copied", ()) else base
        prompts = PromptEmbeddings(texts=load_file(str(folder.assets / record.get("texts", _TEXTS))),
                                   tasks=dict(record.get("tasks", {})), encoder_base=encoder_base,
                                   text_len=int(record.get("text_len", folder.model_config.text_len)))
        data = folder.data_config
        quantiles = action_quantiles(folder.stats, data) if data.normalize_actions else None
        recorded = {**folder.interface["image_shapes"], **record.get("image_shapes", {})}
        shapes = {key: tuple(shape) for key, shape in recorded.items()}
        metadata = folder.metadata(device=device, needs_task=True, image_shape=shapes[data.camera_keys[0]])
        return cls(model, vae=vae, transforms=folder.build_transforms(model_config), prompts=prompts,
                   metadata=metadata, image_shapes=shapes, action_quantiles=quantiles, seed=seed)

    # ------------------------------------------------------------------ Policy
    def reset(self) -> None:
        """New episode: forgets the VAE cache and the KV cache, restarts the noise stream at ``seed``."""
        self.encoder.reset()
        self.session: StreamingSession | None = None
        self.task: str | None = None
        self.generator.manual_seed(self.seed)

    def expected_frames(self) -> int | None:
        """Frames per camera the next call must carry: None for one frame (the first call), else 4(F-1) or 4F."""
        if self.session is None:
            return None
        frames = self.model.data_config.num_latent_frames
        return 4 * (frames - 1) if self.session.frame_offset == 0 else 4 * frames

    def _check(self, observation: Mapping[str, Any]) -> tuple[list[torch.Tensor], str, torch.Tensor | None]:
        """Validated frames per camera ([1 or T, C, H, W] uint8), the task and the executed actions (or None)."""
        meta = self.metadata
        later = self.session is not None
        check_keys(observation, required=[*meta.camera_keys, TASK_KEY],
                   optional=[meta.state_key, *([meta.action_key] if later else [])])
        count = self.expected_frames()
        clips = [image_frames(observation[key], key, self.image_shapes[key], num_frames=count)
                 for key in meta.camera_keys]
        if count is None:
            clips = [clip[None] for clip in clips]
        if meta.state_key in observation:  # not a model input; checked so a wrong robot config shows up
            state_vector(observation[meta.state_key], meta.state_key, meta.state_dim)
        task = task_string(observation[TASK_KEY])
        if later and task != self.task:
            raise ObservationError(f"observation[{TASK_KEY!r}]: {task!r} differs from this episode's task "
                                   f"{self.task!r}; call reset() to start an episode with a new task")
        executed = None
        if later and meta.action_key in observation:
            executed = self._executed(observation[meta.action_key])
        return clips, task, executed

    def _executed(self, value: Any) -> torch.Tensor:
        """The executed actions of the previous chunk as float32 ``[steps, action_dim]``."""
        session, key, dim = self.session, self.metadata.action_key, self.metadata.action_dim
        steps = session.n * (session.last_actions.shape[2] - (1 if session.frame_offset == 0 else 0))
        array = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
        if array.shape != (steps, dim) or not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
            raise ObservationError(f"observation[{key!r}]: got {describe(array)}, expected the {steps} executed "
                                   f"actions of the previous chunk as finite floats of shape ({steps}, {dim})")
        return torch.from_numpy(array.astype(np.float32))

    def _noise(self, latent_shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
        """Video and action noise of one chunk, drawn from the policy's generator."""
        _, channels, _, h, w = latent_shape
        frames, n = self.model.data_config.num_latent_frames, self.model.data_config.action_per_frame
        return {"video": torch.randn(1, channels, frames, h, w, generator=self.generator),
                "action": torch.randn(1, self.model.config.action_dim, frames, n, 1, generator=self.generator)}

    def _start(self, clips: list[torch.Tensor], task: str) -> torch.Tensor:
        """Encodes the first observation, opens the session and predicts the first chunk (normalized actions)."""
        emb = self.prompts(task)
        first = self.encoder(clips)[0]
        sample = self.transforms.sample_transform({"latents": first, "text_emb": emb,
                                                   "null_text_emb": self.prompts.texts[_EMPTY]})
        batch = self.transforms.collate_fn([sample]).to(self.device)
        self.session = StreamingSession(self.model, batch["text_emb"], null_text_emb=batch["null_text_emb"],
                                        max_chunks=self.max_chunks, num_steps=self.num_steps)
        self.task = task
        actions, _ = self.session.predict(noise=self._noise(batch["latents"].shape), first_latent=batch["latents"])
        return actions

    def _feedback(self, executed: torch.Tensor) -> torch.Tensor:
        """Executed actions in dataset units ``[steps, D]`` -> the session's layout ``[1, A, F, n, 1]``."""
        session, cfg = self.session, self.model.config
        if self.action_quantiles is not None:
            q01, q99 = self.action_quantiles
            executed = quantile_normalize(executed, q01, q99)
        fed = torch.zeros_like(session.last_actions)
        offset = 1 if session.frame_offset == 0 else 0  # frame 0 of the first chunk is the observation
        grid = executed.to(fed.device).T.reshape(len(cfg.used_action_channel_ids), -1, session.n)
        fed[0, cfg.used_action_channel_ids, offset:offset + grid.shape[1]] = grid.unsqueeze(-1)
        return fed

    @torch.no_grad()
    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """The next chunk in dataset units: ``[(F-1) n, action_dim]`` first, then ``[F n, action_dim]``."""
        clips, task, executed = self._check(observation)
        if self.session is None:
            actions = self._start(clips, task)
        else:
            latents = self.encoder(clips).to(self.device)
            fed = self._feedback(executed) if executed is not None else self.session.last_actions
            self.session.observe(latents, fed)
            actions, _ = self.session.predict(noise=self._noise(self.session.init_latent.shape))
        if self.transforms.postprocess_actions is not None:
            actions = self.transforms.postprocess_actions(actions)
        return actions[0].float().cpu().numpy()
