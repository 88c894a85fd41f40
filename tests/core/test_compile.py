"""``--compile``: regional torch.compile (CPU inductor) of the blocks of pi05_tiny (Trainer API) and lingbot_va_tiny
(with activation checkpointing, the trainer's order) gives eager's losses and gradients; bad flag combinations
are usage errors before anything is built."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_core import Trainer, hookimpl
from embodied_core.config.resolve import load_config
from embodied_core.errors import UsageError
from embodied_core.trainer.compile import compile_blocks, compile_problems, compiled_block_names
from embodied_core.validation import validate_run_config
from tests.support import run_embodied


class _CompiledBlocks:
    """Records which blocks of the trained model were compiled."""

    def __init__(self) -> None:
        self.names: list[str] = []

    @hookimpl
    def on_train_start(self, config: Any, model: torch.nn.Module) -> None:
        self.names = compiled_block_names(model)


@pytest.fixture(autouse=True)
def _serial_inductor() -> Iterator[None]:
    import torch._inductor.config

    with torch._inductor.config.patch(compile_threads=1):  # no compile worker pool on a 2-core host
        yield


def _losses(out: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def _train(config: dict[str, Any], out: Path, *, compile_: bool) -> tuple[list[float], list[str]]:
    blocks = _CompiledBlocks()
    training = {**config["training"], "output_dir": str(out), "compile": compile_, "log_interval": 1,
                "save_interval": 0}
    Trainer({**config, "training": training}, plugins=[blocks]).train()
    return _losses(out), blocks.names


@pytest.mark.timeout(600)
def test_compiled_pi05_tiny_trains_like_eager(tmp_path: Path) -> None:
    # One layer per tower: each compiled block class once (a deeper model compiles the same graphs again).
    config = {"training": {"model_name": "pi05_tiny", "dataset_format": "dummy_datasets", "train_iters": 2,
                           "dtype": "float32", "per_device_batch_size": 2, "num_workers": 0, "lr_base": 1e-3,
                           "lr_warmup_iters": 0, "seed": 3},
              "model": {"depth": 1, "vision_depth": 1}}
    frames_before = torch._dynamo.utils.counters["frames"]["ok"]
    eager, none = _train(config, tmp_path / "eager", compile_=False)
    compiled, names = _train(config, tmp_path / "compiled", compile_=True)
    assert none == []
    assert names and all(n.startswith(("layers.", "vision.")) or ".layers." in n for n in names), names
    assert torch._dynamo.utils.counters["frames"]["ok"] > frames_before  # the blocks ran as compiled graphs
    assert len(eager) == len(compiled) == 2
    assert eager[0] != eager[-1]  # the steps update the weights, so later losses test the compiled backward too
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-4, atol=1e-5)


def _lingbot_batch(model: torch.nn.Module, batch_size: int = 2) -> dict[str, torch.Tensor]:
    """A lingbot_va_tiny training batch with the strategy's field names (random latents, actions, text)."""
    cfg, data = model.config, model.data_config
    gen = torch.Generator().manual_seed(0)
    (h, w), frames, n = data.latent_hw(), data.num_latent_frames, data.action_per_frame
    mask = torch.zeros(batch_size, cfg.action_dim, frames, n, 1)
    mask[:, cfg.used_action_channel_ids] = 1.0
    return {"latents": torch.randn(batch_size, cfg.in_channels, frames, h, w, generator=gen),
            "actions": torch.randn(batch_size, cfg.action_dim, frames, n, 1, generator=gen) * mask,
            "actions_mask": mask.bool(), "text_emb": torch.randn(batch_size, cfg.text_len, cfg.text_dim, generator=gen),
            "null_text_emb": torch.randn(batch_size, 1, cfg.text_dim, generator=gen)}


