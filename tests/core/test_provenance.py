"""The versions recorded in config.yaml / meta.json: the distribution scan is cached per install state."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from embodied_core.config import provenance


def _install(site_dir: Path, name: str, version: str) -> None:
    info = site_dir / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    os.utime(site_dir, ns=(0, site_dir.stat().st_mtime_ns + 1_000_000))  # as pip's new directory entry would


def test_versions_follow_installs_into_the_site_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    monkeypatch.setattr(sys, "path", [str(site_dir), *sys.path])
    monkeypatch.setattr(provenance.sysconfig, "get_path", lambda _name: str(site_dir))
    before = provenance.embodied_versions()
    assert "embodied-core" in before and "embodied-extra" not in before
    assert provenance.embodied_versions() == before  # the same install state: served from the cache
    _install(site_dir, "embodied-extra", "9.1")
    assert provenance.embodied_versions()["embodied-extra"] == "9.1"  # the scan saw the new distribution
