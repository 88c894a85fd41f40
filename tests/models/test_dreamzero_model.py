"""dreamzero: the reference's geometry invariants, the block-causal teacher-forcing pattern, full sizes on the meta
device, LoRA vs full parameter counts, cached == online inputs, and the diffusers / LoongForge checkpoint layouts.

The tiny model and a real batch (``dreamzero_libero_v21`` through the ``dreamzero`` strategy and the model's collate)
are built once per module.
"""

from __future__ import annotations

import copy
import fnmatch

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.data.dataset import build_training_dataset
from embodied_core.errors import CheckpointError, DataError
from embodied_models.dreamzero.checks import check_run_config
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.masks import Layout, teacher_forcing_mask
from embodied_models.dreamzero.modeling import LORA_MODULES_TO_SAVE, DreamZeroModel
from embodied_models.dreamzero.transforms import make_transforms
from tests.support import DATASETS_DIR

LIBERO = DATASETS_DIR / "strategies" / "dreamzero_libero_v21"
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(config, model, batch of 2 real samples: positions 0 and 19)."""
    cfg = load_config("dreamzero_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(LIBERO),
                                                  "output_dir": str(tmp_path_factory.mktemp("out"))},
                      data={"state_dim": 8, "action_dim": 7, "tokenizer_path": str(TOKENIZER)})
    dataset = build_training_dataset(cfg.training, cfg.data)
    batch = make_transforms(cfg.model, cfg.data, stats=None).collate_fn([dataset[0], dataset[19]])
    torch.manual_seed(0)
    return cfg, DreamZeroModel(cfg.model, cfg.data), batch


def test_block_counts_of_the_presets_and_the_batch(tiny):
    """The reference's asserts: actions / (latent frames - 1) = actions per block / frames per block, and
    (latent frames - 1) / states = frames per block / states per block; 5B's 160x320 frames give 50 tokens."""
    rows = {}
    for name in ("dreamzero_wan22_5b", "dreamzero_wan21_14b", "dreamzero_libero_wan22_5b", "dreamzero_tiny"):
        m = load_config(name).model
        assert m.validate() == [], name
        lay = Layout(m.latent_frames, 1, m.num_frame_per_block, m.num_action_per_block, m.num_state_per_block)
        rows[name] = (m.latent_frames, lay.num_blocks, lay.num_actions, lay.num_states)
    assert rows == {"dreamzero_wan22_5b": (9, 4, 96, 4), "dreamzero_wan21_14b": (9, 4, 96, 4),
                    "dreamzero_libero_wan22_5b": (9, 4, 64, 4), "dreamzero_tiny": (3, 2, 8, 2)}
    cfg, model, batch = tiny
    latents = model.encode_inputs(batch)["latents"]
    frames = latents.shape[2]
    assert batch["images"].shape[1] == cfg.model.num_frames and frames == cfg.model.latent_frames == 3
    assert batch["action"].shape[1] / (frames - 1) == cfg.model.num_action_per_block / cfg.model.num_frame_per_block
    assert (frames - 1) / batch["state"].shape[1] == cfg.model.num_frame_per_block / cfg.model.num_state_per_block
    five_b = load_config("dreamzero_wan22_5b").model
    h, w = five_b.target_video_size
    assert (h // 16 // 2) * (w // 16 // 2) == 50  # LoongForge's frame_seqlen of the 5B preset


@pytest.mark.parametrize("name", ["dreamzero_wan22_5b", "dreamzero_wan21_14b", "dreamzero_tiny",
                                  "dreamzero_lora_wan22_5b", "dreamzero_full_wan22_5b", "dreamzero_lora_wan21_14b",
                                  "dreamzero_full_wan21_14b", "dreamzero_libero_wan22_5b",
                                  "dreamzero_agibot_wan21_14b", "dreamzero_yam_wan21_14b"])
def test_every_preset_and_alias_validates(name):
    cfg = load_config(name)
    assert cfg.model.validate() == [] and cfg.data.validate() == [] and check_run_config(cfg) == []
    lora = {"dreamzero_full_wan22_5b": False, "dreamzero_full_wan21_14b": False, "dreamzero_libero_wan22_5b": False,
            "dreamzero_agibot_wan21_14b": False, "dreamzero_yam_wan21_14b": False}.get(name, True)
    assert cfg.training.use_lora is lora and cfg.training.trainer_type == "dreamzero"


def test_geometry_errors_name_the_fields(tiny):
    bad = DreamZeroModelConfig(num_frames=29, action_horizon=16)
    problems = " | ".join(bad.validate())
    assert "model.num_frames 29 gives 8 latent frames" in problems and "set num_frames = 33" in problems
    assert "model.action_horizon 16 != model.num_action_per_block 24" in problems
    _cfg, model, batch = tiny
    assert any("model.text_len=64 but data.max_text_length=32" in p
               for p in check_run_config(load_config("dreamzero_tiny", data={"max_text_length": 32})))
    mismatched = load_config("dreamzero_tiny", data={"max_chunk_size": 3, "num_frames": 13})
    assert any("model.max_chunk_size=2 but data.max_chunk_size=3" in p for p in check_run_config(mismatched))
    plain = load_config("dreamzero_tiny", training={"trainer_type": "FinetuneTrainer"})
    assert any("--trainer-type dreamzero" in p for p in check_run_config(plain))
    missing = load_config("dreamzero_tiny", model={"vae_path": "/nonexistent/vae"})
    assert any("model.vae_path=/nonexistent/vae: no config.json" in p for p in check_run_config(missing))
    with pytest.raises(ValueError, match="need 8 actions and 2 states, got 4 and 2"):
        model({**batch, "action": batch["action"][:, :4], "action_mask": batch["action_mask"][:, :4]})


def test_teacher_forcing_mask_rules():
    lay = Layout(num_frames=5, frame_tokens=1, frames_per_block=2, actions_per_block=3, states_per_block=1)
    mask = teacher_forcing_mask(lay, window=0)
    clean, noisy = list(range(0, 5)), list(range(5, 10))
    acts = [list(range(10, 13)), list(range(13, 16))]
    states = [16, 17]
    # noisy block 1 (frames 3, 4): clean frames 0..2, its own noisy frames, actions and state
    for q in (noisy[3], acts[1][0]):
        assert mask[q].nonzero().flatten().tolist() == [0, 1, 2, 8, 9, 13, 14, 15, 17]
    assert mask[noisy[0]].nonzero().flatten().tolist() == [noisy[0]]  # noisy frame 0 sees itself
    assert mask[states[0]].nonzero().flatten().tolist() == [states[0]]
    assert mask[clean[4]].nonzero().flatten().tolist() == [0, 1, 2, 3, 4]  # block-causal, not token-causal
    assert mask[clean[1]].nonzero().flatten().tolist() == [0, 1, 2]
    windowed = teacher_forcing_mask(lay, window=2)
    assert windowed[clean[4]].nonzero().flatten().tolist() == [0, 3, 4]  # frame 0 + the window


def test_dit_is_block_causal(tiny):
    """Changing a later block's inputs leaves the predictions of earlier blocks unchanged (and changes its own)."""
    cfg, model, _batch = tiny
    model = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    torch.nn.init.normal_(model.dit.head.head.weight, std=0.1, generator=g)  # zero at init (Wan's)
    b, c, f, h, w = 2, cfg.model.out_dim, 3, 2, 4
    args = dict(noisy=torch.randn(b, c, f, h, w, generator=g), clean=torch.randn(b, c, f, h, w, generator=g),
                video_t=torch.rand(b, f, generator=g) * 1000, actions=torch.randn(b, 8, 12, generator=g),
                action_t=torch.rand(b, 8, generator=g) * 1000, state=torch.randn(b, 2, 16, generator=g),
                embodiment=torch.tensor([21, 21]), text=torch.randn(b, 64, 8, generator=g),
                image=torch.randn(b, 5, 16, generator=g))
    with torch.no_grad():
        v0, a0 = model.dit(**args)
        later = dict(args, noisy=args["noisy"].clone(), actions=args["actions"].clone())
        later["noisy"][:, :, 2] += 1.0
        later["actions"][:, 4:] += 1.0
        v1, a1 = model.dit(**later)
        clean0 = dict(args, clean=args["clean"].clone())
        clean0["clean"][:, :, 1] += 1.0  # block 0's clean frame: context of block 1 only
        v2, a2 = model.dit(**clean0)
    torch.testing.assert_close(v1[:, :, :2], v0[:, :, :2])
    torch.testing.assert_close(a1[:, :4], a0[:, :4])
    assert not torch.allclose(v1[:, :, 2], v0[:, :, 2]) and not torch.allclose(a1[:, 4:], a0[:, 4:])
    torch.testing.assert_close(v2[:, :, :2], v0[:, :, :2])
    torch.testing.assert_close(a2[:, :4], a0[:, :4])
    assert not torch.allclose(a2[:, 4:], a0[:, 4:])


def _meta_model(name: str) -> DreamZeroModel:
    cfg = load_config(name)
    with torch.device("meta"):
        return DreamZeroModel(cfg.model, cfg.data)


def _lora_params(model: DreamZeroModel, r: int) -> int:
    pats = model.default_lora_targets()
    return sum(r * (m.in_features + m.out_features) for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and any(fnmatch.fnmatchcase(n, p) for p in pats))


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _wan_dit_formula(m: DreamZeroModelConfig) -> tuple[int, int]:
    """(Wan DiT parameters, of which image-conditioning) from LoongForge's preset fields alone (CausalWanModel's
    layer shapes: per block self-/cross-attention with q/k RMSNorm, k_img/v_img, affine norm3, FFN, adaLN table)."""
    d, f, patch = m.dim, m.ffn_dim, 4
    lin = lambda i, o: i * o + o  # noqa: E731
    block = 4 * lin(d, d) + 2 * d + 4 * lin(d, d) + 2 * d + 2 * d + lin(d, f) + lin(f, d) + 6 * d
    image = m.num_layers * (2 * lin(d, d) + d) + 2 * m.image_dim + lin(m.image_dim, m.image_dim) + \
        lin(m.image_dim, d) + 2 * d
    embed = m.in_dim * patch * d + d + lin(m.text_dim, d) + lin(d, d) + lin(m.freq_dim, d) + lin(d, d) + lin(d, 6 * d)
    head = lin(d, patch * m.out_dim) + 2 * d
    return m.num_layers * block + embed + head + image, image


@pytest.mark.parametrize(("name", "dit", "action_state", "encoders"), [
    # Wan2.2-TI2V-5B (4,999.8 M without the image-conditioning layers) + k_img/v_img/img_emb + encoders/decoder
    ("dreamzero_wan22_5b", 5_606_692_832, 34_813_984, (704_688_668, 5_680_910_336, 630_766_080)),
    # Wan2.1-I2V-14B + the state/action encoders and the action decoder
    ("dreamzero_wan21_14b", 16_484_292_448, 89_413_664, (126_892_531, 5_680_910_336, 630_766_080)),
])
def test_full_sizes_on_meta(name, dit, action_state, encoders):
    model = _meta_model(name)
    assert all(p.is_meta for p in model.parameters())
    assert _count(model.dit) == dit
    assert sum(_count(getattr(model.dit, k)) for k in ("state_encoder", "action_encoder", "action_decoder")) == \
        action_state
    assert tuple(_count(getattr(model.encoders, k)) for k in ("vae", "text", "image")) == encoders
    wan, image = _wan_dit_formula(model.config)
    assert wan == dit - action_state
    img = sum(p.numel() for n, p in model.dit.named_parameters() if "_img" in n or n.startswith("img_emb"))
    assert img == image
    if name == "dreamzero_wan22_5b":
        assert wan - image == pytest.approx(4_999.8e6, rel=1e-5)  # the Wan2.2-TI2V-5B DiT


def test_lora_vs_full_parameter_counts(tiny):
    """Default LoRA (r=16): adapters on 10 projections per block + the encoders/decoder trained in full."""
    counts = {}
    for name in ("dreamzero_wan22_5b", "dreamzero_wan21_14b"):
        model = _meta_model(name)
        save = sum(_count(model.get_submodule(p)) for p in LORA_MODULES_TO_SAVE)
        counts[name] = (_count(model.dit), _lora_params(model, 16) + save)
    assert counts == {"dreamzero_wan22_5b": (5_606_692_832, 75_118_624),
                      "dreamzero_wan21_14b": (16_484_292_448, 166_090_784)}
    # the tiny model through core's real PEFT injection gives the same rule
    from embodied_core.lora.inject import apply_lora
    from embodied_core.lora.options import LoraSettings, TargetSpec

    cfg, _, _ = tiny
    torch.manual_seed(0)
    model = DreamZeroModel(cfg.model, cfg.data)
    adapters = _lora_params(model, 4)
    expected = adapters + sum(_count(model.get_submodule(p)) for p in LORA_MODULES_TO_SAVE)
    settings = LoraSettings(r=4, alpha=8, dropout=0.0, targets=TargetSpec("default"),
                            modules_to_save=LORA_MODULES_TO_SAVE, bias="none", init=True)
    _, report = apply_lora(model, settings)
    assert len(report.targets) == 2 * 10 and report.adapter_params == adapters == 5_632
    assert report.trainable == expected == 10_732
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == expected


def test_cached_inputs_equal_online(tiny):
    """The cache fields (what precompute stores: VAE latents, UMT5 embeddings) give the online path's loss."""
    cfg, model, batch = tiny
    with torch.no_grad():
        online = model.encode_inputs(batch)
        cached_batch = {**batch, "video_latents": online["latents"].clone(),
                        "prompt_embs": model.encoders.encode_text(batch["text"], batch["text_attention_mask"])}
        cached = model.encode_inputs(cached_batch)
        for key in ("latents", "prompt", "image"):
            torch.testing.assert_close(cached[key], online[key], rtol=0, atol=0)
        torch.manual_seed(3)
        loss_online = model(batch)
        torch.manual_seed(3)
        loss_cached = model(cached_batch)
        torch.manual_seed(4)
        act_online = model.sample_actions(batch, num_steps=2)
        torch.manual_seed(4)
        act_cached = model.sample_actions(cached_batch, num_steps=2)
    assert loss_online.loss.item() == loss_cached.loss.item()
    for key in ("dynamics_loss", "action_loss"):
        assert loss_online.metrics[key].item() == loss_cached.metrics[key].item()
    # sampling encodes the current frame alone online but slices the first latent frame of the cached window:
    # equal for the causal VAE, but the 1-frame and the window conv3d may pick different CPU kernels (CI
    # saw 6e-8), so this one comparison is to float rounding, not bitwise
    torch.testing.assert_close(act_cached, act_online, rtol=1e-5, atol=1e-6)
    assert act_online.shape == (2, cfg.model.action_horizon, cfg.model.max_action_dim)
    # latents of frames not resized to model.target_video_size (32x64 -> a 2x4 grid) are refused
    with pytest.raises(DataError, match=r"\(2, 2\) latent grid.*encode to \(2, 4\)"):
        model.encode_inputs({**cached_batch, "video_latents": cached_batch["video_latents"][..., :2]})


def test_prompt_padding_is_per_sample(tiny):
    _cfg, model, _ = tiny
    prompt = torch.ones(2, 6, 8)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]])
    ours = model._mask_prompt(prompt, mask)
    assert ours[0, :2].eq(1).all() and ours[0, 2:].eq(0).all() and ours[1, :4].eq(1).all()
    model.config.per_sample_prompt_mask = False  # the reference: the shortest length for the whole batch
    try:
        assert model._mask_prompt(prompt, mask)[1, 2:].eq(0).all()
    finally:
        model.config.per_sample_prompt_mask = True


