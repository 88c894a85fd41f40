"""make_transforms(model_config, data_config, *, stats) of pi05 and lingbot_va: the sample transforms take
inference observations (no ``action``), and ``postprocess_actions`` maps the model's normalized actions back to
dataset units (the inverse of the training normalization, trimmed to the dataset's action width)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.errors import DataError
from embodied_data.formats.dummy import DummyDataset

PI05_DATA = {"camera_keys": ["observation.images.front"], "state_dim": 3, "action_dim": 2, "action_horizon": 4}


def test_pi05_postprocess_inverts_the_training_normalization() -> None:
    from embodied_models.pi05.transforms import make_transforms

    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"}, data=PI05_DATA)
    dataset = DummyDataset(config.data, num_samples=32)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    samples = [dataset[i] for i in (3, 17)]
    batch = transforms.collate_fn([transforms.sample_transform(s) for s in samples])
    assert batch.actions.shape == (2, 4, config.model.max_action_dim)
    restored = transforms.postprocess_actions(batch.actions)
    assert restored.shape == (2, 4, 2)
    torch.testing.assert_close(restored, torch.stack([s["action"] for s in samples]), atol=1e-5, rtol=1e-5)
    # an observation as a robot sends it: no action, no pad mask
    observation = {k: v for k, v in samples[0].items() if not k.startswith("action")}
    out = transforms.sample_transform(observation)
    assert "actions" not in out and out["tokens"].shape == (config.model.max_token_len,)
    inference = transforms.collate_fn([out])
    assert inference.actions is None and inference.images.shape[0] == 1


def _lingbot_sample(config, *, with_action: bool) -> dict:
    mcfg, dcfg = config.model, config.data
    steps = dcfg.num_latent_frames * dcfg.action_per_frame
    gen = torch.Generator().manual_seed(0)
    sample = {"latents": torch.randn(mcfg.in_channels, dcfg.num_latent_frames, 2, 4, generator=gen),
              "text_emb": torch.randn(3, mcfg.text_dim, generator=gen),
              "null_text_emb": torch.randn(0, mcfg.text_dim), "task": "pick the red cube",
              "episode_index": torch.tensor(0), "index": torch.tensor(5)}
    if with_action:
        sample["action"] = torch.linspace(-2.0, 6.0, steps * dcfg.action_dim).reshape(steps, dcfg.action_dim)
        sample["action_is_pad"] = torch.zeros(steps, dtype=torch.bool)
    return sample


def test_lingbot_va_observation_without_action_and_postprocess() -> None:
    from embodied_models.lingbot_va.transforms import make_transforms

    config = load_config(training={"model_name": "lingbot_va_tiny"})
    dim = config.data.action_dim
    stats = {"action": {"q01": np.linspace(-2.0, 0.0, dim), "q99": np.linspace(4.0, 6.0, dim)}}
    transforms = make_transforms(config.model, config.data, stats=stats)
    train = transforms.sample_transform(_lingbot_sample(config, with_action=True))
    assert train["actions"].shape[0] == config.model.action_dim
    observation = transforms.sample_transform(_lingbot_sample(config, with_action=False))
    assert "actions" not in observation and "actions_mask" not in observation
    assert torch.equal(observation["text_emb"], train["text_emb"])
    # sample_actions returns [B, steps, D] normalized actions of the used channels: postprocess inverts them
    raw = _lingbot_sample(config, with_action=True)["action"]
    channels = list(config.model.used_action_channel_ids)
    normalized = train["actions"][channels].squeeze(-1).flatten(1).T[None]
    torch.testing.assert_close(transforms.postprocess_actions(normalized)[0], raw, atol=1e-4, rtol=1e-5)
    with pytest.raises(DataError, match=r"q01/q99 statistics of 'action'.*data\.normalize_actions=false"):
        make_transforms(config.model, config.data, stats={"observation.state": stats["action"]})
