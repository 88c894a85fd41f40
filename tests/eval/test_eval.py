"""``embodied eval`` end to end through the real CLI: synth_reach with baselines, videos and eval.json; the same
episodes with parallel envs and through ``embodied serve``; open-loop on a dataset; gym-pusht and gym-aloha;
bad input."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from embodied_core import load_policy
from embodied_core.errors import UsageError
from embodied_core.trainer.api import Trainer
from embodied_eval import RolloutSettings, evaluate
from embodied_eval.intervals import wilson_interval
from tests.eval.serve_support import ServeProcess
from tests.support import clean_env, run_embodied

ONE_THREAD = clean_env(OMP_NUM_THREADS="1")  # same kernels in every process: bit-identical actions


def _eval(*args: str) -> tuple[dict, str]:
    done = run_embodied("eval", *args, "--no-progress", env=ONE_THREAD)
    assert done.returncode == 0, done.stderr[-4000:]
    out = Path(args[args.index("--output-dir") + 1])
    return json.loads((out / "eval.json").read_text()), done.stdout


@contextlib.contextmanager
def _one_thread():
    """Like OMP_NUM_THREADS=1 in the server process, so both compute the same bits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _evaluate(checkpoint: Path | None, out: Path, *, env: str = "synth_reach", server: str | None = None,
              baselines: tuple[str, ...] = (), **settings: int) -> dict:
    """``embodied eval`` from Python (the CLI calls the same function), in this process."""
    with _one_thread():
        report = evaluate(checkpoint, env=env, server=server, settings=RolloutSettings(**settings), output_dir=out,
                          baselines=baselines, show_progress=False)
    return report.document


def _outcomes(document: dict) -> list[tuple]:
    return [(e["seed"], e["success"], e["return"], e["length"], e["predictions"]) for e in document["episodes"]]


def test_synth_reach_eval_json_baselines_table_and_videos(checkpoint, tmp_path):
    out = tmp_path / "eval"
    doc, stdout = _eval(str(checkpoint), "--env", "synth_reach", "--episodes", "3", "--max-steps", "8",
                        "--replan-steps", "4", "--baselines", "hold,mean_action", "--video", "--output-dir", str(out))
    summary = doc["summary"]
    assert summary["episodes"] == 3 and [e["seed"] for e in doc["episodes"]] == [0, 1, 2]
    assert summary["success_rate_ci95"] == list(wilson_interval(summary["successes"], 3))
    assert summary["episode_lengths"] == [e["length"] for e in doc["episodes"]] and max(summary["episode_lengths"]) <= 8
    # 4 executed actions per chunk: an 8-step episode predicts twice
    assert all(e["predictions"] == -(-e["length"] // 4) for e in doc["episodes"])
    meta = doc["policy"]["metadata"]
    assert meta["checkpoint"] == str(checkpoint) and meta["step"] == 6 and meta["model_name"] == "pi05_tiny"
    assert doc["env"]["name"] == "synth_reach" and "gymnasium" in doc["env"]["versions"]
    assert "embodied-eval" in doc["versions"] and doc["settings"]["replan_steps"] == 4
    for name in ("hold", "mean_action"):
        baseline = json.loads((out / "baselines" / name / "eval.json").read_text())
        assert baseline["policy"]["kind"] == "baseline" and [e["seed"] for e in baseline["episodes"]] == [0, 1, 2]
    assert "baseline: hold" in stdout and "baseline: mean_action" in stdout and "pi05_tiny (step 6)" in stdout
    for episode in doc["episodes"]:
        with av.open(episode["video"]) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        assert len(frames) == episode["length"] + 1 and frames[0].shape == (192, 192, 3)
    with av.open(str(out / "videos" / "grid.mp4")) as container:
        grid = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert grid.shape == (480, 480, 3)


def test_parallel_envs_and_the_server_give_the_same_episodes(checkpoint, tmp_path):
    common = {"num_episodes": 4, "max_steps": 10, "replan_steps": 5}
    one = _evaluate(checkpoint, tmp_path / "one", **common)
    two = _evaluate(checkpoint, tmp_path / "two", num_envs=2, **common)
    assert _outcomes(two) == _outcomes(one)
    server = ServeProcess(str(checkpoint))
    try:
        remote = _evaluate(None, tmp_path / "remote", server=server.url, **common)
    finally:
        server.stop()
    assert remote["policy"]["kind"] == "server" and remote["policy"]["server"] == server.url
    assert _outcomes(remote) == _outcomes(one)


def test_offline_eval_matches_a_direct_computation(checkpoint, synth_dataset, tmp_path):
    out = tmp_path / "offline"
    done = run_embodied("eval", str(checkpoint), "--offline", str(synth_dataset), "--offline-episodes", "7",
                        "--offline-stride", "5", "--output-dir", str(out), env=ONE_THREAD)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "offline_eval.json").read_text())
    assert doc["dataset"]["episodes"] == [7] and len(doc["mse_per_step"]) == 10
    assert set(doc["mse_per_dim"]) == {"x", "y"}
    from PIL import Image

    assert Image.open(out / "offline_eval.png").size[0] > 500

    from embodied_data.lerobot.dataset import LeRobotDataset

    data = LeRobotDataset(synth_dataset, episodes=[7], video_backend="pyav",
                          delta_timestamps={"action": [k / 10 for k in range(10)]})
    with _one_thread():
        policy = load_policy(checkpoint)
        errors, counts = np.zeros(10), np.zeros(10)
        for position in range(0, len(data), 5):
            sample = data[position]
            obs = {"observation.images.front": sample["observation.images.front"].numpy(),
                   "observation.state": sample["observation.state"].numpy(), "task": sample["task"]}
            error = ((policy.predict_action(obs) - sample["action"].numpy()) ** 2).mean(axis=1)
            valid = ~sample["action_is_pad"].numpy()
            errors[valid] += error[valid]
            counts[valid] += 1
    np.testing.assert_allclose(doc["mse_per_step"], errors / counts, rtol=1e-6)
    assert doc["samples_per_step"] == counts.astype(int).tolist()