def test_diffusers_and_loongforge_layouts(tiny, tmp_path):
    from diffusers import WanTransformer3DModel
    from safetensors.torch import save_file

    cfg, _model, _ = tiny
    torch.manual_seed(5)
    ref = WanTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                text_dim=8, freq_dim=16, ffn_dim=64, num_layers=2, image_dim=16, added_kv_proj_dim=32)
    ref.save_pretrained(tmp_path / "transformer")
    torch.manual_seed(0)
    target = DreamZeroModel(cfg.model, cfg.data)
    before = target.dit.action_decoder.layer1.W.clone()
    assert target.config.pretrained_layout == "diffusers"  # the default
    report = target.load_pretrained_checkpoint(tmp_path)  # finds transformer/diffusion_pytorch_model.*
    src = ref.state_dict()
    mine = target.state_dict()
    for ours, theirs in (("dit.blocks.1.self_attn.q.weight", "blocks.1.attn1.to_q.weight"),
                         ("dit.blocks.0.cross_attn.k_img.weight", "blocks.0.attn2.add_k_proj.weight"),
                         ("dit.blocks.0.cross_attn.norm_k_img.weight", "blocks.0.attn2.norm_added_k.weight"),
                         ("dit.blocks.1.norm3.weight", "blocks.1.norm2.weight"),
                         ("dit.blocks.0.modulation", "blocks.0.scale_shift_table"),
                         ("dit.head.modulation", "scale_shift_table"), ("dit.head.head.weight", "proj_out.weight"),
                         ("dit.img_emb.proj.3.weight", "condition_embedder.image_embedder.ff.net.2.weight"),
                         ("dit.time_projection.1.weight", "condition_embedder.time_proj.weight")):
        torch.testing.assert_close(mine[ours], src[theirs], rtol=0, atol=0)
    dit_missing = sorted({k.split(".")[1] for k in report.missing if k.startswith("dit.")})
    assert dit_missing == ["action_decoder", "action_encoder", "state_encoder"] and not report.unexpected
    torch.testing.assert_close(target.dit.action_decoder.layer1.W, before)  # kept its initialization

    from embodied_models.dreamzero.checkpoint import LOONGFORGE_ADAPTER_KEY_MAP

    key = "base_model.model.action_head.model.blocks.3.ffn.0.lora_A.weight"
    assert LOONGFORGE_ADAPTER_KEY_MAP.target(key)[0] == "base_model.model.dit.blocks.3.ffn.0.lora_A.weight"
    # a LoongForge DreamZero checkpoint (action_head.model.*, its own encoders ignored) round-trips exactly
    loongforge = {f"action_head.model.{k[4:]}": v for k, v in mine.items() if k.startswith("dit.")}
    loongforge["action_head.text_encoder.blocks.0.weight"] = torch.zeros(1)
    save_file(loongforge, tmp_path / "model.safetensors")
    torch.manual_seed(9)
    other = DreamZeroModel(cfg.model, cfg.data)
    other.config.pretrained_layout = "loongforge"
    try:
        other.load_pretrained_checkpoint(tmp_path / "model.safetensors")
        for key, value in mine.items():
            if key.startswith("dit."):
                torch.testing.assert_close(other.state_dict()[key], value, rtol=0, atol=0)
        save_file({**loongforge, "action_head.model.extra.weight": torch.zeros(1)}, tmp_path / "bad.safetensors")
        with pytest.raises(CheckpointError, match=r"extra\.weight"):
            other.load_pretrained_checkpoint(tmp_path / "bad.safetensors")
    finally:
        other.config.pretrained_layout = "diffusers"


