"""Installing only some packages: scripts/build_wheels.sh, then ``pip install --no-index --find-links wheelhouse``
into fresh venvs (core, core+data, core+dist, core+data+models), and the install hints each partial install gives.

The venvs see the test environment's third-party packages (torch, ...) through a folder of links to its
site-packages that leaves out every embodied distribution (the editable installs), so pip must take the
embodied packages from the wheelhouse and resolve their embodied dependencies there. No network is used.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import REPO_ROOT, clean_env, run_embodied

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheels of every package (built once per session by the script users run) and of the template."""
    out = tmp_path_factory.mktemp("wheelhouse")
    built = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "build_wheels.sh"), str(out)], capture_output=True,
                           text=True, timeout=300, env=clean_env(PYTHON=sys.executable))
    assert built.returncode == 0, built.stdout + built.stderr
    template = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                               "--wheel-dir", str(out), str(REPO_ROOT / "examples" / "plugin-template")],
                              capture_output=True, text=True, timeout=300, env=clean_env())
    assert template.returncode == 0, template.stdout + template.stderr
    return out


@pytest.fixture(scope="session")
def third_party_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Links to everything in the test environment's site-packages except the embodied distributions."""
    site = Path(sysconfig.get_paths()["purelib"])
    folder = tmp_path_factory.mktemp("third_party_site")
    for entry in site.iterdir():
        if "embodied" in entry.name.lower():
            continue  # embodied_*.dist-info and the _editable_impl_embodied_*.pth files
        (folder / entry.name).symlink_to(entry)
    return folder


def _venv(path: Path, third_party: Path, wheelhouse: Path, *requirements: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_third_party.pth").write_text(f"import site; site.addsitedir({str(third_party)!r})\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-input",
                                "--no-index", "--find-links", str(wheelhouse), *requirements],
                               capture_output=True, text=True, timeout=300, env=clean_env())
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


def _distributions(python: Path) -> set[str]:
    code = "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"
    names = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {name for name in names if name.startswith("embodied")}


def _train(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_embodied("train", "--dtype", "float32", "--num-workers", "0", "--save-interval", "0", *args,
                        python=str(python))


def test_core_alone(tmp_path: Path, wheelhouse: Path, third_party_site: Path) -> None:
    python = _venv(tmp_path / "core", third_party_site, wheelhouse, "embodied-core")
    assert _distributions(python) == {"embodied-core"}
    listing = run_embodied("plugins", python=str(python)).stdout
    assert "AdamW" in listing and "embodied-data" not in listing and "pi05" not in listing

    model = _train(python, "--model-name", "pi05_tiny")
    assert model.returncode == 2 and "Traceback" not in model.stderr
    assert "'pi05_tiny' is provided by the package embodied-models, which is not installed" in model.stderr
    assert "pip install --find-links wheelhouse embodied-models" in model.stderr
    data = run_embodied("data", "inspect", str(tmp_path), python=str(python))
    assert data.returncode == 2 and "'data' is provided by the package embodied-data" in data.stderr


def test_core_and_data(tmp_path: Path, wheelhouse: Path, third_party_site: Path) -> None:
    python = _venv(tmp_path / "data", third_party_site, wheelhouse, "embodied-data", "embodied-plugin-template")
    assert _distributions(python) == {"embodied-core", "embodied-data", "embodied-plugin-template"}
    assert "lerobot_datasets" in run_embodied("plugins", "--group", "dataset_formats", python=str(python)).stdout

    # Under torchrun every rank validates; the missing package is named once (rank 0), exit 2.
    env = clean_env()
    launch = subprocess.run([str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             "-m", "embodied_core.cli.main", "train", "--model-name", "tiny_flow_policy",
                             "--dataset-format", "dummy_datasets", "--distributed-strategy", "fsdp", "--dtype",
                             "float32", "--num-workers", "0", "--output-dir", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=300, env=env)
    output = launch.stdout + launch.stderr
    assert launch.returncode != 0 and "exitcode  : 2" in output, output
    assert output.count("'fsdp' is provided by the package embodied-dist, which is not installed") == 1, output


def test_core_and_dist(tmp_path: Path, wheelhouse: Path, third_party_site: Path) -> None:
    python = _venv(tmp_path / "dist", third_party_site, wheelhouse, "embodied-dist", "embodied-plugin-template")
    assert _distributions(python) == {"embodied-core", "embodied-dist", "embodied-plugin-template"}
    strategies = run_embodied("plugins", "--group", "distributed_strategies", python=str(python)).stdout
    assert "fsdp" in strategies and "ddp" in strategies

    result = _train(python, "--model-name", "tiny_flow_policy", "--dataset-format", "lerobot_datasets",
                    "--dataset-path", str(tmp_path))
    assert result.returncode == 2
    assert "'lerobot_datasets' is provided by the package embodied-data, which is not installed" in result.stderr


def test_models_pull_core_and_data(tmp_path: Path, wheelhouse: Path, third_party_site: Path) -> None:
    python = _venv(tmp_path / "models", third_party_site, wheelhouse, "embodied-models")
    assert _distributions(python) == {"embodied-core", "embodied-data", "embodied-models"}
    listing = run_embodied("plugins", "--group", "models", python=str(python)).stdout
    assert "pi05_tiny" in listing and "embodied-models" in listing
    model_help = run_embodied("train", "--model-name", "pi05_tiny", "--help", python=str(python))
    assert model_help.returncode == 0 and "--model." in model_help.stdout
    where = subprocess.run([str(python), "-c", "import embodied_models; print(embodied_models.__file__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.realpath(where).startswith(str((tmp_path / "models").resolve()))  # the wheel, not the checkout
