"""The ``fastwam`` dataset strategy against LoongForge's golden files (``../shared/datasets/strategies/expected/
fastwam_v{21,30}.fastwam.*``): samples and the collated batch bit for bit with the reference switches, our defaults
differing exactly where the strategy README marks LoongForge bugs, config errors and text-cache errors."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from embodied_core.config.training_args import TrainingArgs
from embodied_core.data.dataset import resolve_stats
from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.factory import build_dataset
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import make_strategy
from embodied_models.fastwam.data.config import FastWAMDataConfig
from embodied_models.fastwam.data.prompts import PROMPT_TEMPLATE, format_prompt
from embodied_models.fastwam.data.transforms import make_transforms
from tests.support import DATASETS_DIR

ROOT = DATASETS_DIR / "strategies"
V21, V30 = ROOT / "fastwam_v21", ROOT / "fastwam_v30"
CACHE = V21 / "text_embeds_cache"
# The golden settings: num_video_frames=5, action_video_freq_ratio=2, image_size=16, action_horizon=8,
# tokenizer_max_len=8, text_dim=16 (encoder id wan22ti2v5b from Wan-AI/Wan2.2-TI2V-5B).
GEOMETRY = dict(num_video_frames=5, action_video_freq_ratio=2, image_size=(16, 16), action_horizon=8, text_len=8,
                text_dim=16)
REFERENCE = dict(stats_source="loongforge", image_pad_mode="always_false", context_mask_mode="all_true",
                 missing_text_cache="zeros")
SETTINGS = {"fastwam_v21": (V21, "v2.1", "pyav", str(CACHE)), "fastwam_v30": (V30, "v3.0", "torchcodec", None)}


def _golden(name: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    return (json.loads((ROOT / "expected" / f"{name}.fastwam.json").read_text()),
            load_file(str(ROOT / "expected" / f"{name}.fastwam.safetensors")))


def _pipeline(name: str, **data: Any):
    root, version, backend, cache = SETTINGS[name]
    config = FastWAMDataConfig(**{**GEOMETRY, "text_cache_dir": cache, **data})
    args = TrainingArgs(model_name="fastwam", dataset_path=str(root), dataset_strategy="fastwam",
                        lerobotdataset_version=version, video_backend=backend)
    dataset = build_dataset(args, config)
    stats = resolve_stats(dataset, format_name="lerobot_datasets")
    return dataset, stats, make_transforms(None, config, stats=stats)


def _mismatches(desc: dict[str, Any], value: Any, tensors: dict[str, torch.Tensor], where: str) -> list[str]:
    kind = desc["type"]
    if kind in ("tensor", "ndarray"):
        expected, got = tensors[desc["safetensors_key"]], torch.as_tensor(value)
        same = got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected)
        return [] if same else [f"{where}: {got.dtype}{tuple(got.shape)} vs {expected.dtype}{tuple(expected.shape)}"]
    if kind == "dict" or kind.startswith("dataclass:"):
        items = desc.get("items") or desc["fields"]
        if set(value) != set(items):
            return [f"{where}: keys {sorted(value)} vs {sorted(items)}"]
        return [m for key, d in items.items() for m in _mismatches(d, value[key], tensors, f"{where}.{key}")]
    if kind in ("str", "int", "float", "bool", "list[int]"):
        return [] if value == desc["value"] else [f"{where}: {value!r} vs {desc['value']!r}"]
    raise AssertionError(f"{where}: unexpected description {kind}")


@pytest.fixture(scope="module", params=sorted(SETTINGS))
def reference(request):
    """(golden json, golden tensors, dataset, stats, transforms, samples by position) with the reference switches."""
    doc, tensors = _golden(request.param)
    dataset, stats, transforms = _pipeline(request.param, **REFERENCE)
    positions = sorted({*doc["positions"], *doc["batch"]["positions"]})
    samples = {p: transforms.sample_transform(dataset[p]) for p in positions}
    return doc, tensors, dataset, stats, transforms, samples


def test_golden_samples_and_batch_with_reference_switches(reference):
    doc, tensors, dataset, stats, transforms, samples = reference
    assert len(dataset) == doc["dataset_len"]
    for key, entry in doc["normalization_stats_used"].items():  # LoongForge's stats sources, reproduced
        for stat, desc in entry.items():
            expected = tensors[desc["safetensors_key"]]
            assert torch.equal(torch.as_tensor(stats[key][stat]).to(expected.dtype), expected), (key, stat)
    assert all(samples[p]["index"] == p for p in samples)  # our extra field: keys the model's training draws
    problems = [m for item in doc["items"]
                for m in _mismatches(item["sample"], {k: v for k, v in samples[item["position"]].items()
                                                      if k != "index"}, tensors, f"item {item['position']}")]
    batch = transforms.collate_fn([samples[p] for p in doc["batch"]["positions"]])
    assert batch["prompt"] == [samples[p]["prompt"] for p in doc["batch"]["positions"]]  # our extra fields
    assert batch["sample_index"] == doc["batch"]["positions"]
    model_fields = {k: v for k, v in batch.items() if k not in ("prompt", "sample_index")}
    problems += _mismatches(doc["batch"]["value"], model_fields, tensors, "batch")
    assert not problems, "\n".join(problems)


def _pad_of(meta: LeRobotMeta, position: int, offsets: list[int]) -> list[bool]:
    starts = np.cumsum([0] + [meta.episodes[e].length for e in sorted(meta.episodes)])
    end = starts[np.searchsorted(starts, position, side="right")]
    return [position + k >= end for k in offsets]


def test_defaults_differ_only_where_the_readme_marks_bugs(reference):
    doc, _, dataset, ref_stats, ref_transforms, ref_samples = reference
    name = doc["name"].split(".")[0]
    if SETTINGS[name][3] is None:  # v3.0 golden ran without a text cache: our default refuses (next tests)
        with pytest.raises(DataError, match="precompute-text"):
            _pipeline(name)
        data = {"text_cache_dir": str(CACHE)}  # the same tasks as v2.1
    else:
        data = {}
    dataset, stats, transforms = _pipeline(name, **data)
    positions = doc["batch"]["positions"]
    samples = [transforms.sample_transform(dataset[p]) for p in positions]
    batch = transforms.collate_fn(samples)
    ref = ref_transforms.collate_fn([ref_samples[p] for p in positions])
    # 1. video, prompt and the action pad mask are the reference's
    assert torch.equal(batch["video"], ref["video"]) and torch.equal(batch["action_is_pad"], ref["action_is_pad"])
    assert batch["prompt"] == ref["prompt"]
    # 2. real image_is_pad (the reference's is always False): frames read past the episode end
    meta = LeRobotMeta.load(SETTINGS[name][0])
    expected_pad = torch.tensor([_pad_of(meta, p, [0, 2, 4, 6, 8]) for p in positions])
    assert torch.equal(batch["image_is_pad"], expected_pad) and expected_pad.any() and not ref["image_is_pad"].any()
    # 3. the context mask marks the prompt's tokens (the reference: all True after zeroing); same context values
    index = {r["prompt"]: r["mask_len"] for r in json.loads((CACHE / "INDEX.json").read_text())}
    lengths = torch.tensor([index[p] for p in batch["prompt"]])
    assert torch.equal(batch["context_mask"], torch.arange(8)[None] < lengths[:, None]) and ref["context_mask"].all()
    if SETTINGS[name][3] is not None:
        assert torch.equal(batch["context"], ref["context"])
    # 4. q01/q99 are real quantiles of the data, not min/max or lerobot's averaged per-episode quantiles
    for key in ("action", "observation.state"):
        values = np.stack([np.asarray(v) for v in dataset.table.columns[key]])
        assert np.allclose(stats[key]["q01"], np.quantile(values, 0.01, axis=0))
        assert not np.allclose(stats[key]["q01"], ref_stats[key]["q01"])
    raw = dataset[positions[0]]
    q01, q99 = (torch.as_tensor(stats["action"][q], dtype=torch.float32) for q in ("q01", "q99"))
    assert torch.equal(samples[0]["action"], 2.0 * (raw["action"] - q01) / (q99 - q01) - 1.0)


def test_prompt_template_and_window_conventions():
    assert format_prompt("pick the red cube") == PROMPT_TEMPLATE.format(task="pick the red cube")
    assert format_prompt("A video recorded from above: wipe") == "A video recorded from above: wipe"
    loong = FastWAMDataConfig(num_video_frames=5, action_video_freq_ratio=2, action_horizon=8)
    raw = FastWAMDataConfig(num_video_frames=9, action_video_freq_ratio=2, action_horizon=8,
                            frame_window_mode="lerobot")
    assert loong.video_frame_offsets == raw.video_frame_offsets == [0, 2, 4, 6, 8]
    assert FastWAMDataConfig(num_video_frames=33, action_video_freq_ratio=1, frame_window_mode="lerobot"
                             ).model_video_frames == 33
    assert not loong.validate() and not raw.validate()


@pytest.mark.parametrize(("fields", "message"), [
    (dict(num_video_frames=4, action_video_freq_ratio=1, action_horizon=6), r"4 model frames.*% 4 == 1"),
    (dict(num_video_frames=5, action_video_freq_ratio=3), r"data\.num_video_frames=5.*action_video_freq_ratio=3"),
    (dict(num_video_frames=5, action_video_freq_ratio=2, action_horizon=6), r"data\.action_horizon=6.*multiple of"),
    (dict(num_video_frames=9, action_video_freq_ratio=2, action_horizon=8, frame_window_mode="lerobot",
          image_size=(20, 16)), r"data\.image_size.*multiples of 16"),
    (dict(encoder_id="Wan2.2"), r"data\.encoder_id"),
])
def test_config_errors_name_the_setting(fields, message):
    config = FastWAMDataConfig(**fields)
    assert any(re.search(message, p) for p in config.validate()), config.validate()
    if "image_size" not in fields and "encoder_id" not in fields:  # the strategy refuses the geometry up front
        with pytest.raises(UsageError, match=message):
            make_strategy("fastwam").plan(LeRobotMeta.load(V21), attrs.evolve(config, text_cache_dir=str(CACHE)))


def test_strategy_usage_errors():
    meta = LeRobotMeta.load(V21)
    ok = FastWAMDataConfig(**GEOMETRY, text_cache_dir=str(CACHE))
    with pytest.raises(UsageError, match=r"data\.camera_keys='observation\.images\.top'"):
        make_strategy("fastwam").plan(meta, attrs.evolve(ok, camera_keys=["observation.images.top"]))
    with pytest.raises(UsageError, match=r"data\.max_action_dim=4"):
        make_strategy("fastwam").plan(meta, attrs.evolve(ok, max_action_dim=4))
    from embodied_core.config.model_config import BaseDataConfig
    with pytest.raises(UsageError, match="needs a FastWAM model"):
        make_strategy("fastwam").plan(meta, BaseDataConfig())
    plan = make_strategy("fastwam").plan(meta, attrs.evolve(ok, camera_keys=["observation.images.wrist",
                                                                             "observation.images.front"]))
    assert plan.camera_keys == ["observation.images.front", "observation.images.wrist"]  # sorted by key
    assert plan.delta_timestamps["action"] == [k / 10 for k in range(8)]


def test_missing_text_cache_is_an_error_before_training(tmp_path):
    meta = LeRobotMeta.load(V21)
    partial = tmp_path / "cache"
    shutil.copytree(CACHE, partial)
    (partial / "84f0aeaa7d005d5390b4184ff290f15c2a0f80fd.pt").unlink()  # the legacy-named entry of task 2
    config = FastWAMDataConfig(**GEOMETRY, text_cache_dir=str(partial))
    with pytest.raises(DataError, match=r"'A video recorded from above: wipe the table'.*embodied data "
                       r"precompute-text .*fastwam_v21 .*--text-len 8 --encoder-id wan22ti2v5b"):
        make_strategy("fastwam").plan(meta, config)
    with pytest.raises(DataError, match=r"data\.text_cache_dir is unset.*pick the red cube.*precompute-text"):
        make_strategy("fastwam").plan(meta, FastWAMDataConfig(**GEOMETRY))
    # the collator names a prompt it has no entry for (e.g. a new instruction at inference)
    collate = make_transforms(None, config, stats=_stats()).collate_fn
    sample = {"video": torch.zeros(3, 5, 16, 32), "proprio": torch.zeros(1, 8), "prompt": "open the drawer"}
    with pytest.raises(DataError, match=r"'open the drawer'.*precompute-text"):
        collate([sample])


def _stats() -> dict[str, dict[str, np.ndarray]]:
    return {"action": {"q01": np.zeros(7), "q99": np.ones(7), "mean": np.zeros(7), "std": np.full(7, 2.0)},
            "observation.state": {"q01": np.zeros(8), "q99": np.full(8, 4.0), "mean": np.ones(8), "std": np.ones(8)}}


def test_inference_observation_and_mean_std():
    config = FastWAMDataConfig(**GEOMETRY, text_cache_dir=str(CACHE), normalization_mode="mean_std",
                               camera_keys=["observation.images.wrist", "observation.images.front"], max_action_dim=9)
    transforms = make_transforms(None, config, stats=_stats())
    obs = {"observation.images.front": torch.full((64, 80, 3), 255, dtype=torch.uint8),  # HWC, one frame
           "observation.images.wrist": torch.zeros(3, 48, 64, dtype=torch.uint8),
           "observation.state": torch.arange(8.0), "task": "pick the red cube"}
    batch = transforms.collate_fn([transforms.sample_transform(obs)])
    assert set(batch) == {"video", "context", "context_mask", "proprio", "image_is_pad", "prompt"}
    assert batch["video"].shape == (1, 3, 1, 16, 32)
    video = batch["video"]  # front | wrist (sorted), 255 -> 1 and 0 -> -1 up to the resize's rounding
    assert torch.allclose(video[..., :16], torch.ones(())) and torch.allclose(video[..., 16:], -torch.ones(()))
    assert torch.equal(batch["proprio"], (torch.arange(8.0) - 1).expand(1, 8, 8))  # (x - mean) / std, over H
    action = transforms.sample_transform({**obs, "action": torch.ones(8, 7)})["action"]
    assert action.shape == (8, 9) and (action[:, :7] == 0.5).all() and (action[:, 7:] == 0).all()
    assert torch.equal(transforms.postprocess_actions(action[None]), torch.ones(1, 8, 7))
