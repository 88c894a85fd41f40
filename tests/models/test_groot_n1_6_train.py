"""groot_n1_6_tiny end to end on CPU: the real CLI on a real LeRobot v3.0 dataset (default strategy), an Eagle
processor folder given by ``--tokenizer-path`` and weights from an official GR00T N1.6 folder
(``--pretrained-checkpoint``); the loss falls; the checkpoint is a policy folder that load_policy and ``embodied
serve`` (the real openpi client) answer with exactly the training path's actions; a resumed run repeats the
uninterrupted run's losses; ``embodied eval --offline`` scores the checkpoint on the dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from embodied_core import Trainer, load_policy
from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset
from embodied_core.policy.folder import read_stats
from embodied_models.groot_n1_6.modeling import build_model
from embodied_models.groot_n1_6.processor import EagleProcessor
from embodied_models.groot_n1_6.transforms import make_transforms
from tests.core.policy_support import observation_from_sample, training_path_actions
from tests.eval.serve_support import ServeProcess, run_openpi_client
from tests.models.test_groot_n1_6_checkpoint import official_config, official_names
from tests.support import DATASETS_DIR, clean_env, run_embodied

pytestmark = pytest.mark.slow

V30 = DATASETS_DIR / "lerobot_written" / "v30"
STEPS = 60


def _official_folder(folder: Path) -> Path:
    """A tiny GR00T N1.6 checkpoint in the official layout (config.json + model.safetensors)."""
    config = load_config("groot_n1_6_tiny", training={"dataset_format": "dummy_datasets"},
                         data={"state_dim": 7, "action_dim": 4, "camera_keys": ["a", "b"]})
    torch.manual_seed(5)
    model = build_model(config.model, config.data)
    folder.mkdir(parents=True)
    save_file(official_names(model.state_dict()), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(official_config(model)))
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("groot_n1_6_train")
    processor = EagleProcessor.tiny().save(root / "processor")
    official = _official_folder(root / "GR00T-N1.6-tiny")
    out = root / "run"
    proc = run_embodied("train", "--model-name", "groot_n1_6_tiny", "--dataset-path", str(V30),
                        "--tokenizer-path", str(processor), "--pretrained-checkpoint", str(official),
                        "--train-iters", str(STEPS), "--lr-base", "2e-3", "--lr-decay-style", "constant",
                        "--lr-warmup-iters", "0", "--per-device-batch-size", "4", "--num-workers", "0",
                        "--dtype", "float32", "--save-interval", str(STEPS), "--seed", "3", "--output-dir", str(out),
                        env=clean_env(OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return {"root": root, "out": out, "log": proc.stdout + proc.stderr, "processor": processor,
            "checkpoint": out / "checkpoints" / f"step_{STEPS}", "official": official}


def _fixed_draw_loss(config, transforms, samples, weights: Path) -> float:
    """Mean eval-mode loss of ``weights`` on ``samples`` under fixed draws (the same for every call)."""
    model = build_model(config.model, config.data)
    model.load_pretrained_checkpoint(weights)
    model.eval().seed_rng(0)
    batch = transforms.collate_fn([transforms.sample_transform(dict(s)) for s in samples])
    with torch.no_grad():
        return float(np.mean([model.training_terms(batch)["loss"].item() for _ in range(4)]))


def test_cli_training_on_a_lerobot_dataset_lowers_the_loss(run):
    assert "--pretrained-checkpoint" in run["log"] and "(strict)" in run["log"]
    rows = [json.loads(line) for line in (run["out"] / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert all(np.isfinite(r["loss"]) and r["grad_norm"] > 0 for r in rows)
    assert "trainer_type: groot_n1_6" in (run["out"] / "config.yaml").read_text()
    checkpoint = run["checkpoint"]
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "tokenizer" / "tokenizer.json").is_file()
    # the flow-matching loss is noisy step to step; under fixed draws the trained weights are clearly better
    trained = load_config(config_file=str(run["out"] / "config.yaml"))
    dataset = build_training_dataset(trained.training, trained.data)
    trained.data.tokenizer_path = str(run["processor"])
    transforms = make_transforms(trained.model, trained.data, stats=read_stats(checkpoint / "stats.safetensors"))
    samples = [dataset[i] for i in range(0, len(dataset), 6)]
    before = _fixed_draw_loss(trained, transforms, samples, run["official"])
    after = _fixed_draw_loss(trained, transforms, samples, checkpoint)
    assert after < 0.85 * before, (before, after)


def test_policy_and_server_predict_exactly_the_training_path(run, tmp_path):
    """load_policy + predict_action on dataset frames, then the same checkpoint behind ``embodied serve`` (a fresh
    process) queried by the real openpi client: both equal the training path."""
    trained = load_config(config_file=str(run["out"] / "config.yaml"))
    dataset = build_training_dataset(trained.training, trained.data)
    samples = [dataset[i] for i in (5, 100)]
    model = build_model(trained.model, trained.data)
    model.load_state_dict(load_file(str(run["checkpoint"] / "model.safetensors")))
    shutil.rmtree(run["processor"], ignore_errors=True)  # from here on only the checkpoint's copy exists
    trained.data.tokenizer_path = str(run["checkpoint"] / "tokenizer")
    transforms = make_transforms(trained.model, trained.data,
                                 stats=read_stats(run["checkpoint"] / "stats.safetensors"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server (OMP_NUM_THREADS=1): same kernels, same bits
    try:
        expected = training_path_actions(model.eval(), transforms, samples, seed=0)
        policy = load_policy(run["checkpoint"], seed=0)
        cameras = list(policy.metadata.camera_keys)
        assert cameras == ["observation.images.front", "observation.images.wrist"] and policy.metadata.needs_task
        observations = [observation_from_sample(s, cameras, "observation.state") for s in samples]
        got = [policy.predict_action(obs) for obs in observations]
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == (8, 4) and a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    server = ServeProcess(str(run["checkpoint"]))
    try:
        arrays, facts = run_openpi_client(tmp_path, server.url, "actions", observations, api_key=None)
    finally:
        server.stop()
    for i, want in enumerate(expected):
        np.testing.assert_array_equal(arrays[f"a{i}"], want)
    assert facts["metadata"]["model_name"] == "groot_n1_6_tiny"



def test_offline_eval_of_the_checkpoint_on_the_dataset(run, tmp_path):
    """``embodied eval --offline``: the policy's chunks against the dataset's actions (one episode)."""
    out = tmp_path / "offline"
    done = run_embodied("eval", str(run["checkpoint"]), "--offline", str(V30), "--offline-episodes", "1",
                        "--offline-stride", "10", "--output-dir", str(out), env=clean_env(OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "offline_eval.json").read_text())
    assert doc["dataset"]["episodes"] == [1] and len(doc["mse_per_step"]) == 8
    assert all(np.isfinite(v) for v in doc["mse_per_step"]) and set(doc["mse_per_dim"]) == {"a0", "a1", "a2", "a3"}

def _dummy_run(out: Path, steps: int, **training) -> list[float]:
    Trainer({"training": {"model_name": "groot_n1_6_tiny", "dataset_format": "dummy_datasets", "num_samples": 24,
                          "train_iters": steps, "per_device_batch_size": 2, "num_workers": 0, "dtype": "float32",
                          "lr_warmup_iters": 0, "lr_decay_iters": 4, "save_interval": 2, "output_dir": str(out),
                          "seed": 9, **training},
             "model": {"dropout": 0.0}}).train()
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_resume_repeats_the_uninterrupted_losses(tmp_path):
    straight = _dummy_run(tmp_path / "straight", 4)
    _dummy_run(tmp_path / "resumed", 2)
    resumed = _dummy_run(tmp_path / "resumed", 4, resume=True)
    assert len(resumed) == 4 and resumed[-2:] == straight[-2:]
