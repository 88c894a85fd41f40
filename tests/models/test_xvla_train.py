"""xvla_tiny end to end on a real LeRobot v3.0 video dataset: the CLI trains it from a 2toINF-layout checkpoint with a
tokenizer from a local folder and the loss falls; a wrong action space is a usage error; the policy folder loaded in
a fresh process (the tokenizer's original folder deleted) equals the training path exactly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from embodied_core import load_policy
from embodied_core.cli.main import main as cli_main
from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import ObservationError
from embodied_models.xvla.modeling import build_model
from tests.core.policy_support import observation_from_sample, predict_in_fresh_process, train, training_path_actions
from tests.models.test_xvla_model import _to_vendored
from tests.support import DATASETS_DIR, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"
WORDS = ["pick", "the", "red", "cube", "stack", "blue", "block"]


def _tokenizer(folder: Path) -> Path:
    """A word-level tokenizer with BART's special ids (0 <s>, 1 <pad>, 2 </s>) covering this dataset's tasks."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(str(folder))
    return folder


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cli_trains_from_an_official_layout_checkpoint_and_the_loss_falls(tmp_path):
    config = load_config("xvla_tiny", training={"dataset_format": "dummy_datasets"},
                         data={"camera_keys": ["observation.images.front", "observation.images.wrist"],
                               "state_dim": 7, "action_dim": 4})
    torch.manual_seed(0)
    state = build_model(config.model, config.data).state_dict()
    official = tmp_path / "x-vla-tiny" / "model.safetensors"  # the 2toINF layout: vendored Florence-2, no prefix
    official.parent.mkdir()
    save_file(dict(_to_vendored(k, v.contiguous()) for k, v in state.items()
                   if k != "vlm.language_model.encoder.embed_tokens.weight"), official)
    out = tmp_path / "run"
    proc = run_embodied("train", "--model-name", "xvla_tiny", "--dataset-path", str(V30), "--tokenizer-path",
                        str(_tokenizer(tmp_path / "tokenizer")), "--pretrained-checkpoint", str(official.parent),
                        "--train-iters", "12", "--per-device-batch-size", "6", "--num-workers", "0", "--dtype",
                        "float32", "--lr-base", "2e-3", "--lr-warmup-iters", "0", "--save-interval", "12",
                        "--log-interval", "1", "--seed", "3", "--output-dir", str(out), "data.normalization=mean_std")
    assert proc.returncode == 0, proc.stderr[-4000:]
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    print(f"xvla_tiny CLI losses: {[round(x, 3) for x in losses]}")
    assert len(losses) == 12 and all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < 0.6 * np.mean(losses[:4])
    assert (out / "checkpoints" / "step_12" / "policy.json").is_file()


def test_an_action_space_that_does_not_fit_the_dataset_is_a_usage_error(tmp_path, capsys):
    code = cli_main(["train", "--model-name", "xvla_tiny", "--dataset-path", str(V30), "--train-iters", "1",
                     "--output-dir", str(tmp_path / "run"), "model.action_mode=franka_joint7"])
    err = capsys.readouterr().err
    assert code == 2
    assert "model.action_mode=franka_joint7 trains and returns 7 action channels but data.action_dim is 4" in err
    assert "Traceback" not in err and not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("xvla_policy")
    tokenizer = _tokenizer(root / "tokenizer_src")
    trainer, kept = train({
        "training": {"model_name": "xvla_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(V30),
                     "dtype": "float32", "num_workers": 0, "per_device_batch_size": 2, "output_dir": str(root / "run"),
                     "train_iters": 2, "save_interval": 2, "lr_warmup_iters": 0, "seed": 11},
        "data": {"tokenizer_path": str(tokenizer), "normalization": "mean_std"}})
    dataset = build_training_dataset(trainer.args, trainer.config.data)
    samples = [dataset[i] for i in (3, 64)]
    shutil.rmtree(tokenizer)  # from here on only the checkpoint's copy exists
    return {"checkpoint": root / "run" / "checkpoints" / "step_2", "kept": kept, "samples": samples,
            "cameras": list(trainer.config.data.camera_keys)}


def test_fresh_process_policy_equals_the_training_path_exactly(policy_run, tmp_path):
    run = policy_run
    doc = json.loads((run["checkpoint"] / "policy.json").read_text())
    assert doc["tokenizer"]["files"] == "tokenizer" and (run["checkpoint"] / "tokenizer" / "tokenizer.json").is_file()
    assert doc["data_config"]["normalization"] == "mean_std" and doc["model_config"]["action_mode"] == "auto"
    expected = training_path_actions(run["kept"].model, run["kept"].transforms, run["samples"], seed=0)
    observations = [observation_from_sample(s, run["cameras"], "observation.state") for s in run["samples"]]
    got, metadata = predict_in_fresh_process(run["checkpoint"], observations, tmp_path)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == (8, 4) and a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    assert metadata["model_name"] == "xvla_tiny" and metadata["needs_task"] is True
    assert metadata["camera_keys"] == run["cameras"] == ["observation.images.front", "observation.images.wrist"]


def test_policy_needs_the_task(policy_run):
    policy = load_policy(policy_run["checkpoint"])
    obs = observation_from_sample(policy_run["samples"][0], policy_run["cameras"], "observation.state")
    with pytest.raises(ObservationError, match=r"missing key\(s\) \['task'\]"):
        policy.predict_action({k: v for k, v in obs.items() if k != "task"})
    assert policy.predict_action(obs).shape == (8, 4)