def test_encoder_folders_are_read_at_build_and_after_meta_init(tiny, tmp_path):
    """Frozen encoders from local diffusers / transformers folders: read by build_model, or (built on the meta
    device, as --init-on-meta does) by load_pretrained_checkpoint once the model has storage."""
    from embodied_models.dreamzero.modeling import build_model

    _cfg, model, _ = tiny
    for name, sub in (("vae", "vae"), ("text", "text_encoder"), ("image", "image_encoder")):
        getattr(model.encoders, name).save_pretrained(tmp_path / sub)
    from safetensors.torch import save_file

    save_file({k[4:]: v.contiguous() for k, v in model.state_dict().items() if k.startswith("dit.")},
              tmp_path / "dit.safetensors")
    paths = {"vae_path": str(tmp_path / "vae"), "text_encoder_path": str(tmp_path / "text_encoder"),
             "image_encoder_path": str(tmp_path / "image_encoder"), "pretrained_layout": "wan"}
    mcfg = load_config("dreamzero_tiny", model=paths).model
    reference = {k: v for k, v in model.state_dict().items() if k.startswith("encoders.")}
    torch.manual_seed(11)
    built = build_model(mcfg)
    for key, value in reference.items():
        torch.testing.assert_close(built.state_dict()[key], value, rtol=0, atol=0)
    with torch.device("meta"):
        lazy = build_model(mcfg)
    lazy.to_empty(device="cpu")
    lazy.load_pretrained_checkpoint(tmp_path / "dit.safetensors")
    for key, value in model.state_dict().items():
        torch.testing.assert_close(lazy.state_dict()[key], value, rtol=0, atol=0)