@pytest.mark.timeout(600)
def test_compiled_lingbot_va_tiny_with_checkpointing_matches_eager() -> None:
    """The trainer's order on lingbot_va_tiny: activation checkpointing of its blocks, then compile_blocks; the
    loss and every gradient equal eager's (the checkpointed backward recomputes through the compiled forward)."""
    from embodied_core.trainer.activation_checkpoint import apply_activation_checkpointing
    from embodied_models.lingbot_va.modeling import build_model

    config = load_config(training={"model_name": "lingbot_va_tiny"}, environ={})
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(build_model(config.model, config.data))
    eager, compiled = models
    report = apply_activation_checkpointing(compiled, patterns="transformer.blocks.*", skip=None)
    assert len(report.checkpointed) == len(compiled.transformer.blocks) == 2
    assert compile_blocks(compiled).blocks == ("transformer.blocks.0", "transformer.blocks.1")
    batch = _lingbot_batch(eager)
    losses = []
    for model in (eager, compiled):
        model.seed_rng(3)
        loss = model(batch).loss
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)
    grads = {n: p.grad for n, p in compiled.named_parameters() if p.requires_grad}
    for name, param in eager.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(grads[name], param.grad, rtol=1e-3, atol=1e-5, msg=name)


def _problems(**training: Any) -> list[str]:
    return compile_problems(load_config("tiny_flow_policy", training=training, environ={}).training, cuda=False,
                            world_size=1)


def test_bad_combinations_name_the_flag_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _problems(compile=True) == []
    assert _problems() == []
    (alone,) = _problems(compile_mode="max-autotune")
    assert "--compile-mode max-autotune: read only with --compile" in alone
    (graphs,) = _problems(compile=True, compile_mode="reduce-overhead")
    assert "captures CUDA graphs and no CUDA device" in graphs and "max-autotune-no-cudagraphs" in graphs
    fsdp = compile_problems(load_config("tiny_flow_policy", training={
        "compile": True, "compile_mode": "reduce-overhead", "distributed_strategy": "fsdp"}, environ={}).training,
        cuda=True, world_size=2)
    assert len(fsdp) == 1 and "--distributed-strategy fsdp" in fsdp[0]
    monkeypatch.setattr("embodied_core.trainer.compile.shutil.which", lambda name: None)
    (compiler,) = _problems(compile=True)
    assert "no C++ compiler" in compiler and "drop --compile" in compiler
    with pytest.raises(UsageError, match="--compile-mode max-autotune"):
        validate_run_config(load_config("tiny_flow_policy", training={"compile_mode": "max-autotune"}, environ={}))


def test_a_model_without_blocks_is_a_usage_error() -> None:
    from embodied_core.model_base import EmbodiedModel

    class NoBlocks(EmbodiedModel):  # keeps the default fsdp_units() == ()
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)

    with pytest.raises(UsageError, match=r"--compile: NoBlocks declares no blocks \(its fsdp_units\(\) is empty\)"):
        compile_blocks(NoBlocks())


def test_marked_blocks_compile_with_static_shapes() -> None:
    """Blocks a model marks (a vision pyramid's stages, each at its own fixed shape) get ``dynamic=False``; the
    others keep automatic dynamic shapes (X-VLA's DaViT blocks: tests/models/test_xvla_model.py)."""
    from embodied_core.model_base import EmbodiedModel
    from embodied_core.trainer.compile import mark_static_shapes

    class Pyramid(EmbodiedModel):
        def __init__(self) -> None:
            super().__init__()
            self.stages = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(8, 8)])
            self.layers = torch.nn.ModuleList([torch.nn.Bilinear(3, 3, 3)])
            mark_static_shapes(*self.stages)

        def fsdp_units(self) -> tuple[type[torch.nn.Module], ...]:
            return (torch.nn.Linear, torch.nn.Bilinear)

    calls: list[object] = []
    real = torch.compile

    def recording(fn: object, **kwargs: object) -> object:
        calls.append((fn.__self__, kwargs["dynamic"]))  # type: ignore[attr-defined]
        return real(fn, **kwargs)

    model = Pyramid()
    torch.compile, saved = recording, torch.compile  # type: ignore[assignment]
    try:
        report = compile_blocks(model)
    finally:
        torch.compile = saved
    assert report.static_blocks == ("stages.0", "stages.1") and "(2 with static shapes)" in str(report)
    assert calls == [(model.stages[0], False), (model.stages[1], False), (model.layers[0], None)]


def test_cli_refuses_compile_mode_without_compile(tmp_path: Path) -> None:
    result = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets",
                          "--output-dir", str(tmp_path), "--compile-mode", "reduce-overhead", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "--compile-mode reduce-overhead: read only with --compile" in result.stderr
    assert "Traceback" not in result.stderr
