"""Every checkpoint is a policy folder: ``load_policy`` on the template's ``tiny_flow_policy`` trained a few steps on
a real LeRobot v3.0 dataset (two cameras of different sizes), in a fresh process, against the training path; every
save format; ``embodied checkpoint export``; bad observations; and folders that must not load."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from embodied_core import load_policy
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import CheckpointError, ObservationError, PluginError
from embodied_core.policy.folder import read_stats
from embodied_core.protocols import POLICY_MEMBERS, Policy, missing_members
from tests.core.policy_support import (
    observation_from_sample,
    predict_in_fresh_process,
    train,
    training_path_actions,
)
from tests.support import DATASETS_DIR, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"
SAMPLES = (0, 37, 95)


def _config(out: Path, **training: object) -> dict[str, object]:
    return {"training": {"model_name": "tiny_flow_policy", "dataset_format": "lerobot_datasets",
                         "dataset_path": str(V30), "dtype": "float32", "num_workers": 0, "per_device_batch_size": 4,
                         "output_dir": str(out), "train_iters": 2, "save_interval": 2, "lr_warmup_iters": 0,
                         "lr_base": 1e-3, "seed": 3, "loss_spike_threshold": 1e12, **training}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("policy") / "run"
    trainer, kept = train(_config(out))
    dataset = build_training_dataset(trainer.args, trainer.config.data)
    samples = [dataset[i] for i in SAMPLES]
    return {"out": out, "checkpoint": out / "checkpoints" / "step_2", "kept": kept, "samples": samples,
            "cameras": list(trainer.config.data.camera_keys)}


def _observations(run) -> list[dict]:
    return [observation_from_sample(s, run["cameras"], "observation.state", task=False) for s in run["samples"]]


def _predict(policy, observations) -> list[np.ndarray]:
    return [policy.predict_action(obs) for obs in observations]


def test_fresh_process_policy_equals_the_training_path_exactly(run, tmp_path):
    """Raw HWC frames + raw state through load_policy in a new process == training's transform + sample_actions."""
    expected = training_path_actions(run["kept"].model, run["kept"].transforms, run["samples"], seed=0)
    got, metadata = predict_in_fresh_process(run["out"], _observations(run), tmp_path)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == np.float32 and a.shape == (8, 4)
        np.testing.assert_array_equal(a, b)
    assert metadata["checkpoint"] == str(run["checkpoint"].resolve()) and metadata["step"] == 2
    assert metadata["camera_keys"] == ["observation.images.front", "observation.images.wrist"]
    assert metadata["image_shape"] == [120, 160, 3] and metadata["fps"] == 30.0
    assert (metadata["state_dim"], metadata["action_dim"], metadata["action_horizon"]) == (7, 4, 8)
    assert metadata["state_names"] == [f"s{i}" for i in range(7)] and metadata["action_names"][0] == "a0"
    assert metadata["needs_task"] is False and metadata["model_name"] == "tiny_flow_policy"


def test_hwc_and_chw_frames_give_the_same_actions(run):
    policy = load_policy(run["checkpoint"])
    obs = _observations(run)[1]
    hwc = policy.predict_action(obs)
    policy.reset()
    chw = policy.predict_action({k: (np.ascontiguousarray(v.transpose(2, 0, 1)) if v.ndim == 3 else v)
                                 for k, v in obs.items()})
    np.testing.assert_array_equal(hwc, chw)


