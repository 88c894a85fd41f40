"""lingbot_va_tiny as a policy: closed-loop control from raw camera frames of a real LeRobot v2.1 dataset, loaded
from a checkpoint that carries its own VAE, text encoder and prompt embeddings, in a fresh process."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from embodied_core import load_policy
from embodied_core.config.resolve import load_config
from embodied_core.errors import ObservationError
from tests.core.policy_support import predict_in_fresh_process, train
from tests.models.test_lingbot_va_data import DATASET, _base_model, _config

TASK = "pick the red cube"


def _frames(cameras: list[str], count: int) -> list[np.ndarray]:
    """Episode 0's first ``count`` frames per camera, uint8 HWC, as a robot's cameras deliver them."""
    from embodied_data.video.backends import make_backend

    backend = make_backend("pyav")
    return [backend.decode(DATASET / f"videos/chunk-000/{cam}/episode_000000.mp4",
                           [i / 30 for i in range(count)]).frames.permute(0, 2, 3, 1).numpy() for cam in cameras]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from embodied_models.lingbot_va.precompute import precompute_latents

    root = tmp_path_factory.mktemp("lingbot_policy")
    base = _base_model(root / "base")
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(root / "cache")})
    precompute_latents(DATASET, base_model_path=base, data_config=config.data, text_len=config.model.text_len,
                       device="cpu", dtype=torch.float32)
    trainer, kept = train(_config(root, train_iters=2, save_interval=2, output_dir=str(root / "run")))
    cameras = list(trainer.config.data.camera_keys)
    frames = _frames(cameras, 21)
    # The closed loop of the module doc: first frame, then the keyframes of each executed chunk (4(F-1), then 4F).
    steps = [{**{c: f[0] for c, f in zip(cameras, frames, strict=True)}, "task": TASK},
             {**{c: f[1:9] for c, f in zip(cameras, frames, strict=True)}, "task": TASK},
             {**{c: f[9:21] for c, f in zip(cameras, frames, strict=True)}, "task": TASK}]
    return {"root": root, "base": base, "checkpoint": root / "run" / "checkpoints" / "step_2", "kept": kept,
            "config": trainer.config, "stats": trainer.data_stats, "steps": steps}


def test_checkpoint_carries_what_inference_needs(run):
    doc = json.loads((run["checkpoint"] / "policy.json").read_text())
    assets = doc["assets"]
    assert assets["copied"] == ["text_encoder", "tokenizer", "vae"]
    assert assets["tasks"] == {"pick the red cube": "task_0", "stack the blue block": "task_1"}
    assert assets["image_shapes"] == {"observation.images.front": [120, 160, 3],
                                      "observation.images.wrist": [72, 96, 3]}
    assert {"text.safetensors", "vae", "text_encoder", "tokenizer"} <= {p.name for p in (run["checkpoint"] /
                                                                                         "assets").iterdir()}


def test_fresh_process_closed_loop_equals_in_process_and_the_training_path(run, tmp_path):
    """Three chunks in a new process == the same in this one; the first chunk == training's transform +
    ``sample_actions`` on the encoded first frame with the same noise (cache-free sampling, within 1e-5)."""
    from diffusers import AutoencoderKLWan
    from safetensors.torch import load_file

    from embodied_data.normalize import quantile_normalize
    from embodied_models.lingbot_va.transforms import action_quantiles
    from embodied_models.lingbot_va.vae import StreamingVAEEncoder

    shutil.rmtree(run["base"], ignore_errors=True)  # the checkpoint's own copies must suffice
    fresh, metadata = predict_in_fresh_process(run["checkpoint"], run["steps"], tmp_path)
    policy = load_policy(run["checkpoint"])
    local = [policy.predict_action(obs) for obs in run["steps"]]
    assert [a.shape for a in fresh] == [(8, 4), (12, 4), (12, 4)] and metadata["action_horizon"] == 12
    for a, b in zip(fresh, local, strict=True):
        np.testing.assert_array_equal(a, b)
    # training path on the first observation
    config, kept = run["config"], run["kept"]
    vae = AutoencoderKLWan.from_pretrained(str(run["checkpoint"] / "assets" / "vae")).eval()
    first = [torch.from_numpy(run["steps"][0][c]).permute(2, 0, 1)[None] for c in config.data.camera_keys]
    texts = load_file(str(run["root"] / "cache" / "text.safetensors"))
    sample = {"latents": StreamingVAEEncoder(vae, config.data)(first)[0], "text_emb": texts["task_0"],
              "null_text_emb": texts["empty"]}
    batch = kept.transforms.collate_fn([kept.transforms.sample_transform(sample)])
    gen = torch.Generator().manual_seed(0)
    _, c, _, h, w = batch["latents"].shape
    frames, n = config.data.num_latent_frames, config.data.action_per_frame
    noise = {"video": torch.randn(1, c, frames, h, w, generator=gen),
             "action": torch.randn(1, config.model.action_dim, frames, n, 1, generator=gen)}
    with torch.no_grad():
        expected = kept.transforms.postprocess_actions(kept.model.sample_actions(batch, noise=noise))[0]
    q01, q99 = action_quantiles(run["stats"], config.data)
    torch.testing.assert_close(quantile_normalize(torch.from_numpy(fresh[0]), q01, q99),
                               quantile_normalize(expected, q01, q99), atol=1e-5, rtol=1e-5)


def test_executed_actions_are_fed_back(run):
    policy = load_policy(run["checkpoint"])
    first = policy.predict_action(run["steps"][0])
    default = policy.predict_action(run["steps"][1])
    policy.reset()
    np.testing.assert_array_equal(policy.predict_action(run["steps"][0]), first)
    fed = policy.predict_action({**run["steps"][1], "action": first + 50.0})
    assert fed.shape == default.shape and not np.array_equal(fed, default)


def test_bad_closed_loop_observations_name_what_is_expected(run):
    policy = load_policy(run["checkpoint"])
    first, second = run["steps"][0], run["steps"][1]
    with pytest.raises(ObservationError, match=r"observation\['observation.images.front'\].*\(120, 160, 3\)"):
        policy.predict_action({**first, "observation.images.front": second["observation.images.front"]})
    with pytest.raises(ObservationError, match=r"unexpected key\(s\) \['action'\]"):
        policy.predict_action({**first, "action": np.zeros((8, 4), np.float32)})
    chunk = policy.predict_action(first)
    with pytest.raises(ObservationError, match=r"uint8 8 frames \(H, W, C\) = \(8, 120, 160, 3\)"):
        policy.predict_action(first)  # after the first chunk the keyframes it saw executing are due
    with pytest.raises(ObservationError, match=r"differs from this episode's task.*reset\(\)"):
        policy.predict_action({**second, "task": "stack the blue block"})
    with pytest.raises(ObservationError, match=r"observation\['action'\].*shape \(8, 4\)"):
        policy.predict_action({**second, "action": np.zeros((12, 4), np.float32)})
    # nothing of the episode changed: the chunk equals a fresh policy's second chunk
    fresh = load_policy(run["checkpoint"])
    fresh.predict_action(first)
    np.testing.assert_array_equal(policy.predict_action({**second, "action": chunk}),
                                  fresh.predict_action({**second, "action": chunk}))


def test_unknown_task_needs_a_text_encoder(run, tmp_path):
    folder = tmp_path / "no_encoder"
    shutil.copytree(run["checkpoint"], folder)
    shutil.rmtree(folder / "assets" / "text_encoder")
    doc = json.loads((folder / "policy.json").read_text())
    doc["assets"].update(copied=["tokenizer", "vae"], base_model_path=str(tmp_path / "gone"))
    (folder / "policy.json").write_text(json.dumps(doc))
    policy = load_policy(folder, allow_external_references=True)  # the recorded base lies outside the folder
    unseen = {**run["steps"][0], "task": "open the drawer"}
    with pytest.raises(ObservationError, match=r"'open the drawer' is not a training task.*pick the red cube"):
        policy.predict_action(unseen)
    assert policy.predict_action({**unseen, "task": "  pick the  red cube "}).shape == (8, 4)  # cleaned prompt
    assert load_policy(run["checkpoint"]).predict_action(unseen).shape == (8, 4)  # encoded by the folder's UMT5



def test_a_run_without_latent_cache_says_why_it_cannot_serve(run, tmp_path):
    """Without a LeRobot dataset + latent cache there is no VAE or prompt to record: saving says so, loading
    refuses with the reason instead of failing later."""
    from embodied_core.errors import CheckpointError
    from embodied_models.lingbot_va.policy import LingBotVAPolicy

    config = load_config(training={"model_name": "lingbot_va_tiny", "dataset_format": "dummy_datasets",
                                   "lerobotdataset_version": "v3.0", "dataset_strategy": "default"})
    record = LingBotVAPolicy.write_assets(config, tmp_path)
    assert "dummy_datasets" in record["unavailable"] and not any(tmp_path.iterdir())
    folder = tmp_path / "folder"
    shutil.copytree(run["checkpoint"], folder)
    doc = json.loads((folder / "policy.json").read_text())
    doc["assets"] = record
    (folder / "policy.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"not servable as a LingBot-VA policy.*dummy_datasets"):
        load_policy(folder)
