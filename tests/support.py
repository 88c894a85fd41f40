"""Test support: where the shared datasets/fixtures live, and running the real CLI (import as tests.support)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared")).resolve()
"""``../shared`` next to the checkout (read-only in CI); override with SHARED_DATA_DIR."""
DATASETS_DIR = SHARED_DIR / "datasets"
FIXTURES_DIR = SHARED_DIR / "fixtures"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without EMBODIED_* / torchrun variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMBODIED_") and k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR",
                                                           "MASTER_PORT", "LOCAL_WORLD_SIZE")}
    env.update(extra)
    return env


def run_embodied(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 300, python: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m embodied_core.cli.main ARGS`` and captures its output (in a fork of a warm interpreter
    that already imported torch when it can: ``tests/warm_cli.py``)."""
    from tests.warm_cli import run_module

    return run_module(list(args), env=env if env is not None else clean_env(), cwd=str(cwd) if cwd else None,
                      timeout=timeout, python=python)


def run_torchrun(*args: str, env: dict[str, str], cwd: Path | str | None = None, timeout: float = 240,
                 log: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m torch.distributed.run ARGS`` (torchrun's own agent and flags), output captured (and written to
    ``log`` when given); its workers are forks of a warm agent (``tests/warm_torchrun.py``) when it can, so no
    rank spends seconds importing torch. ``env`` gets the repository on ``PYTHONPATH``. A timeout kills the agent
    and every rank, then fails the test with the log's tail."""
    import pytest

    from tests.warm_cli import run_module

    paths = [str(REPO_ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env = {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
    try:
        result = run_module(list(args), env=env, cwd=str(cwd) if cwd else None, timeout=timeout, python=None,
                            module="tests.warm_torchrun", cold_module="torch.distributed.run", session=True)
    except subprocess.TimeoutExpired as exc:
        output = f"{exc.output or ''}{exc.stderr or ''}"
        if log is not None:
            Path(log).write_text(output)
        pytest.fail(f"torchrun {' '.join(args)} hung for {timeout:.0f} s:\n{output[-4000:]}")
    if log is not None:
        Path(log).write_text(result.stdout + result.stderr)
    return result


def recipe_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for running a recipe script (which execs ``torchrun`` from its PATH): that torchrun launches warm,
    as :func:`run_torchrun` does (``tests/bin/torchrun``)."""
    from tests.warm_cli import torchrun_shim_env

    return torchrun_shim_env(env)
