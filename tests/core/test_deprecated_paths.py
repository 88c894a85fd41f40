"""Deprecated import paths (embodied_core.deprecation.MOVED): every old module or name still imports, as the very
object of its new path, with one FutureWarning naming the new path; ``embodied plugins --check`` names plugins
that declare or import an old path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from embodied_core.deprecation import MOVED, moved_to
from embodied_core.registry import DatasetDefaults, DatasetFormatSpec, PluginEntry, PluginSpec
from embodied_core.registry._deprecated_uses import declared_paths, static_uses
from tests.support import REPO_ROOT, clean_env, run_embodied

# Imports every old path twice in a fresh interpreter (this process has imported most new paths already) and
# reports, per old path, whether it is the new object and the warnings it raised.
_PROBE = textwrap.dedent("""
    import importlib, json, sys, warnings
    from embodied_core.deprecation import MOVED, moved_to, recorded_uses
    out = {}
    submodules = ["embodied_core.strategies.base", "embodied_core.strategies.validation"]
    for entry in [*MOVED, *map(moved_to, submodules)]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            def resolve(path):
                module, _, name = path.partition(":")
                return getattr(importlib.import_module(module), name) if name else importlib.import_module(module)
            old, again, new = resolve(entry.old), resolve(entry.old), resolve(entry.new)
        mine = [w for w in caught if str(w.message).startswith(entry.old + " is")]
        out[entry.old] = {"same": old is new and again is new, "files": [w.filename for w in mine],
                          "messages": [str(w.message) for w in mine if w.category is FutureWarning]}
    out["uses"] = [list(use) for use in recorded_uses()]
    print(json.dumps(out))
""")


def test_every_old_path_is_its_new_object_and_warns_once_with_the_new_path() -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=clean_env(),
                            cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    submodules = [moved_to(old) for old in ("embodied_core.strategies.base", "embodied_core.strategies.validation")]
    for entry in [*MOVED, *submodules]:
        found = report[entry.old]
        assert found["same"], entry
        assert found["messages"] == [f"{entry.old} is deprecated since embodied {entry.since} and will be removed "
                                     f"in {entry.removal} at the earliest: use {entry.new} instead"], entry
        assert found["files"] == ["<string>"], entry  # the warning points at the importing code
    assert ["embodied_core.strategies.base", "embodied_core.distributed.base", "__main__"] in report["uses"]


def _source_modules() -> dict[str, Path]:
    modules = {}
    for src in REPO_ROOT.glob("packages/*/src"):
        for path in src.rglob("*.py"):
            modules[".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")] = path
    return modules


def test_the_table_names_paths_that_moved() -> None:
    modules = _source_modules()
    for entry in MOVED:
        old_module, _, name = entry.old.partition(":")
        assert entry.new.partition(":")[0] in modules, entry
        if name:  # a name moved out of a module that stays: the module no longer defines it
            assert not re.search(rf"^{name}\b\s*[:=]", modules[old_module].read_text(), re.MULTILINE), entry
        else:
            assert old_module not in modules, entry


def test_moved_to_resolves_submodules_and_names_and_leaves_current_paths() -> None:
    assert moved_to("embodied_core.strategies.validation").new == "embodied_core.distributed.validation"
    assert moved_to("embodied_core.strategies.dcp").new == "embodied_core.checkpoint.dcp"  # the longer entry wins
    assert moved_to("embodied_core.strategies.base:build_single").new == "embodied_core.distributed.base:build_single"
    assert moved_to("embodied_data.formats.specs:HDF5_DATASETS").new == "embodied_data.hdf5.specs:HDF5_DATASETS"
    for current in ("embodied_core.distributed.base", "embodied_data.formats.specs:DUMMY_DATASETS",
                    "embodied_core.strategiesx", "embodied_data.formats.specs"):
        assert moved_to(current) is None, current


def test_every_path_field_of_a_spec_is_declared() -> None:
    spec = DatasetFormatSpec(name="f", factory="a.b:c", checks=("a.d:e",), preflight="a.f:g",
                             dataset_defaults=DatasetDefaults(stats="embodied_core.strategies:h"))
    entry = PluginEntry("embodied.dataset_formats", "f", "pkg.spec:F", "d", "1")
    assert declared_paths(entry, spec) == ["pkg.spec:F", "a.b:c", "a.d:e", "a.f:g", "embodied_core.strategies:h"]
    assert [move.new for move, _ in static_uses(entry, spec)] == ["embodied_core.distributed:h"]


def test_a_plugin_declaring_or_importing_an_old_path_is_found_without_running_it(tmp_path: Path) -> None:
    (tmp_path / "oldplug").mkdir()
    (tmp_path / "oldplug" / "__init__.py").write_text("")
    (tmp_path / "oldplug" / "strategy.py").write_text(
        "raise RuntimeError('never run')\nfrom embodied_core.strategies.base import DistributedStrategy\n"
        "from ..oldplug import spec\nfrom embodied_data.formats.specs import HDF5_DATASETS\n")
    sys.path.insert(0, str(tmp_path))
    try:
        spec = PluginSpec(name="old", factory="oldplug.strategy:build")
        entry = PluginEntry("embodied.distributed_strategies", "old", "embodied_core.strategies.base:SPEC", "d", "1")
        found = {(move.old, where) for move, where in static_uses(entry, spec)}
    finally:
        sys.path.remove(str(tmp_path))
    assert found == {("embodied_core.strategies.base:SPEC", "declared embodied_core.strategies.base:SPEC"),
                     ("embodied_core.strategies.base", "oldplug.strategy"),
                     ("embodied_data.formats.specs:HDF5_DATASETS", "oldplug.strategy")}


OLD_SINGLE = PluginSpec(name="old_single", description="declares its factory under the old module path",
                        factory="embodied_core.strategies.base:build_single")


@pytest.mark.timeout(120)
def test_plugins_check_reports_a_deprecated_factory_path() -> None:
    env = clean_env(EMBODIED_PLUGINS="distributed_strategies:old_single=tests.core.test_deprecated_paths:OLD_SINGLE")
    checked = run_embodied("plugins", "--group", "distributed_strategies", "--check", env=env, cwd=REPO_ROOT,
                           timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # deprecated is reported, not a failure
    rows = {line.split()[1]: line for line in checked.stdout.splitlines()[2:]}
    assert ("ok; deprecated: embodied_core.strategies.base:build_single -> embodied_core.distributed.base:build_single "
            "(declared embodied_core.strategies.base:build_single)") in rows["old_single"]
    assert rows["single"].rstrip().endswith("ok")
