"""Statistics of a union of datasets from each dataset's own statistics (``data_mixture.stats: merged``, and the
entries that share one embodiment tag).

Per feature key and dimension, with ``n_i`` the samples of part i (its ``count`` stat, else its number of
samples), ``N = sum(n_i)``:

- ``mean = sum(n_i mean_i) / N`` and ``std = sqrt(sum(n_i (std_i^2 + (mean_i - mean)^2)) / N)``: the parallel
  (pooled) variance formula, exact for the population statistics the datasets store; ``min`` / ``max`` the
  extremes; ``count = N``.
- Quantiles (``q01`` ... ``q99``) are **approximate**: each part's distribution is modelled by the piecewise-linear
  CDF through its ``(min, 0)``, ``(q_k, k)`` ... ``(max, 1)`` points, the union's CDF is the count-weighted
  mixture of those, and each merged quantile is that mixture CDF's inverse (found by bisection). It equals the
  exact union quantile when the parts do not overlap at the level, and is far closer than the count-weighted
  average of the parts' quantiles (lerobot's ``aggregate_stats``) when they do not overlap at all (two datasets
  with actions around 0 and around 1000 have their union's q01 near 0, not near 500).

Other stats a part carries are kept only when every part has them with the same value, and are otherwise left
out with one log line naming them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from embodied_core.errors import UsageError

__all__ = ["QUANTILE_LEVELS", "merge_stats"]

logger = logging.getLogger("embodied.data")

QUANTILE_LEVELS = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
"""Quantile stat names and their levels."""
_MOMENTS = ("mean", "std", "min", "max", "count")


def _count(entry: Mapping[str, np.ndarray], fallback: int) -> float:
    if "count" in entry:
        return float(np.asarray(entry["count"], dtype=np.float64).reshape(-1)[0])
    return float(fallback)


def _cdf(x: np.ndarray, knots_x: np.ndarray, knots_f: np.ndarray) -> np.ndarray:
    """Right-continuous piecewise-linear CDF through ``(knots_x[:, k], knots_f[k])``, per dimension (row)."""
    out = (x >= knots_x[:, -1]).astype(np.float64)
    for k in range(knots_x.shape[1] - 1):
        lo, hi = knots_x[:, k], knots_x[:, k + 1]
        inside = (x >= lo) & (x < hi)
        span = np.where(hi > lo, hi - lo, 1.0)
        out = np.where(inside, knots_f[k] + (knots_f[k + 1] - knots_f[k]) * (x - lo) / span, out)
    return out


def _merged_quantiles(parts: Sequence[Mapping[str, np.ndarray]], weights: np.ndarray,
                      names: Sequence[str], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    levels = [QUANTILE_LEVELS[n] for n in names]
    knots = []
    for part in parts:
        columns = [np.asarray(part["min"], np.float64).reshape(-1)]
        columns += [np.asarray(part[n], np.float64).reshape(-1) for n in names]
        columns.append(np.asarray(part["max"], np.float64).reshape(-1))
        knots.append(np.maximum.accumulate(np.stack(columns, axis=1), axis=1))  # a CDF never decreases
    knots_f = np.array([0.0, *levels, 1.0])
    lo = np.min([k[:, 0] for k in knots], axis=0)
    hi = np.max([k[:, -1] for k in knots], axis=0)
    out = {}
    for name, level in zip(names, levels, strict=True):
        a, b = lo.copy(), hi.copy()
        for _ in range(80):  # bisection for min {x : mixture CDF(x) >= level}
            mid = (a + b) / 2
            cdf = sum(w * _cdf(mid, k, knots_f) for w, k in zip(weights, knots, strict=True))
            below = cdf < level
            a, b = np.where(below, mid, a), np.where(below, b, mid)
        out[name] = b.reshape(shape)
    return out


def _merge_key(key: str, parts: Sequence[Mapping[str, np.ndarray]], counts: Sequence[float],
               labels: Sequence[str]) -> tuple[dict[str, np.ndarray], set[str]]:
    shapes = {label: np.asarray(p["mean"]).shape for p, label in zip(parts, labels, strict=True)}
    if len(set(shapes.values())) > 1:
        listed = "; ".join(f"{label}: {shape}" for label, shape in shapes.items())
        raise UsageError(f"statistics of {key!r} cannot be merged: their shapes differ ({listed}); use "
                         "data_mixture.stats: per_entry (each embodiment its own statistics), or map the entries "
                         "to one layout (data: overrides, --robot-type)")
    n = np.asarray(counts, dtype=np.float64)
    total = n.sum()
    weights = n / total
    mean = sum(w * np.asarray(p["mean"], np.float64) for w, p in zip(weights, parts, strict=True))
    var = sum(w * (np.asarray(p["std"], np.float64) ** 2 + (np.asarray(p["mean"], np.float64) - mean) ** 2)
              for w, p in zip(weights, parts, strict=True))
    shape = np.asarray(parts[0]["mean"]).shape
    merged = {"mean": mean, "std": np.sqrt(np.maximum(var, 0.0)),
              "min": np.min([np.asarray(p["min"], np.float64) for p in parts], axis=0),
              "max": np.max([np.asarray(p["max"], np.float64) for p in parts], axis=0),
              "count": np.array([round(total)], dtype=np.int64)}
    names = [q for q in QUANTILE_LEVELS if all(q in p for p in parts)]
    merged.update(_merged_quantiles(parts, weights, names, shape))
    dropped = set()
    for stat in set().union(*parts) - set(merged):
        values = [np.asarray(p[stat]) if stat in p else None for p in parts]
        if all(v is not None and v.shape == values[0].shape and np.array_equal(v, values[0]) for v in values):
            merged[stat] = values[0]
        else:
            dropped.add(stat)
    return merged, dropped


def merge_stats(parts: Sequence[Mapping[str, Mapping[str, np.ndarray]]], *, counts: Sequence[int],
                labels: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """The statistics of the union of ``parts`` (see the module docstring).

    Args:
        parts: each dataset's ``{key: {stat: array}}``.
        counts: each dataset's number of samples (used when a key carries no ``count``).
        labels: how messages name each part.

    A key is merged over the parts that have it; a key without ``mean`` / ``std`` / ``min`` / ``max`` in one of
    them is kept only if identical everywhere.

    Raises:
        UsageError: a key whose statistics have different shapes in two parts (names the parts and shapes).
    """
    if len(parts) == 1:
        return {key: dict(entry) for key, entry in parts[0].items()}
    out: dict[str, dict[str, np.ndarray]] = {}
    dropped: dict[str, set[str]] = {}
    for key in dict.fromkeys(k for p in parts for k in p):
        having = [i for i, p in enumerate(parts) if key in p]
        group = [parts[i][key] for i in having]
        if not all(all(m in g for m in _MOMENTS[:4]) for g in group):
            same = all(set(g) == set(group[0]) and all(np.array_equal(g[s], group[0][s]) for s in g) for g in group)
            if same:
                out[key] = dict(group[0])
            else:
                dropped[key] = {"(all)"}
            continue
        merged, lost = _merge_key(key, group, [_count(g, counts[i]) for g, i in zip(group, having, strict=True)],
                                  [labels[i] for i in having])
        out[key] = merged
        if lost:
            dropped[key] = lost
    if dropped:
        logger.info("merged statistics leave out what differs between the datasets and cannot be merged: %s",
                    "; ".join(f"{key}: {', '.join(sorted(stats))}" for key, stats in dropped.items()))
    return out
