"""``--use-lora`` in one process: adapters injected by PEFT into the model itself, checkpoints in PEFT's format with a
base reference, exact resume, adapter checkpoints loaded directly (load_policy, PEFT's own PeftModel), and
``embodied checkpoint merge-lora`` whose merged policy answers like the adapter policy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from embodied_core import load_policy
from embodied_core.config.resolve import load_config
from embodied_core.errors import CheckpointError, ConfigError, UsageError
from embodied_core.lora.inject import adapted_layers, apply_lora, lora_state
from embodied_core.lora.merge import merge_lora
from embodied_core.lora.options import LoraSettings, TargetSpec, parse_targets
from embodied_core.policy.export import export_policy
from embodied_core.policy.load import read_policy_folder
from embodied_core.trainer.api import Trainer
from embodied_models.pi05.modeling import Pi05Model, build_model
from tests.core.policy_support import train
from tests.eval.serve_support import ServeProcess, run_openpi_client
from tests.support import run_embodied

PI05 = {"model_name": "pi05_tiny", "dataset_format": "dummy_datasets", "num_samples": 16, "train_iters": 4,
        "dtype": "float32", "per_device_batch_size": 2, "num_workers": 0, "save_interval": 2, "lr_warmup_iters": 0,
        "lr_decay_iters": 4, "lr_base": 1e-2, "seed": 7, "detail_log_interval": 0, "use_lora": True, "lora_r": 4,
        "lora_alpha": 8, "lora_modules_to_save": "action_out_proj"}
TINY = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "num_samples": 24, "train_iters": 4,
        "dtype": "float32", "per_device_batch_size": 4, "num_workers": 0, "save_interval": 2, "lr_warmup_iters": 0,
        "lr_decay_iters": 4, "lr_base": 1e-2, "seed": 5, "detail_log_interval": 0, "use_lora": True, "lora_r": 4,
        "lora_alpha": 8, "lora_target_modules": "head.0,head.2,head.4"}


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _resume_from_step_2(run: Path, copy: Path, **flags: Any) -> Path:
    """A copy of ``run`` without its step-4 checkpoint, resumed to step 4 with ``flags``."""
    shutil.copytree(run, copy, symlinks=True)
    shutil.rmtree(copy / "checkpoints" / "step_4")
    (copy / "checkpoints" / "latest").unlink()
    Trainer({"training": {**flags, "output_dir": str(copy), "resume": True}}).train()
    return copy


def _observation(policy: Any, seed: int) -> dict[str, Any]:
    meta = policy.metadata
    rng = np.random.default_rng(seed)
    obs: dict[str, Any] = {key: rng.integers(0, 256, size=meta.image_shape, dtype=np.uint8) for key in meta.camera_keys}
    obs[meta.state_key] = rng.standard_normal(meta.state_dim).astype(np.float32)
    obs["task"] = "pick up the cube"
    return obs


def _tiny_pi05() -> Pi05Model:
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"})
    torch.manual_seed(0)
    return build_model(config.model, config.data)


# ------------------------------------------------------------------ a pi05_tiny LoRA run shared by the tests below
@pytest.fixture(scope="module")
def pi05_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("lora_pi05") / "run"
    trainer, kept = train({"training": {**PI05, "output_dir": str(out)}})
    assert trainer.state.step == 4
    return out, kept


def test_checkpoint_holds_adapters_in_peft_format_and_a_base_reference(pi05_run: tuple[Path, Any]) -> None:
    out, _ = pi05_run
    step = out / "checkpoints" / "step_4"
    assert not (step / "model.safetensors").exists()
    assert json.loads((step / "meta.json").read_text())["format"] == "lora"
    adapters = load_file(step / "adapter_model.safetensors")
    assert all(k.startswith("base_model.model.") for k in adapters)
    layers = {k.removeprefix("base_model.model.").rsplit(".lora_", 1)[0] for k in adapters if ".lora_" in k}
    # pi05's default_lora_targets(), less the last VLM layer's q/o/MLP projections, which pi05 freezes itself
    assert len(layers) == 23 and "layers.1.expert.mlp.down_proj" in layers and "layers.1.vlm.mlp.up_proj" not in layers
    assert {"base_model.model.action_out_proj.weight", "base_model.model.action_out_proj.bias"} <= set(adapters)
    config = json.loads((step / "adapter_config.json").read_text())
    base = json.loads((step / "lora_base.json").read_text())["base"]
    assert (config["peft_type"], config["r"], config["lora_alpha"]) == ("LORA", 4, 8)
    assert config["modules_to_save"] == ["action_out_proj"]
    assert base["kind"] == "initial" and config["base_model_name_or_path"] == base["path"]
    assert Path(base["path"]) == (out / "lora_base" / "model.safetensors").resolve()
    # the optimizer covers the trainable tensors only: the adapters and action_out_proj's trained copy
    optimizer = torch.load(step / "training_state" / "optimizer.pt", weights_only=True)
    assert sum(len(group["params"]) for group in optimizer["param_groups"]) == len(adapters) == 48
    assert len(optimizer["state"]) == 48  # and every one of them got gradients


def test_model_keeps_its_class_and_only_adapters_train(pi05_run: tuple[Path, Any]) -> None:
    _, kept = pi05_run
    model = kept.model
    assert type(model) is Pi05Model and lora_state(model) is not None
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n or ".modules_to_save." in n for n in trainable)
    base = load_file(lora_state(model).base.path)
    # the frozen base did not move: each base_layer weight equals the recorded initial weights
    for name, param in model.named_parameters():
        if ".base_layer." in name:
            torch.testing.assert_close(param.detach(), base[name.replace(".base_layer", "")], rtol=0, atol=0)


def test_resume_restores_adapters_optimizer_and_schedule_exactly(pi05_run: tuple[Path, Any], tmp_path: Path) -> None:
    out, _ = pi05_run
    resumed = _resume_from_step_2(out, tmp_path / "resumed", **PI05)
    assert _losses(resumed) == _losses(out)
    straight = load_file(out / "checkpoints" / "step_4" / "adapter_model.safetensors")
    again = load_file(resumed / "checkpoints" / "step_4" / "adapter_model.safetensors")
    assert straight.keys() == again.keys()
    assert all(torch.equal(straight[k], again[k]) for k in straight)


def test_load_policy_builds_exactly_the_trained_model(pi05_run: tuple[Path, Any]) -> None:
    out, kept = pi05_run
    model = read_policy_folder(out).build_model()  # the run's --output-dir: its newest checkpoint
    trained = kept.model.state_dict()
    loaded = model.state_dict()
    assert loaded.keys() == trained.keys()
    assert all(torch.equal(loaded[k], trained[k]) for k in trained)


def test_merge_lora_writes_a_full_policy_folder_answering_like_the_adapters(pi05_run: tuple[Path, Any],
                                                                           tmp_path: Path) -> None:
    out, _ = pi05_run
    merged = tmp_path / "merged"
    proc = run_embodied("checkpoint", "merge-lora", str(out / "checkpoints" / "step_4"), str(merged))
    assert proc.returncode == 0, proc.stderr
    assert "merged 23 LoRA layer(s)" in proc.stdout
    weights = load_file(merged / "model.safetensors")
    assert weights.keys() == _tiny_pi05().state_dict().keys()  # the model's own keys, nothing of PEFT left
    assert not (merged / "adapter_config.json").exists()
    adapter_policy = load_policy(out / "checkpoints" / "step_4", seed=3)
    merged_policy = load_policy(merged, seed=3)
    assert merged_policy.metadata.step == 4
    for seed in range(3):
        obs = _observation(adapter_policy, seed)
        np.testing.assert_allclose(merged_policy.predict_action(obs), adapter_policy.predict_action(obs),
                                   rtol=1e-4, atol=1e-5)
    with pytest.raises(UsageError, match="not a LoRA checkpoint"):
        merge_lora(merged, tmp_path / "twice")
    with pytest.raises(CheckpointError, match=r"holds LoRA adapters .* `embodied checkpoint merge-lora"):
        export_policy(out, tmp_path / "exported")  # full weights of an adapter run come from merge-lora


def test_embodied_serve_answers_an_openpi_client_from_the_adapter_checkpoint(pi05_run: tuple[Path, Any],
                                                                            tmp_path: Path) -> None:
    out, _ = pi05_run
    step = out / "checkpoints" / "step_4"
    server = ServeProcess(str(step))
    try:
        policy = load_policy(step, seed=0)  # the server resets its policy when a lone client connects
        observations = [_observation(policy, seed) for seed in range(2)]
        arrays, facts = run_openpi_client(tmp_path, server.url, "actions", observations, api_key=None)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the server (OMP_NUM_THREADS=1): same kernels, same bits
        try:
            expected = [policy.predict_action(obs) for obs in observations]
        finally:
            torch.set_num_threads(threads)
    finally:
        code, _, errors = server.stop()
    assert code == 0, errors[-2000:]
    assert facts["metadata"]["step"] == 4 and facts["metadata"]["checkpoint"] == str(step)
    for i, want in enumerate(expected):
        np.testing.assert_array_equal(arrays[f"a{i}"], want)


def test_peft_loads_the_checkpoint_with_its_own_api(pi05_run: tuple[Path, Any]) -> None:
    from peft import PeftModel

    out, kept = pi05_run
    step = out / "checkpoints" / "step_4"
    base = _tiny_pi05()
    base.load_state_dict(load_file(out / "lora_base" / "model.safetensors"))
    peft_model = PeftModel.from_pretrained(base, str(step))
    trained = kept.model.state_dict()
    inner = peft_model.get_base_model().state_dict()
    assert inner.keys() == trained.keys()
    assert all(torch.equal(inner[k], trained[k]) for k in trained)


# ------------------------------------------------------------------ injection and targets on a built model
def test_injection_is_a_no_op_at_init_and_freezes_the_base() -> None:
    model = _tiny_pi05()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = LoraSettings(r=4, alpha=8, dropout=0.0, targets=TargetSpec("names", ("q_proj", "v_proj")),
                            modules_to_save=(), bias="none", init=True)
    _, report = apply_lora(model, settings)
    # names follow PEFT's rule (a path or its last dotted parts): SigLIP's q/v projections are adapted too
    assert set(report.targets) == set(adapted_layers(model))
    assert {t.rsplit(".", 1)[1] for t in report.targets} == {"q_proj", "v_proj"}
    assert any(t.startswith("vision_tower.") for t in report.targets) and any(".expert." in t for t in report.targets)
    assert report.trainable == report.adapter_params > 0
    after = model.state_dict()
    for key, value in before.items():  # base weights sit under base_layer now, unchanged
        moved = key if key in after else next(k for k in after if k.replace(".base_layer", "") == key)
        assert torch.equal(after[moved], value)
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"})
    from embodied_data.formats.dummy import DummyDataset
    from embodied_models.pi05.transforms import make_transforms

    dataset = DummyDataset(config.data, num_samples=4)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(2)])
    plain = _tiny_pi05().eval()
    noise = torch.randn(2, config.data.action_horizon, config.model.max_action_dim,
                        generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model.eval().sample_actions(batch, noise=noise),
                               plain.sample_actions(batch, noise=noise), rtol=0, atol=0)  # B = 0: a no-op


def test_lingbot_va_default_targets_are_its_blocks_attention_and_ffn_projections() -> None:
    from embodied_core.registry import get_spec

    config = load_config("lingbot_va_tiny", training={"dataset_format": "dummy_datasets"})
    model = get_spec("embodied.models", "lingbot_va_tiny").load_factory()(config.model, config.data)
    _, report = apply_lora(model, LoraSettings(r=2, alpha=4, dropout=0.0, targets=TargetSpec("default"),
                                               modules_to_save=(), bias="none", init=True))
    kinds = {t.split(".", 3)[3] for t in report.targets}  # transformer.blocks.<i>.<projection>
    assert {"attn1.to_q", "attn1.to_out.0", "attn2.to_k"} <= kinds and any(k.startswith("ffn.") for k in kinds)
    assert all(t.startswith("transformer.blocks.") for t in report.targets)
    assert report.trainable == report.adapter_params


def test_target_mistakes_are_reported_together_with_the_closest_name() -> None:
    model = _tiny_pi05()
    with pytest.raises(ConfigError) as exc:
        apply_lora(model, LoraSettings(r=4, alpha=8, dropout=0.0, targets=TargetSpec("names", ("q_prj", "o_proj")),
                                       modules_to_save=("layers.0.vlm.self_attn.o_proj", "action_head"),
                                       bias="none", init=True))
    text = str(exc.value)
    assert "--lora-target-modules 'q_prj': no module has this name (did you mean 'q_proj'?)" in text
    assert "--lora-modules-to-save 'action_head': no module has this name" in text
    assert "'layers.0.vlm.self_attn.o_proj': overlaps the adapter target(s)" in text
    unsupported = r"'layers\\.\\d\\.vlm': matches 2 module\(s\) LoRA cannot adapt: layers.0.vlm \(VlmLayer\)"
    with pytest.raises(ConfigError, match=unsupported):
        apply_lora(_tiny_pi05(), LoraSettings(r=4, alpha=8, dropout=0.0, targets=parse_targets(r"layers\.\d\.vlm"),
                                              modules_to_save=(), bias="none", init=True))
    assert adapted_layers(model) == {}  # nothing was injected after a failed check


def test_flag_mistakes_fail_before_anything_is_built_with_exit_2(tmp_path: Path) -> None:
    proc = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets",
                        "--output-dir", str(tmp_path / "never"), "--use-lora", "--lora-target-modules", "head.(0",
                        "--lora-init", "eva", "--lora-dropout", "1.0", "--save-format", "dcp")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for fragment in ("--lora-target-modules: 'head.(0' is neither a list of module names nor a valid regular "
                     "expression", "--lora-init: 'eva' needs a calibration dataloader",
                     "--lora-dropout 1.0: must be < 1", "--save-format dcp: with --use-lora"):
        assert fragment in proc.stderr, fragment
    assert not (tmp_path / "never").exists()
    plain = {k: v for k, v in TINY.items() if not k.startswith("lora_") and k != "use_lora"}
    with pytest.raises(ConfigError, match="--lora-r 8: read only with --use-lora"):
        Trainer({"training": {**plain, "lora_r": 8, "output_dir": str(tmp_path / "never")}}).build()


# ------------------------------------------------------------------ tiny_flow_policy: PiSSA, bf16, resume rules
@pytest.fixture(scope="module")
def pissa_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_flow_policy with PiSSA adapters, trained by the real CLI (the flags of TINY)."""
    out = tmp_path_factory.mktemp("lora_pissa") / "run"
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in TINY.items() if key != "use_lora"]
    proc = run_embodied("train", *flags, "--use-lora", "--lora-init", "pissa", "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_pissa_resumes_exactly_and_is_stored_as_a_plain_lora_of_rank_2r(pissa_run: Path, tmp_path: Path) -> None:
    resumed = _resume_from_step_2(pissa_run, tmp_path / "resumed", **TINY, lora_init="pissa")
    assert _losses(resumed) == _losses(pissa_run)
    step = pissa_run / "checkpoints" / "step_4"
    config = json.loads((step / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["init_lora_weights"]) == (8, 16, True)
    assert load_file(step / "adapter_model.safetensors")["base_model.model.head.2.lora_A.weight"].shape[0] == 8
    # against the original base, the converted adapters give the trained (residual-base) model's outputs
    folder = read_policy_folder(step)
    adapter_model = folder.build_model()
    merged = tmp_path / "merged"
    assert merge_lora(step, merged).num_layers == 3
    merged_model = read_policy_folder(merged).build_model()
    x = torch.randn(3, adapter_model.head[0].in_features, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(merged_model.head(x), adapter_model.head(x), rtol=1e-4, atol=1e-5)


def test_resume_with_other_lora_flags_or_without_lora_is_refused(pissa_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(pissa_run, copy, symlinks=True)
    with pytest.raises(CheckpointError, match=r"--lora-alpha: checkpoint 8, this run 16"):
        Trainer({"training": {**TINY, "lora_init": "pissa", "lora_alpha": 16, "output_dir": str(copy),
                              "resume": True}}).train()
    plain = {k: v for k, v in TINY.items() if not k.startswith("lora_") and k != "use_lora"}
    with pytest.raises(CheckpointError, match=r"holds LoRA adapters .*resume it with --use-lora"):
        Trainer({"training": {**plain, "output_dir": str(copy), "resume": True}}).train()
    step = str(copy / "checkpoints" / "step_4")
    with pytest.raises(ConfigError) as exc:  # caught by validation, before anything is built
        Trainer({"training": {**plain, "output_dir": str(tmp_path / "new"), "resume_from": step,
                              "pretrained_checkpoint": step}}).build()
    assert f"--resume-from {step}: holds LoRA adapters" in str(exc.value)
    assert f"--pretrained-checkpoint {step}: a LoRA checkpoint" in str(exc.value) and "merge-lora" in str(exc.value)


def test_bf16_autocast_lr_groups_and_frozen_adapters(tmp_path: Path) -> None:
    out = tmp_path / "bf16"
    Trainer({"training": {**TINY, "dtype": "bfloat16", "train_iters": 2, "save_interval": 2, "lora_bias": "lora_only",
                          "lr_group": "head.2=1e-3", "freeze_modules": "head.4.lora_A", "lr_decay_style": "constant",
                          "output_dir": str(out)}}).train()
    losses = _losses(out)
    assert len(losses) == 2 and all(np.isfinite(losses))
    step = out / "checkpoints" / "step_2"
    adapters = load_file(step / "adapter_model.safetensors")
    assert {t.dtype for t in adapters.values()} == {torch.float32}  # fp32 masters under bf16 autocast
    assert "base_model.model.head.0.base_layer.bias" in adapters  # --lora-bias lora_only: the adapted layers' biases
    groups = torch.load(step / "training_state" / "optimizer.pt", weights_only=True)["param_groups"]
    by_lr = {g["lr"]: set(g["param_names"]) for g in groups}
    assert by_lr[1e-3] == {"head.2.base_layer.bias", "head.2.lora_A.default.weight", "head.2.lora_B.default.weight"}
    assert "head.4.lora_A.default.weight" not in set().union(*by_lr.values())  # frozen by --freeze-modules
