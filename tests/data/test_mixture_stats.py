"""Statistics of a mixture: ``stats: merged`` against a direct computation over the union of two real datasets'
values, the merge rules themselves, and entries that share an embodiment tag sharing their union's statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from embodied_core.config.resolve import load_config, model_spec
from embodied_core.data.mixture import build_mixture, merge_stats
from embodied_core.errors import UsageError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.stats.dataset import read_numeric_columns
from embodied_data.synth.writer import SynthConfig, write_synthetic_dataset

KEYS = ("observation.state", "action")
LEVELS = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two small synthetic LeRobot v3.0 datasets: same features, different episodes and values."""
    root = tmp_path_factory.mktemp("mixture_stats")
    paths = []
    for seed, episodes in ((0, 3), (1, 5)):
        path = root / f"synth{seed}"
        write_synthetic_dataset(path, SynthConfig(num_episodes=episodes, min_length=12, max_length=30,
                                                  image_size=(32, 32), seed=seed))
        paths.append(path)
    return paths


def _mixture(tmp: Path, datasets: list[Path], stats: str, tags: list[str]) -> object:
    file = tmp / f"mix_{stats}.yaml"
    file.write_text(yaml.safe_dump({"stats": stats, "entries": [
        {"path": str(p), "embodiment": tag} for p, tag in zip(datasets, tags, strict=True)]}))
    config = load_config("pi05_tiny", training={"dataset_mixture": str(file), "video_backend": "pyav"})
    return build_mixture(config, model_spec("pi05_tiny"))


def _union(datasets: list[Path], key: str) -> np.ndarray:
    parts = []
    for path in datasets:
        meta = LeRobotMeta.load(path)
        parts.append(read_numeric_columns(meta, [key], list(meta.episodes))[key])
    return np.concatenate(parts).astype(np.float64)


def entry_stats(path: Path, key: str) -> dict[str, np.ndarray]:
    meta = LeRobotMeta.load(path)
    return _normal_stats(read_numeric_columns(meta, [key], list(meta.episodes))[key].astype(np.float64))


def _bracket(parts: list[dict[str, np.ndarray]], level: float) -> tuple[np.ndarray, np.ndarray]:
    """Where the union's ``level`` quantile can be, knowing only each part's count, min, quantiles and max: between
    a part's consecutive stored points its CDF is anywhere between the two stored levels."""
    names = ["min", *LEVELS, "max"]
    levels = np.array([0.0, *LEVELS.values(), 1.0])
    weights = np.array([float(p["count"][0]) for p in parts])
    weights /= weights.sum()
    knots = [np.stack([p[n] for n in names], axis=-1) for p in parts]  # [dims, 7]
    grid = np.linspace(min(k[:, 0].min() for k in knots), max(k[:, -1].max() for k in knots), 40001)
    lo, hi = [], []
    for d in range(knots[0].shape[0]):
        below, above = np.zeros_like(grid), np.zeros_like(grid)
        for w, k in zip(weights, knots, strict=True):
            index = np.searchsorted(k[d], grid, side="right") - 1  # last stored point <= x
            below += w * np.where(index < 0, 0.0, levels[np.clip(index, 0, 6)])
            above += w * np.where(index >= 6, 1.0, levels[np.clip(index + 1, 0, 6)])
        step = grid[1] - grid[0]
        lo.append(grid[np.argmax(above >= level)] - step)
        hi.append(grid[np.argmax(below >= level)] + step)
    return np.array(lo), np.array(hi)


@pytest.mark.timeout(120)
def test_merged_stats_equal_a_direct_computation_over_the_union(datasets: list[Path], tmp_path: Path) -> None:
    mixture = _mixture(tmp_path, datasets, "merged", ["a", "b"])
    stats = mixture.embodiments["a"].stats
    assert stats is mixture.embodiments["b"].stats  # one set for every entry
    for key in KEYS:
        values = _union(datasets, key)
        merged = stats[key]
        assert int(merged["count"][0]) == len(values)
        np.testing.assert_allclose(merged["mean"], values.mean(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(merged["std"], values.std(axis=0), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(merged["min"], values.min(axis=0))
        np.testing.assert_array_equal(merged["max"], values.max(axis=0))
        # quantiles are approximate (module doc of embodied_core.data.mixture.stats): each merged quantile, like the
        # exact one of the union, lies where every dataset's own stored quantiles allow it to be
        parts = [entry_stats(path, key) for path in datasets]
        for name, level in LEVELS.items():
            lo, hi = _bracket(parts, level)
            exact = np.quantile(values, level, axis=0)
            assert np.all((lo <= exact) & (exact <= hi)), (key, name, lo, exact, hi)
            assert np.all((lo - 1e-9 <= merged[name]) & (merged[name] <= hi + 1e-9)), (key, name, lo, merged[name], hi)


@pytest.mark.timeout(120)
def test_entries_sharing_a_tag_share_their_unions_stats(datasets: list[Path], tmp_path: Path) -> None:
    mixture = _mixture(tmp_path, datasets, "per_entry", ["robot", "robot"])
    assert list(mixture.embodiments) == ["robot"] and mixture.embodiments["robot"].entries == (0, 1)
    state = mixture.embodiments["robot"].stats["observation.state"]
    np.testing.assert_allclose(state["mean"], _union(datasets, "observation.state").mean(axis=0), rtol=1e-12)


def _normal_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    out = {"mean": values.mean(0), "std": values.std(0), "min": values.min(0), "max": values.max(0),
           "count": np.array([len(values)])}
    out.update({name: np.quantile(values, level, axis=0) for name, level in LEVELS.items()})
    return out


def test_quantiles_of_datasets_that_do_not_overlap_are_those_of_their_union() -> None:
    rng = np.random.default_rng(0)
    near, far = rng.normal(0.0, 1.0, (4000, 2)), rng.normal(1000.0, 1.0, (1000, 2))
    merged = merge_stats([{"action": _normal_stats(near)}, {"action": _normal_stats(far)}], counts=[0, 0],
                         labels=["near", "far"])["action"]
    union = np.concatenate([near, far])
    for name, level in LEVELS.items():
        np.testing.assert_allclose(merged[name], np.quantile(union, level, axis=0), atol=0.35)
    averaged = 0.8 * np.quantile(near, 0.01, axis=0) + 0.2 * np.quantile(far, 0.01, axis=0)  # lerobot's rule
    assert np.all(averaged > 150) and np.all(merged["q01"] < 0)
    np.testing.assert_allclose(merged["std"], union.std(axis=0), rtol=1e-12)


def test_stats_of_different_shapes_are_not_merged_and_the_parts_are_named() -> None:
    a = {"observation.state": _normal_stats(np.ones((5, 7)))}
    b = {"observation.state": _normal_stats(np.ones((5, 26)))}
    with pytest.raises(UsageError, match=r"'observation.state' cannot be merged: .*arm: \(7,\); g1: \(26,\)"):
        merge_stats([a, b], counts=[5, 5], labels=["arm", "g1"])
