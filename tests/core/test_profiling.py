"""--use-pytorch-profiler: a trace per profiling rank under the output dir covering exactly the step window
(absolute steps, also after --resume), with shapes and memory; --use-nsys-profiler is a clear error on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embodied_core.errors import ConfigError
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import training


def _trace_steps(directory: Path) -> tuple[set[int], list[dict]]:
    traces = sorted(directory.glob("rank0.*.pt.trace.json"))
    assert len(traces) == 1, [p.name for p in directory.iterdir()]
    events = json.loads(traces[0].read_text())["traceEvents"]
    steps = {int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    return steps, events


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU case; on CUDA the trace also holds kernels")
def test_the_trace_covers_exactly_the_window_also_after_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    window = {"use_pytorch_profiler": True, "profile_step_start": 2, "profile_step_end": 3}
    Trainer({"training": training(out, save_interval=2, **window)}).train()
    steps, events = _trace_steps(out / "profiler")
    assert steps == {2, 3}
    assert any(e.get("name") == "[memory]" for e in events)  # profile_memory
    assert any("Input Dims" in e.get("args", {}) for e in events)  # record_shapes
    resumed = tmp_path / "traces_after_resume"
    Trainer({"training": training(out, save_interval=2, resume_from=str(out / "checkpoints/step_2"),
                                  profile_output_dir=str(resumed), **window)}).train()
    assert _trace_steps(resumed)[0] == {3}  # the resumed run starts at step 3: the rest of the window


def test_ranks_outside_profile_ranks_write_nothing(tmp_path: Path) -> None:
    from embodied_core.config.training_args import TrainingArgs
    from embodied_core.trainer.profiling import build_step_profiler

    profiler = build_step_profiler(TrainingArgs(use_pytorch_profiler=True, output_dir=str(tmp_path)), rank=1)
    with profiler.step(10):
        torch.ones(2).sum()
    profiler.close()
    assert profiler.kind is None and not (tmp_path / "profiler").exists()


@pytest.mark.parametrize(("flags", "message"), [
    ({"use_nsys_profiler": True}, "--use-nsys-profiler needs CUDA"),
    ({"use_nsys_profiler": True, "use_pytorch_profiler": True}, "exclude each other"),
    ({"use_pytorch_profiler": True, "profile_step_start": 5, "profile_step_end": 4},
     "--profile-step-end 4 is before --profile-step-start 5"),
    ({"use_pytorch_profiler": True, "profile_ranks": [0, 3]}, r"--profile-ranks 3: no such rank \(world size 1"),
])
def test_profiler_flag_mistakes_are_reported_before_training(tmp_path: Path, flags: dict, message: str) -> None:
    if torch.cuda.is_available() and message.endswith("CUDA"):
        pytest.skip("CUDA is available here")
    with pytest.raises(ConfigError, match=message):
        Trainer({"training": training(tmp_path / "run", **flags)})
    assert not (tmp_path / "run").exists()
