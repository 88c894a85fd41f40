"""The real ``embodied`` CLI in subprocesses: exit codes, messages, help without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_core import __version__ as RELEASE
from tests.support import clean_env, run_embodied

_HELP_PROBE = """
import sys
from embodied_core.cli.main import main
try:
    main({argv!r})
except SystemExit as exc:
    code = exc.code
print("PROBE", __import__("json").dumps({{"code": code,
      "torch": "torch" in sys.modules, "numpy": "numpy" in sys.modules,
      "lerobot_metadata": "embodied_data.lerobot.metadata" in sys.modules,
      "plugin_modules": sorted(m for m in sys.modules if m.startswith("embodied_plugin_template"))}}))
"""


def _probe_help(argv: list[str]) -> tuple[dict, str]:
    result = subprocess.run([sys.executable, "-c", _HELP_PROBE.format(argv=argv)], capture_output=True, text=True,
                            env=clean_env(), timeout=60)
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE"))
    return json.loads(line.removeprefix("PROBE ")), result.stdout


def test_train_help_imports_neither_torch_nor_plugins() -> None:
    probe, text = _probe_help(["train", "--help"])
    # nor numpy and the LeRobot metadata reader (issue 29: they cost 0.14x of the torch import)
    assert probe == {"code": 0, "torch": False, "numpy": False, "lerobot_metadata": False, "plugin_modules": []}
    assert "--train-iters" in text and "--fsdp-reshard-default" in text and "tiny_flow_policy" in text


def test_model_help_shows_model_and_data_fields_without_torch() -> None:
    probe, text = _probe_help(["train", "--model-name", "tiny_flow_policy", "--help"])
    assert probe["code"] == 0 and probe["torch"] is False
    assert "embodied_plugin_template.modeling" not in probe["plugin_modules"]  # only the light spec/config
    assert "--model.hidden-dim" in text and "--data.action-horizon" in text
    assert "Width of the flow-matching MLP" in text  # field docstrings reach --help


def test_usage_and_config_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    cases = [
        ["train", "--model-name", "tiny_flow_policy", "--no-such-flag", "1"],
        ["train", "--model-name", "tiny_flow_pollicy"],
        ["train"],
        ["train", "--model-name", "tiny_flow_policy", "--train-iters", "abc"],
        ["train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets", "--optimizer", "adamw"],
        ["train", "--model-name", "tiny_flow_policy", "model.hidden_dimm=3"],
        ["train", "--model-name", "tiny_flow_policy", "--config-file", str(tmp_path / "missing.yaml")],
        ["nonsense"],
        ["plugins", "--group", "modelz"],
    ]
    for argv in cases:
        result = run_embodied(*argv, timeout=60)
        assert result.returncode == 2, (argv, result.stderr)
        assert "Traceback" not in result.stderr, (argv, result.stderr)
    result = run_embodied("train", "--model-name", "tiny_flow_pollicy", timeout=60)
    assert "did you mean 'tiny_flow_policy'" in result.stderr
    result = run_embodied("train", "--model-name", "tiny_flow_policy", "model.hidden_dimm=3", timeout=60)
    assert "model.hidden_dimm: unknown key (did you mean 'hidden_dim'?)" in result.stderr


def test_env_layer_errors_exit_2() -> None:
    result = run_embodied("train", "--model-name", "tiny_flow_policy", env=clean_env(EMBODIED_TRAIN_ITER="5"),
                          timeout=60)
    assert result.returncode == 2 and "EMBODIED_TRAIN_ITER" in result.stderr


def test_runtime_failure_exits_1(tmp_path: Path) -> None:
    result = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets",
                          "--resume-from", str(tmp_path / "nope"), "--output-dir", str(tmp_path / "out"),
                          "--train-iters", "1", "--num-workers", "0", "--dtype", "float32", timeout=120)
    assert result.returncode == 1, result.stderr
    assert "no such checkpoint directory" in result.stderr and "Traceback" not in result.stderr


def test_plugins_lists_without_importing(tmp_path: Path) -> None:
    result = run_embodied("plugins", timeout=60)
    assert result.returncode == 0
    rows = [line.split() for line in result.stdout.splitlines()[2:]]  # after the version line and the header
    assert ["embodied.models", "tiny_flow_policy", "embodied-plugin-template", RELEASE,
            "embodied_plugin_template.spec:TINY_FLOW_POLICY"] in rows  # each entry's module:attr is shown
    assert ["embodied.optimizers", "AdamW", "embodied-core", RELEASE, "embodied_core.plugins:ADAMW"] in rows
    only = run_embodied("plugins", "--group", "optimizers", timeout=60)
    assert {line.split()[0] for line in only.stdout.splitlines()[2:]} == {"embodied.optimizers"}


def test_dataset_problems_exit_2_before_the_model_is_built(tmp_path: Path) -> None:
    from tests.support import DATASETS_DIR

    result = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-path",
                          str(DATASETS_DIR / "lerobot_written" / "v21"), "--lerobotdataset-version", "v3.0",
                          "--output-dir", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 2, result.stderr
    assert "v2.1" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # nothing was built or written


def test_every_installed_model_renders_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``--model-name X --help`` of every installed model and preset shows its fields (tyro must be able to print
    every default: dreamzero_tiny's dict-valued encoder configs once crashed it with an AssertionError)."""
    from embodied_core import registry
    from embodied_core.cli.main import main
    from embodied_core.registry import groups

    failed = {}
    for name in registry.names(groups.MODELS):
        try:
            code = main(["train", "--model-name", name, "--help"])
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # report every model, not only the first
            code = f"{type(exc).__name__}: {exc}"[:300]
        out = capsys.readouterr().out
        if code not in (0, None) or "--model." not in out:
            failed[name] = code
    assert not failed, failed