def test_pusht_through_gym_pusht(checkpoint, tmp_path):
    # the synth checkpoint reads one 2-D state and one camera, as PushT gives them: the plumbing runs end to end
    doc = _evaluate(checkpoint, tmp_path, env="pusht", num_episodes=2, max_steps=4)
    assert doc["env"]["name"] == "pusht" and "gym-pusht" in doc["env"]["versions"]
    assert doc["summary"]["episode_lengths"] == [4, 4]


@pytest.fixture(scope="module")
def aloha_checkpoint(tmp_path_factory) -> Path:
    """pi05_tiny for ALOHA's layout (top camera, 14-D state and action), 2 steps on generated data."""
    out = tmp_path_factory.mktemp("aloha_run")
    Trainer({"training": {"model_name": "pi05_tiny", "dataset_format": "dummy_datasets", "train_iters": 2,
                          "save_interval": 2, "dtype": "float32", "per_device_batch_size": 2, "num_workers": 0,
                          "lr_warmup_iters": 0, "output_dir": str(out)},
             "data": {"camera_keys": ["observation.images.top"], "state_dim": 14, "action_dim": 14}}).train()
    return out / "checkpoints" / "step_2"


def test_aloha_transfer_cube_through_gym_aloha(aloha_checkpoint, tmp_path):
    doc = _evaluate(aloha_checkpoint, tmp_path, env="aloha_transfer_cube", baselines=("hold",), num_episodes=1,
                    max_steps=3)
    assert doc["env"]["name"] == "aloha_transfer_cube" and "gym-aloha" in doc["env"]["versions"]
    assert doc["summary"]["episode_lengths"] == [3] and doc["summary"]["successes"] == 0


def test_a_policy_that_does_not_fit_is_refused_before_any_rollout(checkpoint, tmp_path):
    with pytest.raises(UsageError, match="state has 14 dims here, the policy reads 2"):
        _evaluate(checkpoint, tmp_path, env="aloha_insertion")
    with pytest.raises(UsageError, match="exceeds the policy's action horizon 10"):
        _evaluate(checkpoint, tmp_path, replan_steps=11)
    assert not (tmp_path / "eval.json").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--env", "synth_rech"], "did you mean 'synth_reach'"),
    (["--env", "synth_reach", "--env-option", "colour=red"], "synth_reach accepts num_tasks, hold_frames"),
    (["--env", "synth_reach", "--episodes", "0"], "--episodes must be >= 1"),
    (["--env", "synth_reach", "--baselines", "random"], "valid baselines are hold, mean_action"),
    (["--env", "synth_reach", "--server", "ws://127.0.0.1:9"], "give CHECKPOINT or --server URL"),
])
def test_bad_input_exits_2_with_a_message(checkpoint, tmp_path, args, message):
    done = run_embodied("eval", str(checkpoint), *args, "--output-dir", str(tmp_path), env=ONE_THREAD)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and "Traceback" not in done.stderr
