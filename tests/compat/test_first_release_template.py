"""A plugin written against the first release keeps installing, registering and training.

``plugin_template_0_1/`` is the plugin template frozen as it stood at 0.1.0 (commit fb821dc, the last state before
the protocol changes of 050fe01; see its README): a model that is a plain ``nn.Module`` whose ``fsdp_units`` and
``no_weight_decay`` return lists, the Lion optimizer, an LR schedule and a logger with options, a hook module; plus,
written against the 0.1 API, a dataset format whose factory returns a list of dicts and a distributed strategy
importing ``embodied_core.strategies.base``. It keeps its names (distribution ``embodied-plugin-template``, package
``embodied_plugin_template``): it is installed with pip into a venv that sees the test environment without the
current template, so no two distributions claim one name. It trains under torchrun on 2 gloo processes, so its
strategy runs too.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import clean_env, run_embodied

FROZEN = Path(__file__).resolve().parent / "plugin_template_0_1"
pytestmark = pytest.mark.timeout(300)


def _site_without_the_current_template(folder: Path) -> Path:
    """Links to the test environment's site-packages, except the current template's metadata and path file."""
    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "embodied_plugin_template" not in entry.name:
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def compat_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv over that site with the frozen template pip-installed (a regular, non-editable install)."""
    root = tmp_path_factory.mktemp("compat")
    site = _site_without_the_current_template(root / "site")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # addsitedir so the editable installs' .pth files in the linked site are processed
    Path(purelib, "_test_env.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-input",
                                "--no-deps", "--no-build-isolation", str(FROZEN)], capture_output=True, text=True,
                               timeout=300, env=clean_env(PIP_NO_INDEX="1"))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


_TRAIN = ["train", "--model-name", "tiny_flow_policy", "--dataset-format", "listed_episodes", "--num-samples", "16",
          "--train-iters", "3", "--per-device-batch-size", "2", "--optimizer", "Lion", "--lr-base", "3e-4",
          "--dtype", "float32", "--num-workers", "0", "--save-interval", "0", "--lr-decay-style",
          "warmup_stable_decay", "--lr-warmup-iters", "1", "plugins.csv_metrics.filename=m.csv",
          "--distributed-strategy", "allreduce", "data.camera_keys=[observation.images.front]", "data.state_dim=2",
          "data.action_dim=2"]


def test_it_registers_and_check_names_its_deprecated_import(compat_python: Path) -> None:
    listing = run_embodied("plugins", python=str(compat_python), timeout=60)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split()[:4] for line in listing.stdout.splitlines()]
    for group, name in (("models", "tiny_flow_policy"), ("optimizers", "Lion"), ("hooks", "run_events"),
                        ("lr_schedulers", "warmup_stable_decay"), ("loggers", "csv_metrics"),
                        ("dataset_formats", "listed_episodes"), ("distributed_strategies", "allreduce")):
        assert [f"embodied.{group}", name, "embodied-plugin-template", "0.1.0"] in rows, name
    checked = run_embodied("plugins", "--group", "distributed_strategies", "--check", python=str(compat_python),
                           timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # deprecated is reported, not a failure
    row = next(line for line in checked.stdout.splitlines() if " allreduce " in line)
    assert row.endswith("ok; deprecated: embodied_core.strategies.base -> embodied_core.distributed.base "
                        "(embodied_plugin_template.strategy)"), row


@pytest.mark.distributed
def test_it_trains_on_two_processes_with_all_its_plugins(compat_python: Path, tmp_path: Path) -> None:
    """Its model, list-of-dicts dataset, optimizer, schedule, logger, hook and strategy, under torchrun (gloo)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = subprocess.run([str(compat_python), "-m", "torch.distributed.run", "--nproc_per_node=2",
                             f"--master_port={port}", "-m", "embodied_core.cli.main", *_TRAIN, "--output-dir",
                             str(tmp_path)], capture_output=True, text=True, env=clean_env(OMP_NUM_THREADS="1"),
                            timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3] and all(m["loss"] > 0 for m in metrics)
    assert "3,loss," in (tmp_path / "m.csv").read_text()  # its logger, switched on by its own option
    assert '"event": "train_end"' in (tmp_path / "hook_events.jsonl").read_text()  # its hook ran
    config = (tmp_path / "config.yaml").read_text()
    assert "embodied.distributed_strategies/allreduce: embodied-plugin-template 0.1.0" in config
    assert "embodied.dataset_formats/listed_episodes: embodied-plugin-template 0.1.0" in config
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["consumed_samples"] == 12  # 3 steps x 2 processes x 2 samples: both ranks trained
    # what changed is said, not hidden: the old module path its strategy imports and the lists its model returns
    # warn, each naming the fix
    assert ("FutureWarning: embodied_core.strategies.base is deprecated since embodied 0.2.0 and will be removed in "
            "0.3.0 at the earliest: use embodied_core.distributed.base instead") in result.stderr
    assert "fsdp_units() returned a list; the model-plugin protocol declares tuple" in result.stderr
