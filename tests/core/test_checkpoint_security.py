"""Loading a checkpoint never runs code from it: a malicious pickle at every entry point is a CheckpointError
naming the file, and its payload (which would create a marker file) never runs.

Entry points: ``--pretrained-checkpoint`` (zip ``.pt``, legacy pickle, ``pytorch_model.bin`` folder, DCP),
resume (``model.pt``, ``optimizer.pt``, ``rank0.pt``, ``scheduler.pt``; DCP ``scheduler.pt``, ``.metadata``,
``.distcp`` entries), ``embodied checkpoint convert`` (DCP metadata, DCP entries, ZeRO optimizer files), and a
strategy's sharded load (cross-topology resumes).
"""

from __future__ import annotations

import pickle
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from embodied_core.checkpoint.dcp_reader import read_dcp_metadata, read_dcp_state_dict
from embodied_core.checkpoint.pretrained import load_pretrained
from embodied_core.distributed.base import SingleProcessStrategy
from embodied_core.errors import CheckpointError
from embodied_core.trainer.api import Trainer
from embodied_dist.convert import convert
from tests.core.trainer_support import build, training
from tests.support import run_embodied


class Payload:
    """Unpickling this calls ``open(marker, "w")``: the marker file exists iff code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 2-step run per save format with one checkpoint (step_2)."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for fmt in ("pt", "dcp"):
        Trainer({"training": training(root / fmt, train_iters=2, save_interval=2, save_format=fmt)}).train()
        out[fmt] = root / fmt / "checkpoints" / "step_2"
    return out


def _copy(step: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt" / step.name
    shutil.copytree(step, target, symlinks=True)
    return target


def _evil_torch_file(path: Path, marker: Path, *, legacy: bool = False) -> None:
    torch.save({"weight": torch.zeros(2), "payload": Payload(marker)}, path,
               _use_new_zipfile_serialization=not legacy)


def _model(tmp_path: Path) -> torch.nn.Module:
    return build(tmp_path / "model").build_model()


def _rewrite_dcp(directory: Path, marker: Path, *, among: str = "rank_state") -> None:
    """Saves the checkpoint again with a payload among its non-tensor entries (as a crafted file would hold):
    the per-rank state, or the optimizer's parameter groups."""
    state = read_dcp_state_dict(directory)
    entries = state["rank_state"]["rank0"]["dataloader"] if among == "rank_state" else state["optim"]["param_groups"][0]
    entries["payload"] = Payload(marker)
    shutil.rmtree(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(directory))


# ---------------------------------------------------------------------------------------------- pretrained
@pytest.mark.parametrize("layout", ["pt_zip", "legacy_pickle", "pytorch_model_bin_folder"])
def test_pretrained_weights_never_run_code(tmp_path: Path, layout: str) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    if layout == "pytorch_model_bin_folder":
        (tmp_path / "hub").mkdir()
        bad = tmp_path / "hub" / "pytorch_model.bin"
        _evil_torch_file(bad, marker)
        source = tmp_path / "hub"
    else:
        bad = source = tmp_path / "evil.pt"
        _evil_torch_file(bad, marker, legacy=layout == "legacy_pickle")
    with pytest.raises(CheckpointError, match="weights_only=True") as info:
        load_pretrained(_model(tmp_path), source)
    assert str(bad) in str(info.value)
    assert not marker.exists()


def test_pretrained_dcp_checkpoint_with_crafted_metadata(runs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["dcp"], tmp_path)
    model = _model(tmp_path)
    assert load_pretrained(model, step).ok  # a DCP checkpoint initializes a model (gathered in this process)
    metadata = step / "dcp" / ".metadata"
    with metadata.open("wb") as f:
        pickle.dump(Payload(marker), f)
    with pytest.raises(CheckpointError, match="refused") as info:
        load_pretrained(model, step)
    assert str(metadata) in str(info.value) and not marker.exists()


# ---------------------------------------------------------------------------------------------- resume
@pytest.mark.parametrize("name", ["model.pt", "training_state/optimizer.pt", "training_state/rank0.pt",
                                  "training_state/scheduler.pt"])
def test_resume_pt_files_never_run_code(runs: dict[str, Path], tmp_path: Path, name: str) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["pt"], tmp_path)
    _evil_torch_file(step / name, marker)
    trainer = Trainer({"training": training(tmp_path / "run", train_iters=4, resume_from=str(step))})
    with pytest.raises(CheckpointError, match="weights_only=True") as info:
        trainer.train()
    assert str(step / name) in str(info.value)
    assert not marker.exists()
    assert not (tmp_path / "run" / "config.yaml").exists()  # found before the model was built


