"""LeRobot reader behaviour beyond the golden outputs: metadata variants, selection, errors, workers, caching."""

from __future__ import annotations

import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot import LeRobotMeta, read_version
from embodied_data.lerobot.dataset import LeRobotDataset
from tests.support import DATASETS_DIR

WRITTEN = DATASETS_DIR / "lerobot_written"
FPS = 30


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name.replace("/", "_")
    shutil.copytree(DATASETS_DIR / name, dst)
    for path in dst.rglob("*"):  # the shared tree is read-only; the copy must be editable
        path.chmod(0o755 if path.is_dir() else 0o644)
    dst.chmod(0o755)
    return dst


def _edit_info(root: Path, edit: Callable[[dict], None]) -> None:
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    edit(info)
    path.write_text(json.dumps(info, indent=2))


# ---------------------------------------------------------------------------- metadata
@pytest.mark.parametrize("version", ["v20", "v21", "v30", "v30_converted"])
def test_metadata_of_every_version(version: str) -> None:
    meta = LeRobotMeta.load(WRITTEN / version)
    assert meta.version == {"v20": "v2.0", "v21": "v2.1"}.get(version, "v3.0")
    assert meta.fps == FPS and meta.robot_type == "synthetic_arm"
    assert meta.camera_keys == ["observation.images.front", "observation.images.wrist"]
    assert [e.length for e in meta.episodes.values()] == [37, 52, 5, 26]
    assert [(e.from_index, e.to_index) for e in meta.episodes.values()] == [(0, 37), (37, 89), (89, 94), (94, 120)]
    assert meta.tasks == {0: "pick the red cube", 1: "stack the blue block"}
    assert meta.splits == {"train": [0, 1, 2, 3]}
    assert meta.features["observation.state"].shape == (7,)
    assert meta.features["observation.images.front"].declared_codec == "av1"
    for ep in meta.episodes:
        assert meta.data_file(ep).exists()
        for cam in meta.camera_keys:
            assert meta.video_file(ep, cam).exists()


def test_v30_episode_file_mapping_and_offsets() -> None:
    meta = LeRobotMeta.load(WRITTEN / "v30")
    front, wrist = "observation.images.front", "observation.images.wrist"
    assert meta.video_file(2, front).name == "file-001.mp4" and meta.video_from_timestamp(2, front) == 0.0
    assert meta.video_file(2, wrist).name == "file-000.mp4"
    assert meta.video_from_timestamp(2, wrist) == pytest.approx(2.9667, abs=1e-4)
    assert meta.video_from_timestamp(3, front) == pytest.approx(0.1667, abs=1e-4)
    assert meta.data_file(3).name == "file-001.parquet" and meta.data_file(2).name == "file-000.parquet"


def test_stats_readers() -> None:
    v20, v21, v30 = (LeRobotMeta.load(WRITTEN / v) for v in ("v20", "v21", "v30"))
    assert v20.read_episode_stats() == {} and v20.read_stats() is not None
    assert "count" not in v20.read_stats()["observation.state"]
    per_episode = v21.read_episode_stats()
    assert sorted(per_episode) == [0, 1, 2, 3]
    np.testing.assert_allclose(per_episode[0]["observation.state"]["max"], 36 + np.arange(7) / 8)
    v30_stats = v30.read_episode_stats()
    np.testing.assert_allclose(v30_stats[1]["action"]["min"], 1000 + 0.5 * np.arange(4) + 0.25)
    assert v30.read_stats()["action"]["max"].shape == (4,)


