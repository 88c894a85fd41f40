"""cosmos3_tiny trains through the real CLI on the cosmos3_droid strategy's shared DROID v3.0 dataset with the tiny
Qwen3-VL-style tokenizer (chat template): the loss falls; its checkpoint is a policy (``load_policy`` +
``predict_action`` equal the model + training transforms path); FSDP2 on two gloo processes (decoder layers as
units) gives one process's losses and gradient norms.

Each launch runs under a subprocess timeout, so a hung collective fails the test instead of the suite.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support import DATASETS_DIR, clean_env, run_embodied, run_torchrun

pytestmark = [pytest.mark.slow]

STRATEGIES = DATASETS_DIR / "strategies"
COMMON = ["--model-name", "cosmos3_tiny", "--dataset-format", "lerobot_datasets", "--dataset-path",
          str(STRATEGIES / "cosmos3_droid_v30"), "--dataset-strategy", "cosmos3_droid", "--tokenizer-path",
          str(STRATEGIES / "tokenizers" / "qwen3vl_tiny"), "--num-workers", "0", "--dtype", "float32",
          "--lr-warmup-iters", "0", "--lr-base", "3e-3", "--lr-decay-style", "constant", "--batch-drop-last",
          "--seed", "7", "model.action_normalization=mean_std"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(output_dir: Path, args: list[str], *, nproc: int = 1) -> list[dict]:
    train = ["train", *COMMON, *args, "--output-dir", str(output_dir)]
    log = output_dir.with_suffix(".log")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    env = clean_env(OMP_NUM_THREADS="1")
    if nproc > 1:
        result = run_torchrun("--nproc_per_node", str(nproc), "--master_port", str(_free_port()),
                              "-m", "embodied_core.cli.main", *train, env=env, timeout=300, log=log)
    else:
        result = run_embodied(*train, env=env, timeout=300)
        log.write_text(result.stdout + result.stderr)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosmos3_train")
    records = _run(root / "one", ["--per-device-batch-size", "4", "--train-iters", "10", "--save-interval", "10"])
    return {"root": root, "records": records, "checkpoint": root / "one" / "checkpoints" / "step_10"}


def test_loss_falls_over_two_epochs(single):
    """20 samples a epoch (batch 4, the 21st dropped): the second epoch's mean loss is at least 10% below the first's,
    for the vision and the action flow losses alike."""
    records = single["records"]
    assert [r["step"] for r in records] == list(range(1, 11))
    first, second = records[:5], records[5:]

    def mean(rows, key):
        return sum(r[key] for r in rows) / len(rows)

    assert mean(second, "loss") < 0.9 * mean(first, "loss"), [r["loss"] for r in records]
    assert mean(second, "vision_loss") < mean(first, "vision_loss")
    assert mean(second, "action_loss") < mean(first, "action_loss")
    assert (single["checkpoint"] / "model.safetensors").is_file()


def _observation(seed: int, metadata) -> dict:
    rng = np.random.default_rng(seed)
    obs = {key: rng.integers(0, 256, metadata.image_shape, dtype=np.uint8) for key in metadata.camera_keys}
    obs[metadata.state_key] = rng.normal(size=metadata.state_dim).astype(np.float32) + 10.0
    obs["task"] = "put the marker in the cup | place the marker into the cup"
    return obs


def test_checkpoint_is_a_policy_equal_to_the_training_path(single):
    """load_policy(step_10).predict_action on robot observations (HWC frames, the [J + 1] state, the task) equals
    the model + training transforms (checkpoint statistics, observation -> training sample) sampled with the same
    seed; actions come back in dataset units [H, action_dim]."""
    import attrs
    from safetensors.torch import load_file

    from embodied_core import load_policy
    from embodied_core.errors import ObservationError
    from embodied_core.policy.folder import read_stats
    from embodied_models.cosmos3.config import Cosmos3ModelConfig
    from embodied_models.cosmos3.data.config import Cosmos3DataConfig
    from embodied_models.cosmos3.modeling import build_model
    from embodied_models.cosmos3.transforms import make_transforms

    policy = load_policy(single["checkpoint"], seed=3)
    md = policy.metadata
    assert (md.action_horizon, md.action_dim, md.image_shape, md.fps) == (8, 8, (48, 64, 3), 15.0)
    observations = [_observation(i, md) for i in range(2)]
    got = [policy.predict_action(obs) for obs in observations]
    assert all(a.shape == (8, 8) and a.dtype == np.float32 and np.isfinite(a).all() for a in got)
    assert not np.allclose(got[0], got[1])
    policy.reset()
    np.testing.assert_array_equal(policy.predict_action(observations[0]), got[0])

    doc = json.loads((single["checkpoint"] / "policy.json").read_text())
    data_fields = {f.name for f in attrs.fields(Cosmos3DataConfig)}
    model_config = Cosmos3ModelConfig(**doc["model_config"])
    fields = {k: v for k, v in doc["data_config"].items() if k in data_fields}
    data_config = Cosmos3DataConfig(**{**fields, "tokenizer_path": str(single["checkpoint"] / "tokenizer")})
    model = build_model(model_config, data_config).eval()
    model.load_state_dict(load_file(str(single["checkpoint"] / "model.safetensors")))
    stats = read_stats(single["checkpoint"] / "stats.safetensors")
    transforms = make_transforms(model_config, data_config, stats=stats)
    torch.manual_seed(3)
    for obs, expected in zip(observations, got, strict=True):
        batch = transforms.collate_fn([transforms.sample_transform({k: v for k, v in obs.items()})])
        actions = transforms.postprocess_actions(model.sample_actions(batch))[0].numpy()
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ObservationError, match="state"):
        policy.predict_action({k: v for k, v in observations[0].items() if k != md.state_key})


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_fsdp_on_two_processes_equals_one_process(single):
    """Batch 2 per rank on 2 gloo processes (FSDP2, the MoT decoder layers as units) = batch 4 in one process: the
    training draws are keyed per sample, so the first two losses and gradient norms agree."""
    fsdp = _run(single["root"] / "fsdp", ["--per-device-batch-size", "2", "--train-iters", "2", "--save-interval",
                                          "0", "--distributed-strategy", "fsdp"], nproc=2)
    for a, b in zip(single["records"][:2], fsdp, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
        assert a["action_loss"] == pytest.approx(b["action_loss"], rel=1e-5)
