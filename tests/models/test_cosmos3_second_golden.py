"""``cosmos3_droid`` against a second golden of LoongForge's own reader and transform at other settings.

``tests/fixtures/cosmos3_chunk4_tier256/`` (written by ``benchmarks/cosmos3_second_golden.py`` with LoongForge
``c6275661``'s ``DROIDLeRobotDataset`` and ``Cosmos3ActionTransform``): ``action_chunk_length`` 4 (35 samples,
the 6-frame episode included), ``max_text_tokens`` 48 (every caption cut), the ``"256"`` tier (our
``data.resolution_tier``; LoongForge's builder fixes 480), deterministic caption choice. As the shared golden:
every value equal, videos bit for bit (sha256); six of the 35 positions are read (time).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from embodied_core.config.training_args import TrainingArgs
from embodied_data.lerobot.factory import build_dataset
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.data.transform import make_sample_transform
from tests.support import DATASETS_DIR

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cosmos3_chunk4_tier256"
STRATEGIES = DATASETS_DIR / "strategies"
CHECKED = (0, 15, 16, 17, 28, 34)
"""Positions checked (each reads three videos): the first, the last of episode 0, both samples of the 6-frame
episode, the start of episode 3 and the last (after its task switch). The fixture holds all 35."""
SCALARS = ("raw_action_dim", "domain_id", "idle_frames", "dataset_index", "episode_index", "start_frame",
           "task_index")


def _sha256(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    return json.loads((FIXTURE / "expected.json").read_text()), load_file(str(FIXTURE / "tensors.safetensors"))


def test_reader_and_transform_equal_the_reference_at_chunk_4_tier_256(golden: tuple) -> None:
    doc, tensors = golden
    settings = doc["settings"]
    config = Cosmos3DataConfig(action_chunk_length=settings["action_chunk_length"],
                               max_text_tokens=settings["max_text_tokens"], resolution_tier=settings["resolution"],
                               action_fps=settings["action_fps"], caption_choice="position")
    dataset = build_dataset(TrainingArgs(dataset_path=str(STRATEGIES / "cosmos3_droid_v30"),
                                         dataset_strategy="cosmos3_droid"), config)
    transform = make_sample_transform(config, max_action_dim=settings["max_action_dim"],
                                      temporal_compression=settings["temporal_compression"],
                                      tokenizer_path=str(STRATEGIES / "tokenizers" / "qwen3vl_tiny"))
    assert len(dataset) == doc["dataset_len"] == 35
    problems = []
    assert set(CHECKED) <= {item["position"] for item in doc["items"]}
    for item in (item for item in doc["items"] if item["position"] in CHECKED):
        position = item["position"]
        raw = dataset[position]
        sample = transform(raw)
        got = {"raw_video": _sha256(raw["video"]), "raw_caption": raw["ai_caption"], "video": _sha256(sample["video"]),
               "video_shape": list(sample["video"].shape), "ai_caption": sample["ai_caption"],
               "text_token_ids": list(sample["text_token_ids"]), "fps": sample["fps"],
               "sequence_plan": {name: getattr(sample["sequence_plan"], name) for name in item["sequence_plan"]},
               **{key: int(sample[key]) for key in SCALARS}}
        want = {"raw_video": item["raw_video"]["sha256"], "raw_caption": item["raw_caption"],
                "video": item["video"]["sha256"], "video_shape": item["video"]["shape"],
                "ai_caption": item["ai_caption"], "text_token_ids": item["text_token_ids"], "fps": item["fps"],
                "sequence_plan": item["sequence_plan"], **{key: item[key] for key in SCALARS}}
        problems += [f"{position}.{key}: {got[key]!r} != {want[key]!r}" for key in want if got[key] != want[key]]
        for key in ("action", "image_size"):
            expected = tensors[f"{position}.{key}"]
            if sample[key].dtype != expected.dtype or not torch.equal(sample[key], expected):
                problems.append(f"{position}.{key} differs")
        if "crop" in item:
            crop = sample["video"][tuple(slice(a, b) for a, b in item["crop"])]
            if not torch.equal(crop, tensors[f"{position}.crop"]):
                problems.append(f"{position}: video crop at the content corner differs")
    assert not problems, problems[:20]
