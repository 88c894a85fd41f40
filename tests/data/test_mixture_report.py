"""``embodied data mixture FILE.yaml``: the resolved entries, the shares measured over one epoch next to the requested
ones, the stats mode, every problem; exit 0 / 1 / 2 as ``embodied data inspect``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from embodied_data.mixture import mixture_report, report_json
from tests.support import DATASETS_DIR, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"
V21 = DATASETS_DIR / "lerobot_written" / "v21"
G1 = DATASETS_DIR / "g1_inspire_v21"
TWO = {"stats": "per_entry", "entries": [
    {"path": str(V30), "weight": 3, "embodiment": "arm"},
    {"path": str(G1), "weight": 1, "episodes": "10-11", "lerobotdataset_version": "v2.1", "embodiment": "g1"}]}


def _file(tmp_path: Path, mixture: dict[str, Any]) -> Path:
    file = tmp_path / "mix.yaml"
    file.write_text(yaml.safe_dump(mixture))
    return file


@pytest.mark.timeout(120)
def test_the_report_lists_entries_and_measured_shares_and_exits_by_its_problems(tmp_path: Path) -> None:
    done = run_embodied("data", "mixture", str(_file(tmp_path, TWO)), "--video-backend", "pyav", timeout=110)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "2 entries, weighting dataset, stats per_entry" in text
    rows = [line.split() for line in text.splitlines() if line.strip().startswith(("0  v30", "1  g1_inspire"))]
    assert rows[0][-4:-1] == ["3", "75.00%", "75.00%"] and rows[1][-4:-1] == ["1", "25.00%", "25.00%"]
    assert "observation.state [26], action [26], observation.images.cam_high 480x640" in text
    assert "per embodiment (arm: entries 0; g1: entries 1)" in text
    assert "cameras ['observation.images.cam_high']" in text  # a note: the entries differ
    bad_version = run_embodied("data", "mixture", str(_file(tmp_path, {"entries": [{"path": str(V30)},
                                                                                    {"path": str(V21)}]})),
                               timeout=110)
    assert bad_version.returncode == 1
    assert f"data_mixture.entries[1] ({V21}):" in bad_version.stdout and "v2.1" in bad_version.stdout
    malformed = run_embodied("data", "mixture", str(_file(tmp_path, {"entries": [{"path": str(V30), "weight": 0}]})),
                             timeout=110)
    assert malformed.returncode == 2 and "weight must be a finite number > 0 (got 0.0)" in malformed.stderr


@pytest.mark.timeout(120)
def test_with_a_model_every_entry_is_mapped_into_its_input(tmp_path: Path) -> None:
    mixture = {**TWO, "samples_per_epoch": 1001}
    report = mixture_report(_file(tmp_path, mixture), model="pi05_tiny",
                            flags={"video_backend": "pyav", "per_device_batch_size": 4})
    assert report.ok, report.problems
    assert report.epoch_length == 1000  # whole batches of 4
    doc = report_json(report)
    assert [e["draws"] for e in doc["entries"]] == [750, 250]
    assert doc["entries"][0]["samples"] == 120 and doc["entries"][0]["passes"] == 750 / 120
    assert doc["embodiments"] == {"arm": [0], "g1": [1]}
