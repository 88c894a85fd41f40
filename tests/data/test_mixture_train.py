"""Training on a mixture of two shared datasets of different layouts (LeRobot v3.0 with 2 cameras and a 7-dim state,
v2.1 with 1 camera and a 26-dim state), end to end: exact resume with 2 workers, a policy folder with per-embodiment
statistics and interfaces, ``load_policy(...).predict_action(obs, embodiment=...)`` and ``embodied serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from embodied_core import load_policy
from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset, resolve_stats
from embodied_core.errors import ObservationError
from embodied_core.policy.folder import read_stats
from embodied_core.trainer.api import Trainer
from tests.eval.serve_support import ServeProcess, run_openpi_client
from tests.support import DATASETS_DIR

ARM = DATASETS_DIR / "lerobot_written" / "v30"
G1 = DATASETS_DIR / "g1_inspire_v21"
MIXTURE = {"weighting": "dataset", "stats": "per_entry", "entries": [
    {"path": str(ARM), "weight": 3, "embodiment": "arm"},
    {"path": str(G1), "weight": 1, "episodes": "10-11", "lerobotdataset_version": "v2.1", "embodiment": "g1"}]}


def _training(out: Path, mixture_file: Path, **extra: Any) -> dict[str, Any]:
    return {"model_name": "pi05_tiny", "dataset_mixture": str(mixture_file), "video_backend": "pyav",
            "per_device_batch_size": 2, "num_workers": 2, "train_iters": 3, "save_interval": 2, "dtype": "float32",
            "lr_base": 1e-3, "lr_warmup_iters": 1, "seed": 11, "log_interval": 1, "detail_log_interval": 0,
            "output_dir": str(out), **extra}


def _losses(out: Path) -> dict[int, float]:
    return {row["step"]: row["loss"] for row in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mixture_train")
    mixture_file = root / "mix.yaml"
    mixture_file.write_text(yaml.safe_dump(MIXTURE))
    Trainer({"training": _training(root / "straight", mixture_file)}).train()
    Trainer({"training": _training(root / "resumed", mixture_file,
                                   resume_from=str(root / "straight" / "checkpoints" / "step_2"))}).train()
    return {"straight": root / "straight", "resumed": root / "resumed", "file": mixture_file}


@pytest.mark.timeout(300)
def test_a_resumed_mixture_run_repeats_the_uninterrupted_step_exactly(runs: dict[str, Path]) -> None:
    straight, resumed = _losses(runs["straight"]), _losses(runs["resumed"])
    assert set(resumed) == {3}
    assert resumed[3] == straight[3]
    config = yaml.safe_load((runs["straight"] / "config.yaml").read_text())
    entries = config["data_mixture"]["entries"]  # config.yaml records each entry's own widths and cameras
    assert [e["data"]["state_dim"] for e in entries] == [7, 26]
    assert config["data"]["state_dim"] == 26 and config["training"]["dataset_mixture"] is None
    # config.yaml reproduces the run: the same mixture, entries and data sections
    again = load_config(config_file=str(runs["straight"] / "config.yaml"))
    replayed = json.loads(json.dumps(again.to_dict()))  # tuples as YAML lists
    assert replayed["data_mixture"] == config["data_mixture"] and replayed["data"] == config["data"]


def _own_stats(path: Path, **training: Any) -> dict[str, dict[str, np.ndarray]]:
    config = load_config("pi05_tiny", training={"dataset_path": str(path), "video_backend": "pyav", **training})
    return resolve_stats(build_training_dataset(config.training, config.data), format_name="lerobot_datasets")


@pytest.mark.timeout(300)
def test_the_policy_folder_holds_each_embodiments_own_statistics(runs: dict[str, Path]) -> None:
    folder = runs["straight"] / "checkpoints" / "step_3"
    doc = json.loads((folder / "policy.json").read_text())
    tags = doc["embodiments"]["tags"]
    assert doc["embodiments"]["default"] == "arm" and list(tags) == ["arm", "g1"]
    own = {"arm": _own_stats(ARM), "g1": _own_stats(G1, split="10-11", lerobotdataset_version="v2.1")}
    for tag, expected in own.items():
        stored = read_stats(folder / tags[tag]["stats_file"])
        for key in ("observation.state", "action"):
            for stat, value in expected[key].items():
                np.testing.assert_array_equal(stored[key][stat], value)
    assert tags["g1"]["interface"]["camera_keys"] == ["observation.images.cam_high"]
    assert doc["interface"] == tags["arm"]["interface"]  # the top level describes the default embodiment


def _observation(tag: str, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if tag == "arm":
        return {"observation.images.front": rng.integers(0, 256, (120, 160, 3), dtype=np.uint8),
                "observation.images.wrist": rng.integers(0, 256, (72, 96, 3), dtype=np.uint8),
                "observation.state": rng.normal(size=7).astype(np.float32), "task": "pick the red cube"}
    return {"observation.images.cam_high": rng.integers(0, 256, (480, 640, 3), dtype=np.uint8),
            "observation.state": rng.normal(size=26).astype(np.float32),
            "task": "Pick up the yellow bottle on the table."}


@pytest.mark.timeout(300)
def test_predict_action_picks_the_embodiments_interface_and_statistics(runs: dict[str, Path]) -> None:
    policy = load_policy(runs["straight"])
    assert policy.metadata.embodiments == ("arm", "g1") and policy.metadata.embodiment == "arm"
    assert policy.predict_action(_observation("arm", 0)).shape == (10, 4)
    assert policy.predict_action(_observation("g1", 0), embodiment="g1").shape == (10, 26)
    # actions come back in each embodiment's own units: a normalized 0 is the middle of its q01..q99
    g1_action = _own_stats(G1, split="10-11", lerobotdataset_version="v2.1")["action"]
    middle = policy.view("g1").transforms.postprocess_actions(torch.zeros(1, 10, 32))[0].numpy()
    np.testing.assert_allclose(middle, np.broadcast_to((g1_action["q01"] + g1_action["q99"]) / 2, (10, 26)),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(ObservationError, match="its embodiments: arm, g1"):
        policy.predict_action(_observation("g1", 0), embodiment="franka")
    with pytest.raises(ObservationError, match="missing key"):  # a g1 observation is not an arm one
        policy.predict_action(_observation("g1", 0))


@pytest.mark.timeout(300)
def test_embodied_serve_serves_the_chosen_embodiment_and_one_per_request(runs: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    checkpoint = runs["straight"] / "checkpoints" / "step_3"
    server = ServeProcess(str(checkpoint), "--embodiment", "g1")
    try:
        assert any("embodiment g1" in line for line in server.banner), server.banner
        requests = [_observation("g1", 1), {**_observation("arm", 2), "embodiment": "arm"}]
        arrays, facts = run_openpi_client(tmp_path, server.url, "actions", requests, api_key=None)
    finally:
        server.stop()
    assert facts["metadata"]["embodiment"] == "g1" and facts["metadata"]["state_dim"] == 26
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server (OMP_NUM_THREADS=1): same kernels, same bits
    try:
        policy = load_policy(checkpoint, seed=0)
        expected = [policy.predict_action(_observation("g1", 1), embodiment="g1"),  # one noise stream, as served
                    policy.predict_action(_observation("arm", 2), embodiment="arm")]
    finally:
        torch.set_num_threads(threads)
    assert arrays["a0"].shape == (10, 26) and arrays["a1"].shape == (10, 4)
    np.testing.assert_array_equal(arrays["a0"], expected[0])
    np.testing.assert_array_equal(arrays["a1"], expected[1])
