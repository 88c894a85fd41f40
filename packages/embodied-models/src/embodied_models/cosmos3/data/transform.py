"""The Cosmos3 per-sample transform: raw DROID window sample (:mod:`.reader`) -> the model's sample.

Steps (LoongForge's ``Cosmos3ActionTransform``, whose output the golden files record):

1. frames cut to ``(T - 1) // c * c + 1`` (``c`` = the VAE's temporal compression);
2. the video fitted onto the closest bucket of ``data.resolution_tier`` (:mod:`.video`); ``image_size`` =
   ``[bucket_h, bucket_w, content_h, content_w]`` (float32);
3. the caption chain: with probability ``data.cfg_dropout_rate`` the caption is empty (and stays so); otherwise
   the viewpoint sentence + view description, the duration/fps sentence and the resolution sentence (of the
   bucket) are appended, each after ``". "`` (or ``" "`` when the text already ends with a period);
4. the caption as one user message through the tokenizer's chat template (with the generation prompt), cut to
   ``data.max_text_tokens`` ids;
5. the :class:`~.plan.SequencePlan` of a policy sample; the action zero-padded to ``max_action_dim`` with
   ``raw_action_dim`` kept.

Output keys: ``video`` [3, T', bucket_h, bucket_w] uint8, ``action`` [T', max_action_dim] float32,
``raw_action_dim``, ``domain_id``, ``fps`` (float), ``idle_frames``, ``image_size``, ``ai_caption`` (the full
caption), ``text_token_ids`` (list of int), ``sequence_plan``, ``dataset_index``, ``episode_index``,
``start_frame``, ``task_index``. The caption describes the window (``action_chunk_length + 1`` frames, cut as in
step 1) also for a policy observation (:meth:`.reader.DroidWindowTransform.observation`: one frame, ``action`` =
the observed state row, plan with row 0 and frame 0 clean). A sample without ``action`` gets no action fields and
a plan without actions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from embodied_core.errors import DataError, UsageError
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.data.plan import policy_plan
from embodied_models.cosmos3.data.tables import (
    DURATION_SENTENCE,
    RESOLUTION_SENTENCE,
    VIEWPOINT_SENTENCES,
    closest_bucket,
)
from embodied_models.cosmos3.data.video import aligned_frames, fit_to_bucket

__all__ = ["Cosmos3SampleTransform", "append_sentence", "build_caption", "load_tokenizer", "make_sample_transform"]


def append_sentence(text: str, sentence: str) -> str:
    """``text`` + ``" "`` (after a period) or ``". "`` + ``sentence``; an empty text stays empty."""
    if text == "":
        return text
    text = text.rstrip()
    return text + (" " if text.endswith(".") else ". ") + sentence


def build_caption(caption: str, *, viewpoint: str, view_description: str | None, frames: int, fps: float,
                  bucket_h: int, bucket_w: int, exact_duration: bool = False) -> str:
    """The full caption (step 3 of the module docstring, without the dropout)."""
    sentence = VIEWPOINT_SENTENCES.get(viewpoint)
    if sentence is not None:
        if view_description is not None:
            sentence = append_sentence(sentence, view_description)
        caption = append_sentence(caption, sentence)
    if fps > 0:
        duration = frames / fps if exact_duration else int(frames / fps)
        caption = append_sentence(caption, DURATION_SENTENCE.format(duration=duration, fps=fps))
    return append_sentence(caption, RESOLUTION_SENTENCE.format(height=bucket_h, width=bucket_w))


def load_tokenizer(path: str | None) -> Any:
    """The Qwen3-VL tokenizer of a local folder (transformers' fast tokenizer); it must have a chat template."""
    if not path:
        raise UsageError("the Cosmos3 captions need the Qwen3-VL tokenizer: pass --tokenizer-path DIR (a folder with "
                         "tokenizer.json and a chat template) or data.tokenizer_path=DIR")
    folder = Path(path)
    if not (folder / "tokenizer.json").is_file():
        raise UsageError(f"--tokenizer-path {path}: no tokenizer.json in that folder (give the folder of the "
                         "Qwen3-VL tokenizer, e.g. Qwen3-VL-8B-Instruct's)")
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    if not tokenizer.chat_template:
        raise UsageError(f"--tokenizer-path {path}: the tokenizer has no chat template (chat_template.jinja or "
                         "tokenizer_config.json's chat_template); Cosmos3 tokenizes captions as a chat message")
    return tokenizer


class Cosmos3SampleTransform:
    """Picklable per-sample transform (see the module docstring); the tokenizer is loaded when built (so a bad path
    fails early) and again lazily in each worker.

    Args:
        data_config: the run's data section.
        max_action_dim: width the action is zero-padded to (the model's ``max_action_dim``).
        temporal_compression: the VAE's temporal compression (4 for Wan2.2).
        tokenizer_path: the Qwen3-VL tokenizer folder.
    """

    def __init__(self, data_config: Cosmos3DataConfig, *, max_action_dim: int, temporal_compression: int,
                 tokenizer_path: str) -> None:
        self.cfg = data_config
        self.max_action_dim = int(max_action_dim)
        self.temporal_compression = int(temporal_compression)
        self.tokenizer_path = tokenizer_path
        self._tokenizer: Any = load_tokenizer(tokenizer_path)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}

    @property
    def tokenizer(self) -> Any:
        """The chat-template tokenizer (loaded on first use in a worker)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.tokenizer_path)
        return self._tokenizer

    def tokenize(self, caption: str) -> list[int]:
        """Chat-template ids of ``caption`` as one user message, with the assistant prompt, cut to
        ``data.max_text_tokens``."""
        ids = self.tokenizer.apply_chat_template([{"role": "user", "content": caption}], tokenize=True,
                                                 add_generation_prompt=True, return_dict=False)
        return list(ids)[: self.cfg.max_text_tokens]

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        video = sample["video"]
        _, frames, height, width = video.shape
        kept = aligned_frames(frames, self.temporal_compression)
        bucket_h, bucket_w = closest_bucket(height, width, cfg.resolution_tier)
        video, content_h, content_w = fit_to_bucket(video[:, :kept], bucket_h, bucket_w)
        image_size = torch.tensor([bucket_h, bucket_w, content_h, content_w], dtype=torch.float32)
        fps = float(sample["conditioning_fps"])
        if cfg.cfg_dropout_rate > 0.0 and torch.rand(1).item() < cfg.cfg_dropout_rate:
            caption = ""
        else:
            # the duration of the whole window (equal to ``kept`` in training; an observation has one frame)
            frames_described = aligned_frames(cfg.window_frames, self.temporal_compression)
            caption = build_caption(sample["ai_caption"], viewpoint=sample["viewpoint"],
                                    view_description=sample.get("additional_view_description"),
                                    frames=frames_described,
                                    fps=fps, bucket_h=bucket_h, bucket_w=bucket_w, exact_duration=cfg.exact_duration)
        action = sample.get("action")
        out: dict[str, Any] = {"video": video}
        if action is not None:
            if action.shape[-1] > self.max_action_dim:
                raise DataError(f"the action has {action.shape[-1]} channels, more than model.max_action_dim="
                                f"{self.max_action_dim}")
            out["action"] = torch.nn.functional.pad(action, (0, self.max_action_dim - action.shape[-1]))
            out["raw_action_dim"] = torch.tensor(action.shape[-1], dtype=torch.long)
        out.update({
            "domain_id": torch.as_tensor(sample["domain_id"], dtype=torch.long),
            "fps": fps,
            "idle_frames": sample["idle_frames"],
            "image_size": image_size,
            "ai_caption": caption,
            "text_token_ids": self.tokenize(caption),
            "sequence_plan": policy_plan(video_length=kept, action_length=None if action is None else len(action)),
        })
        for key in ("dataset_index", "episode_index", "start_frame", "task_index"):
            out[key] = sample.get(key)
        return out


def make_sample_transform(data_config: Cosmos3DataConfig, *, max_action_dim: int, temporal_compression: int,
                          tokenizer_path: str | None = None) -> Cosmos3SampleTransform:
    """The per-sample transform for a Cosmos3 model (call it from the model's ``make_transforms``).

    ``tokenizer_path`` None: ``data.tokenizer_path``, else ``--tokenizer-path`` (environment TOKENIZER_PATH).
    Raises UsageError for a chunk length the temporal compression does not divide, or a missing tokenizer.
    """
    if data_config.action_chunk_length % temporal_compression:
        raise UsageError(f"data.action_chunk_length={data_config.action_chunk_length} must be a multiple of the VAE's "
                         f"temporal compression {temporal_compression} (video frames and action rows must line up)")
    path = tokenizer_path or data_config.resolved_tokenizer_path()
    return Cosmos3SampleTransform(data_config, max_action_dim=max_action_dim,
                                  temporal_compression=temporal_compression, tokenizer_path=path or "")
