"""DreamZero's training mixture as LoongForge draws it (``data.use_mixture_dataset``), against golden draws computed
from the documented semantics (``tests/fixtures/dreamzero_mixture``) on a dataset of six trajectories of unequal
length: the (trajectory, step) of every index, the fixed step bound (default) and the reference's inclusive one,
``allow_padding_at_end``, uniform trajectory weights, the epoch, and the per-sample transform seed from the mixture
index; through the trainer's own data path (``--dataset-path`` as a mixture of one entry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch

from embodied_core.config.resolve import load_config, model_spec
from embodied_core.distributed.base import SingleProcessStrategy
from embodied_core.errors import UsageError
from embodied_core.trainer.components import build_data
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.mixture import build_mixture_draw
from tests.fixtures.dreamzero_mixture.make_fixture import write_dataset
from tests.support import DATASETS_DIR, REPO_ROOT

GOLDEN = json.loads((REPO_ROOT / "tests" / "fixtures" / "dreamzero_mixture" / "golden.json").read_text())
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("dz_mixture") / "zigzag")


def _config(path: Path, **data: Any) -> Any:
    settings = {"use_mixture_dataset": True, "mixture_sampling_seed": 5, "use_sample_transform_seed": True,
                "sample_transform_seed": 1234, "tokenizer_path": str(TOKENIZER), **data}
    return load_config("dreamzero_tiny", training={"dataset_path": str(path), "video_backend": "pyav"}, data=settings)


@pytest.fixture(scope="module")
def data(dataset: Path) -> Any:
    config = _config(dataset)
    return build_data(config, model_spec("dreamzero_tiny"), SingleProcessStrategy(config.training))


def _draws(data: Any, config_data: Any, epoch: int) -> list[list[int]]:
    entries = [d.dataset for d in data.mixture.dataset.datasets]
    draw = build_mixture_draw(entries, [1.0], seed=3047, data_config=config_data)
    return [list(draw.draw(epoch, i)[1:]) for i in range(len(draw))]


@pytest.mark.timeout(180)
def test_every_case_draws_the_golden_trajectory_and_step(data: Any) -> None:
    base = data.mixture.dataset.datasets[0].dataset  # the entry's dataset: six trajectories
    assert [b - a for a, b in base.episode_ranges()] == GOLDEN["lengths"]
    draw = data.mixture.order.draw
    assert len(draw) == GOLDEN["num_indices"] and len(data.loader.order) == 85
    for name, case in GOLDEN["cases"].items():
        config_data = attrs.evolve(data.mixture.embodiments[data.mixture.default_embodiment].data_config,
                                   mixture_sampling_seed=case["seed"],
                                   balance_trajectory_weights=case["balance_trajectory_weights"],
                                   allow_padding_at_end=case["allow_padding_at_end"],
                                   mixture_inclusive_step_bound=case["inclusive_step_bound"])
        assert _draws(data, config_data, case["epoch"]) == GOLDEN["draws"][name], name
    lengths = GOLDEN["lengths"]
    past_end = {name: sum(step + GOLDEN["max_delta_index"] >= lengths[t] for t, step in draws)
                for name, draws in GOLDEN["draws"].items()}
    assert past_end["fixed"] == 0 and past_end["reference"] > 0  # the inclusive bound's windows leave the episode


@pytest.mark.timeout(180)
def test_samples_are_the_drawn_steps_seeded_by_the_mixture_index(data: Any) -> None:
    dataset = data.mixture.dataset  # the drawn mixture: value epoch * n + i
    base = dataset.datasets[0].dataset  # the entry's LeRobot dataset (the dreamzero strategy's transform inside)
    n = len(dataset)
    for epoch, case in ((0, "fixed"), (1, "fixed_epoch1")):
        for index in (0, 1, 40, 84):
            entry, position = dataset.draw.locate(epoch, index)
            info = base.index.query(position).info
            assert (entry, info["trajectory_id"], info["base_index"]) == (0, *GOLDEN["draws"][case][index])
    assert base.index.query(dataset.draw.locate(0, 1)[1]).info["flat_index"] == 75  # trajectory 5, step 0
    differs = []
    for epoch, index in [(0, i) for i in range(6)] + [(1, 0), (1, 1)]:
        position = dataset.draw.locate(epoch, index)[1]
        seeded = dataset[epoch * n + index]["images"]  # sample_transform_seed + mixture index
        assert torch.equal(seeded, base.item(position, info={"flat_index": index})["images"])
        differs.append(not torch.equal(seeded, base[position]["images"]))  # seeded by the step's flat index
    assert any(differs)


@pytest.mark.timeout(180)
def test_the_loader_reads_every_index_of_the_epoch_once(data: Any) -> None:
    order = data.loader.order
    values = order(0)
    assert sorted(values) == list(range(85)) and values != list(range(85))  # shuffled, each index once
    assert sorted(order(1)) == list(range(85, 170))


@pytest.mark.timeout(180)
def test_two_entries_share_the_draws_by_their_balanced_weights(data: Any) -> None:
    base = data.mixture.dataset.datasets[0].dataset
    config_data = data.mixture.embodiments[data.mixture.default_embodiment].data_config
    draw = build_mixture_draw([base, base], [3.0, 1.0], seed=5, data_config=config_data)
    assert draw.shares() == pytest.approx([0.75, 0.25]) and len(draw) == 85
    unbalanced = build_mixture_draw([base, base], [3.0, 1.0], seed=5,
                                    data_config=attrs.evolve(config_data, balance_dataset_weights=False))
    assert unbalanced.shares() == pytest.approx([0.75, 0.25]) and len(unbalanced) == 85


def test_mixture_settings_without_the_mixture_and_with_language_chunks_are_errors() -> None:
    problems = DreamZeroDataConfig(allow_padding_at_end=True, mixture_inclusive_step_bound=True).validate()
    assert ("data.allow_padding_at_end, data.mixture_inclusive_step_bound act only with "
            "data.use_mixture_dataset=true") in problems
    problems = DreamZeroDataConfig(use_mixture_dataset=True, language_chunk_sampling=True).validate()
    assert any("language_chunk_sampling=true samples language-chunk anchors" in p for p in problems)


@pytest.mark.timeout(180)
def test_streaming_is_refused_with_the_drawn_mixture(dataset: Path) -> None:
    config = _config(dataset)
    config = attrs.evolve(config, training=attrs.evolve(config.training, streaming=True))
    with pytest.raises(UsageError, match="--streaming reads episodes block by block"):
        build_data(config, model_spec("dreamzero_tiny"), SingleProcessStrategy(config.training))
