"""The plugin-API version: ``embodied_core.PLUGIN_API_VERSION``, shown by ``embodied plugins``; a spec's
``requires_api`` is checked when the plugin is selected (an IncompatiblePluginError naming the plugin, its
distribution, the requirement and core's version) and listed as a problem by ``embodied plugins --check``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import embodied_core
from embodied_core import registry
from embodied_core.api_version import api_version_string, satisfies_requires_api
from embodied_core.errors import IncompatiblePluginError
from embodied_core.registry import PluginSpec, groups
from tests.support import REPO_ROOT, clean_env, run_embodied

HERE = "tests.core.test_plugin_api_version"  # importable from the repository root by the CLI subprocesses
FUTURE = PluginSpec(name="future_opt", description="needs a plugin API this core does not have",
                    factory="embodied_core.optim.optimizers:build_sgd", requires_api=">=99.0")
CURRENT = PluginSpec(name="current_opt", description="needs the API of this major",
                     factory="embodied_core.optim.optimizers:build_sgd",
                     requires_api=f">={api_version_string()},<{embodied_core.PLUGIN_API_VERSION[0] + 1}")
ENV = f"optimizers:future_opt={HERE}:FUTURE,optimizers:current_opt={HERE}:CURRENT"


def test_the_version_is_major_minor_and_requirements_are_pep440() -> None:
    major, minor = embodied_core.PLUGIN_API_VERSION
    assert isinstance(major, int) and isinstance(minor, int) and major >= 1
    assert satisfies_requires_api(">=1.0,<2", (1, 1)) and not satisfies_requires_api(">=1.2", (1, 1))
    assert satisfies_requires_api("==1.*", (1, 0)) and not satisfies_requires_api("<1", (1, 0))
    with pytest.raises(ValueError, match=r"PluginSpec.requires_api: expected a PEP 440 version specifier .*"
                                         r"got '1.0\+'"):
        PluginSpec(name="x", factory="a.b:c", requires_api="1.0+")
    with pytest.raises(ValueError, match=r"PluginSpec.requires_api: .* the empty string"):
        PluginSpec(name="x", factory="a.b:c", requires_api="")


def test_selecting_a_plugin_that_requires_another_api_is_refused() -> None:
    registry.register(groups.OPTIMIZERS, "future_opt", FUTURE, replace=True)
    registry.register(groups.OPTIMIZERS, "current_opt", CURRENT, replace=True)
    try:
        assert registry.get_spec(groups.OPTIMIZERS, "current_opt") is CURRENT
        with pytest.raises(IncompatiblePluginError) as info:
            registry.load_factory(groups.OPTIMIZERS, "future_opt", flag="--optimizer")
    finally:
        registry.unregister(groups.OPTIMIZERS, "future_opt")
        registry.unregister(groups.OPTIMIZERS, "current_opt")
    message = str(info.value)
    assert "plugin 'future_opt' (embodied.optimizers) from distribution '<in-process>'" in message
    assert "requires plugin API '>=99.0'" in message
    assert f"embodied-core {embodied_core.__version__} provides plugin API {api_version_string()}" in message


@pytest.mark.timeout(120)
def test_plugins_shows_the_api_version_and_check_lists_the_incompatible_plugin() -> None:
    env = clean_env(EMBODIED_PLUGINS=ENV)
    listing = run_embodied("plugins", "--group", "optimizers", env=env, cwd=REPO_ROOT, timeout=60)
    assert listing.returncode == 0, listing.stderr
    first = listing.stdout.splitlines()[0]
    assert first == f"embodied-core {embodied_core.__version__}, plugin API {api_version_string()}"
    checked = run_embodied("plugins", "--group", "optimizers", "--check", env=env, cwd=REPO_ROOT, timeout=120)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    rows = {line.split()[1]: line for line in checked.stdout.splitlines()[2:]}
    assert "INCOMPATIBLE: plugin 'future_opt'" in rows["future_opt"] and "'>=99.0'" in rows["future_opt"]
    assert rows["current_opt"].rstrip().endswith("ok") and rows["SGD"].rstrip().endswith("ok")


def test_the_requirement_is_checked_without_importing_torch() -> None:
    code = ("import sys; from embodied_core import registry\n"
            "from embodied_core.errors import IncompatiblePluginError\n"
            "try:\n    registry.get_spec('embodied.optimizers', 'future_opt')\n"
            "except IncompatiblePluginError as exc:\n    print(type(exc).__name__)\n"
            "registry.get_spec('embodied.optimizers', 'current_opt')\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                            env=clean_env(EMBODIED_PLUGINS=ENV), timeout=60)
    assert result.stdout.split() == ["IncompatiblePluginError", "False"], result.stderr


def test_a_run_selecting_it_reports_the_requirement_with_the_remedy() -> None:
    from embodied_core.config.resolve import load_config
    from embodied_core.config.validate import config_problems

    registry.register(groups.OPTIMIZERS, "future_opt", FUTURE, replace=True)
    try:
        config = load_config(training={"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets",
                                       "optimizer": "future_opt"})
        problems, _ = config_problems(config, world_size=1)
    finally:
        registry.unregister(groups.OPTIMIZERS, "future_opt")
    [problem] = [p for p in problems if "future_opt" in p]
    assert "requires plugin API '>=99.0'" in problem and problem.endswith("or select another --optimizer")
