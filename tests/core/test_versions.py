"""The five packages and the plugin template release together: one version in every pyproject.toml and
``__version__``, inter-package ``>=`` pins at it, the installed metadata at it, and a CHANGELOG.md section for it
that names its plugin-API version."""

from __future__ import annotations

import importlib
import re
from importlib import metadata

import embodied_core
from embodied_core.api_version import api_version_string
from tests.support import REPO_ROOT

PROJECTS = {"embodied-core": "embodied_core", "embodied-data": "embodied_data", "embodied-dist": "embodied_dist",
            "embodied-models": "embodied_models", "embodied-eval": "embodied_eval",
            "embodied-plugin-template": "embodied_plugin_template"}


def _pyprojects() -> dict[str, dict]:
    import tomllib  # Python >= 3.11, which the test environment is (scripts/setup.sh)

    paths = [*REPO_ROOT.glob("packages/*/pyproject.toml"), REPO_ROOT / "examples/plugin-template/pyproject.toml"]
    docs = [tomllib.loads(path.read_text())["project"] for path in paths]
    return {doc["name"]: doc for doc in docs}


def test_every_package_has_the_release_version_and_pins_it() -> None:
    release = embodied_core.__version__
    projects = _pyprojects()
    assert set(projects) == set(PROJECTS)
    pinned = {req for project in projects.values() for req in project["dependencies"] if req.startswith("embodied-")}
    assert pinned == {f"embodied-core>={release}", f"embodied-data>={release}"}  # dist/models/eval/template pin them
    for name, project in projects.items():
        assert project["version"] == release, name
        assert importlib.import_module(PROJECTS[name]).__version__ == release, name
        pins = [req for req in project["dependencies"] if re.match(r"embodied-[a-z]+\b", req)]
        assert all(re.fullmatch(rf"embodied-[a-z]+>={re.escape(release)}", req) for req in pins), (name, pins)
        # a stale environment (installed before the bump) shows old versions in `embodied plugins`: rerun setup.sh
        assert metadata.version(name) == release, f"{name} is installed at {metadata.version(name)}; reinstall it"


def test_the_changelog_has_the_release_and_its_plugin_api_version() -> None:
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    section = re.search(rf"^## {re.escape(embodied_core.__version__)}\b.*?(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert section is not None, "CHANGELOG.md has no section for this release"
    assert f"plugin API {api_version_string()}" in section.group(0)
