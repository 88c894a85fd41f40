"""Stats: reading the three LeRobot layouts, aggregation, exact quantiles, computation when absent, normalization."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from embodied_core.errors import DataError
from embodied_data.normalize import Normalizer, quantile_normalize, quantile_unnormalize
from embodied_data.stats import (
    aggregate_stats,
    compute_feature_stats,
    compute_image_stats,
    dataset_stats,
    read_episodes_stats_jsonl,
    read_stats_json,
    read_v30_episode_stats,
)
from embodied_data.stats.frames import decode_frames_at
from tests.support import DATASETS_DIR

WRITTEN = DATASETS_DIR / "lerobot_written"
LENGTHS = {0: 37, 1: 52, 2: 5, 3: 26}


def _actions(episodes: list[int]) -> np.ndarray:
    """``action`` of lerobot_written as its README defines it: 1000*ep + frame + 0.5*j + 0.25."""
    rows = [[1000 * ep + f + 0.5 * j + 0.25 for j in range(4)] for ep in episodes for f in range(LENGTHS[ep])]
    return np.asarray(rows, dtype=np.float32).astype(np.float64)


def test_v21_episode_stats_aggregate_to_the_v20_stats_json() -> None:
    per_episode = read_episodes_stats_jsonl(WRITTEN / "v21/meta/episodes_stats.jsonl")
    assert sorted(per_episode) == [0, 1, 2, 3]
    combined = aggregate_stats([per_episode[e] for e in sorted(per_episode)])
    stored = read_stats_json(WRITTEN / "v20/meta/stats.json")  # lerobot's aggregate_stats over the same files
    for key, per in stored.items():
        for name, value in per.items():
            np.testing.assert_allclose(combined[key][name], value, rtol=1e-12, atol=1e-12, err_msg=f"{key}/{name}")
    assert combined["observation.images.front"]["mean"].shape == (3, 1, 1)
    assert int(combined["action"]["count"][0]) == 120


def test_v30_episode_stats_from_the_episodes_parquet() -> None:
    per_episode = read_v30_episode_stats(WRITTEN / "v30/meta")
    assert {e: int(s["action"]["count"][0]) for e, s in per_episode.items()} == LENGTHS
    combined = aggregate_stats([per_episode[e] for e in range(4)])
    np.testing.assert_allclose(combined["action"]["mean"], _actions([0, 1, 2, 3]).mean(0), rtol=1e-12)
    np.testing.assert_allclose(combined["action"]["std"], _actions([0, 1, 2, 3]).std(0), rtol=1e-6)
    stored = read_stats_json(WRITTEN / "v30/meta/stats.json")
    for name in ("min", "max", "mean", "std"):
        np.testing.assert_allclose(combined["action"][name], stored["action"][name], rtol=1e-9)


@pytest.mark.parametrize("version", ["v20", "v21", "v30", "v30_converted"])
def test_dataset_stats_quantiles_are_real_quantiles(version: str) -> None:
    result = dataset_stats(WRITTEN / version)
    actions = _actions([0, 1, 2, 3])
    action = result.stats["action"]
    np.testing.assert_allclose(action["mean"], actions.mean(0), rtol=1e-9)
    np.testing.assert_allclose(action["min"], actions.min(0))
    for name, q in (("q01", 0.01), ("q50", 0.5), ("q99", 0.99)):
        np.testing.assert_allclose(action[name], np.quantile(actions, q, axis=0), rtol=1e-12, err_msg=name)
    assert (action["q01"] > action["min"]).all()
    assert (action["q99"] < action["max"]).all()
    assert "quantiles computed from data" in result.sources["action"]
    assert result.stats["next.reward"]["mean"].shape == (1,)
    assert result.stats["observation.images.front"]["mean"].shape == (3, 1, 1)


def test_episode_subset_aggregates_only_those_episodes() -> None:
    result = dataset_stats(WRITTEN / "v21", episodes=[1, 2])
    np.testing.assert_allclose(result.stats["action"]["mean"], _actions([1, 2]).mean(0), rtol=1e-9)
    np.testing.assert_allclose(result.stats["action"]["q01"], np.quantile(_actions([1, 2]), 0.01, axis=0))
    assert int(result.stats["action"]["count"][0]) == 57
    assert result.sources["action"].startswith("episodes_stats.jsonl")


def test_stats_computed_when_absent(tmp_path: Path) -> None:
    """v2.0 keeps only global stats.json; without it (or for a subset) everything is computed."""
    root = tmp_path / "v20"
    shutil.copytree(WRITTEN / "v20", root)
    (root / "meta/stats.json").unlink()
    result = dataset_stats(root, episodes=[0, 3], frames_per_episode=6)
    np.testing.assert_allclose(result.stats["action"]["std"], _actions([0, 3]).std(0), rtol=1e-9)
    assert result.sources["action"] == "computed from data"
    image = result.stats["observation.images.front"]
    assert result.sources["observation.images.front"].startswith("computed from 6 sampled frames")
    assert image["mean"].shape == (3, 1, 1)
    assert int(image["count"][0]) == 37 + 26
    # the stored per-episode stats (all frames) of those episodes agree with the sampled estimate
    per = read_episodes_stats_jsonl(WRITTEN / "v21/meta/episodes_stats.jsonl")
    reference = aggregate_stats([per[0], per[3]])["observation.images.front"]
    np.testing.assert_allclose(image["mean"], reference["mean"], atol=0.03)
    assert (image["q01"] <= image["q50"]).all()
    assert (image["q50"] <= image["q99"]).all()


def test_image_quantiles_on_request_keep_stored_moments() -> None:
    result = dataset_stats(WRITTEN / "v30", episodes=[2], image_quantiles=True, frames_per_episode=3)
    wrist = result.stats["observation.images.wrist"]
    stored = read_v30_episode_stats(WRITTEN / "v30/meta")[2]["observation.images.wrist"]
    np.testing.assert_allclose(wrist["mean"], stored["mean"])
    assert "q99" in wrist
    assert "sampled frames" in result.sources["observation.images.wrist"]


def test_missing_video_is_an_error_naming_file_and_episode(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"video file missing: .*nope\.mp4 \(episode 4\)"):
        decode_frames_at(tmp_path / "nope.mp4", [0.0], fps=30, episode=4)


def test_compute_feature_and_image_stats() -> None:
    values = np.arange(100, dtype=np.float64)
    stats = compute_feature_stats(values)
    assert stats["mean"].shape == (1,)
    assert stats["q01"][0] == pytest.approx(0.99)
    assert stats["q99"][0] == pytest.approx(98.01)
    frames = np.zeros((2, 3, 4, 4), dtype=np.uint8)
    frames[:, 1] = 255
    image = compute_image_stats(frames)
    assert image["mean"].ravel().tolist() == [0.0, 1.0, 0.0]
    assert image["count"].tolist() == [2]


def test_quantile_normalization_maps_q01_q99_to_unit_range() -> None:
    q01, q99 = torch.tensor([0.0, 10.0]), torch.tensor([2.0, 30.0])
    x = torch.tensor([[0.0, 10.0], [2.0, 30.0], [1.0, 20.0], [4.0, 0.0]])
    y = quantile_normalize(x, q01, q99)
    np.testing.assert_allclose(y[:3].numpy(), [[-1, -1], [1, 1], [0, 0]], atol=1e-5)
    assert y[3, 0] > 1  # outside the 1st-99th percentile: not clipped by default
    np.testing.assert_allclose(quantile_unnormalize(y, q01, q99).numpy(), x.numpy(), atol=1e-5)
    assert quantile_normalize(x, q01, q99, clip=True).abs().max() <= 1


def test_normalizer_from_dataset_stats() -> None:
    stats = dataset_stats(WRITTEN / "v21").stats
    normalizer = Normalizer(stats, {"action": "quantile", "observation.state": "mean_std"})
    sample = {"action": torch.from_numpy(_actions([1])[:8]).float(), "task": "x"}
    out = normalizer.normalize(sample)
    assert out["task"] == "x"
    torch.testing.assert_close(normalizer.unnormalize(out)["action"], sample["action"])
    with pytest.raises(ValueError, match=r"needs stats q01, q99"):
        Normalizer({"action": {"mean": np.zeros(4)}}, {"action": "quantile"})
    with pytest.raises(ValueError, match="unknown normalization mode"):
        Normalizer(stats, {"action": "zscore"})


def test_image_features_stored_in_the_parquet(tmp_path: Path) -> None:
    """dtype ``image`` cameras (PNG bytes in the data parquet) get stats from sampled rows."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    root = tmp_path / "v21"
    shutil.copytree(WRITTEN / "v21", root)
    (root / "meta/episodes_stats.jsonl").unlink()
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.images.top"] = {"dtype": "image", "shape": [4, 4, 3],
                                                  "names": ["height", "width", "channel"]}
    (root / "meta/info.json").write_text(json.dumps(info))

    def png(value: int) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(np.full((4, 4, 3), value, dtype=np.uint8)).save(buffer, format="PNG")
        return buffer.getvalue()

    for file in sorted((root / "data").glob("**/*.parquet")):
        table = pq.read_table(file)
        frames = table.column("frame_index").to_pylist()
        cells = pa.array([{"bytes": png(3 * f), "path": None} for f in frames],
                         type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
        pq.write_table(table.append_column("observation.images.top", cells), file)
    result = dataset_stats(root, episodes=[1], frames_per_episode=52)
    top = result.stats["observation.images.top"]
    expected = np.arange(52) * 3 / 255
    np.testing.assert_allclose(top["mean"].ravel(), [expected.mean()] * 3)
    np.testing.assert_allclose(top["q99"].ravel(), [np.quantile(np.repeat(expected, 16), 0.99)] * 3)  # 4x4 pixels
    assert result.sources["observation.images.top"].startswith("computed from")
