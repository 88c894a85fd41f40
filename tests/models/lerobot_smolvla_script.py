"""Runs in .venv-lerobot (lerobot 0.6.1): a tiny lerobot SmolVLA checkpoint and its actions for one observation.

    .venv-lerobot/bin/python tests/models/lerobot_smolvla_script.py OUT_DIR REQUEST.npz

Writes a local SmolVLM2 folder at smolvla_tiny's sizes (``benchmarks/lerobot_smolvla_vlm.py``) to OUT_DIR/vlm,
builds lerobot's ``SmolVLAPolicy`` on it (``load_vlm_weights=false``) for one camera ``observation.image`` (the
request's frame shape), a 4-D state and a 4-D action, gives every weight a seeded draw (N(0, 1/fan_in) matrices,
1 + N(0, 0.1^2) norm scales, N(0, 0.1^2) other vectors; transformers' own init leaves the action head near zero),
and saves it the way lerobot-train does: ``OUT_DIR/run/pretrained_model`` with ``config.json``,
``model.safetensors`` and the pre/post-processors holding the request's statistics. Then it runs lerobot's
preprocessor, ``predict_action_chunk(noise=...)`` and postprocessor on the request's observation (uint8 frame as
x / 255 channels-first, float32 state, the task) and saves the actions as OUT_DIR/actions.npy.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]


def _vlm_writer():
    spec = importlib.util.spec_from_file_location("lerobot_smolvla_vlm", REPO / "benchmarks" / "lerobot_smolvla_vlm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(out: Path, request_path: Path) -> None:
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    request = dict(np.load(request_path))
    vlm = out / "vlm"
    _vlm_writer().write_folder(vlm, "smolvla_tiny")
    height, width, _ = request["image"].shape
    config = SmolVLAConfig(
        input_features={"observation.image": PolicyFeature(type=FeatureType.VISUAL, shape=(3, height, width)),
                        "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(4,))},
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(4,))},
        chunk_size=10, n_action_steps=10, resize_imgs_with_padding=(64, 64), vlm_model_name=str(vlm),
        load_vlm_weights=False, num_vlm_layers=4, device="cpu", push_to_hub=False)
    torch.manual_seed(0)
    policy = SmolVLAPolicy(config)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if param.ndim >= 2:
                param.copy_(torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
            elif "norm" in name:
                param.copy_(1 + 0.1 * torch.randn(param.shape, generator=gen))
            else:
                param.copy_(0.1 * torch.randn(param.shape, generator=gen))
    policy.eval()
    stats = {key: {stat: torch.from_numpy(request[f"{key}|{stat}"]) for stat in ("mean", "std", "min", "max")}
             for key in ("observation.state", "action")}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    folder = out / "run" / "pretrained_model"
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)

    batch = {"observation.image": torch.from_numpy(request["image"]).permute(2, 0, 1)[None].float() / 255.0,
             "observation.state": torch.from_numpy(request["state"])[None].float(),
             "task": [str(request["task"])]}
    with torch.no_grad():
        actions = policy.predict_action_chunk(pre(batch), noise=torch.from_numpy(request["noise"]))
        actions = post(actions)
    np.save(out / "actions.npy", actions.numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