def test_legacy_video_info_and_nested_names(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v20", tmp_path)

    def legacy(info: dict) -> None:
        for feature in info["features"].values():
            if "info" in feature:
                feature["video_info"] = feature.pop("info")
        info["features"]["observation.state"]["names"] = [info["features"]["observation.state"]["names"]]

    _edit_info(root, legacy)
    meta = LeRobotMeta.load(root)
    assert meta.features["observation.images.front"].declared_codec == "av1"
    assert meta.features["observation.state"].names == tuple(f"s{i}" for i in range(7))
    assert LeRobotDataset(root, meta=meta)[0]["observation.images.front"].shape == (3, 120, 160)


def test_tasks_parquet_with_task_column(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v30", tmp_path)
    pq.write_table(pa.table({"task_index": [0, 1], "task": ["pick the red cube", "stack the blue block"]}),
                   root / "meta" / "tasks.parquet")
    assert LeRobotMeta.load(root).tasks == {0: "pick the red cube", 1: "stack the blue block"}


def test_version_must_agree_with_info_json() -> None:
    with pytest.raises(UsageError, match=r"is LeRobot v2\.1.*--lerobotdataset-version v2\.1"):
        LeRobotMeta.load(WRITTEN / "v21", expected_version="v3.0")
    assert read_version(WRITTEN / "v20") == "v2.0"


def test_unsupported_version(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v21", tmp_path)
    _edit_info(root, lambda info: info.update(codebase_version="v1.6"))
    with pytest.raises(DataError, match=r"v1\.6.*not supported"):
        LeRobotMeta.load(root)


# ---------------------------------------------------------------------------- samples
def test_shapes_without_deltas_and_task_per_frame() -> None:
    ds = LeRobotDataset(WRITTEN / "v21")
    sample = ds[94 + 12]
    assert sample["observation.state"].shape == (7,) and sample["action"].shape == (4,)
    assert sample["next.reward"].shape == () and sample["index"].dtype == torch.int64
    assert sample["observation.images.front"].shape == (3, 120, 160)
    assert sample["observation.images.wrist"].dtype == torch.uint8
    assert not any(k.endswith("_is_pad") for k in sample)
    # episode 3 changes task at frame 13: the task follows the frame, not the episode
    assert sample["task"] == "stack the blue block" and ds[94 + 13]["task"] == "pick the red cube"


def test_pad_masks_clamp_to_episode() -> None:
    deltas = {"action": [i / FPS for i in range(8)], "observation.state": [-2 / FPS, -1 / FPS, 0.0]}
    ds = LeRobotDataset(WRITTEN / "v30", delta_timestamps=deltas, camera_keys=[])
    sample = ds[91]  # episode 2 (89..93), frame 2 of 5
    assert sample["action_is_pad"].tolist() == [False, False, False, True, True, True, True, True]
    assert sample["action"][:, 0].tolist() == [2002.25, 2003.25, 2004.25] + [2004.25] * 5
    first = ds[89]
    assert first["observation.state_is_pad"].tolist() == [True, True, False]
    assert first["observation.state"][:, 0].tolist() == [200.0, 200.0, 200.0]
    assert "observation.images.front" not in sample


def test_episode_subset_and_splits(tmp_path: Path) -> None:
    ds = LeRobotDataset(WRITTEN / "v30", episodes=[3, 1], camera_keys=[])
    assert ds.episodes == [1, 3] and len(ds) == 52 + 26
    assert ds.episode_ranges() == [(0, 52), (52, 78)]
    assert int(ds[0]["index"]) == 37 and int(ds[52]["episode_index"]) == 3
    root = _copy("lerobot_written/v21", tmp_path)
    _edit_info(root, lambda info: info.update(splits={"train": "0:3", "val": "3:4"}))
    val = LeRobotDataset(root, split="val", camera_keys=[])
    assert val.episodes == [3] and len(val) == 26
    with pytest.raises(UsageError, match=r"splits in meta/info.json: train, val.*did you mean 'val'"):
        LeRobotDataset(root, split="vall")
    with pytest.raises(UsageError, match=r"episodes \[1\] are not in split 'val'"):
        LeRobotDataset(root, split="val", episodes=[1])
    with pytest.raises(UsageError, match=r"episodes \[7\] are not in"):
        LeRobotDataset(root, episodes=[7])


def test_missing_video_names_file_and_episode() -> None:
    with pytest.raises(DataError, match=r"episode 0: .*episode_000000\.mp4") as info:
        LeRobotDataset(DATASETS_DIR / "g1_inspire_v21")
    assert "90 video file(s)" in str(info.value)
    with pytest.raises(DataError, match=r"episode 7: .*file-007\.mp4"):
        LeRobotDataset(DATASETS_DIR / "lingzu_pi05_v30", episodes=[6, 7])


def test_delta_timestamp_checks() -> None:
    with pytest.raises(UsageError, match=r"not multiples of 1/fps"):
        LeRobotDataset(WRITTEN / "v21", delta_timestamps={"action": [0.0, 0.02]})
    with pytest.raises(UsageError, match=r"'actions' is not a feature.*did you mean 'action'"):
        LeRobotDataset(WRITTEN / "v21", delta_timestamps={"actions": [0.0]})
    with pytest.raises(UsageError, match=r"camera keys \['observation.images.top'\]"):
        LeRobotDataset(WRITTEN / "v21", camera_keys=["observation.images.top"])


def test_video_timestamp_outside_tolerance(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v30", tmp_path)
    path = next((root / "meta" / "episodes").rglob("*.parquet"))
    table = pq.read_table(path)
    column = "videos/observation.images.front/from_timestamp"
    shifted = [v + (0.01 if i == 3 else 0.0) for i, v in enumerate(table.column(column).to_pylist())]
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(shifted, pa.float64()))
    pq.write_table(table, path)
    ds = LeRobotDataset(root, camera_keys=["observation.images.front"])
    ds[93]  # episode 2 is untouched
    with pytest.raises(DataError, match=r"file-001\.mp4: episode 3, camera observation\.images\.front.*tolerance_s"):
        ds[94]


def test_parquet_timestamps_out_of_sync(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v21", tmp_path)
    path = root / "data" / "chunk-000" / "episode_000001.parquet"
    table = pq.read_table(path)
    ts = table.column("timestamp").to_numpy().copy()
    ts[10:] += 0.5
    table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", pa.array(ts, pa.float32()))
    pq.write_table(table, path)
    with pytest.raises(DataError, match=r"episode_000001\.parquet: timestamps are not 1/fps apart.*index 46"):
        LeRobotDataset(root, episodes=[1], camera_keys=[])


def test_row_count_must_match_metadata(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v21", tmp_path)
    path = root / "data" / "chunk-000" / "episode_000002.parquet"
    pq.write_table(pq.read_table(path).slice(0, 4), path)
    with pytest.raises(DataError, match=r"episode 2 has 4 rows but meta says length 5"):
        LeRobotDataset(root, camera_keys=[])


# ---------------------------------------------------------------------------- workers and decoders
def test_decoder_cache_is_bounded_and_dropped_on_pickle() -> None:
    ds = LeRobotDataset(WRITTEN / "v21", camera_keys=["observation.images.front"], decoder_cache_size=2)
    for position in (0, 40, 90, 100):  # four episodes -> four files
        ds[position]
    assert ds.backend.num_open == 2
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.backend.num_open == 0
    assert torch.equal(clone[100]["observation.images.front"], ds[100]["observation.images.front"])
    assert clone.backend.num_open == 1


def test_default_decoder_cache_holds_every_file_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a dataset keeps one decoder per video file it reads (a shuffled pass never reopens one), but
    never more than DECODER_CACHE_MAX."""
    from embodied_data.lerobot import dataset as dataset_module

    cameras = ["observation.images.front", "observation.images.wrist"]
    ds = LeRobotDataset(WRITTEN / "v21", camera_keys=cameras)  # four episodes x two cameras -> eight files
    files = {ds.meta.video_file(ep, cam) for ep in ds.episodes for cam in cameras}
    assert len(files) == 8 and ds.backend.cache_size == 8
    for position in (100, 0, 40, 90, 0, 100):
        ds[position]
    assert ds.backend.num_open == 8
    assert LeRobotDataset(WRITTEN / "v21", camera_keys=cameras, episodes=[1]).backend.cache_size == 2
    assert LeRobotDataset(WRITTEN / "v21", camera_keys=[]).backend.cache_size == 1
    monkeypatch.setattr(dataset_module, "DECODER_CACHE_MAX", 3)
    bounded = LeRobotDataset(WRITTEN / "v21", camera_keys=cameras)
    for position in (0, 40, 90, 100):
        bounded[position]
    assert bounded.backend.cache_size == 3 and bounded.backend.num_open == 3


@pytest.mark.timeout(120)
def test_dataloader_workers_match_in_process() -> None:
    deltas = {"action": [i / FPS for i in range(4)], "observation.images.wrist": [-1 / FPS, 0.0]}
    ds = LeRobotDataset(WRITTEN / "v30", delta_timestamps=deltas, camera_keys=["observation.images.wrist"])
    ds[0]  # the parent opens a decoder before forking: workers must not reuse it
    positions = [0, 36, 37, 88, 89, 93, 94, 119]
    loader = DataLoader(torch.utils.data.Subset(ds, positions), batch_size=4, num_workers=2)
    batches = list(loader)
    images = torch.cat([b["observation.images.wrist"] for b in batches])
    assert images.dtype == torch.uint8 and images.shape == (8, 2, 3, 72, 96)
    for i, position in enumerate(positions):
        assert torch.equal(images[i], ds[position]["observation.images.wrist"])
    assert [t for b in batches for t in b["task"]] == [ds[p]["task"] for p in positions]


def test_string_columns_stay_python_strings(tmp_path: Path) -> None:
    root = _copy("lerobot_written/v21", tmp_path)
    for ep in range(4):
        path = root / "data" / "chunk-000" / f"episode_{ep:06d}.parquet"
        table = pq.read_table(path)
        pq.write_table(table.append_column("note", pa.array([f"e{ep}f{i}" for i in range(table.num_rows)])), path)
    _edit_info(root, lambda info: info["features"].update(note={"dtype": "string", "shape": [1], "names": None}))
    ds = LeRobotDataset(root, camera_keys=[], delta_timestamps={"note": [-1 / FPS, 0.0]})
    assert ds[40]["note"] == ["e1f2", "e1f3"] and ds[37]["note"] == ["e1f0", "e1f0"]
    assert LeRobotDataset(root, camera_keys=[])[5]["note"] == "e0f5"
