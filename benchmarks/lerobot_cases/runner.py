"""One measurement in this process: build a side of a case, step it, return the record (shared by
``benchmarks/vs_lerobot.py`` and the smoke test, which runs our side in the test process).

One step = the side's loss (under bf16 autocast when asked), backward, AdamW (lr 1e-4, weight decay 0.01) over the
parameters that require grad, ``zero_grad(set_to_none=True)``; torch's global RNG is seeded with
``step_seed(step)`` before each loss. Where the case cannot train on the device (``trains_on``), the step is the
loss under ``no_grad``. Peak memory: on CUDA ``max_memory_allocated`` over the steps; on CPU the peak RSS during
the steps (sampled every millisecond by a thread) minus the RSS before the first step, i.e. what the step itself
holds (activations, gradients, optimizer state), not the libraries each venv imports.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.lerobot_cases import Side, load_case, step_seed

INPUTS = "inputs.safetensors"


def sized(case: ModuleType, size_name: str, batch_size: int | None) -> dict[str, Any]:
    """The case's size ``size_name`` with the batch replaced by ``batch_size`` when given."""
    if size_name not in case.SIZES:
        raise SystemExit(f"{case.__name__.rsplit('.', 1)[-1]}: no size {size_name!r}; choose from "
                         f"{', '.join(case.SIZES)}")
    size = dict(case.SIZES[size_name])
    if batch_size:
        size["batch"] = batch_size
    return size


def ensure_inputs(case: ModuleType, size: dict[str, Any], work: Path) -> dict[str, Any]:
    """The case's inputs, written to ``work`` by the first process that needs them and read by every other one
    (both venvs then see the same tensors, whatever their RNG)."""
    from safetensors.torch import load_file, save_file

    path = work / INPUTS
    if not path.exists():
        work.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in case.make_inputs(size).items()}, str(path))
    # cloned: safetensors may hand out tensors at unaligned addresses (1-ulp matmul differences)
    return {k: v.clone() for k, v in load_file(str(path)).items()}


def trains_on(case: ModuleType, device: Any) -> bool:
    """Whether both sides of ``case`` can run backward on ``device``."""
    check = getattr(case, "trains_on", None)
    return True if check is None else bool(check(device))


