"""The ten --lr-decay-style schedules against their docstring formulas: warmup, mid-decay, end, past the end."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch

from embodied_core import registry
from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError
from embodied_core.registry import groups
from embodied_core.trainer import components
from embodied_core.validation import validate_run_config

W, D, BASE, MIN = 10, 110, 1e-3, 1e-5
STYLES = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
          "inverse_sqrt", "cosine_with_min_lr", "cosine_warmup_with_min_lr", "lambda_linear")


def _lr_fn(style: str, **extra: Any) -> Any:
    extra = {"lr_end": MIN, **extra} if style == "polynomial" else extra
    args = TrainingArgs(lr_decay_style=style, lr_warmup_iters=W, lr_decay_iters=D, train_iters=500, min_lr=MIN,
                        **extra)
    return registry.load_factory(groups.LR_SCHEDULERS, style)(args)


def _p(step: int) -> float:
    return min(max((step - W) / (D - W), 0.0), 1.0)


def test_all_ten_styles_are_registered() -> None:
    assert set(STYLES) <= set(registry.names(groups.LR_SCHEDULERS))


@pytest.mark.parametrize("style", [s for s in STYLES if s not in ("constant", "cosine_warmup_with_min_lr",
                                                                  "lambda_linear")])
def test_warmup_is_linear_from_zero_to_the_peak(style: str) -> None:
    lr = _lr_fn(style)
    assert lr(0, BASE) == pytest.approx(BASE / W)
    assert lr(4, BASE) == pytest.approx(BASE * 5 / W)
    assert lr(W - 1, BASE) == pytest.approx(BASE)


# (style, formula after warmup) - straight from each docstring.
FORMULAS = {
    "linear": lambda s: BASE * (1 - _p(s)),
    "cosine": lambda s: BASE * 0.5 * (1 + math.cos(math.pi * _p(s))),
    "polynomial": lambda s: (BASE - MIN) * (1 - _p(s)) ** 2.0 + MIN,
    "constant_with_warmup": lambda s: BASE,
    "inverse_sqrt": lambda s: BASE * math.sqrt(W / (min(s, D) - W + W)),
    "cosine_with_min_lr": lambda s: MIN + (BASE - MIN) * 0.5 * (1 + math.cos(math.pi * _p(s))),
    "cosine_warmup_with_min_lr": lambda s: MIN + (BASE - MIN) * 0.5 * (1 + math.cos(math.pi * _p(s))),
    "cosine_with_restarts": lambda s: 0.0 if _p(s) >= 1 else BASE * 0.5 * (1 + math.cos(math.pi * ((3 * _p(s)) % 1))),
}
EXTRA = {"polynomial": {"lr_decay_power": 2.0}, "cosine_with_restarts": {"lr_num_cycles": 3}}


@pytest.mark.parametrize("style", sorted(FORMULAS))
@pytest.mark.parametrize("step", [W, 35, 60, 85, D - 1, D, D + 1, 2 * D, 499])
def test_decay_matches_its_formula(style: str, step: int) -> None:
    lr = _lr_fn(style, **EXTRA.get(style, {}))
    assert lr(step, BASE) == pytest.approx(FORMULAS[style](step), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("style", [s for s in STYLES if s != "lambda_linear"])
def test_past_the_end_is_clamped_and_never_climbs(style: str) -> None:
    lr = _lr_fn(style, **EXTRA.get(style, {}))
    end = lr(D, BASE)
    assert [lr(s, BASE) for s in (D + 1, D + 50, 3 * D, 10_000)] == pytest.approx([end] * 4)
    decay = [lr(s, BASE) for s in range(W, D + 20)]
    if style != "cosine_with_restarts":  # restarts rise inside the span by design, never after it
        assert all(b <= a + 1e-15 for a, b in itertools.pairwise(decay))


@pytest.mark.parametrize(("style", "end"), [("linear", 0.0), ("cosine", 0.0), ("cosine_with_restarts", 0.0),
                                            ("polynomial", MIN), ("cosine_with_min_lr", MIN),
                                            ("cosine_warmup_with_min_lr", MIN), ("constant", BASE),
                                            ("constant_with_warmup", BASE)])
def test_end_values_and_min_lr_floor(style: str, end: float) -> None:
    lr = _lr_fn(style)
    assert lr(D, BASE) == pytest.approx(end, abs=1e-15)
    if end == MIN:
        assert min(lr(s, BASE) for s in range(W, 3 * D)) >= MIN - 1e-18  # absolute floor, not relative


def test_min_lr_floor_never_lifts_a_group_above_its_own_peak() -> None:
    lr = _lr_fn("cosine_with_min_lr")
    assert lr(D, 1e-6) == pytest.approx(1e-6)  # group peak below --min-lr: stays at its peak
    assert lr(D, 0.0) == 0.0


def test_constant_ignores_warmup_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    lr = _lr_fn("constant")
    assert [lr(s, BASE) for s in (0, 5, W, D, 10 * D)] == [BASE] * 5
    assert "constant_with_warmup" in caplog.text


def test_cosine_warmup_with_min_lr_starts_at_the_floor() -> None:
    lr = _lr_fn("cosine_warmup_with_min_lr")
    assert lr(0, BASE) == pytest.approx(MIN + (BASE - MIN) / W)
    assert lr(W - 1, BASE) == pytest.approx(BASE)


def test_inverse_sqrt_without_warmup_and_without_floor() -> None:
    args = TrainingArgs(lr_decay_style="inverse_sqrt", lr_warmup_iters=0, lr_decay_iters=100, min_lr=0.5)
    lr = registry.load_factory(groups.LR_SCHEDULERS, "inverse_sqrt")(args)
    assert lr(0, 1.0) == 1.0
    assert lr(3, 1.0) == pytest.approx(0.5)  # 1 / sqrt(4): no --min-lr floor
    assert lr(100, 1.0) == pytest.approx(1 / math.sqrt(101))
    assert lr(1000, 1.0) == lr(100, 1.0)


def test_polynomial_ends_at_lr_end_not_at_min_lr() -> None:
    args = TrainingArgs(lr_decay_style="polynomial", lr_warmup_iters=0, lr_decay_iters=10, min_lr=1e-3, lr_end=1e-6,
                        lr_decay_power=2.0)
    lr = registry.load_factory(groups.LR_SCHEDULERS, "polynomial")(args)
    assert lr(10, 1.0) == pytest.approx(1e-6)
    assert lr(5, 1.0) == pytest.approx((1.0 - 1e-6) * 0.5**2 + 1e-6)
    assert lr(10, 1e-7) == pytest.approx(1e-7)  # --lr-end above a group's peak: the group ends at its peak


def test_polynomial_default_end_is_loongforge_default() -> None:
    lr = registry.load_factory(groups.LR_SCHEDULERS, "polynomial")(TrainingArgs(lr_decay_style="polynomial",
                                                                                lr_warmup_iters=0, lr_decay_iters=4))
    assert lr(4, 1e-3) == pytest.approx(1e-7)


LAMBDA = {"lambda_f_start": 0.1, "lambda_f_max": 0.8, "lambda_f_min": 0.05, "lambda_cycle_length": 60}


def test_lambda_linear_follows_loongforge_formula_and_repeats() -> None:
    c, f_start, f_max, f_min = 60, 0.1, 0.8, 0.05
    lr = _lr_fn("lambda_linear", **LAMBDA)
    for n in (0, 5, W - 1, W, 30, c - 1):
        factor = (f_max - f_start) * n / W + f_start if n < W else f_min + (f_max - f_min) * (c - n) / (c - W)
        assert lr(n, BASE) == pytest.approx(BASE * factor)
        for cycle in (1, 2, 7):  # the run goes on: every cycle repeats the first (--lr-decay-iters plays no part)
            assert lr(cycle * c + n, BASE) == pytest.approx(BASE * factor)
    assert lr(0, BASE) == pytest.approx(BASE * f_start)
    assert lr(W, BASE) == pytest.approx(BASE * f_max)


def test_lambda_linear_defaults_are_loongforge_defaults() -> None:
    args = TrainingArgs(lr_decay_style="lambda_linear", lr_warmup_iters=100)
    lr = registry.load_factory(groups.LR_SCHEDULERS, "lambda_linear")(args)
    assert lr(0, 1.0) == 0.0 and lr(50, 1.0) == pytest.approx(0.2)  # f_start 0 -> f_max 0.4 over the warmup
    assert lr(100, 1.0) == pytest.approx(0.4) and lr(9_999, 1.0) == pytest.approx(0.4 / 9_900)
    assert lr(10_000, 1.0) == 0.0  # cycle length 10000: the next cycle starts


@pytest.mark.parametrize("style", STYLES)
def test_lambda_lr_applies_the_schedule_to_each_group_peak(style: str) -> None:
    cycle = {"lambda_cycle_length": 12} if style == "lambda_linear" else {}
    args = TrainingArgs(lr_decay_style=style, lr_warmup_iters=3, lr_decay_iters=12, train_iters=20, min_lr=1e-5,
                        **cycle)
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    optimizer = torch.optim.SGD([{"params": [params[0]], "lr": 1e-3}, {"params": [params[1]], "lr": 5e-2}], lr=1.0)
    scheduler = components.build_scheduler(optimizer, args)
    lr_fn = registry.load_factory(groups.LR_SCHEDULERS, style)(args)
    for step in range(20):
        assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([lr_fn(step, 1e-3), lr_fn(step, 5e-2)])
        optimizer.step()
        scheduler.step()


def _config(**training: Any) -> RunConfig:
    from embodied_core.config.resolve import load_config

    return load_config(training={"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", **training})


@pytest.mark.parametrize(("training", "message"), [
    ({"lr_num_cycles": 3}, "--lr-num-cycles 3: read only by --lr-decay-style cosine_with_restarts"),
    ({"lr_decay_power": 2.0, "lr_decay_style": "linear"}, "--lr-decay-power 2.0: read only by"),
    ({"lr_decay_style": "lambda_linear", "lr_warmup_iters": 50, "lambda_cycle_length": 50},
     "must be shorter than the cycle length --lambda-cycle-length 50"),
    ({"lambda_f_max": 1.0}, "--lambda-f-max 1.0: read only by --lr-decay-style lambda_linear"),
    ({"lambda_cycle_length": 7, "lr_decay_style": "cosine"}, "--lambda-cycle-length 7: read only by"),
    ({"lr_end": 0.0}, "--lr-end 0.0: read only by --lr-decay-style polynomial"),
])
def test_schedule_flags_are_validated(training: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_run_config(_config(**training), world_size=1)
