"""smolvla_tiny as a policy: trained two steps on a real LeRobot v3.0 dataset with a Hugging Face tokenizer, loaded in
a fresh process from the checkpoint alone (the tokenizer's original folder deleted), equal to the training path
(frames resized on the device from their native sizes, stats and tokenizer from the folder)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from embodied_core import load_policy
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import ObservationError
from tests.core.policy_support import (
    observation_from_sample,
    predict_in_fresh_process,
    train,
    training_path_actions,
)
from tests.models.test_smolvla_transforms import write_tokenizer
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("smolvla_policy")
    tokenizer = write_tokenizer(root / "tokenizer_src")
    trainer, kept = train({
        "training": {"model_name": "smolvla_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(V30),
                     "dtype": "float32", "num_workers": 0, "per_device_batch_size": 2, "output_dir": str(root / "run"),
                     "train_iters": 2, "save_interval": 2, "lr_warmup_iters": 0, "seed": 11},
        "data": {"tokenizer_path": str(tokenizer)}})
    dataset = build_training_dataset(trainer.args, trainer.config.data)
    samples = [dataset[i] for i in (3, 64)]
    shutil.rmtree(tokenizer)  # from here on only the checkpoint's copy exists
    return {"checkpoint": root / "run" / "checkpoints" / "step_2", "kept": kept, "samples": samples,
            "cameras": list(trainer.config.data.camera_keys)}


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
    assert metadata["model_name"] == "smolvla_tiny"


def test_observation_errors_name_the_key(run):
    policy = load_policy(run["checkpoint"])
    obs = _observations(run)[0]
    with pytest.raises(ObservationError, match=r"missing key\(s\) \['task'\]"):
        policy.predict_action({k: v for k, v in obs.items() if k != "task"})
    with pytest.raises(ObservationError, match=r"observation.images.wrist"):
        policy.predict_action({k: v for k, v in obs.items() if k != "observation.images.wrist"})
    # another task changes the actions (same seed): the language reaches the expert through the VLM's keys/values
    policy = load_policy(run["checkpoint"])
    first = policy.predict_action(obs)
    policy = load_policy(run["checkpoint"])
    other = policy.predict_action({**obs, "task": "stack the blue block"})
    assert first.shape == other.shape == (10, 4) and not np.array_equal(first, other)
