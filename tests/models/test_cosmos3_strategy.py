"""``cosmos3_droid`` strategy: LoongForge's golden samples and batch, our switches, config errors, the backend.

The golden (``strategies/expected/cosmos3_droid_v30.cosmos3_droid.json``) was recorded with LoongForge's
``--deterministic-mode`` (caption alternative by ``random.Random(position)``, no CFG dropout), chunk 8, max text
tokens 99999, the ``"480"`` tier and torchcodec; our matching settings are ``caption_choice="position"`` and the
defaults otherwise.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
import shutil
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from embodied_core.config.converter import structure
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, DataError, UsageError
from embodied_data.lerobot.factory import build_dataset, check_dataset, infer_features
from embodied_models.cosmos3.data.collate import collate_cosmos3
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.data.strategy import check_run_config
from embodied_models.cosmos3.data.transform import make_sample_transform
from embodied_models.cosmos3.data.video import fit_to_bucket
from tests.support import DATASETS_DIR

STRATEGIES = DATASETS_DIR / "strategies"
ROOT = STRATEGIES / "cosmos3_droid_v30"
TOKENIZER = str(STRATEGIES / "tokenizers" / "qwen3vl_tiny")
EXPECTED = STRATEGIES / "expected" / "cosmos3_droid_v30.cosmos3_droid.json"
GOLDEN = dict(action_chunk_length=8, max_text_tokens=99999, caption_choice="position")


def _args(root: Path = ROOT, **kw: Any) -> TrainingArgs:
    return TrainingArgs(dataset_path=str(root), dataset_strategy="cosmos3_droid", **kw)


def _transform(cfg: Cosmos3DataConfig) -> Any:
    return make_sample_transform(cfg, max_action_dim=64, temporal_compression=4, tokenizer_path=TOKENIZER)


class _Golden:
    """Compares values with the golden's value descriptions; collects every mismatch."""

    def __init__(self) -> None:
        self.doc = json.loads(EXPECTED.read_text())
        self.tensors = load_file(str(EXPECTED.with_name(EXPECTED.stem + ".safetensors")))
        self.problems: list[str] = []

    def _tensor(self, key: str, value: Any, path: str) -> None:
        expected = self.tensors[key]
        value = torch.as_tensor(value)
        if value.dtype != expected.dtype or value.shape != expected.shape or not torch.equal(value, expected):
            self.problems.append(f"{path}: {value.dtype}{list(value.shape)} differs from {key}")

    def check(self, desc: dict[str, Any], value: Any, path: str) -> None:
        kind = desc["type"]
        if kind == "tensor":
            self._tensor(desc["safetensors_key"], value, path)
        elif kind == "big_tensor":
            digest = hashlib.sha256(value.contiguous().numpy().tobytes()).hexdigest()
            if list(value.shape) != desc["shape"] or digest != desc["sha256"] or int(value.sum()) != desc["sum"]:
                self.problems.append(f"{path}: sha256/sum of {list(value.shape)} differ")
            for name, crop in desc["crops"].items():
                part = value[:, :, ::32, ::32] if crop["slices"] is None else value[
                    tuple(slice(lo, hi) for lo, hi in crop["slices"])]
                self._tensor(crop["safetensors_key"], part, f"{path}#{name}")
        elif kind == "tensor_frames":
            if list(value.shape) != desc["shape"]:
                self.problems.append(f"{path}: shape {list(value.shape)} != {desc['shape']}")
                return
            for frame in desc["frames"]:
                self._tensor(frame["safetensors_key"], value[:, frame["t"]], f"{path}[t={frame['t']}]")
        elif kind == "dict":
            if set(value) != set(desc["items"]):
                self.problems.append(f"{path}: keys differ by {sorted(set(value) ^ set(desc['items']))}")
            for key, sub in desc["items"].items():
                if key in value:
                    self.check(sub, value[key], f"{path}/{key}")
        elif kind.startswith("dataclass:"):
            for key, sub in desc["fields"].items():
                self.check(sub, getattr(value, key), f"{path}.{key}")
        elif kind in ("list", "tuple"):
            if len(value) != len(desc["items"]):
                self.problems.append(f"{path}: {len(value)} items != {len(desc['items'])}")
            for i, (sub, item) in enumerate(zip(desc["items"], value, strict=False)):
                self.check(sub, item, f"{path}[{i}]")
        elif kind == "none":
            if value is not None:
                self.problems.append(f"{path}: {value!r} is not None")
        elif kind == "float":
            if not isinstance(value, float) or float.hex(value) != desc["hex"]:
                self.problems.append(f"{path}: {value!r} != {desc['value']!r}")
        elif type(value).__name__ != kind.replace("list[int]", "list") or value != desc["value"]:
            self.problems.append(f"{path}: {value!r} != {desc['value']!r}")


