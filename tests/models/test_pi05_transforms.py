"""pi0.5 data pipeline: cameras and masks, resize-with-pad, normalization, state prompt, tokenizers, validation."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError, DataError
from embodied_core.validation import validate_run_config
from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.modeling import build_model
from embodied_models.pi05.tokenizer import TINY_VOCAB_SIZE, TinyTokenizer
from embodied_models.pi05.transforms import discretize_state, make_transforms, pi05_prompt, resize_with_pad


def _configs(**data):
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"},
                         data={"camera_keys": ["observation.images.front", "observation.images.wrist"],
                               "num_image_slots": 3, "state_dim": 2, "action_dim": 3, "action_horizon": 4, **data})
    return config.model, config.data


def _sample(**extra):
    sample = {
        "observation.images.front": torch.full((3, 48, 64), 200, dtype=torch.uint8),
        "observation.state": torch.tensor([0.1, 11.0]),
        "action": torch.tensor([[1.0, 2.0, 3.0]] * 4),
        "action_is_pad": torch.tensor([False, False, True, True]),
        "task": "pick_up the\ncube ",
    }
    sample.update(extra)
    return sample


STATS = {"observation.state": {"q01": np.array([-1.0, 0.0]), "q99": np.array([1.0, 20.0])},
         "action": {"q01": np.zeros(3), "q99": np.full(3, 4.0)}}


def test_resize_with_pad_keeps_aspect_and_centres():
    image = torch.full((3, 48, 96), 255, dtype=torch.uint8)
    out = resize_with_pad(image, (56, 56))
    assert out.shape == (3, 56, 56) and out.dtype == torch.uint8
    assert (out[:, :14] == 0).all() and (out[:, 42:] == 0).all()  # 28 rows of content, centred
    assert (out[:, 14:42] == 255).all()
    assert resize_with_pad(out, (56, 56)) is out


def test_state_bins_and_prompt():
    bins = discretize_state(np.array([-1.0, -0.999, 0.0, 0.999, 1.0, 5.0, -5.0]))
    assert bins.tolist() == [0, 0, 128, 255, 255, 255, 0]
    assert pi05_prompt(" pick_up the\ncube ", [0, 128]) == "Task: pick up the cube, State: 0 128;\nAction: "


def test_tiny_tokenizer_spells_numbers_as_single_ids():
    tok = TinyTokenizer()
    ids = tok.encode("State: 12 255 256 007;")
    assert ids[0] == 2 and max(ids) < TINY_VOCAB_SIZE
    assert tok.decode(ids) == "State: 12 255 256 007;"
    assert len(tok.encode("12")) == 2 and len(tok.encode("256")) == 4  # BOS + one id vs BOS + three bytes


def test_sample_transform_and_collate():
    model_cfg, data_cfg = _configs()
    transforms = make_transforms(model_cfg, data_cfg, stats=STATS)
    out = transforms.sample_transform(_sample())
    assert out["images"].shape == (3, 3, 56, 56) and out["images"].dtype == torch.uint8
    assert out["image_masks"].tolist() == [True, False, False]  # wrist absent, third slot unused
    assert (out["images"][1:] == 0).all()
    # state (0.1, 11) -> quantile-normalized (0.1, 0.1) -> bin 140; the zero padding -> bin 128
    text = TinyTokenizer().decode(out["tokens"][out["token_mask"]].tolist())
    bins = ["140", "140"] + ["128"] * (model_cfg.max_state_dim - 2)
    assert text == "Task: pick up the cube, State: " + " ".join(bins) + ";\nAction: "
    assert not out["token_mask"][out["token_mask"].sum():].any()
    torch.testing.assert_close(out["actions"][:, :3], torch.tensor([[-0.5, 0.0, 0.5]] * 4), atol=1e-5, rtol=0)
    assert (out["actions"][:, 3:] == 0).all() and out["actions"].shape == (4, model_cfg.max_action_dim)
    batch = transforms.collate_fn([out, out])
    assert isinstance(batch, Pi05PreparedBatch)
    assert batch.images.shape == (2, 3, 3, 56, 56) and batch.action_is_pad.tolist()[0] == [False, False, True, True]
    moved = batch.to("cpu")
    assert moved.tokens.dtype == torch.long
    unnorm = transforms.sample_transform.unnormalize_actions(batch.actions)
    torch.testing.assert_close(unnorm, torch.tensor([[[1.0, 2.0, 3.0]] * 4] * 2), atol=1e-4, rtol=0)


def test_uint8_images_reach_the_model_as_minus_one_to_one():
    model_cfg, data_cfg = _configs()
    model = build_model(model_cfg, data_cfg).eval()
    u8 = torch.randint(0, 256, (1, 2, 3, 56, 56), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(model.embed_images(u8), model.embed_images(u8.float() / 255 * 2 - 1))


def test_missing_keys_and_wrong_dims_are_clear_errors():
    model_cfg, data_cfg = _configs()
    transform = make_transforms(model_cfg, data_cfg, stats=STATS).sample_transform
    with pytest.raises(DataError, match=r"sample has no 'observation\.state'"):
        transform({k: v for k, v in _sample().items() if k != "observation.state"})
    with pytest.raises(DataError, match=r"data\.state_dim=3"):
        transform(_sample(**{"observation.state": torch.zeros(3)}))
    with pytest.raises(DataError, match="task string"):
        transform({k: v for k, v in _sample().items() if k != "task"})


def test_stats_without_the_state_key_name_it():
    model_cfg, data_cfg = _configs()
    with pytest.raises(DataError, match=r"no 'observation\.state'.*cover action"):
        make_transforms(model_cfg, data_cfg, stats={"action": STATS["action"]})
    with pytest.raises(DataError, match=r"set data\.normalization=none"):
        make_transforms(model_cfg, data_cfg, stats=None)


WORDS = ["<pad>", "<eos>", "<bos>", "<unk>", "Task", ":", "pick", "up", "the", "cube", ",", "State", ";", "Action",
         "push", "block", "to", "goal", *[str(i) for i in range(256)]]


def _write_tokenizer(folder):
    """A small word-level Hugging Face tokenizer directory (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=inner, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                            unk_token="<unk>").save_pretrained(folder)
    return folder