def _metadata_with_payload(step: Path, marker: Path) -> None:
    metadata = read_dcp_metadata(step / "dcp")
    metadata.storage_meta.modules = [Payload(marker)]  # a genuine metadata object carrying one foreign object
    with (step / "dcp" / ".metadata").open("wb") as f:
        pickle.dump(metadata, f)


@pytest.mark.parametrize("crafted", ["scheduler.pt", "metadata_raw", "metadata_embedded", "distcp_entry"])
def test_resume_dcp_files_never_run_code(runs: dict[str, Path], tmp_path: Path, crafted: str) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["dcp"], tmp_path)
    if crafted == "scheduler.pt":
        bad = step / "training_state" / "scheduler.pt"
        _evil_torch_file(bad, marker)
    elif crafted == "metadata_raw":
        bad = step / "dcp" / ".metadata"
        bad.write_bytes(pickle.dumps(Payload(marker)))
    elif crafted == "metadata_embedded":
        bad = step / "dcp" / ".metadata"
        _metadata_with_payload(step, marker)
    else:
        bad = step / "dcp" / "__0_0.distcp"
        _rewrite_dcp(step / "dcp", marker)
    with pytest.raises(CheckpointError) as info:
        Trainer({"training": training(tmp_path / "run", train_iters=4, save_format="dcp",
                                      resume_from=str(step))}).train()
    assert str(bad) in str(info.value) or (bad.name in str(info.value) and str(step) in str(info.value))
    assert not marker.exists()


def test_torch_alone_would_run_both_dcp_payloads(runs: dict[str, Path], tmp_path: Path) -> None:
    """What the tests above guard against: torch's own reader and planner run code from both files."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

    metadata_marker, entry_marker = tmp_path / "METADATA_RAN", tmp_path / "ENTRY_RAN"
    crafted_metadata = _copy(runs["dcp"], tmp_path / "a")
    _metadata_with_payload(crafted_metadata, metadata_marker)
    FileSystemReader(str(crafted_metadata / "dcp")).read_metadata()
    assert metadata_marker.exists()
    crafted_entry = _copy(runs["dcp"], tmp_path / "b")
    _rewrite_dcp(crafted_entry / "dcp", entry_marker)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _load_state_dict_from_keys({"rank_state"}, checkpoint_id=str(crafted_entry / "dcp"))
    assert entry_marker.exists()


def test_strategy_sharded_load_never_runs_code(runs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["dcp"], tmp_path)
    _metadata_with_payload(step, marker)
    trainer = build(tmp_path / "model")
    strategy = SingleProcessStrategy(trainer.args)
    with pytest.raises(CheckpointError, match="refused"):
        strategy.load_sharded_checkpoint(step / "dcp", trainer.build_model(), None)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------- convert
def test_convert_cli_refuses_crafted_metadata_without_traceback(runs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["dcp"], tmp_path)
    _metadata_with_payload(step, marker)
    result = run_embodied("checkpoint", "convert", str(step), str(tmp_path / "out.safetensors"), timeout=120)
    assert result.returncode == 1, result.stderr
    assert str(step / "dcp" / ".metadata") in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists() and not (tmp_path / "out.safetensors").exists()


def test_convert_refuses_crafted_entries_and_zero_optimizer_files(runs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    step = _copy(runs["dcp"], tmp_path / "dcp")
    _rewrite_dcp(step / "dcp", marker, among="optim")
    with pytest.raises(CheckpointError, match=r"__0_0\.distcp"):
        convert(step, tmp_path / "w.safetensors", optimizer=tmp_path / "optim.pt")
    zero = _copy(runs["pt"], tmp_path / "zero")  # a ZeRO-1 pt checkpoint keeps one optimizer file per rank
    (zero / "training_state" / "optimizer.pt").rename(zero / "training_state" / "optimizer_rank0.pt")
    _evil_torch_file(zero / "training_state" / "optimizer_rank0.pt", marker)
    with pytest.raises(CheckpointError, match=r"optimizer_rank0\.pt"):
        convert(zero, tmp_path / "w2.safetensors", optimizer=tmp_path / "optim2.pt")
    assert not marker.exists()