class _RssPeak:
    """Peak resident set size (MiB) above the level at entry, sampled every millisecond."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._page = 4096

    @staticmethod
    def _rss_pages() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1])

    def __enter__(self) -> _RssPeak:
        import os

        self._page = os.sysconf("SC_PAGE_SIZE")
        self._base = self._rss_pages()
        self._max = self._base
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self._max = max(self._max, self._rss_pages())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._max = max(self._max, self._rss_pages())
        self.peak = (self._max - self._base) * self._page / 2**20


def build_side(case: ModuleType, role: str, *, size: dict[str, Any], work: Path, device: Any,
               compile_model: bool = False) -> Side:
    """``role``'s side of ``case`` on ``device`` with the inputs of ``work``; ours compiled with the trainer's
    ``compile_blocks`` when ``compile_model`` (lerobot's with its own switch, where it has one)."""
    inputs = {k: v.to(device) for k, v in ensure_inputs(case, size, work).items()}
    if role == "lerobot":
        return case.lerobot_side(size, inputs, work, device, compile_model=compile_model)
    side = case.our_side(size, inputs, work, device)
    if compile_model:
        from embodied_core.trainer.compile import compile_blocks

        side.notes.append(str(compile_blocks(side.model if side.compile_target is None else side.compile_target)))
    return side


def sample_actions(side: Side, device: Any, path: Path | None = None) -> Any:
    """One action chunk from ``side`` in eval mode under ``no_grad``, torch's RNG seeded with ``step_seed(0)``
    (so every call and both sides sample the same noise); saved to ``path`` when given. The mode is restored."""
    import torch
    from safetensors.torch import save_file

    if side.predict is None:
        raise SystemExit(f"{type(side.model).__name__}: this side has no action sampling")
    was_training = side.model.training
    side.model.to(device).eval()
    torch.manual_seed(step_seed(0))
    with torch.no_grad():
        actions = side.predict()
    if device.type == "cuda":
        torch.cuda.synchronize()
    side.model.train(was_training)
    if path is not None:
        save_file({"actions": actions.detach().float().cpu().contiguous()}, str(path))
    return actions


def run_side(model_name: str, role: str, *, size: dict[str, Any], work: Path, device: str = "cpu",
             dtype: str = "float32", steps: int = 3, warmup: int = 1, compile_model: bool = False,
             count_flops: bool = False, profile: Path | None = None, save_actions: bool = False) -> dict[str, Any]:
    """Builds ``role``'s side ("ours" or "lerobot") of ``model_name`` and steps it ``warmup + steps`` times;
    with ``save_actions``, first samples one action chunk (before any update; where the side can sample) into
    ``work/<role>.actions.safetensors``.

    Returns: role, compile, mode ("train" or "forward"), first_s, step_s (median of the timed steps), step_cpu_s
    (the same in CPU time of this process: what other jobs on a shared host do not inflate), losses (all
    steps), peak_mib, trained_params (elements of the parameters with a nonzero gradient at step 0), flops (one
    step, counted by torch's FlopCounterMode, when ``count_flops``) and notes.
    """
    import torch

    case = load_case(model_name)
    dev = torch.device(device)
    side = build_side(case, role, size=size, work=work, device=dev, compile_model=compile_model)
    if save_actions and side.predict is not None:
        sample_actions(side, dev, work / f"{role}.actions.safetensors")
    train = trains_on(case, dev)
    side.model.to(dev)
    side.model.train(side.train_mode)
    params = [p for p in side.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01) if train else None
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16")

    trained = 0

    def step(index: int) -> float:
        nonlocal trained
        torch.manual_seed(step_seed(index))
        with autocast, torch.set_grad_enabled(train):
            loss = side.loss(index)
        if train:
            loss.backward()
            if index == 0:  # nonzero: work whose result the loss never reads gets a zero gradient, not none
                trained = sum(p.numel() for p in params if p.grad is not None and bool(p.grad.any()))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return float(loss.detach().float())

    times, cpu_times, losses = [], [], []
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with _RssPeak() as rss:
        for index in range(warmup + steps):
            started, cpu_started = time.perf_counter(), time.process_time()
            losses.append(step(index))
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else rss.peak
    record: dict[str, Any] = {"role": role, "compile": compile_model, "mode": "train" if train else "forward",
                              "first_s": times[0], "step_s": statistics.median(times[warmup:]),
                              "step_cpu_s": statistics.median(cpu_times[warmup:]), "losses": losses,
                              "peak_mib": peak, "trained_params": trained, "notes": side.notes}
    if count_flops:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            step(warmup + steps)
        record["flops"] = counter.get_total_flops()
    if profile is not None:
        record["profile"] = str(_profile_step(step, warmup + steps + 1, profile, f"{model_name}_{role}"
                                              f"{'_compiled' if compile_model else ''}", dev))
    return record


def _profile_step(step: Any, index: int, folder: Path, name: str, device: Any) -> Path:
    """One more step under torch.profiler; writes the op table (by self time), the same by input shapes and a
    Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        step(index)
    folder.mkdir(parents=True, exist_ok=True)
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = folder / f"{name}.txt"
    table.write_text(prof.key_averages(group_by_input_shape=False).table(sort_by=sort, row_limit=40))
    (folder / f"{name}.shapes.txt").write_text(prof.key_averages(group_by_input_shape=True).table(
        sort_by=sort, row_limit=80, max_name_column_width=60, max_shapes_column_width=120))
    prof.export_chrome_trace(str(folder / f"{name}.trace.json"))
    return table


def print_record(record: dict[str, Any]) -> None:
    """The record as the JSON line a driver reads (the last line of the side's stdout)."""
    print(json.dumps(record), flush=True)


def run_predict(model_name: str, role: str, *, size: dict[str, Any], work: Path, device: str = "cpu",
                calls: int = 20, warmup: int = 3, compile_model: bool = False) -> dict[str, Any]:
    """Builds ``role``'s side of ``model_name`` in eval mode and times its action sampling ``warmup + calls``
    times (torch's global RNG seeded with ``step_seed(0)`` before each call, so every call samples the same noise).

    Returns: role, compile, latencies_ms (the timed calls), flops (one call, by FlopCounterMode), and the actions
    of the last call saved to ``work/<role>[_compiled].actions.safetensors`` (for the driver's comparison).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    dev = torch.device(device)
    side = build_side(load_case(model_name), role, size=size, work=work, device=dev, compile_model=compile_model)
    name = f"{role}{'_compiled' if compile_model else ''}.actions.safetensors"
    latencies = []
    for index in range(warmup + calls):
        started = time.perf_counter()
        sample_actions(side, dev)
        if index >= warmup:
            latencies.append((time.perf_counter() - started) * 1e3)
    counter = FlopCounterMode(display=False)
    with counter:
        sample_actions(side, dev, work / name)
    return {"role": role, "compile": compile_model, "latencies_ms": latencies, "flops": counter.get_total_flops(),
            "actions_file": name, "notes": side.notes}
