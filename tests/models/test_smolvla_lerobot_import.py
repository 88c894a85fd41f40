"""``embodied checkpoint import-lerobot-smolvla``: a checkpoint saved by lerobot 0.6.1's SmolVLA (side venv, built on
a local SmolVLM2 folder, no hub) becomes a policy folder whose actions equal lerobot's own for the same observation
and noise; bad sources are usage errors naming the file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from embodied_core import load_policy
from embodied_core.cli.main import main as embodied_main
from embodied_core.errors import UsageError
from embodied_models.smolvla.lerobot_import import import_lerobot_smolvla
from tests.support import REPO_ROOT, clean_env

LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
SCRIPT = Path(__file__).with_name("lerobot_smolvla_script.py")
TASK = "Press a button from the top"


@pytest.fixture(scope="module")
def lerobot_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray], np.ndarray]:
    """A lerobot SmolVLA checkpoint, the request it answered and lerobot's actions."""
    assert LEROBOT_PYTHON.is_file(), f"{LEROBOT_PYTHON} missing: run scripts/setup.sh (it creates .venv-lerobot)"
    out = tmp_path_factory.mktemp("lerobot_smolvla")
    rng = np.random.default_rng(0)
    request = {"image": rng.integers(0, 256, (72, 96, 3), dtype=np.uint8),  # not square: exercises the padding
               "state": rng.normal(size=4).astype(np.float32), "task": np.array(TASK),
               "noise": rng.normal(size=(1, 10, 32)).astype(np.float32)}
    for key, scale in (("observation.state", 0.5), ("action", 0.3)):
        mean = rng.normal(size=4).astype(np.float32)
        std = (scale + rng.random(4)).astype(np.float32)
        request |= {f"{key}|mean": mean, f"{key}|std": std, f"{key}|min": mean - 2 * std, f"{key}|max": mean + 2 * std}
    np.savez(out / "request.npz", **request)
    env = clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(out / "hf"), OMP_NUM_THREADS="1")
    proc = subprocess.run([str(LEROBOT_PYTHON), str(SCRIPT), str(out), str(out / "request.npz")],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, request, np.load(out / "actions.npy")


def test_imported_policy_acts_as_lerobot(lerobot_run: tuple[Path, dict, np.ndarray], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out, request, theirs = lerobot_run
    dst = tmp_path / "policy"
    assert embodied_main(["checkpoint", "import-lerobot-smolvla", str(out / "run"), str(dst)]) == 0, \
        capsys.readouterr().err[-3000:]
    assert f"to {dst}" in capsys.readouterr().out
    policy = load_policy(dst)
    meta = policy.metadata
    assert meta.camera_keys == ("observation.image",) and meta.image_shape == (72, 96, 3)
    assert (meta.state_dim, meta.action_dim, meta.action_horizon, meta.needs_task) == (4, 4, 10, True)
    doc = json.loads((dst / "policy.json").read_text())
    assert doc["imported_from"]["format"] == "lerobot" and doc["tokenizer"]["files"] == "tokenizer"

    observation = {"observation.image": request["image"], "observation.state": request["state"], "task": TASK}
    transforms = policy.transforms
    batch = transforms.collate_fn([transforms.sample_transform(policy.observation_to_sample(observation))])
    with torch.no_grad():
        ours = transforms.postprocess_actions(policy.model.sample_actions(batch, noise=torch.from_numpy(
            request["noise"])))
    assert theirs.shape == (1, 10, 4)
    assert np.abs(theirs).max() > 0.5  # a real signal, not a near-zero head
    # float32 on both sides; normalization eps differs (lerobot std + 1e-8, ours 1e-6): far below the tolerance
    # measured: max |diff| 2.3e-6 at values up to 3.4
    np.testing.assert_allclose(ours.numpy(), theirs, atol=1e-5, rtol=1e-5)
    # the policy's own sampling runs end to end
    assert policy.predict_action(observation).shape == (10, 4)


def test_import_refuses_what_it_cannot_use(lerobot_run: tuple[Path, dict, np.ndarray], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out, _, _ = lerobot_run
    with pytest.raises(UsageError, match="not a lerobot checkpoint"):
        import_lerobot_smolvla(tmp_path, tmp_path / "dst")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file").write_text("x")
    with pytest.raises(UsageError, match="not an empty directory"):
        import_lerobot_smolvla(out / "run", taken)
    config = json.loads((out / "run" / "pretrained_model" / "config.json").read_text())
    hub = tmp_path / "hub" / "pretrained_model"
    hub.mkdir(parents=True)
    (hub / "model.safetensors").symlink_to(out / "run" / "pretrained_model" / "model.safetensors")
    (hub / "config.json").write_text(json.dumps({**config, "vlm_model_name": "HuggingFaceTB/SmolVLM2-500M"}))
    with pytest.raises(UsageError, match=r"not a local folder.*--vlm-folder"):
        import_lerobot_smolvla(hub, tmp_path / "dst")
    assert embodied_main(["checkpoint", "import-lerobot-smolvla", str(hub), str(tmp_path / "dst")]) == 2
    assert "--vlm-folder" in capsys.readouterr().err
    with pytest.raises(UsageError, match="pi05_tiny: not a SmolVLA model plugin"):
        import_lerobot_smolvla(hub, tmp_path / "dst", model_name="pi05_tiny", vlm_folder=out / "vlm")
    (hub / "config.json").write_text(json.dumps({**config, "adapt_to_pi_aloha": True}))
    with pytest.raises(UsageError, match=r"config\.json: adapt_to_pi_aloha=true is not ported"):
        import_lerobot_smolvla(hub, tmp_path / "dst", vlm_folder=out / "vlm")
