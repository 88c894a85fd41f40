"""``state_action_normalizer``: the normalizer every VLA plugin builds from ``data.normalization``, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied_core.errors import DataError
from embodied_data.normalize import state_action_normalizer

STATS = {"observation.state": {"q01": np.zeros(2), "q99": np.full(2, 2.0)},
         "action": {"q01": np.zeros(2), "q99": np.full(2, 4.0)}}


def _build(mode: str, stats=STATS, **kwargs):
    return state_action_normalizer(mode, stats, state_key="observation.state", action_key="action", **kwargs)


def test_none_builds_nothing_and_a_mode_normalizes_both_keys() -> None:
    assert _build("none") is None
    out = _build("quantile").normalize({"observation.state": torch.ones(2), "action": torch.full((2,), 4.0)})
    torch.testing.assert_close(out["observation.state"], torch.zeros(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(out["action"], torch.ones(2), atol=1e-5, rtol=0)


def test_errors_name_the_setting_and_what_is_missing() -> None:
    with pytest.raises(DataError, match=r"none were given; set data.normalization=none to train on raw values \(X"):
        _build("quantile", None, raw_hint=" (X-VLA's default)")
    with pytest.raises(DataError, match=r"no 'action' \(they cover observation.state\); set data.state_key"):
        _build("quantile", {"observation.state": STATS["observation.state"]})
    with pytest.raises(DataError, match=r"(?s)data.normalization=mean_std: .*needs stats mean, std \(the dataset "
                                        r"stats have q01, q99\)"):
        _build("mean_std")