def test_precomputed_cache_equals_online(tiny, tmp_path):
    """``embodied data precompute-dreamzero`` with the model's own VAE / UMT5 folders: training batches read from
    that cache give the online path's inputs and loss (episode 2: 5 samples)."""
    from embodied_models.dreamzero.data.precompute import main as precompute

    _cfg, model, _ = tiny
    model.encoders.vae.save_pretrained(tmp_path / "vae")
    model.encoders.text.save_pretrained(tmp_path / "text_encoder")
    assert precompute([str(LIBERO), "--output", str(tmp_path / "cache"), "--model-name", "dreamzero_tiny",
                       "--vae-path", str(tmp_path / "vae"), "--text-encoder-path", str(tmp_path / "text_encoder"),
                       "--tokenizer-path", str(TOKENIZER), "--features", "video_latents,prompt_embs", "--device",
                       "cpu", "--episodes", "2", "data.use_sample_transform_seed=true"]) == 0
    batches = []
    for extra in ({}, {"precomputed_cache_dir": str(tmp_path / "cache")}):
        run = load_config("dreamzero_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(LIBERO),
                                                      "output_dir": str(tmp_path / "out")},
                          data={"state_dim": 8, "action_dim": 7, "tokenizer_path": str(TOKENIZER),
                                "use_sample_transform_seed": True, **extra})
        dataset = build_training_dataset(run.training, run.data)
        batches.append(make_transforms(run.model, run.data, stats=None).collate_fn([dataset[53], dataset[57]]))
    online, cached = batches
    assert "video_latents" in cached and "prompt_embs" in cached and "video_latents" not in online
    with torch.no_grad():
        a, b = model.encode_inputs(online), model.encode_inputs(cached)
        torch.testing.assert_close(b["latents"], a["latents"], rtol=0, atol=1e-6)  # batched vs per-sample VAE
        torch.testing.assert_close(b["prompt"], a["prompt"], rtol=0, atol=0)
        torch.manual_seed(2)
        loss_online = model(online).loss.item()
        torch.manual_seed(2)
        loss_cached = model(cached).loss.item()
    assert loss_cached == pytest.approx(loss_online, rel=1e-6)


