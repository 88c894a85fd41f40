"""Helpers of the serve tests: start ``embodied serve`` as a real process, run the real openpi client in its own
venv, and build robot-style observations from a real dataset."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.support import REPO_ROOT, clean_env

OPENPI_PYTHON = REPO_ROOT / ".venv-openpi-client" / "bin" / "python"
CLIENT_SCRIPT = Path(__file__).with_name("openpi_client_script.py")


class ServeProcess:
    """``python -m embodied_core.cli.main serve ARGS`` on a free port; :attr:`url` once it listens."""

    def __init__(self, *args: str, timeout: float = 120.0) -> None:
        env = clean_env(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "embodied_core.cli.main", "serve", *args, "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=REPO_ROOT)
        self.banner: list[str] = []
        self.url = self._wait_for_url(timeout)

    def _wait_for_url(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._reader = threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout or ()],
                                        daemon=True)
        self._reader.start()
        self._errors: list[str] = []  # drained all along, so a chatty log never fills the pipe
        self._error_reader = threading.Thread(target=lambda: self._errors.extend(self.proc.stderr or ()), daemon=True)
        self._error_reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.banner.append(line.rstrip())
            if line.startswith("serving on "):
                self._lines = lines
                return line.split()[2]
        self.proc.kill()
        self.proc.wait()
        self._error_reader.join(timeout=10)
        raise AssertionError(f"embodied serve did not start: {self.banner}\n{''.join(self._errors)[-3000:]}")

    def stop(self, timeout: float = 30.0) -> tuple[int, str, str]:
        """SIGTERM, then (returncode, the rest of stdout, stderr)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        self._error_reader.join(timeout=timeout)
        rest = []
        while not self._lines.empty():
            rest.append(self._lines.get())
        return self.proc.returncode, "".join(rest), "".join(self._errors)


def run_openpi_client(tmp_path: Path, url: str, scenario: str, requests: Sequence[Mapping[str, Any]], *,
                      api_key: str | None, timeout: float = 120.0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Runs one scenario of openpi_client_script.py in the openpi-client venv; returns its arrays and facts."""
    assert OPENPI_PYTHON.is_file(), f"{OPENPI_PYTHON} missing: run scripts/setup.sh (it creates .venv-openpi-client)"
    arrays, strings = {}, {}
    for i, request in enumerate(requests):
        for key, value in request.items():
            (strings if isinstance(value, str) else arrays)[f"r{i}|{key}"] = value
    stem = tmp_path / f"{scenario}_{time.monotonic_ns()}"
    np.savez(f"{stem}_requests.npz", **arrays)
    plan = {"url": url, "api_key": api_key, "scenario": scenario, "requests": f"{stem}_requests.npz",
            "strings": strings, "output": f"{stem}_out.npz"}
    plan_path = Path(f"{stem}_plan.json")
    plan_path.write_text(json.dumps(plan))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([str(OPENPI_PYTHON), str(CLIENT_SCRIPT), str(plan_path)], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, f"openpi client ({scenario}) failed:\n{done.stderr[-4000:]}"
    with np.load(plan["output"]) as out:
        result = {name: out[name] for name in out.files}
    return result, json.loads(Path(plan["output"] + ".json").read_text())


def dataset_observations(root: Path, positions: Sequence[int]) -> list[dict[str, Any]]:
    """Frames of a real LeRobot dataset as a robot sends them: uint8 HWC frames, float32 state, the task string."""
    from embodied_data.lerobot.dataset import LeRobotDataset

    data = LeRobotDataset(root, video_backend="pyav")
    out = []
    for position in positions:
        sample = data[position]
        obs = {key: sample[key].permute(1, 2, 0).numpy().copy() for key in data.camera_keys}
        obs["observation.state"] = sample["observation.state"].numpy().astype(np.float32)
        obs["task"] = sample["task"]
        out.append(obs)
    return out
