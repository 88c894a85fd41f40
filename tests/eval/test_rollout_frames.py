"""Videos reuse the observation's frame: a rollout with frames never renders a second time."""

from __future__ import annotations

import numpy as np

from embodied_eval.baselines import HoldPolicy
from embodied_eval.chunking import ChunkedController
from embodied_eval.envs.synth_reach import make_env
from embodied_eval.rollout import run_episode


def test_video_frames_are_the_observation_frames_not_a_second_render():
    env = make_env(None, max_steps=6)
    renders = []
    seen = []

    def render() -> np.ndarray:  # any call here would be the second render of a step
        renders.append(1)
        raise AssertionError("the rollout rendered the scene again for the video")

    env.env.render = render
    observe = env._observation

    def keep(raw):
        out = observe(raw)
        seen.append(out["observation.images.front"].copy())
        return out

    env._observation = keep
    frames: list[np.ndarray] = []
    controller = ChunkedController(HoldPolicy(env.metadata, env.hold_action_for), replan_steps=1)
    result = run_episode(env, controller, index=0, seed=5, max_steps=6, frames=frames)
    assert not renders and result.length == 6
    assert len(frames) == len(seen) == 7  # the reset frame and one per step
    for frame, observed in zip(frames, seen, strict=True):
        assert np.array_equal(frame, observed)
    env.close()