def test_init_on_meta_initializes_every_tensor(tiny):
    """--init-on-meta: core materializes the meta model and calls init_module_weights on every module (DiT, the
    transformers encoders, the diffusers VAE); a tensor left untouched would be a PluginError naming it."""
    from embodied_core.trainer.meta_init import build_on_meta, materialize
    from embodied_models.dreamzero.modeling import build_model

    cfg, _, batch = tiny
    model = build_on_meta(lambda: build_model(cfg.model, cfg.data))
    report = materialize(model, device=torch.device("cpu"), init=model.init_module_weights, seed=0)
    assert report.tensors >= len(list(model.parameters()))
    assert model.dit.head.head.weight.abs().sum() == 0 and model.dit.blocks[0].modulation.std() > 0
    torch.manual_seed(0)
    with torch.no_grad():
        assert torch.isfinite(model(batch).loss)


def test_bf16_parameters_and_autocast(tiny):
    """The recipes' --dtype bfloat16: bf16 parameters (FSDP mixed precision) and bf16 autocast both train."""
    _, model, batch = tiny
    low = copy.deepcopy(model).to(torch.bfloat16)
    torch.manual_seed(0)
    out = low(batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and low.dit.action_decoder.layer2.W.grad is not None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.manual_seed(0)
        assert torch.isfinite(copy.deepcopy(model)(batch).loss)


def test_droid_geometry_through_the_strategy(tmp_path):
    """oxe_droid (language chunks of 24 actions, 2 latent frames per block, relative joint actions, 2x2 view grid):
    the strategy's batch has the counts per block the model checks, and the model trains on it."""
    geometry = {"num_frames": 17, "action_horizon": 24, "num_frame_per_block": 2, "max_chunk_size": 2}
    cfg = load_config("dreamzero_tiny",
                      training={"dataset_format": "lerobot_datasets", "output_dir": str(tmp_path),
                                "dataset_path": str(DATASETS_DIR / "strategies" / "dreamzero_droid_v21")},
                      model={**geometry, "num_action_per_block": 24, "target_video_size": [64, 64]},
                      data={**geometry, "embodiment_tag": "oxe_droid", "language_chunk_sampling": True,
                            "require_full_language_chunks": True, "relative_action": True,
                            "relative_action_keys": ["joint_position"], "tokenizer_path": str(TOKENIZER),
                            "state_dim": 8, "action_dim": 8})
    assert check_run_config(cfg) == []
    dataset = build_training_dataset(cfg.training, cfg.data)
    batch = make_transforms(cfg.model, cfg.data, stats=None).collate_fn([dataset[0], dataset[len(dataset) - 1]])
    assert batch["images"].shape == (2, 17, 64, 64, 3)  # wrist x2 on top, exterior left | right below
    assert batch["action"].shape[1] == 2 * 24 and batch["state"].shape[1] == 2
    torch.manual_seed(0)
    model = DreamZeroModel(cfg.model, cfg.data)
    out = model(batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.dit.action_encoder.W1.W.grad is not None
