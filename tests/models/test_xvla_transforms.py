"""X-VLA transforms: left/top resize padding that is 0 after normalization (as lerobot pads), tokenizers padded to
the fixed length, action/state padding and normalization round trip, domain ids, and clear data errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError, DataError
from embodied_models.xvla.checks import size_problems
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.modeling import IMAGENET_MEAN, IMAGENET_STD, build_model
from embodied_models.xvla.tokenizer import ByteTokenizer, HFInstructionTokenizer
from embodied_models.xvla.transforms import make_transforms, resize_with_pad_left_top

CAMERAS = ["observation.images.front", "observation.images.wrist"]


def _configs(**data):
    config = load_config("xvla_tiny", training={"dataset_format": "dummy_datasets"},
                         data={"camera_keys": CAMERAS, "state_dim": 7, "action_dim": 4, **data})
    return config.model, config.data


def _sample(rng: np.random.Generator, *, action: bool = True, **extra) -> dict:
    sample = {CAMERAS[0]: torch.from_numpy(rng.integers(0, 256, (3, 120, 160), dtype=np.uint8)),
              CAMERAS[1]: torch.from_numpy(rng.integers(0, 256, (3, 72, 96), dtype=np.uint8)),
              "observation.state": torch.from_numpy(rng.normal(size=7).astype(np.float32)),
              "task": "pick the red cube", "episode_index": 2, "frame_index": 5, **extra}
    if action:
        sample["action"] = torch.from_numpy(rng.normal(size=(8, 4)).astype(np.float32))
    return sample


def _lerobot_pixels(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """lerobot's order: [0, 1] floats, ImageNet normalization, then resize and pad the normalized image with 0 on the
    left and top (``resize_with_pad(..., pad_value=0.0)``)."""
    x = image.float()[None] / 255.0
    x = (x - torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)) / torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    ratio = max(x.shape[3] / size[1], x.shape[2] / size[0])
    h, w = int(x.shape[2] / ratio), int(x.shape[3] / ratio)
    x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    return F.pad(x, (size[1] - w, 0, size[0] - h, 0), value=0.0)[0]


def test_resize_pads_left_and_top_and_the_padding_is_zero_after_normalization():
    model_cfg, data_cfg = _configs()
    rng = np.random.default_rng(0)
    sample = _sample(rng)
    transforms = make_transforms(model_cfg, data_cfg, stats=None)
    out = transforms.sample_transform(sample)
    assert out["images"].shape == (2, 3, 48, 48) and out["images"].dtype == torch.uint8
    # 160x120 -> 48x36 (12 rows on top); 96x72 -> 48x36 as well
    assert out["image_pad"].tolist() == [[12, 0], [12, 0]]
    assert not out["images"][:, :, :12].any()
    batch = transforms.collate_fn([out])
    pixels = build_model(model_cfg, data_cfg).pixel_values(batch)[0]
    for view, key in enumerate(CAMERAS):
        reference = _lerobot_pixels(sample[key], (48, 48))
        assert torch.equal(pixels[view, :, :12], torch.zeros(3, 12, 48))
        # the frames cross the worker boundary as uint8: within half a grey level of lerobot's float path
        torch.testing.assert_close(pixels[view], reference, atol=0.5 / 255 / 0.224 + 1e-5, rtol=0)
    image, pad = resize_with_pad_left_top(sample[CAMERAS[0]][:, :48, :48], (48, 48))
    assert pad == (0, 0) and torch.equal(image, sample[CAMERAS[0]][:, :48, :48])


def test_missing_cameras_and_extra_views_are_masked_zero_images():
    model_cfg, data_cfg = _configs(num_image_views=3)
    sample = _sample(np.random.default_rng(1))
    del sample[CAMERAS[1]]
    out = make_transforms(model_cfg, data_cfg, stats=None).sample_transform(sample)
    assert out["image_masks"].tolist() == [True, False, False]
    assert not out["images"][1:].any()


def test_byte_tokenizer_keeps_eos_and_pads_to_the_fixed_length():
    tok = ByteTokenizer()
    assert tok.encode("ab", 6) == [0, 4 + 97, 4 + 98, 2, 1, 1]
    assert tok.encode("abcdef", 4) == [0, 4 + 97, 4 + 98, 2]


def test_hf_tokenizer_from_a_local_folder_pads_and_truncates(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "pick": 4, "the": 5, "red": 6, "cube": 7}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(str(tmp_path))
    hf = HFInstructionTokenizer(tmp_path)
    assert hf.pad_id == 1 and hf.vocab_size == 8
    assert hf.encode("pick the red cube", 8) == [0, 4, 5, 6, 7, 2, 1, 1]
    assert hf.encode("pick the red cube", 4) == [0, 4, 5, 2]
    with pytest.raises(ConfigError, match="not a directory"):
        HFInstructionTokenizer(tmp_path / "absent")


def test_actions_are_padded_and_normalization_round_trips():
    model_cfg, data_cfg = _configs(normalization="mean_std")
    sample = _sample(np.random.default_rng(2))
    stats = {"observation.state": {"mean": np.full(7, 0.5), "std": np.full(7, 2.0)},
             "action": {"mean": np.arange(4.0), "std": np.full(4, 3.0)}}
    transforms = make_transforms(model_cfg, data_cfg, stats=stats)
    out = transforms.sample_transform(sample)
    assert out["actions"].shape == (8, 20) and not out["actions"][:, 4:].any()
    assert out["state"].shape == (20,) and not out["state"][7:].any()
    torch.testing.assert_close(out["state"][:7], (sample["observation.state"] - 0.5) / (2.0 + 1e-6))
    back = transforms.postprocess_actions(out["actions"][None])[0]
    torch.testing.assert_close(back, sample["action"], atol=1e-5, rtol=1e-5)
    inference = transforms.sample_transform({k: v for k, v in sample.items() if k != "action"})
    assert "actions" not in inference and "action_is_pad" not in inference
    with pytest.raises(DataError, match=r"statistics have no 'action'"):
        make_transforms(model_cfg, data_cfg, stats={"observation.state": stats["observation.state"]})


def test_domain_ids_from_the_config_or_a_sample_key():
    model_cfg, data_cfg = _configs(domain_id=2)
    rng = np.random.default_rng(3)
    assert make_transforms(model_cfg, data_cfg, stats=None).sample_transform(_sample(rng))["domain_id"] == 2
    model_cfg, data_cfg = _configs(domain_id_key="domain")
    transform = make_transforms(model_cfg, data_cfg, stats=None).sample_transform
    assert transform(_sample(rng, domain=torch.tensor([1])))["domain_id"] == 1
    with pytest.raises(DataError, match=r"domain: a domain id must be one integer in \[0, 3\)"):
        transform(_sample(rng, domain=torch.tensor(3)))
    with pytest.raises(DataError, match=r"data\.domain_id_key='domain': the sample has no such key"):
        transform(_sample(rng))


def test_bce_gripper_targets_outside_0_1_are_a_data_error():
    config = load_config("xvla_tiny", training={"dataset_format": "dummy_datasets"}, model={"action_mode": "ee6d"},
                         data={"camera_keys": CAMERAS, "state_dim": 7, "action_dim": 20})
    model_cfg, data_cfg = config.model, config.data
    rng = np.random.default_rng(4)
    sample = _sample(rng, action=False)
    actions = torch.zeros(8, 20)
    actions[:, 9] = 1.0
    transform = make_transforms(model_cfg, data_cfg, stats=None).sample_transform
    assert transform({**sample, "action": actions})["actions"].shape == (8, 20)
    actions[3, 19] = 1.7
    with pytest.raises(DataError, match=r"action channel 19 \(episode 2, frame 5\): model.action_mode=ee6d .* "
                                        r"\[0, 1\] \(got 1.7\)"):
        transform({**sample, "action": actions})
    with pytest.raises(DataError, match="no task string"):
        transform({k: v for k, v in sample.items() if k != "task"})


def test_action_space_rules_name_the_fix():
    data = XvlaDataConfig(camera_keys=["a"], state_dim=7, action_dim=8)
    problems = size_problems(XvlaModelConfig(action_mode="franka_joint7"), data)
    assert problems == ["model.action_mode=franka_joint7 trains and returns 7 action channels but data.action_dim is "
                        "8; use model.action_mode=auto for another width"]
    problems = size_problems(XvlaModelConfig(action_mode="joint"), XvlaDataConfig(
        camera_keys=["a"], state_dim=7, action_dim=14, normalization="quantile"))
    assert any("BCE" in p and "data.normalization=none" in p for p in problems)
    problems = size_problems(XvlaModelConfig(action_mode="ee6d", max_state_dim=8), XvlaDataConfig(
        camera_keys=["a"], state_dim=7, action_dim=20))
    assert problems == ["model.action_mode=ee6d zeroes state channels [9, 19] but the state is 8 wide "
                        "(model.max_state_dim); raise model.max_state_dim to at least 20"]
    problems = size_problems(XvlaModelConfig(action_mode="auto"), XvlaDataConfig(
        camera_keys=["a", "b", "c"], state_dim=40, action_dim=24, image_size=(2000, 2000), domain_id=30))
    assert len(problems) == 6 and all(word in " ".join(problems) for word in (
        "model.max_action_dim", "model.max_state_dim", "model.num_domains", "model.vision_max_position_embeddings",
        "model.text_max_position_embeddings", "model.max_len_seq"))
