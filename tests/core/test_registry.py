"""Plugin discovery: real distributions (dist-info folders on sys.path), the env var and register()."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from embodied_core import registry
from embodied_core.errors import PluginError, PluginLoadError, UnknownPluginError, UsageError
from embodied_core.hooks import hookimpl, make_plugin_manager
from embodied_core.registry import groups


def _write_dist(site: Path, dist: str, version: str, entry_points: str, modules: dict[str, str]) -> None:
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


_SPEC_MODULE = """
from embodied_core.registry import PluginSpec
ALPHA = PluginSpec(name="alpha", description="a", factory="{mod}_impl:build")
BETA = PluginSpec(name="beta", description="b", factory="{mod}_impl:build")
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site directory on sys.path holding fake-but-real distributions; the discovery cache is reset."""
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.clear_cache()
    yield tmp_path
    registry.clear_cache()
    for name in [m for m in sys.modules if m.startswith("fakeplug")]:
        del sys.modules[name]


def test_discovery_reads_metadata_without_importing(site: Path) -> None:
    _write_dist(site, "fakeplug-one", "1.2.3", """
        [embodied.optimizers]
        alpha = fakeplug_one:ALPHA
    """, {"fakeplug_one": _SPEC_MODULE.format(mod="fakeplug_one"),
          "fakeplug_one_impl": "def build(groups, args):\n    return ('built', groups)\n"})
    entry = registry.get_entry(groups.OPTIMIZERS, "alpha")
    assert (entry.distribution, entry.version) == ("fakeplug-one", "1.2.3")
    assert "fakeplug_one" not in sys.modules  # listing and lookup import nothing
    spec = registry.get_spec(groups.OPTIMIZERS, "alpha")
    assert "fakeplug_one" in sys.modules and "fakeplug_one_impl" not in sys.modules  # the factory stays lazy
    assert registry.load_factory(groups.OPTIMIZERS, "alpha")([1], None) == ("built", [1])
    assert spec.name == "alpha"


def test_duplicate_name_names_both_distributions(site: Path) -> None:
    for dist in ("fakeplug-a", "fakeplug-b"):
        mod = dist.replace("-", "_")
        _write_dist(site, dist, "0.1", f"""
            [embodied.optimizers]
            alpha = {mod}:ALPHA
        """, {mod: _SPEC_MODULE.format(mod=mod)})
    with pytest.raises(PluginError, match=r"fakeplug-a.*fakeplug-b|fakeplug-b.*fakeplug-a"):
        registry.get_entry(groups.OPTIMIZERS, "alpha")
    assert "alpha" in registry.names(groups.OPTIMIZERS)  # listed (as a conflict), never silently picked


def test_broken_plugin_fails_only_when_selected(site: Path) -> None:
    _write_dist(site, "fakeplug-broken", "0.9", """
        [embodied.optimizers]
        beta = fakeplug_broken:BETA
        alpha = fakeplug_ok:ALPHA
    """, {"fakeplug_broken": "import this_module_does_not_exist_anywhere\n",
          "fakeplug_ok": _SPEC_MODULE.format(mod="fakeplug_ok")})
    assert registry.get_spec(groups.OPTIMIZERS, "alpha").name == "alpha"  # the healthy plugin still works
    with pytest.raises(PluginLoadError) as info:
        registry.get_spec(groups.OPTIMIZERS, "beta")
    assert "fakeplug-broken" in str(info.value) and "this_module_does_not_exist_anywhere" in str(info.value)


def test_unknown_name_lists_installed_and_closest() -> None:
    with pytest.raises(UnknownPluginError) as info:
        registry.get_entry(groups.OPTIMIZERS, "adamw", flag="--optimizer")
    message = str(info.value)
    assert "--optimizer" in message and "AdamW" in message and "did you mean 'AdamW'" in message


def test_env_var_and_in_process_registration(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (site / "fakeplug_env.py").write_text(_SPEC_MODULE.format(mod="fakeplug_env"))
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "optimizers:alpha=fakeplug_env:ALPHA")
    entry = registry.get_entry(groups.OPTIMIZERS, "alpha")
    assert entry.source == "env" and registry.get_spec(groups.OPTIMIZERS, "alpha").name == "alpha"
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "optimizers:alpha")
    with pytest.raises(UsageError, match=r"EMBODIED_PLUGINS"):
        registry.names(groups.OPTIMIZERS)
    monkeypatch.delenv(registry.PLUGINS_ENV_VAR)

    spec = registry.PluginSpec(name="gamma", factory="fakeplug_env:ALPHA")
    registry.register("optimizers", "gamma", spec)
    try:
        assert registry.get_spec(groups.OPTIMIZERS, "gamma") is spec
        with pytest.raises(UsageError, match=r"already registered"):
            registry.register("optimizers", "gamma", spec)
        with pytest.raises(UsageError, match=r"unknown plugin group"):
            registry.register("optimiser", "delta", spec)
    finally:
        registry.unregister("optimizers", "gamma")
    assert "gamma" not in registry.names(groups.OPTIMIZERS)


def test_spec_name_must_match_entry_point(site: Path) -> None:
    _write_dist(site, "fakeplug-misnamed", "1.0", """
        [embodied.optimizers]
        omega = fakeplug_misnamed:ALPHA
    """, {"fakeplug_misnamed": _SPEC_MODULE.format(mod="fakeplug_misnamed")})
    with pytest.raises(PluginLoadError, match=r"must agree"):
        registry.get_spec(groups.OPTIMIZERS, "omega")


class _Recorder:
    def __init__(self) -> None:
        self.steps: list[int] = []

    @hookimpl
    def on_step_end(self, step: int, metrics: dict | None) -> None:
        self.steps.append(step)


def test_hooks_fire_and_can_be_blocked_by_name() -> None:
    recorder = _Recorder()
    manager = make_plugin_manager([recorder])
    manager.hook.on_step_end(step=3, metrics=None)
    assert recorder.steps == [3]
    blocked = _Recorder()
    manager = make_plugin_manager([blocked], blocked=["_Recorder"])
    manager.hook.on_step_end(step=4, metrics=None)
    assert blocked.steps == []
