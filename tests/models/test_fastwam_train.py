"""fastwam_tiny through the real CLI on ../shared/datasets/strategies/fastwam_v21 (--dataset-strategy fastwam, video
encoded online by the tiny random Wan VAE, prompts from a text cache built by `embodied data precompute-text` with a
tiny random UMT5): the loss falls, a resumed run repeats the uninterrupted one exactly, the checkpoint is a policy
equal to the direct sampling path, and FSDP2 (MoT layers as units) on two gloo processes equals DDP."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support import DATASETS_DIR, clean_env, run_embodied, run_torchrun

DATASET = DATASETS_DIR / "strategies" / "fastwam_v21"
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"


def _train_args(out: Path, cache: Path, *extra: str) -> list[str]:
    return ["train", "--model-name", "fastwam_tiny", "--dataset-path", str(DATASET), "--train-iters", "16",
            "--per-device-batch-size", "4", "--num-workers", "0", "--dtype", "float32", "--lr-base", "5e-3",
            "--lr-warmup-iters", "0", "--lr-decay-style", "constant", "--save-interval", "12", "--log-interval", "1",
            "--seed", "3", "--output-dir", str(out), f"data.text_cache_dir={cache}", *extra]


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from embodied_core.cli.main import main as embodied_main
    from embodied_models.wan.text import build_tiny_umt5

    root = tmp_path_factory.mktemp("fastwam_train")
    encoder = build_tiny_umt5(root / "umt5", TOKENIZER)
    cache = root / "text_cache"
    assert embodied_main(["data", "precompute-text", str(DATASET), "--text-encoder-path", str(encoder), "--out",
                          str(cache), "--text-len", "8"]) == 0
    proc = run_embodied(*_train_args(root / "run", cache))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"root": root, "cache": cache, "out": root / "run"}


def test_cli_training_loss_falls(run):
    losses = _losses(run["out"])
    print(f"fastwam_tiny CLI losses: {[round(x, 3) for x in losses]}")
    assert len(losses) == 16 and all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < 0.8 * np.mean(losses[:4])
    record = json.loads((run["out"] / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"loss_video", "loss_action"} <= set(record)
    assert (run["out"] / "checkpoints" / "step_16" / "policy.json").is_file()


def test_resume_repeats_the_uninterrupted_run_exactly(run):
    out = run["root"] / "resumed"
    proc = run_embodied(*_train_args(out, run["cache"], "--resume-from", str(run["out"] / "checkpoints" / "step_12")))
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(13, 17))
    assert [r["loss"] for r in records] == _losses(run["out"])[12:]


def test_checkpoint_is_a_policy_equal_to_the_direct_path(run):
    from embodied_core import load_policy
    from tests.core.policy_support import training_path_actions

    checkpoint = run["out"] / "checkpoints" / "step_16"
    assert sorted(p.name for p in (checkpoint / "assets" / "text_cache").glob("*.pt")) == sorted(
        p.name for p in run["cache"].glob("*.pt"))  # the folder carries its prompts' embeddings
    policy = load_policy(checkpoint, seed=0)
    assert Path(policy.transforms.collate_fn.cfg.text_cache_dir) == checkpoint / "assets" / "text_cache"
    shapes = {"observation.images.front": (64, 80, 3), "observation.images.wrist": (48, 64, 3)}
    rng = np.random.default_rng(0)
    obs = {key: rng.integers(0, 255, shape, dtype=np.uint8) for key, shape in shapes.items()}
    obs |= {"observation.state": np.linspace(0, 1, 8, dtype=np.float32), "task": "pick the red cube"}
    got = policy.predict_action(obs)
    expected = training_path_actions(policy.model, policy.transforms, [policy.observation_to_sample(obs)], seed=0)[0]
    assert got.shape == (8, 7) and got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_array_equal(got, expected)
    policy.reset()
    other = dict(obs, **{"observation.images.front": 255 - obs["observation.images.front"]})
    assert not np.array_equal(policy.predict_action(other), got)  # the first frame goes through the VAE


def _launch(out: Path, cache: Path, strategy: str) -> list[dict]:
    from tests.models.test_pi05_distributed import _free_port

    args = ["--nproc_per_node", "2", "--master_port", str(_free_port()),
            "-m", "embodied_core.cli.main", "train", "--model-name", "fastwam_tiny", "--dataset-path", str(DATASET),
            "--train-iters", "2", "--per-device-batch-size", "1", "--num-workers", "0", "--dtype", "float32",
            "--lr-warmup-iters", "0", "--save-interval", "0", "--output-dir", str(out), "--distributed-strategy",
            strategy, f"data.text_cache_dir={cache}"]
    out.parent.mkdir(parents=True, exist_ok=True)
    result = run_torchrun(*args, env=clean_env(OMP_NUM_THREADS="1"), timeout=240, log=out.with_suffix(".log"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_fsdp_on_two_processes_equals_one_process(run):
    """Training draws are keyed per sample (not per rank), so FSDP2 on 2 processes with 1 sample each equals one
    process with both samples (same global order)."""
    fsdp = _launch(run["root"] / "fsdp", run["cache"], "fsdp")
    single_out = run["root"] / "single"
    proc = run_embodied("train", "--model-name", "fastwam_tiny", "--dataset-path", str(DATASET), "--train-iters",
                        "2", "--per-device-batch-size", "2", "--num-workers", "0", "--dtype", "float32",
                        "--lr-warmup-iters", "0", "--save-interval", "0", "--output-dir", str(single_out),
                        f"data.text_cache_dir={run['cache']}", env=clean_env(OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    single = [json.loads(line) for line in (single_out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in single] == [r["step"] for r in fsdp] == [1, 2]
    for a, b in zip(single, fsdp, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