def test_read_only_frames_as_the_wire_hands_them_out_give_the_same_actions_without_a_warning(run):
    """``embodied serve`` gets frames as read-only views of the request's bytes: same actions, no torch warning about
    non-writable arrays, and the request's memory is never written."""
    import warnings

    policy = load_policy(run["checkpoint"])
    obs = _observations(run)[1]
    sent = {k: v.copy() for k, v in obs.items() if isinstance(v, np.ndarray)}
    expected = policy.predict_action(obs)
    for key, value in sent.items():  # a writable frame is shared with the tensor, never written either
        np.testing.assert_array_equal(obs[key], value)
    policy.reset()
    frozen = {}
    for key, value in obs.items():
        if isinstance(value, np.ndarray):
            value = np.frombuffer(value.tobytes(), dtype=value.dtype).reshape(value.shape)  # read-only, as msgpack's
            assert not value.flags.writeable
        frozen[key] = value
    before = {k: v.copy() for k, v in frozen.items() if isinstance(v, np.ndarray)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = policy.predict_action(frozen)
    np.testing.assert_array_equal(got, expected)
    for key, value in before.items():
        np.testing.assert_array_equal(frozen[key], value)


def test_same_seed_same_actions_and_reset_restarts_the_stream(run):
    observations = _observations(run)
    first, second = load_policy(run["out"], seed=5), load_policy(run["out"], seed=5)
    assert isinstance(first, Policy) and missing_members(first, POLICY_MEMBERS) == []
    a, b = _predict(first, observations), _predict(second, observations)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], a[1])  # the noise stream moves on between calls
    first.reset()
    np.testing.assert_array_equal(first.predict_action(observations[0]), a[0])
    assert not np.array_equal(load_policy(run["out"], seed=6).predict_action(observations[0]), a[0])


@pytest.mark.parametrize(("change", "words"), [
    (lambda o: o.pop("observation.images.wrist"), ["missing", "observation.images.wrist"]),
    (lambda o: o.update(extra=1), ["unexpected", "'extra'"]),
    (lambda o: o.update({"observation.images.front": np.zeros((64, 64, 3), np.uint8)}),
     ["observation.images.front", "(64, 64, 3)", "(120, 160, 3)", "(3, 120, 160)"]),
    (lambda o: o.update({"observation.images.wrist": np.zeros((72, 96, 3), np.float32)}),
     ["observation.images.wrist", "float32", "uint8"]),
    (lambda o: o.update({"observation.state": np.zeros(6, np.float32)}), ["observation.state", "(6,)", "(7,)"]),
    (lambda o: o.update({"observation.state": np.full(7, np.nan, np.float32)}), ["observation.state", "NaN"]),
])
def test_bad_observation_names_key_got_and_expected_and_policy_stays_usable(run, change, words):
    policy = load_policy(run["checkpoint"])
    good = _observations(run)[0]
    bad = dict(good)
    change(bad)
    with pytest.raises(ObservationError) as info:
        policy.predict_action(bad)
    assert all(word in str(info.value) for word in words), str(info.value)
    np.testing.assert_array_equal(policy.predict_action(good), load_policy(run["checkpoint"]).predict_action(good))


def test_non_mapping_observation_is_an_observation_error(run):
    with pytest.raises(ObservationError, match="mapping"):
        load_policy(run["checkpoint"]).predict_action([1, 2, 3])


@pytest.fixture(scope="module")
def dcp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("policy_dcp") / "run"
    train(_config(out, save_format="dcp"))
    return out / "checkpoints" / "step_2"


@pytest.mark.parametrize("save_format", ["pt", "dcp"])
def test_every_save_format_is_a_policy_folder(run, tmp_path, save_format, request):
    """Same seed and data: the pt / DCP run's policy returns the safetensors run's actions (DCP gathered on load)."""
    if save_format == "dcp":
        folder = request.getfixturevalue("dcp_run")
    else:
        train(_config(tmp_path / "pt", save_format="pt"))
        folder = tmp_path / "pt" / "checkpoints" / "step_2"
    weights = {"pt": "model.pt", "dcp": "dcp"}[save_format]
    assert {"policy.json", "stats.safetensors", "meta.json", weights} <= {p.name for p in folder.iterdir()}
    observations = _observations(run)
    for a, b in zip(_predict(load_policy(folder), observations), _predict(load_policy(run["checkpoint"]),
                                                                          observations), strict=True):
        np.testing.assert_array_equal(a, b)


