"""GR00T N1.6 transforms on a real LeRobot v3.0 dataset: the default strategy's samples (views, the Eagle prompt
with its image spans after the text, N1.6's min-max normalization, padding and masks, embodiment slots, inference
observations), the same dataset through ``--dataset-strategy groot_n1_7`` (meta/modality.json written here), the
Eagle processor folder round trip, and the errors that name what to change."""

from __future__ import annotations

import json
import shutil

import attrs
import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset, resolve_stats
from embodied_core.errors import ConfigError, DataError
from embodied_models.groot.trainer import modality_camera_keys
from embodied_models.groot_n1_6.checks import check_run_config, size_problems
from embodied_models.groot_n1_6.config import GrootN16DataConfig
from embodied_models.groot_n1_6.processor import EagleProcessor
from embodied_models.groot_n1_6.transforms import make_transforms
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"
MODALITY = {
    "state": {"arm": {"start": 0, "end": 5}, "gripper": {"start": 5, "end": 7}},
    "action": {"arm": {"start": 0, "end": 3}, "gripper": {"start": 3, "end": 4}},
    "video": {"front_view": {"original_key": "observation.images.front"},
              "wrist_view": {"original_key": "observation.images.wrist"}},
    "annotation": {"human.action.task_description": {"original_key": "task_index"}},
}


