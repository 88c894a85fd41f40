"""pi05_tiny as a policy: trained a few steps on a real LeRobot v3.0 dataset with a Hugging Face tokenizer, loaded
in a fresh process from the checkpoint alone (the tokenizer's original folder deleted), equal to the training path;
the statistics in the folder are exactly training's and are what normalizes at inference."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from embodied_core import load_policy
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import CheckpointError, ExternalReferenceError, ObservationError
from embodied_core.policy import folder as policy_folder
from embodied_core.policy.folder import read_stats, write_stats
from tests.core.policy_support import (
    observation_from_sample,
    predict_in_fresh_process,
    train,
    training_path_actions,
)
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"
WORDS = ["Task", "State", "Action", "pick", "the", "red", "cube", "stack", "blue", "block", ":", ",", ";"]


def _tokenizer(folder: Path) -> Path:
    """A word-level Hugging Face tokenizer covering the pi0.5 prompt of this dataset (271 ids, fits vocab 520)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    vocab.update({str(n): len(vocab) + n for n in range(256)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(str(folder))
    return folder


def _config(out: Path, tokenizer: Path) -> dict[str, object]:
    return {"training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(V30),
                         "dtype": "float32", "num_workers": 0, "per_device_batch_size": 2, "output_dir": str(out),
                         "train_iters": 2, "save_interval": 2, "lr_warmup_iters": 0, "seed": 11},
            "data": {"tokenizer_path": str(tokenizer)}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pi05_policy")
    tokenizer = _tokenizer(root / "tokenizer_src")
    trainer, kept = train(_config(root / "run", tokenizer))
    dataset = build_training_dataset(trainer.args, trainer.config.data)
    samples = [dataset[i] for i in (3, 64)]
    shutil.rmtree(tokenizer)  # from here on only the checkpoint's copy exists
    return {"root": root, "checkpoint": root / "run" / "checkpoints" / "step_2", "kept": kept, "samples": samples,
            "stats": trainer.data_stats, "cameras": list(trainer.config.data.camera_keys)}


def _observations(run) -> list[dict]:
    return [observation_from_sample(s, run["cameras"], "observation.state") for s in run["samples"]]


def test_fresh_process_policy_equals_the_training_path_exactly(run, tmp_path):
    doc = json.loads((run["checkpoint"] / "policy.json").read_text())
    assert doc["tokenizer"]["files"] == "tokenizer" and (run["checkpoint"] / "tokenizer" / "tokenizer.json").is_file()
    expected = training_path_actions(run["kept"].model, run["kept"].transforms, run["samples"], seed=0)
    got, metadata = predict_in_fresh_process(run["checkpoint"], _observations(run), tmp_path)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == (10, 4) and a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    assert metadata["needs_task"] is True and metadata["camera_keys"] == run["cameras"]
    assert metadata["model_name"] == "pi05_tiny" and metadata["plugin_version"]


def test_folder_statistics_are_trainings_exactly_and_are_used(run, tmp_path):
    stored = read_stats(run["checkpoint"] / "stats.safetensors")
    assert set(stored) == set(run["stats"])
    for key, entry in run["stats"].items():
        for stat, value in entry.items():
            assert stored[key][stat].dtype in (np.float64, np.int64)
            np.testing.assert_array_equal(stored[key][stat], value)
    # Inference reads the folder's statistics, nothing else: doubling the action q99 changes the actions.
    edited = tmp_path / "edited"
    shutil.copytree(run["checkpoint"], edited)
    stats = {k: dict(v) for k, v in stored.items()}
    stats["action"]["q99"] = stats["action"]["q99"] * 2
    write_stats(stats, edited / "stats.safetensors")
    obs = _observations(run)[0]
    original = load_policy(run["checkpoint"]).predict_action(obs)
    assert not np.array_equal(load_policy(edited).predict_action(obs), original)


def test_task_is_required_and_must_be_a_string(run):
    policy = load_policy(run["checkpoint"])
    obs = _observations(run)[0]
    with pytest.raises(ObservationError, match=r"missing key\(s\) \['task'\]"):
        policy.predict_action({k: v for k, v in obs.items() if k != "task"})
    with pytest.raises(ObservationError, match=r"observation\['task'\]: got int"):
        policy.predict_action({**obs, "task": 3})
    assert policy.predict_action(obs).shape == (10, 4)


def test_a_large_tokenizer_is_referenced_and_must_exist(tmp_path, monkeypatch):
    monkeypatch.setattr(policy_folder, "SMALL_FILES_BYTES", 10)
    tokenizer = _tokenizer(tmp_path / "big_tokenizer")
    train(_config(tmp_path / "run", tokenizer))
    checkpoint = tmp_path / "run" / "checkpoints" / "step_2"
    doc = json.loads((checkpoint / "policy.json").read_text())
    assert doc["tokenizer"] == {"source": str(tokenizer.resolve()), "files": None}
    assert not (checkpoint / "tokenizer").exists()
    with pytest.raises(ExternalReferenceError, match=r"tokenizer.source = .*big_tokenizer"):
        load_policy(checkpoint)  # outside the folder and its run: read only when allowed
    assert load_policy(checkpoint, allow_external_references=True).metadata.step == 2
    shutil.rmtree(tokenizer)
    with pytest.raises(CheckpointError, match=r"big_tokenizer.*does not exist on this machine"):
        load_policy(checkpoint, allow_external_references=True)


def test_a_hub_tokenizer_id_is_recorded_as_a_reference():
    from embodied_core.config.resolve import load_config
    from embodied_core.policy.writer import tokenizer_source

    config = load_config("pi05_tiny", data={"tokenizer_path": "google/paligemma-3b-pt-224"})
    assert tokenizer_source(config) == "google/paligemma-3b-pt-224"
