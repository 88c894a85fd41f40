"""GR00T N1.7 transforms on the groot_n1_7 strategy's samples of a real LeRobot v3.0 dataset (meta/modality.json
written here): views, the Qwen3-VL prompt, percentile normalization with GR00T's semantics, padding and masks,
embodiment slots, inference observations, and the errors that name what to change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset, resolve_stats
from embodied_core.errors import ConfigError, DataError
from embodied_models.groot_n1_7.checks import size_problems
from embodied_models.groot_n1_7.config import GrootDataConfig
from embodied_models.groot_n1_7.normalize import GrootNormalizer
from embodied_models.groot_n1_7.processor import VLProcessor
from embodied_models.groot_n1_7.trainer import modality_camera_keys
from embodied_models.groot_n1_7.transforms import formalize, make_transforms
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"
MODALITY = {
    "state": {"arm": {"start": 0, "end": 5}, "gripper": {"start": 5, "end": 7}},
    "action": {"arm": {"start": 0, "end": 3}, "gripper": {"start": 3, "end": 4}},
    "video": {"front_view": {"original_key": "observation.images.front"},
              "wrist_view": {"original_key": "observation.images.wrist"}},
    "annotation": {"human.action.task_description": {"original_key": "task_index"}},
}


def _groot_copy(tmp_path: Path) -> Path:
    root = tmp_path / "v30"
    shutil.copytree(V30, root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (root / "meta" / "modality.json").write_text(json.dumps(MODALITY))
    return root


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = _groot_copy(tmp_path_factory.mktemp("groot_transforms"))
    config = load_config("groot_n1_7_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(root),
                                                      "dataset_strategy": "groot_n1_7"})
    renamed = modality_camera_keys(config)
    assert renamed == ["video.front_view", "video.wrist_view"]  # the trainer's names for the dataset cameras
    config.data.camera_keys = renamed
    dataset = build_training_dataset(config.training, config.data)
    stats = resolve_stats(dataset, format_name="lerobot_datasets")
    return config, dataset, stats, make_transforms(config.model, config.data, stats=stats)


def test_a_strategy_sample_becomes_views_prompt_state_and_padded_actions(setup):
    _, dataset, stats, transforms = setup
    sample = dataset[94 + 12]  # episode 3, frame 12: "stack the blue block"
    out = transforms.sample_transform(dict(sample))
    assert out["images"].shape == (2, 3, 32, 32) and out["images"].dtype == torch.uint8
    text = transforms.sample_transform.processor.tokenizer.decode(out["input_ids"].tolist())
    assert text.endswith("<|vision_end|>stack the blue block<|im_end|>\n") and text.count("<|image_pad|>") == 8
    q01, q99 = (torch.as_tensor(stats["observation.state"][k]) for k in ("q01", "q99"))
    expected = (2 * (sample["observation.state"].double() - q01) / (q99 - q01) - 1).clamp(-1, 1).float()
    torch.testing.assert_close(out["state"][0, :7], expected)
    assert out["state"].shape == (1, 32) and not out["state"][0, 7:].any()
    assert out["actions"].shape == (8, 32) and not out["actions"][:, 4:].any()
    assert torch.equal(out["action_mask"], torch.zeros(8, 32).index_fill_(1, torch.arange(4), 1.0))
    assert int(out["embodiment_id"]) == 10 and int(out["sample_index"]) == int(sample["index"])


def test_postprocess_inverts_the_action_normalization(setup):
    config, dataset, stats, transforms = setup
    sample = dataset[40]
    out = transforms.sample_transform(dict(sample))
    model_space = torch.zeros(1, config.model.action_horizon, config.model.max_action_dim)
    model_space[0] = out["actions"]
    back = transforms.postprocess_actions(model_space)[0]
    raw = sample["action"]
    q01, q99 = (torch.as_tensor(stats["action"][k]).float() for k in ("q01", "q99"))
    inside = (raw >= q01) & (raw <= q99)
    assert back.shape == (8, 4) and inside.any()
    torch.testing.assert_close(back[inside], raw[inside], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(back[~inside], torch.maximum(torch.minimum(raw, q99), q01)[~inside], atol=1e-5,
                               rtol=1e-5)  # clipped, as GR00T's decoder clips to [-1, 1]


def test_an_inference_observation_needs_no_action(setup):
    _, dataset, _, transforms = setup
    sample = {k: v for k, v in dataset[3].items() if not k.startswith("action")}
    batch = transforms.collate_fn([transforms.sample_transform(sample)])
    assert batch.actions is None and batch.action_mask is None and batch.images.shape == (1, 2, 3, 32, 32)


def test_padded_steps_can_leave_the_loss(setup):
    config, dataset, stats, _ = setup
    data = attrs.evolve(config.data, mask_padded_actions=True)
    transforms = make_transforms(config.model, data, stats=stats)
    last = dataset[36]  # last frame of episode 0 (37 frames): 7 of the 8 horizon steps repeat it
    assert last["action_is_pad"].tolist() == [False] + [True] * 7
    mask = transforms.sample_transform(dict(last))["action_mask"]
    assert mask[0, :4].tolist() == [1.0] * 4 and not mask[1:].any()


def test_gr00t_normalization_semantics():
    stats = {"x": {"q01": np.array([0.0, 2.0, -1.0]), "q99": np.array([4.0, 2.0, 1.0]),
                   "mean": np.array([1.0, 2.0, 0.0]), "std": np.array([2.0, 0.0, 1.0])}}
    norm = GrootNormalizer.from_stats(stats, "x", "percentile", clip=True, setting="data.normalization")
    y = norm.normalize(torch.tensor([[1.0, 5.0, 3.0]]))
    assert y.tolist() == [[-0.5, 0.0, 1.0]]  # a constant dimension maps to 0, an outlier is clipped
    assert norm.unnormalize(torch.tensor([[-0.5, 0.3, 2.0]])).tolist() == [[1.0, 2.0, 1.0]]
    unclipped = GrootNormalizer.from_stats(stats, "x", "percentile", clip=False, setting="data.normalization")
    assert unclipped.normalize(torch.tensor([[1.0, 5.0, 3.0]])).tolist() == [[-0.5, 0.0, 3.0]]
    mean_std = GrootNormalizer.from_stats(stats, "x", "mean_std", clip=True, setting="data.normalization")
    assert mean_std.normalize(torch.tensor([[3.0, 7.0, 1.0]])).tolist() == [[1.0, 7.0, 1.0]]  # std 0 passes through
    with pytest.raises(DataError, match=r"statistics of 'x' lack min, max"):
        GrootNormalizer.from_stats(stats, "x", "min_max", clip=True, setting="data.normalization")


def test_formalize_language():
    assert formalize("Pick up the Yellow bottle, please!") == "pick up the yellow bottle please"


def test_errors_name_the_setting(setup, tmp_path):
    config, dataset, stats, transforms = setup
    with pytest.raises(DataError, match=r"no 'observation\.state'.*data\.state_key"):
        make_transforms(config.model, config.data, stats={"action": stats["action"]})
    with pytest.raises(DataError, match=r"no camera 'video\.front_view'"):
        transforms.sample_transform({k: v for k, v in dataset[0].items() if k != "video.front_view"})
    assert any("multiples of model.vision_patch_size x model.vision_merge_size = 16" in p
               for p in size_problems(config.model, attrs.evolve(config.data, image_size=(24, 24))))
    assert any("not below model.max_num_embodiments" in p
               for p in size_problems(attrs.evolve(config.model, max_num_embodiments=4), config.data))
    assert any("did you mean 'libero_sim'" in p for p in GrootDataConfig(embodiment_tag="libero_sm").validate())
    # a processor that would upscale 32x32 views: its pixel bounds are part of the Qwen3-VL logic
    tiny = VLProcessor.tiny()
    tiny.image_settings["size"] = {"shortest_edge": 64 * 64, "longest_edge": 1 << 20}
    folder = tiny.save(tmp_path / "proc")
    with pytest.raises(ConfigError, match=r"would resize such views to \(64, 64\).*data\.image_size=\[64, 64\]"):
        make_transforms(config.model, attrs.evolve(config.data, tokenizer_path=str(folder)), stats=stats)