@pytest.fixture(scope="module")
def golden() -> _Golden:
    return _Golden()


@pytest.fixture(scope="module")
def dataset() -> Any:
    return build_dataset(_args(), Cosmos3DataConfig(**GOLDEN))


@pytest.fixture(scope="module")
def transform() -> Any:
    return _transform(Cosmos3DataConfig(**GOLDEN))


@pytest.fixture(scope="module")
def samples(dataset: Any, transform: Any, golden: _Golden) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    out = {}
    for item in golden.doc["items"]:
        raw = dataset[item["position"]]
        out[item["position"]] = (raw, transform(raw))
    return out


def test_golden_samples_and_batch(dataset: Any, samples: dict, golden: _Golden) -> None:
    doc = golden.doc
    assert len(dataset) == doc["dataset_len"] == 21
    assert dataset.episode_ranges() == [(0, 12), (12, 18), (18, 21)]  # episode 1 (6 frames) gives no sample
    for item in doc["items"]:
        raw, sample = samples[item["position"]]
        golden.check(item["raw"], raw, f"item {item['position']} raw")
        golden.check(item["sample"], sample, f"item {item['position']} sample")
    batch = collate_cosmos3([samples[i][1] for i in doc["batch"]["positions"]])
    golden.check(doc["batch"]["value"], batch, "batch")
    assert golden.problems == []


def test_batch_stacks_for_the_model(samples: dict) -> None:
    batch = collate_cosmos3([samples[i][1] for i in (0, 11, 12, 20)])
    assert batch.video.shape == (4, 3, 9, 640, 640) and batch.video.dtype == torch.uint8
    assert batch.action.shape == (4, 9, 64) and batch.action_channel_mask.sum(1).tolist() == [8] * 4
    assert torch.equal(batch.action[:, :, 8:], torch.zeros(4, 9, 56))
    assert batch.text_mask.sum(1).tolist() == [len(ids) for ids in batch.text_token_ids]
    for row, ids in enumerate(batch.text_token_ids):
        assert batch.text_ids[row, :len(ids)].tolist() == ids and not batch.text_ids[row, len(ids):].any()
    assert batch.domain_id.tolist() == [8] * 4 and batch.fps.tolist() == [15.0] * 4
    moved = batch.to("meta")
    assert moved.video.is_meta and all(v.is_meta for v in moved.videos) and moved.text_ids.is_meta
    assert moved.sequence_plans == batch.sequence_plans and moved.text_token_ids == batch.text_token_ids


def test_video_backend_is_honoured(golden: _Golden) -> None:
    dataset = build_dataset(_args(video_backend="pyav"), Cosmos3DataConfig(**GOLDEN))
    assert dataset.backend.name == "pyav"
    item = golden.doc["items"][13]
    golden.check(item["raw"]["items"]["video"], dataset[item["position"]]["video"], "pyav video")
    assert golden.problems == []


