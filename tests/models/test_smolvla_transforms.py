"""SmolVLA data pipeline: image slots and masks, left/top resize-with-pad on the device, mean/std normalization and
padding, the newline-terminated task through the built-in and a Hugging Face tokenizer, validation, light spec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import ConfigError, DataError
from embodied_core.validation import validate_run_config
from embodied_models.smolvla.images import prepare_images, resize_with_pad_left_top
from embodied_models.smolvla.tokenizer import TinyByteTokenizer, task_text
from embodied_models.smolvla.transforms import make_transforms
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"
CAMERAS = ["observation.images.front", "observation.images.wrist"]
WORDS = ["pick", "the", "red", "cube", "stack", "blue", "block", "up", "and", "place"]


def write_tokenizer(folder: Path) -> Path:
    """A word-level Hugging Face tokenizer (pad 0, bos 1 added to every text) saved to ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "<unk>": 2, "\n": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(pattern="\n", behavior="isolated"),
                                                 pre_tokenizers.Split(pattern=" ", behavior="removed")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                            unk_token="<unk>").save_pretrained(str(folder))
    return folder


def _config(**data):
    return load_config("smolvla_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(V30)},
                       data=data)


@pytest.fixture(scope="module")
def v30():
    config = _config()
    dataset = build_training_dataset(config.training, config.data)
    return config, dataset, [dataset[i] for i in (0, 29)]  # an episode's first and last frame


def test_resize_pads_left_and_top_and_keeps_the_aspect():
    image = torch.rand(1, 3, 48, 96)
    out = resize_with_pad_left_top(image, (64, 64))
    assert out.shape == (1, 3, 64, 64)
    assert (out[:, :, :32] == 0).all()  # 32 rows of padding on top, none at the bottom (pi0.5 centres)
    torch.testing.assert_close(out[:, :, 32:], F.interpolate(image, size=(32, 64), mode="bilinear",
                                                             align_corners=False), atol=0, rtol=0)
    tall = resize_with_pad_left_top(torch.rand(1, 3, 96, 48), (64, 64))
    assert (tall[..., :32] == 0).all() and not (tall[..., 32:] == 0).all()  # padding on the left
    assert resize_with_pad_left_top(out, (64, 64)) is out


def test_prepare_images_maps_uint8_frames_to_minus_one_one_at_model_size():
    frame = torch.full((2, 3, 48, 96), 255, dtype=torch.uint8)
    out = prepare_images((frame, torch.zeros(2, 3, 64, 64)), (64, 64))
    assert out.shape == (2, 2, 3, 64, 64) and out.dtype == torch.float32
    assert (out[:, 0, :, :32] == -1).all() and (out[:, 0, :, 32:] == 1).all()
    with pytest.raises(ValueError, match=r"image slot 0: float images must already be at the model resolution"):
        prepare_images((torch.zeros(1, 3, 32, 32),), (64, 64))


def test_real_dataset_sample(v30):
    config, dataset, samples = v30
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    out = transforms.sample_transform(samples[1])
    assert [tuple(i.shape) for i in out["images"]] == [(3, 120, 160), (3, 72, 96)]  # native sizes, uint8
    assert all(i.dtype == torch.uint8 for i in out["images"]) and out["image_masks"].tolist() == [True, True]
    stats = dataset.stats["observation.state"]
    mean, std = torch.as_tensor(stats["mean"]), torch.as_tensor(stats["std"])
    expected_state = (samples[1]["observation.state"].double() - mean) / (std + 1e-6)
    torch.testing.assert_close(out["state"][:7], expected_state.float(), atol=1e-5, rtol=1e-5)
    assert out["state"].shape == (32,) and not out["state"][7:].any()
    ids = TinyByteTokenizer().encode(samples[1]["task"] + "\n")
    assert out["tokens"][: len(ids)].tolist() == ids and not out["tokens"][len(ids):].any()
    assert out["token_mask"].sum() == len(ids) and out["tokens"].shape == (config.model.tokenizer_max_length,)
    assert out["actions"].shape == (10, 32) and not out["actions"][:, 4:].any()
    assert out["action_is_pad"].tolist() == samples[1]["action_is_pad"].tolist() and out["action_is_pad"].any()
    batch = transforms.collate_fn([transforms.sample_transform(s) for s in samples])
    torch.testing.assert_close(transforms.postprocess_actions(batch.actions),  # float32 round trip
                               torch.stack([s["action"] for s in samples]), atol=1e-5, rtol=1e-4)
    # an observation as a robot sends it: channels-last frames, no action
    observation = {k: v for k, v in samples[0].items() if not k.startswith("action")}
    observation[CAMERAS[0]] = observation[CAMERAS[0]].permute(1, 2, 0).numpy()
    inference = transforms.collate_fn([transforms.sample_transform(observation)])
    assert inference.actions is None and inference.images[0].shape == (1, 3, 120, 160)
    assert torch.equal(inference.images[0][0], transforms.sample_transform(samples[0])["images"][0])


