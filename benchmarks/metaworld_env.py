"""The ``metaworld`` env plugin's costs and its experts: render time per frame in both looks, physics step time,
and the scripted experts' success rate (lerobot's conventions: an episode ends at the first success, 500 steps).

    .venv/bin/python -m benchmarks.metaworld_env                      # button-press-topdown-v3, 20 seeds
    .venv/bin/python -m benchmarks.metaworld_env --suite easy --seeds 5 --seed 1000

Prints figures; asserts nothing. The experts run without rendering (``obs_type="agent_pos"``): rendering does not
change the physics.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from embodied_eval.envs.metaworld.gym_env import MetaworldEnv
from embodied_eval.envs.metaworld.tasks import select_tasks


def render_ms(task: str, *, look: str, size: int, frames: int) -> tuple[float, float]:
    """(ms per rendered frame, ms per physics step) in ``look`` at ``size``."""
    env = MetaworldEnv(task, look=look, image_size=size)
    env.reset(seed=0)
    env.render()  # the first render creates the GL context
    started = time.perf_counter()
    for _ in range(frames):
        env.render()
    render = (time.perf_counter() - started) / frames * 1e3
    env.obs_type = "agent_pos"
    started = time.perf_counter()
    for _ in range(frames):
        env.step(np.zeros(4, np.float32))
    step = (time.perf_counter() - started) / frames * 1e3
    env.close()
    return render, step


def expert_successes(task: str, seeds: range) -> tuple[int, list[int]]:
    """(successes, episode lengths) of the task's MetaWorld expert, actions clipped to [-1, 1] as recorded."""
    env = MetaworldEnv(task, obs_type="agent_pos")
    successes, lengths = 0, []
    for seed in seeds:
        env.reset(seed=seed)
        length, done = 0, False
        while not done:
            _, _, terminated, truncated, info = env.step(np.clip(env.expert_action(), -1, 1))
            length, done = length + 1, terminated or truncated
        successes += int(info["is_success"])
        lengths.append(length)
    env.close()
    return successes, lengths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default=None, help="task(s), comma-separated (default button-press-topdown-v3)")
    parser.add_argument("--suite", default=None, help="easy, medium, hard, very_hard or mt10 instead of --task")
    parser.add_argument("--seeds", type=int, default=20, help="expert episodes per task (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--frames", type=int, default=20, help="frames timed per look (default 20)")
    args = parser.parse_args()
    task = args.task if args.task or args.suite else "button-press-topdown-v3"
    selection = select_tasks(task, args.suite)
    first = selection.tasks[0]
    print(f"render and step time, {first} (ms, mean of {args.frames}):")
    for look, size in (("lerobot", 480), ("fast", 128), ("fast", 96)):
        render, step = render_ms(first, look=look, size=size, frames=args.frames)
        print(f"  {look:8s} {size}x{size}: render {render:7.1f} ms/frame   physics step {step:.2f} ms")
    total, ok = 0, 0
    print(f"expert success, seeds {args.seed}..{args.seed + args.seeds - 1}:")
    for name in selection.tasks:
        started = time.perf_counter()
        successes, lengths = expert_successes(name, range(args.seed, args.seed + args.seeds))
        total, ok = total + args.seeds, ok + successes
        print(f"  {name:32s} {successes}/{args.seeds}  mean length {np.mean(lengths):6.1f}  "
              f"({time.perf_counter() - started:.1f} s)")
    print(f"  all: {ok}/{total} = {ok / total:.1%}")


if __name__ == "__main__":
    main()