def test_switches_duration_tier_and_caption_choice(dataset: Any, samples: dict, golden: _Golden) -> None:
    raw, reference = samples[0]
    assert "The video is 0.0 seconds long" in reference["ai_caption"]
    exact = _transform(Cosmos3DataConfig(**GOLDEN, exact_duration=True))(raw)
    assert exact["ai_caption"] == reference["ai_caption"].replace("0.0 seconds", "0.6 seconds")
    small = _transform(Cosmos3DataConfig(**GOLDEN, resolution_tier="256"))(raw)
    assert small["video"].shape == (3, 9, 256, 256) and small["image_size"].tolist() == [256, 256, 72, 64]
    assert small["ai_caption"].endswith("This video is of 256x256 resolution.")
    crop = golden.doc["items"][0]["sample"]["items"]["video"]["crops"]["content_t0_plus_margin"]
    assert torch.equal(small["video"][:, :1, :74, :66], golden.tensors[crop["safetensors_key"]])
    # default: the alternative comes from the sample's seeded RNG (the loader seeds it per sample and epoch)
    seeded = build_dataset(_args(), Cosmos3DataConfig(action_chunk_length=8)).transform
    rows = _row_sample(dataset, 0)
    options = {"put the marker in the cup", "place the marker into the cup", "drop the marker in the mug"}
    picked = []
    for seed in range(12):
        random.seed(seed)
        picked.append(seeded(rows)["ai_caption"])
    assert set(picked) == options
    random.seed(3)
    assert seeded(rows)["ai_caption"] == picked[3]


def _row_sample(dataset: Any, position: int) -> dict[str, Any]:
    """The rows the dataset reads for ``position`` before the strategy's transform runs."""
    saved, dataset.transform = dataset.transform, None
    try:
        sample = dataset[position]
    finally:
        dataset.transform = saved
    return sample


def test_cfg_dropout_empties_the_caption(samples: dict) -> None:
    raw, _ = samples[0]
    dropped = _transform(Cosmos3DataConfig(**GOLDEN, cfg_dropout_rate=1.0))(raw)
    assert dropped["ai_caption"] == ""
    assert dropped["text_token_ids"] == _transform(Cosmos3DataConfig(**GOLDEN)).tokenize("")


def test_bucket_fit_scales_down_and_pads() -> None:
    video = torch.arange(300 * 400, dtype=torch.int64).remainder(251).to(torch.uint8).reshape(1, 1, 300, 400)
    video = video.expand(3, 2, 300, 400).contiguous()
    out, h, w = fit_to_bucket(video, 256, 320)  # scale 0.8 -> 240 x 320 content, 16 reflected rows below
    assert (h, w) == (240, 320) and out.shape == (3, 2, 256, 320)
    scaled = torch.nn.functional.interpolate(video.reshape(6, 1, 300, 400).float(), size=(240, 320), mode="bicubic",
                                             align_corners=False, antialias=True).clamp(0, 255).round()
    assert torch.equal(out[..., :240, :].reshape(6, 1, 240, 320), scaled.to(torch.uint8))
    assert torch.equal(out[..., 240:, :], out[..., 223:239, :].flip(-2))  # reflect: rows 238, 237, ... mirrored
    small, h, w = fit_to_bucket(video[..., :10, :12], 256, 320)  # no enlarging; pad >= content: edge
    assert (h, w) == (10, 12) and torch.equal(small[..., 200, 300], video[..., 9, 11])


def test_samples_need_a_full_window_and_follow_the_split() -> None:
    cfg = Cosmos3DataConfig(**GOLDEN)
    with pytest.raises(DataError, match="no samples"):
        build_dataset(_args(split="1"), cfg)  # the 6-frame episode is shorter than 9 frames
    dataset = build_dataset(_args(split="2-3"), cfg)
    assert len(dataset) == 9 and dataset.episode_ranges() == [(0, 6), (6, 9)]
    last = dataset[8]
    assert int(last["episode_index"]) == 3 and int(last["start_frame"]) == 2 and int(last["dataset_index"]) == 8


def test_features_stats_and_pickling(dataset: Any, transform: Any) -> None:
    found = infer_features(_args(), Cosmos3DataConfig(**GOLDEN))
    assert found.features["action"].shape == (8,) and found.features["observation.state"].shape == (8,)
    assert found.features["action"].names == (*(f"joint_{i}" for i in range(7)), "gripper_open")
    stats = dataset.stats
    joint, grip = stats["action.joint_position"], stats["action.gripper_position"]
    assert np.allclose(stats["action"]["min"], np.r_[joint["min"], 1 - grip["max"]])
    assert np.allclose(stats["action"]["mean"], np.r_[joint["mean"], 1 - grip["mean"]])
    clone = pickle.loads(pickle.dumps(dataset))
    raw = clone[5]
    assert torch.equal(raw["video"], dataset[5]["video"])
    assert pickle.loads(pickle.dumps(transform))(raw)["text_token_ids"] == transform(raw)["text_token_ids"]


def test_tasks_parquet_layouts(tmp_path: Path, samples: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "droid"
    (root / "meta").mkdir(parents=True)
    for part in ("data", "videos"):
        (root / part).symlink_to(ROOT / part)
    shutil.copy(ROOT / "meta" / "info.json", root / "meta")
    (root / "meta" / "episodes").symlink_to(ROOT / "meta" / "episodes")
    tasks = pq.read_table(ROOT / "meta" / "tasks.parquet")
    legacy = pa.table({"task_index": tasks.column("task_index"), "__index_level_0__": tasks.column("task")})
    pq.write_table(legacy, root / "meta" / "tasks.parquet")  # lerobot 0.4.4: the task string is the pandas index
    dataset = build_dataset(_args(root), Cosmos3DataConfig(**GOLDEN))
    assert dataset[0]["ai_caption"] == samples[0][0]["ai_caption"] == "place the marker into the cup"
    pq.write_table(pa.table({"task_index": tasks.column("task_index"), "text": tasks.column("task")}),
                   root / "meta" / "tasks.parquet")
    with pytest.raises(DataError, match=r"tasks\.parquet.*'task'"):
        build_dataset(_args(root), Cosmos3DataConfig(**GOLDEN))


@pytest.mark.parametrize(("data", "match"), [
    ({"target_h": 480}, r"data\.target_h.*data\.resolution_tier"),
    ({"target_w": 480}, r"data\.target_w.*data\.resolution_tier"),
    ({"video_backend": "torchcodec"}, r"data\.video_backend.*--video-backend"),
    ({"resolution_tier": "500"}, r"data\.resolution_tier"),
    ({"embodiment": "franka"}, r"data\.embodiment"),
    ({"camera_keys": ["a", "b"]}, r"data\.camera_keys.*exactly 3"),
    ({"caption_choice": "global"}, r"data\.caption_choice"),
])
def test_config_errors(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        structure(data, Cosmos3DataConfig, path="data")


def test_plan_and_run_checks() -> None:
    problems = check_dataset(_args(), Cosmos3DataConfig(action_fps=10.0))
    assert len(problems) == 1 and "data.action_fps=10 but" in problems[0] and "15 fps" in problems[0]
    problems = check_dataset(_args(), Cosmos3DataConfig(joint_state_key="observation.state"))
    assert "data.joint_state_key='observation.state' is not a feature" in problems[0]
    cam = "observation.image.wrist_image_left"
    problems = check_dataset(_args(), Cosmos3DataConfig(camera_keys=[cam, cam.replace("wrist", "side"), cam]))
    assert "data.camera_keys[1]" in problems[0]
    run = types.SimpleNamespace(data=Cosmos3DataConfig(action_chunk_length=6), training=TrainingArgs(),
                                model=types.SimpleNamespace(vae_temporal_compression=4))
    problems = check_run_config(run)
    assert any("data.action_chunk_length=6 must be a multiple of model.vae_temporal_compression=4" in p
               for p in problems) and any("--tokenizer-path" in p for p in problems)
    with pytest.raises(UsageError, match="action_chunk_length=6"):
        _transform(Cosmos3DataConfig(action_chunk_length=6))
    with pytest.raises(UsageError, match=r"no tokenizer\.json"):
        make_sample_transform(Cosmos3DataConfig(), max_action_dim=64, temporal_compression=4,
                              tokenizer_path=str(STRATEGIES))
    from embodied_core.config.model_config import BaseDataConfig

    problems = check_dataset(_args(), BaseDataConfig())
    assert "needs a Cosmos3 model" in problems[0]


def test_unknown_task_index_is_an_error(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    root = tmp_path / "droid"
    shutil.copytree(ROOT / "meta", root / "meta")
    (root / "videos").symlink_to(ROOT / "videos")
    tasks = pq.read_table(ROOT / "meta" / "tasks.parquet")
    pq.write_table(tasks.slice(0, 2), root / "meta" / "tasks.parquet")  # task 2 ("Wipe the table.") dropped
    for path in sorted((ROOT / "data").glob("chunk-*/file-*.parquet")):
        target = root / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(path)
    with pytest.raises(DataError, match=r"task_index \[2\].*meta/tasks\.parquet does not list"):
        build_dataset(_args(root), Cosmos3DataConfig(**GOLDEN))


def test_policy_observation_gives_the_training_layout(dataset: Any, samples: dict, transform: Any) -> None:
    rows = _row_sample(dataset, 0)
    cfg = Cosmos3DataConfig(**GOLDEN)
    observation = {key: rows[key][0].permute(1, 2, 0).numpy() for key in cfg.camera_keys}  # HWC, as clients send
    observation.update({cfg.joint_state_key: rows[cfg.joint_state_key][0].numpy(),
                        cfg.gripper_state_key: rows[cfg.gripper_state_key][0].numpy(), "task": rows["task"]})
    reader = dataset.transform.transforms[0]
    out = transform(reader.observation(observation))
    raw, reference = samples[0]
    assert out["video"].shape == (3, 1, 640, 640) and torch.equal(out["video"][:, 0], reference["video"][:, 0])
    assert torch.equal(out["action"], reference["action"][:1]) and int(out["raw_action_dim"]) == 8
    plan = out["sequence_plan"]
    assert (plan.condition_frame_indexes_action, plan.action_start_frame_offset) == ([0], 0)
    assert out["ai_caption"] == reference["ai_caption"].replace(raw["ai_caption"], "put the marker in the cup")
    state = {key: observation[key] for key in cfg.camera_keys}
    state["observation.state"] = raw["action"][0].numpy()  # the assembled state (joints, 1 - gripper)
    assert torch.equal(reader.observation(state)["action"], raw["action"][:1])
    from embodied_core.errors import ObservationError

    with pytest.raises(ObservationError, match="no state"):
        reader.observation({key: observation[key] for key in cfg.camera_keys})
    with pytest.raises(ObservationError, match="uint8 RGB frame"):
        reader.observation({**observation, cfg.camera_keys[1]: observation[cfg.camera_keys[1]].astype(np.float32)})


def test_cli_reports_dead_settings_before_work() -> None:
    from tests.support import run_embodied

    base = ["train", "--model-name", "cosmos3_tiny", "--dataset-path", str(ROOT), "--dataset-strategy",
            "cosmos3_droid", "--train-iters", "1", "--num-workers", "0"]
    dead = run_embodied(*base, "--tokenizer-path", TOKENIZER, "data.target_h=480", "data.video_backend=pyav",
                        timeout=120)
    assert dead.returncode == 2 and "Traceback" not in dead.stderr
    assert "data.target_h: is not a setting of the cosmos3_droid strategy" in dead.stderr
    assert "data.video_backend: is not a setting" in dead.stderr and "--video-backend" in dead.stderr