@pytest.fixture(scope="module")
def setup():
    config = load_config("groot_n1_6_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(V30)})
    dataset = build_training_dataset(config.training, config.data)
    stats = resolve_stats(dataset, format_name="lerobot_datasets")
    return config, dataset, stats, make_transforms(config.model, config.data, stats=stats)


def test_a_sample_becomes_views_the_eagle_prompt_state_and_padded_actions(setup):
    _, dataset, stats, transforms = setup
    sample = dataset[94 + 12]  # episode 3, frame 12: "stack the blue block"
    out = transforms.sample_transform(dict(sample))
    assert out["images"].shape == (2, 3, 32, 32) and out["images"].dtype == torch.uint8
    text = transforms.sample_transform.processor.tokenizer.decode(out["input_ids"].tolist())
    span = "<img>" + "<IMG_CONTEXT>" * 4 + "</img>"
    assert text == ("<|im_start|>system\nYou are a helpful assistant.\n<|im_end|>\n<|im_start|>user\n"
                    f"stack the blue block<image 1>{span}<image 2>{span}<|im_end|>\n")
    low, high = (torch.as_tensor(stats["observation.state"][k]) for k in ("min", "max"))
    expected = (2 * (sample["observation.state"].double() - low) / (high - low) - 1).clamp(-1, 1).float()
    torch.testing.assert_close(out["state"][0, :7], expected)
    assert out["state"].shape == (1, 32) and not out["state"][0, 7:].any()
    assert out["actions"].shape == (8, 32) and not out["actions"][:, 4:].any()
    assert torch.equal(out["action_mask"], torch.zeros(8, 32).index_fill_(1, torch.arange(4), 1.0))
    assert int(out["embodiment_id"]) == 10 and int(out["sample_index"]) == int(sample["index"])


def test_collate_left_pads_and_marks_the_image_tokens(setup):
    _, dataset, _, transforms = setup
    samples = [transforms.sample_transform(dict(dataset[i])) for i in (0, 94)]  # two task strings of other lengths
    batch = transforms.collate_fn(samples)
    lengths = [int(s["input_ids"].shape[0]) for s in samples]
    assert lengths[0] != lengths[1] and batch.input_ids.shape == (2, max(lengths))
    short = lengths.index(min(lengths))
    pad = max(lengths) - min(lengths)
    assert not batch.attention_mask[short, :pad].any() and batch.attention_mask[short, pad:].all()
    assert (batch.input_ids[short, :pad] == transforms.sample_transform.processor.pad_token_id).all()
    assert batch.image_mask.sum(1).tolist() == [8, 8] and not (batch.image_mask & ~batch.attention_mask).any()


def test_postprocess_inverts_the_min_max_normalization(setup):
    config, dataset, _, transforms = setup
    sample = dataset[40]
    model_space = torch.zeros(1, config.model.action_horizon, config.model.max_action_dim)
    model_space[0] = transforms.sample_transform(dict(sample))["actions"]
    back = transforms.postprocess_actions(model_space)[0]
    assert back.shape == (8, 4)
    torch.testing.assert_close(back, sample["action"], atol=1e-5, rtol=1e-5)  # min-max never clips dataset values


def test_an_inference_observation_needs_no_action(setup):
    _, dataset, _, transforms = setup
    sample = {k: v for k, v in dataset[3].items() if not k.startswith("action")}
    batch = transforms.collate_fn([transforms.sample_transform(sample)])
    assert batch.actions is None and batch.action_mask is None and batch.images.shape == (1, 2, 3, 32, 32)


def test_a_groot_n1_7_strategy_dataset_reads_the_same(setup, tmp_path):
    """meta/modality.json: cameras named by their video keys, the instruction from the annotation; same inputs."""
    _, dataset, stats, transforms = setup
    root = tmp_path / "v30"
    shutil.copytree(V30, root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (root / "meta" / "modality.json").write_text(json.dumps(MODALITY))
    config = load_config("groot_n1_6_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(root),
                                                      "dataset_strategy": "groot_n1_7"},
                         data={"language_key": "annotation.human.action.task_description"})
    config.data.camera_keys = modality_camera_keys(config)
    assert config.data.camera_keys == ["video.front_view", "video.wrist_view"]
    modality = build_training_dataset(config.training, config.data)
    ours = make_transforms(config.model, config.data, stats=stats).sample_transform(dict(modality[106]))
    plain = transforms.sample_transform(dict(dataset[106]))
    for key in ("images", "input_ids", "state", "actions", "action_mask"):
        assert torch.equal(ours[key], plain[key]), key


def test_the_processor_folder_round_trip_and_its_errors(tmp_path):
    tiny = EagleProcessor.tiny()
    folder = tiny.save(tmp_path / "proc")
    loaded = EagleProcessor.from_folder(folder)
    ids = tiny.prompt_ids("pick it", num_images=2, tokens_per_image=3)
    assert loaded.prompt_ids("pick it", num_images=2, tokens_per_image=3) == ids
    assert loaded.image_token_id == tiny.image_token_id and ids.count(tiny.image_token_id) == 6
    assert loaded.settings == tiny.settings
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": "{{ messages[0]['role'] }}"}))
    with pytest.raises(ConfigError, match=r"wrote the image placeholders \[\] for 2 image\(s\)"):
        EagleProcessor.from_folder(folder).prompt_ids("x", num_images=2, tokens_per_image=1)
    (folder / "preprocessor_config.json").write_text(json.dumps({"do_normalize": False}))
    with pytest.raises(ConfigError, match=r"do_normalize=False"):
        EagleProcessor.from_folder(folder)
    with pytest.raises(ConfigError, match=r"not a directory"):
        EagleProcessor.from_folder(tmp_path / "nothing")


def test_errors_name_the_setting(setup, tmp_path):
    config, dataset, stats, transforms = setup
    with pytest.raises(DataError, match=r"no 'observation\.state'.*data\.state_key"):
        make_transforms(config.model, config.data, stats={"action": stats["action"]})
    with pytest.raises(DataError, match=r"no camera 'observation\.images\.front'"):
        transforms.sample_transform({k: v for k, v in dataset[0].items() if k != "observation.images.front"})
    assert any("multiples of 2 x model.vision_patch_size = 16" in p
               for p in size_problems(config.model, attrs.evolve(config.data, image_size=(24, 24))))
    assert any("not below model.max_num_embodiments" in p
               for p in size_problems(attrs.evolve(config.model, max_num_embodiments=4), config.data))
    assert any("did you mean 'libero_panda'" in p for p in GrootN16DataConfig(embodiment_tag="libero_pand").validate())
    official = load_config("groot_n1_6", training={"dataset_format": "dummy_datasets"},
                           data={"state_dim": 4, "action_dim": 3, "camera_keys": ["cam"]})
    assert any("--tokenizer-path DIR" in p for p in check_run_config(official))
    wide = EagleProcessor.tiny()
    wide.settings["pixels_per_token"] = 28 * 28
    folder = wide.save(tmp_path / "proc")
    with pytest.raises(ConfigError, match=r"pixels_per_token 784 but one image token covers .* = 256 pixels"):
        make_transforms(config.model, attrs.evolve(config.data, tokenizer_path=str(folder)), stats=stats)