def test_local_hugging_face_tokenizer_directory(tmp_path):
    words = WORDS
    _write_tokenizer(tmp_path)
    model_cfg, data_cfg = _configs(tokenizer_path=str(tmp_path))
    transform = make_transforms(model_cfg, data_cfg, stats=STATS).sample_transform
    out = transform(_sample())
    ids = out["tokens"][out["token_mask"]].tolist()
    assert ids[:6] == [words.index(w) for w in ("Task", ":", "pick", "up", "the", "cube")]
    assert ids.count(words.index("140")) == 2
    assert ids.count(words.index("128")) == model_cfg.max_state_dim - 2


def test_validation_names_the_fix(monkeypatch):
    monkeypatch.delenv("TOKENIZER_PATH", raising=False)
    config = load_config("pi05", training={"dataset_format": "dummy_datasets"}, data={"action_dim": 40},
                         environ={})
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    message = str(info.value)
    assert "set model.max_action_dim=40" in message
    assert "--tokenizer-path" in message


def test_tokenizer_path_flag_through_the_trainer(tmp_path, monkeypatch):
    from embodied_core import Trainer

    monkeypatch.setenv("TOKENIZER_PATH", "")  # restored after the test: Trainer exports --tokenizer-path
    folder = _write_tokenizer(tmp_path / "tok")
    result = Trainer({"training": {
        "model_name": "pi05_tiny", "dataset_format": "dummy_datasets", "train_iters": 1, "dtype": "float32",
        "per_device_batch_size": 2, "num_workers": 0, "output_dir": str(tmp_path / "run"), "save_interval": 0,
        "lr_warmup_iters": 0, "tokenizer_path": str(folder)}}).train()
    assert result.step == 1
    assert os.environ["TOKENIZER_PATH"] == str(folder)
    with pytest.raises(ConfigError, match="not a directory"):
        make_transforms(*_configs(tokenizer_path=str(tmp_path / "missing")), stats=STATS)


def test_spec_module_is_light():
    import subprocess
    import sys

    code = ("import sys, embodied_models.pi05.spec as s; "
            "assert s.PI05.name == 'pi05' and s.PI05_TINY.name == 'pi05_tiny'; "
            "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