def test_missing_and_empty_cameras_are_black_masked_slots(v30):
    config, dataset, samples = v30
    config = _config(empty_cameras=1)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    lacking = {k: v for k, v in samples[0].items() if k != CAMERAS[1]}
    batch = transforms.collate_fn([transforms.sample_transform(samples[1]), transforms.sample_transform(lacking)])
    assert batch.image_masks.tolist() == [[True, True, False], [True, False, False]]
    assert batch.images[1].shape == (2, 3, 72, 96) and not batch.images[1][1].any()
    assert batch.images[2].shape == (2, 3, 64, 64) and not batch.images[2].any()


def test_bad_samples_and_stats_are_data_errors(v30):
    config, dataset, samples = v30
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    with pytest.raises(DataError, match=r"observation.state: last dimension is 3 .* set data.state_dim=3"):
        transforms.sample_transform({**samples[0], "observation.state": torch.zeros(3)})
    with pytest.raises(DataError, match=r"no task string"):
        transforms.sample_transform({k: v for k, v in samples[0].items() if k != "task"})
    with pytest.raises(DataError, match=r"statistics have no 'action'"):
        make_transforms(config.model, config.data, stats={"observation.state": dataset.stats["observation.state"]})
    raw = make_transforms(config.model, _config(normalization="none").data, stats=None)
    out = raw.sample_transform(samples[0])
    torch.testing.assert_close(out["state"][:7], samples[0]["observation.state"].float())


def test_hugging_face_tokenizer_from_a_folder(v30, tmp_path):
    config, dataset, samples = v30
    folder = write_tokenizer(tmp_path / "tok")
    transforms = make_transforms(config.model, _config(tokenizer_path=str(folder)).data, stats=dataset.stats)
    out = transforms.sample_transform({**samples[0], "task": "pick the red cube"})
    assert out["tokens"][:6].tolist() == [1, 4, 5, 6, 7, 3]  # its own special token, the words, the newline
    assert out["token_mask"].sum() == 6 and not out["tokens"][6:].any()
    assert task_text("done\n") == "done\n" and task_text("go") == "go\n"
    long = transforms.sample_transform({**samples[0], "task": " ".join(["cube"] * 100)})
    assert out["tokens"].shape == long["tokens"].shape and long["token_mask"].all()  # truncated to 48
    with pytest.raises(ConfigError, match="not a directory"):
        make_transforms(config.model, _config(tokenizer_path=str(tmp_path / "missing")).data, stats=dataset.stats)


def test_validation_names_the_fix(monkeypatch):
    monkeypatch.delenv("TOKENIZER_PATH", raising=False)
    config = load_config("smolvla", training={"dataset_format": "dummy_datasets"},
                         data={"action_dim": 40, "image_size": [500, 500]}, environ={})
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    message = str(info.value)
    assert "set model.max_action_dim=40" in message
    assert "--tokenizer-path" in message
    assert "not a multiple of model.vision_patch_size 16" in message
    config = load_config("smolvla_tiny", training={"dataset_format": "dummy_datasets"},
                         model={"num_expert_layers": 3, "expert_width_multiplier": 0.3})
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    assert "num_expert_layers 3 must divide model.num_vlm_layers 4" in str(info.value)
    assert "expert width of 19" in str(info.value)


def test_spec_module_is_light():
    code = ("import sys, embodied_models.smolvla.spec as s; "
            "assert s.SMOLVLA.name == 'smolvla' and s.SMOLVLA_TINY.name == 'smolvla_tiny'; "
            "from embodied_models.smolvla.config import SmolVLAModelConfig as C; "
            "assert C(tokenizer='tiny', vocab_size=300).validate() == []; "
            "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr

