"""The synth_reach environment is the task ``embodied data synth`` records: the same episode draw, pictures and
transitions; the recorded expert solves it and holding still does not. Plus the chunk executor on a real policy
and the success-rate interval."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from embodied_core import load_policy
from embodied_data.synth.task import Episode, TaskParams, render_frames, simulate_episode
from embodied_eval.chunking import ChunkedController
from embodied_eval.envs.synth_reach import GYM_ID, SUCCESS_RADIUS, SynthReachEnv
from embodied_eval.intervals import wilson_interval


def _expert(seed: int, steps: int) -> Episode:
    """The synth writer's episode for a generator seeded with ``seed`` (what the env draws on reset)."""
    return simulate_episode(np.random.default_rng(seed), length=steps + 1, fps=10.0, task_index=0,
                            params=TaskParams())


@pytest.mark.parametrize("cameras", [("front",), ("front", "wrist")])
def test_replaying_the_recorded_expert_reproduces_its_states_and_frames(cameras):
    steps = 30
    env = SynthReachEnv(image_size=(64, 80), cameras=cameras, max_episode_steps=steps, hold_frames=10**6)
    expert = _expert(11, steps)
    obs, info = env.reset(seed=11)
    frames = {view: render_frames(expert, height=64, width=80, view=view) for view in cameras}
    for t in range(steps):
        assert np.array_equal(obs["agent_pos"], expert.state[t])
        for view in cameras:
            assert np.array_equal(obs["pixels"][view], frames[view][t]), (t, view)
        obs, reward, terminated, truncated, info = env.step(expert.action[t])
        on_target = np.linalg.norm(expert.state[t + 1] - expert.targets[0, t + 1]) < SUCCESS_RADIUS
        assert reward == float(on_target) and not terminated
    assert truncated and info["task"] == "move the arm to the red target"


def test_the_expert_succeeds_and_holding_still_mostly_fails():
    env = SynthReachEnv()
    expert_wins, hold_wins = 0, 0
    for seed in range(20):
        expert = _expert(seed, 40)
        env.reset(seed=seed)
        for t in range(40):
            *_, terminated, truncated, info = env.step(expert.action[t])
            if terminated or truncated:
                break
        expert_wins += info["is_success"]
        obs, _ = env.reset(seed=seed)
        for _ in range(40):
            *_, terminated, truncated, info = env.step(obs["agent_pos"])
            if terminated or truncated:
                break
        hold_wins += info["is_success"]
    assert expert_wins == 20 and hold_wins <= 6


def test_gymnasium_env_checker_passes():
    import gymnasium

    check_env(gymnasium.make(GYM_ID, cameras=("front", "wrist"), num_tasks=2).unwrapped, skip_render_check=False)


def test_commands_are_limited_to_the_experts_largest_step():
    env = SynthReachEnv()
    obs, _ = env.reset(seed=0)
    start = obs["agent_pos"].copy()
    obs, *_ = env.step(-np.sign(start) * 5.0)  # far outside the workspace
    assert np.linalg.norm(obs["agent_pos"] - start) == pytest.approx(TaskParams().max_step, rel=1e-5)
    with pytest.raises(ValueError, match=r"end-point position \[x, y\]"):
        env.step(np.array([np.nan, 0.0]))


def test_chunks_are_executed_replanned_and_ensembled(checkpoint, synth_dataset):
    from tests.eval.serve_support import dataset_observations

    observations = dataset_observations(synth_dataset, range(8))
    # plain chunking: 3 actions of each chunk, a new prediction every 3 steps
    policy, reference = load_policy(checkpoint, seed=4), load_policy(checkpoint, seed=4)
    controller = ChunkedController(policy, replan_steps=3)
    controller.reset()
    acted = [controller.act(obs) for obs in observations[:6]]
    chunks = [reference.predict_action(observations[0]), reference.predict_action(observations[3])]
    np.testing.assert_array_equal(np.stack(acted), np.concatenate([chunks[0][:3], chunks[1][:3]]))
    assert controller.num_predictions == 2
    # temporal ensembling: every step averages all chunks covering it, oldest weighted most
    controller = ChunkedController(policy, replan_steps=2, ensemble_decay=0.5)
    controller.reset()
    reference.reset()
    acted = [controller.act(obs) for obs in observations[:6]]
    chunks = {start: reference.predict_action(observations[start]) for start in (0, 2, 4)}
    for t, action in enumerate(acted):
        rows = np.stack([chunks[s][t - s] for s in sorted(chunks) if s <= t])
        weights = np.exp(-0.5 * np.arange(len(rows)))
        np.testing.assert_allclose(action, (weights[:, None] * rows).sum(0) / weights.sum(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"replan_steps must be in 1\.\.10"):
        ChunkedController(policy, replan_steps=11)


def test_wilson_interval_values():
    # reference values: Wilson (1927) score interval, z = 1.96
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.27753, abs=1e-5))
    assert wilson_interval(5, 10) == (pytest.approx(0.23659, abs=1e-5), pytest.approx(0.76341, abs=1e-5))
    assert wilson_interval(50, 50) == (pytest.approx(0.92865, abs=1e-5), 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)
