"""The warm CLI launcher of the tests (tests/warm_cli.py) gives what a real ``python -m embodied_core.cli.main``
process gives: exit code, stdout and stderr, and it sees the command's environment, cwd and PYTHONPATH."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import clean_env, run_embodied
from tests.warm_cli import run_module


def _both(args: list[str], *, env: dict[str, str] | None = None,
          cwd: str | None = None) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The same command in a new process and through the warm launcher."""
    env = env or clean_env()
    cold = subprocess.run([sys.executable, "-m", "embodied_core.cli.main", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)
    return cold, run_module(args, env=env, cwd=cwd, timeout=120, python=None)


def test_usage_error_is_the_same_as_in_a_new_process() -> None:
    cold, warm = _both(["train", "--model-name", "tiny_flow_policy", "--no-such-flag"])
    assert cold.returncode == warm.returncode == 2
    assert (warm.stdout, warm.stderr) == (cold.stdout, cold.stderr)
    assert "--no-such-flag" in warm.stderr


def test_command_sees_its_env_cwd_and_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "my_plugins.py").write_text(
        "from embodied_core.registry.specs import PluginSpec\n"
        "SPEC = PluginSpec(name='warm_probe', description='from PYTHONPATH', factory='my_plugins:SPEC')\n")
    env = clean_env(PYTHONPATH=str(tmp_path), EMBODIED_PLUGINS="loggers:warm_probe=my_plugins:SPEC")
    cold, warm = _both(["plugins", "--group", "embodied.loggers"], env=env, cwd=str(tmp_path))
    assert cold.returncode == warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout and "warm_probe" in warm.stdout
    assert run_embodied("plugins", "--group", "embodied.loggers").stdout.count("warm_probe") == 0


def test_timeout_raises_like_subprocess_run_and_the_server_serves_on() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_module(["train", "--help"], env=clean_env(), cwd=None, timeout=0.01, python=None)
    assert run_embodied("train", "--help").returncode == 0
