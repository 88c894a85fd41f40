"""Runs in .venv-lerobot (lerobot 0.6.1): reads a local dataset with lerobot's own ``LeRobotDataset`` and saves
what it returns for some rows, for tests/data/test_lerobot_reads.py to compare with our reader.

    .venv-lerobot/bin/python tests/data/lerobot_read_script.py OUT_DIR ROOT=INDEX,INDEX,... [ROOT=...]

For the k-th dataset, OUT_DIR/k.npz: per row i ``{i}|<key>`` for every camera (uint8 HWC, from lerobot's float
CHW in [0, 1]), the state, the action, the integer columns and the timestamp; OUT_DIR/k.json: the dataset facts
and each row's task string. One process reads them all (importing lerobot is most of the time).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def read(root: str, out: Path, indices: list[int]) -> None:
    dataset = LeRobotDataset("local/embodied-test", root=root, video_backend="torchcodec")
    meta = dataset.meta
    arrays: dict[str, np.ndarray] = {}
    tasks = []
    for i in indices:
        item = dataset[i]
        for key in meta.camera_keys:
            frame = item[key].numpy()  # float32 [3, H, W] in [0, 1]
            arrays[f"{i}|{key}"] = np.round(frame.transpose(1, 2, 0) * 255.0).astype(np.uint8)
        for key in ("observation.state", "action", "timestamp", "episode_index", "frame_index", "index",
                    "task_index"):
            arrays[f"{i}|{key}"] = item[key].numpy()
        tasks.append(item["task"])
    np.savez(out, **arrays)
    facts = {"num_episodes": dataset.num_episodes, "num_frames": dataset.num_frames, "fps": meta.fps,
             "camera_keys": list(meta.camera_keys), "features": sorted(meta.features), "tasks": tasks,
             "episode_lengths": [int(e["length"]) for e in meta.episodes]}
    out.with_suffix(".json").write_text(json.dumps(facts))


if __name__ == "__main__":
    for k, job in enumerate(sys.argv[2:]):
        root, _, rows = job.rpartition("=")
        read(root, Path(sys.argv[1]) / f"{k}.npz", [int(x) for x in rows.split(",")])