def test_export_cli_writes_an_inference_only_folder(run, tmp_path):
    dst = tmp_path / "exported"
    proc = run_embodied("checkpoint", "export", str(run["out"]), str(dst))
    assert proc.returncode == 0, proc.stderr
    assert "step 2" in proc.stdout and str(dst) in proc.stdout
    assert sorted(p.name for p in dst.iterdir()) == ["meta.json", "model.safetensors", "policy.json",
                                                      "stats.safetensors"]
    assert json.loads((dst / "meta.json").read_text())["training_state"] is False
    observations = _observations(run)
    exported = load_policy(dst)
    assert exported.metadata.step == 2 and exported.metadata.checkpoint == str(dst.resolve())
    for a, b in zip(_predict(exported, observations), _predict(load_policy(run["checkpoint"]), observations),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    again = run_embodied("checkpoint", "export", str(run["checkpoint"]), str(dst))
    assert again.returncode == 2 and "not an empty directory" in again.stderr and "Traceback" not in again.stderr


def test_export_of_a_dcp_checkpoint_gathers_the_weights(dcp_run, tmp_path):
    proc = run_embodied("checkpoint", "export", str(dcp_run), str(tmp_path / "exported"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "exported" / "model.safetensors").is_file()
    assert not (tmp_path / "exported" / "dcp").exists()


class _Payload:
    """Unpickling this would create ``marker`` (the proof that code ran)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_loading_never_executes_code_from_the_folder(run, tmp_path):
    marker = tmp_path / "code_ran"
    folder = tmp_path / "pt_pickle"
    shutil.copytree(run["checkpoint"], folder)
    (folder / "model.safetensors").unlink()
    with (folder / "model.pt").open("wb") as f:
        pickle.dump({"weight": _Payload(marker)}, f, protocol=2)
    with pytest.raises(CheckpointError, match=r"model\.pt"):
        load_policy(folder)
    dcp_folder = tmp_path / "dcp_pickle"
    shutil.copytree(run["checkpoint"], dcp_folder)
    (dcp_folder / "model.safetensors").unlink()
    (dcp_folder / "dcp").mkdir()
    (dcp_folder / "dcp" / ".metadata").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError, match=r"\.metadata"):
        load_policy(dcp_folder)
    assert not marker.exists()


def _edited(run, tmp_path: Path, name: str, edit) -> Path:
    folder = tmp_path / name
    shutil.copytree(run["checkpoint"], folder)
    doc = json.loads((folder / "policy.json").read_text())
    edit(doc, folder)
    (folder / "policy.json").write_text(json.dumps(doc))
    return folder


def test_folders_that_cannot_load_name_the_problem(run, tmp_path):
    newer = _edited(run, tmp_path, "newer", lambda d, f: d.update(policy_format=99))
    with pytest.raises(CheckpointError, match=r"policy_format 99.*reads policy_format 1.*newer"):
        load_policy(newer)
    no_stats = _edited(run, tmp_path, "no_stats", lambda d, f: (f / "stats.safetensors").unlink())
    with pytest.raises(CheckpointError, match=r"stats\.safetensors: missing"):
        load_policy(no_stats)
    not_installed = _edited(run, tmp_path, "plugin", lambda d, f: d.update(model_name="groot_n9",
                                                                          plugin={"distribution": "embodied-groot"}))
    with pytest.raises(PluginError, match=r"'groot_n9' from embodied-groot.*not installed"):
        load_policy(not_installed)
    other_model = _edited(run, tmp_path, "other", lambda d, f: d["model_config"].update(hidden_dim=64))
    with pytest.raises(CheckpointError, match="do not match TinyFlowPolicy"):
        load_policy(other_model)
    old = tmp_path / "old"
    shutil.copytree(run["checkpoint"], old)
    (old / "policy.json").unlink()
    with pytest.raises(CheckpointError, match=r"without policy\.json"):
        load_policy(old)
    with pytest.raises(CheckpointError, match="no such policy folder"):
        load_policy(tmp_path / "nowhere")


def test_template_records_no_statistics_it_does_not_use(run):
    """tiny_flow_policy declares no transforms: it normalizes nothing, so the folder holds no statistics."""
    assert read_stats(run["checkpoint"] / "stats.safetensors") == {}
    doc = json.loads((run["checkpoint"] / "policy.json").read_text())
    assert doc["policy_format"] == 1 and doc["plugin"]["distribution"] == "embodied-plugin-template"
    assert doc["interface"]["image_shapes"] == {"observation.images.front": [120, 160, 3],
                                                "observation.images.wrist": [72, 96, 3]}
