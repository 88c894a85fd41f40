"""The third-party plugin template as a real distribution: pip install, discover, train, pip uninstall.

The template is copied and renamed (distribution, import package, model name) so that this test's install
is independent of the copy the README setup installs; it goes into a throwaway venv layered over the test
environment (a .pth file), so the test environment itself is never modified.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_core import __version__ as RELEASE
from tests.support import REPO_ROOT, clean_env, run_embodied

_RENAMES = (("embodied-plugin-template", "acme-flow-policy"), ("embodied_plugin_template", "acme_flow_policy"),
            ("tiny_flow_policy", "acme_policy"), ('name="Lion"', 'name="AcmeLion"'), ('Lion = "', 'AcmeLion = "'),
            ("run_events", "acme_events"), ("warmup_stable_decay", "acme_wsd"), ("csv_metrics", "acme_csv"))


def _renamed_copy(destination: Path) -> Path:
    source = REPO_ROOT / "examples" / "plugin-template"
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    (destination / "src" / "embodied_plugin_template").rename(destination / "src" / "acme_flow_policy")
    for path in destination.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".toml", ".md"):
            text = path.read_text()
            for old, new in _RENAMES:
                text = text.replace(old, new)
            path.write_text(text)
    return destination


def _layered_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    venv_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    capture_output=True, text=True, check=True).stdout.strip())
    # Everything installed in the test environment (torch, embodied-*) stays importable from the new venv.
    # addsitedir (not a bare path line) so the editable installs' own .pth files there are processed too.
    lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
    (venv_site / "_test_env.pth").write_text("\n".join(lines) + "\n")
    return python


def _pip(python: Path, *args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args, "--no-input"],
                            capture_output=True, text=True, timeout=300, env=clean_env(PIP_NO_INDEX="1"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_template_installs_trains_and_uninstalls(tmp_path: Path) -> None:
    package = _renamed_copy(tmp_path / "acme-flow-policy")
    python = _layered_venv(tmp_path / "venv")
    assert "acme_policy" not in run_embodied("plugins", python=str(python)).stdout

    _pip(python, "install", "--no-deps", "--no-build-isolation", str(package))
    listing = run_embodied("plugins", python=str(python)).stdout
    assert "acme_policy" in listing and "acme-flow-policy" in listing
    rows = [line.split()[:4] for line in listing.splitlines()]
    for group, name in (("optimizers", "AcmeLion"), ("hooks", "acme_events"), ("lr_schedulers", "acme_wsd"),
                        ("loggers", "acme_csv")):
        assert [f"embodied.{group}", name, "acme-flow-policy", RELEASE] in rows
    assert "acme_policy" in run_embodied("train", "--help", python=str(python)).stdout
    model_help = run_embodied("train", "--model-name", "acme_policy", "--lr-decay-style", "acme_wsd", "--help",
                              python=str(python)).stdout
    assert "--model.hidden-dim" in model_help and "--plugins.acme-wsd.decay-fraction" in model_help

    out = tmp_path / "run"
    result = run_embodied("train", "--model-name", "acme_policy", "--dataset-format", "dummy_datasets",
                          "--train-iters", "4", "--optimizer", "AcmeLion", "--lr-base", "3e-4", "--dtype", "float32",
                          "--num-workers", "0", "--num-samples", "16", "--save-interval", "0",
                          "--output-dir", str(out), "--block-plugins", "acme_events", "run_events",
                          "--lr-decay-style", "acme_wsd", "--lr-warmup-iters", "1", "plugins.acme_csv.filename=m.csv",
                          python=str(python))
    assert result.returncode == 0, result.stderr
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 4
    assert "4,loss," in (out / "m.csv").read_text()  # the package's logger, switched on by its own option
    assert "acme_policy" in (out / "config.yaml").read_text() and "AcmeLion" in (out / "config.yaml").read_text()
    assert not (out / "hook_events.jsonl").exists()  # the blocked hook plugins did not run
    with_hook = run_embodied("train", "--model-name", "acme_policy", "--dataset-format", "dummy_datasets",
                             "--train-iters", "1", "--dtype", "float32", "--num-workers", "0", "--num-samples", "8",
                             "--save-interval", "0", "--output-dir", str(out), "--block-plugins", "run_events",
                             python=str(python))
    assert with_hook.returncode == 0, with_hook.stderr
    assert '"event": "train_end"' in (out / "hook_events.jsonl").read_text()

    _pip(python, "uninstall", "-y", "acme-flow-policy")
    assert "acme_policy" not in run_embodied("plugins", python=str(python)).stdout
    gone = run_embodied("train", "--model-name", "acme_policy", python=str(python))
    assert gone.returncode == 2 and "unknown --model-name 'acme_policy'" in gone.stderr
