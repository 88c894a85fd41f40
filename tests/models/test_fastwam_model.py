"""FastWAM model: golden parity with lerobot 0.6.1 (../shared/fixtures/fastwam_lerobot, atol = rtol = 1e-5), the
KV-cache sampling path against the uncached one, the masks of the variants, the checkpoint layouts (lerobot,
LoongForge with aliases, diffusers video expert), `embodied checkpoint init-fastwam-action-dit`, and the official
size on the meta device."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from embodied_core.config.resolve import load_config
from embodied_core.errors import CheckpointError, DataError
from embodied_models.fastwam.modeling import build_model
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "fastwam_lerobot"
TOL = {"atol": 1e-5, "rtol": 1e-5}
# The fixture's sizes (config.json: video_dit_config / action_dit_config).
FIXTURE_MODEL = {"in_channels": 8, "out_channels": 8, "num_heads": 2, "attn_head_dim": 16, "num_layers": 2,
                 "video_hidden_dim": 32, "video_ffn_dim": 64, "video_freq_dim": 16, "action_hidden_dim": 24,
                 "action_ffn_dim": 48, "action_freq_dim": 12, "text_dim": 16, "num_inference_steps": 4}
FIXTURE_DATA = {"action_dim": 7, "state_dim": 5, "text_dim": 16}


def _model(**model):
    cfg = load_config(training={"model_name": "fastwam_tiny"}, model={**FIXTURE_MODEL, **model}, data=FIXTURE_DATA)
    return build_model(cfg.model, cfg.data)


@pytest.fixture(scope="module")
def fixture():
    # Cloned: safetensors tensors may sit at unaligned addresses, which can round a matmul differently (README).
    inputs = {k: v.clone() for k, v in load_file(str(FIXTURE / "inputs.safetensors")).items()}
    expected = load_file(str(FIXTURE / "expected.safetensors"))
    weights = load_file(str(FIXTURE / "model.safetensors"))
    return inputs, expected, weights


@pytest.fixture(scope="module")
def golden(fixture):
    model = _model()
    report = model.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
    assert report.ok and len(report.loaded) == len(fixture[2])
    return model


def _train_batch(inputs):
    return {"latents": inputs["train.latents"], "context": inputs["context"], "context_mask": inputs["context_mask"],
            "proprio": inputs["proprio"][:, None], "action": inputs["train.action"],
            "action_is_pad": inputs["train.action_is_pad"], "image_is_pad": inputs["train.image_is_pad"]}


def _sample_batch(inputs):
    return {"latents": inputs["sample.first_frame_latents"], "context": inputs["context"],
            "context_mask": inputs["context_mask"], "proprio": inputs["proprio"][:, None].expand(-1, 8, -1)}


def _max_diff(a, b):
    return (a.float() - b.float()).abs().max().item()


def test_golden_training_loss_and_draws(golden, fixture):
    inputs, expected, _ = fixture
    torch.manual_seed(int(inputs["train.torch_manual_seed"]))  # the draws replay lerobot's own, in its order
    out = golden.training_outputs(_train_batch(inputs))
    for name in ("noise_video", "u_video", "noise_action", "u_action"):
        assert torch.equal(out[name], inputs[f"train.{name}"]), name
    pairs = {"loss": "train.loss", "loss_video": "train.loss_video", "loss_action": "train.loss_action",
             "pred_video": "train.pred_video", "pred_action": "train.pred_action",
             "video_loss_per_frame": "train.video_loss_per_frame",
             "video_loss_per_sample": "train.video_loss_per_sample",
             "action_loss_per_step": "train.action_loss_per_step",
             "action_loss_per_sample": "train.action_loss_per_sample", "video_weight": "train.video_loss_weight",
             "action_weight": "train.action_loss_weight", "noisy_video": "debug.train.noisy_latents",
             "noisy_action": "debug.train.noisy_action", "target_video": "debug.train.target_video",
             "t_video": "debug.train.timestep_video", "t_action": "debug.train.timestep_action"}
    diffs = {ours: _max_diff(out[ours], expected[ref]) for ours, ref in pairs.items()}
    print("fastwam golden training max|diff|:", {k: f"{v:.1e}" for k, v in diffs.items()})
    for ours, ref in pairs.items():
        torch.testing.assert_close(out[ours].float(), expected[ref].float(), **TOL, msg=ours)
    # The padded latent frame of element 1 (raw frames 5..8) is out of its video loss; padded steps of the actions too.
    assert torch.equal(out["video_loss_per_sample"][1], out["video_loss_per_frame"][1, 0])


def test_golden_sampling_cached_and_uncached(golden, fixture):
    from embodied_models.fastwam.sampling import prefill_first_frame

    inputs, expected, _ = fixture
    golden.eval()
    batch = _sample_batch(inputs)
    cached = golden.sample_actions(batch, noise=inputs["sample.init_noise"])
    uncached = golden.sample_actions(batch, noise=inputs["sample.init_noise"], use_kv_cache=False)
    print(f"fastwam golden sampling max|diff| {_max_diff(cached, expected['sample.action']):.1e}, cached vs uncached "
          f"{_max_diff(cached, uncached):.1e}")
    torch.testing.assert_close(cached, expected["sample.action"], **TOL)
    torch.testing.assert_close(uncached, cached, atol=1e-6, rtol=1e-6)
    context, mask = golden.context(batch)
    cache = prefill_first_frame(golden, batch["latents"], context, mask)
    for layer, (k, v) in enumerate(cache):
        torch.testing.assert_close(k.flatten(2), expected[f"debug.sample.video_k.layer{layer}"], **TOL)
        torch.testing.assert_close(v.flatten(2), expected[f"debug.sample.video_v.layer{layer}"], **TOL)
    _, timesteps, deltas = golden.action_schedule(4)
    torch.testing.assert_close(timesteps, expected["debug.sample.timesteps"], **TOL)
    torch.testing.assert_close(deltas, expected["debug.sample.deltas"], **TOL)


def test_training_draws_are_keyed_per_sample_not_per_batch_position(golden, fixture):
    """With dataset indices (training batches), a sample's draws do not depend on the batch it is in."""
    inputs, _, _ = fixture
    latents, action = inputs["train.latents"], inputs["train.action"]
    torch.manual_seed(11)
    pair = golden.draw_training_noise(latents, action, [5, 9])
    torch.manual_seed(11)
    alone = golden.draw_training_noise(latents[1:], action[1:], [9])
    for name, value in pair.items():
        assert torch.equal(value[1:], alone[name]), name
    assert not torch.equal(pair["noise_video"][0], pair["noise_video"][1])
    with pytest.raises(DataError, match="2 sample indices for a batch of 1"):
        golden.draw_training_noise(latents[:1], action[:1], [1, 2])


def test_masks_of_the_variants():
    from embodied_models.fastwam.masks import idm_attention_mask, mot_attention_mask

    base = mot_attention_mask(6, 2, 3, variant="uncond", video_mode="first_frame_causal")
    joint = mot_attention_mask(6, 2, 3, variant="joint", video_mode="first_frame_causal")
    for mask in (base, joint):
        assert not mask[:6, 6:].any()  # video never sees actions
        assert mask[6:, 6:].all() and not mask[:2, 2:6].any() and mask[2:6, :6].all()
    assert base[6:, :2].all() and not base[6:, 2:6].any()
    assert joint[6:, :6].all()
    causal = mot_attention_mask(6, 2, 3, variant="base", video_mode="per_frame_causal")
    assert causal[2, :4].all() and not causal[2, 4:6].any()
    idm = idm_attention_mask(6, 2, 3, video_mode="first_frame_causal")  # [noisy 6 | copy 6 | actions 3]
    assert not idm[:6, 6:].any() and not idm[6:12, :6].any() and not idm[6:12, 12:].any()
    assert idm[12:, 6:].all() and not idm[12:, :6].any() and torch.equal(idm[6:12, 6:12], base[:6, :6])


def test_joint_variant_sees_the_future_frames_and_samples_with_video(golden, fixture):
    inputs, expected, _ = fixture
    joint = _model(variant="joint")
    joint.load_state_dict(golden.state_dict())
    out = joint.training_outputs(_train_batch(inputs), {k: inputs[f"train.{k}"] for k in
                                                        ("noise_video", "u_video", "noise_action", "u_action")})
    torch.testing.assert_close(out["pred_video"], expected["train.pred_video"], **TOL)  # video never sees actions
    assert _max_diff(out["pred_action"], expected["train.pred_action"]) > 1e-2
    joint.data_config.num_video_frames = 9  # the sampled clip: 3 latent frames
    joint.eval()
    torch.manual_seed(0)
    actions = joint.sample_actions(_sample_batch(inputs))
    assert actions.shape == (2, 8, 7) and torch.isfinite(actions).all()


def test_idm_variant_teacher_forces_a_copy_for_the_actions(golden, fixture):
    inputs, expected, _ = fixture
    idm = _model(variant="idm")
    idm.load_state_dict(golden.state_dict())
    torch.manual_seed(int(inputs["train.torch_manual_seed"]))
    draws = idm.draw_training_noise(inputs["train.latents"], inputs["train.action"])
    assert {"cond_coin", "u_cond", "noise_cond"} <= set(draws)
    draws["cond_coin"] = torch.tensor([0.2, 0.9])  # element 0: noised copy, element 1: clean copy
    out = idm.training_outputs(_train_batch(inputs), draws)
    torch.testing.assert_close(out["pred_video"], expected["train.pred_video"], **TOL)  # never sees the copy
    other = idm.training_outputs(_train_batch(inputs), {**draws, "noise_cond": draws["noise_cond"] + 1})
    assert _max_diff(other["pred_action"][0], out["pred_action"][0]) > 1e-3  # the noised copy feeds the actions
    torch.testing.assert_close(other["pred_action"][1], out["pred_action"][1], atol=0, rtol=0)
    idm.data_config.num_video_frames = 9
    idm.eval()
    actions = idm.sample_actions(_sample_batch(inputs))
    assert actions.shape == (2, 8, 7) and torch.isfinite(actions).all()


def _aliased_loongforge_state(weights):
    """The fixture's weights as LoongForge's policy state dict: every expert under four names, TE extra state,
    VAE weights."""
    out = {}
    for key, tensor in weights.items():
        if key.startswith("mot.layers."):
            _, _, n, _, expert, rest = key.split(".", 5)
            names = [f"{p}.blocks.{n}.{rest}" for p in (f"core.{expert}_expert", f"core.mot.mixtures.{expert}",
                                                         f"core.dit.mixtures.{expert}", f"dit.mixtures.{expert}")]
        elif key.startswith("mot.mixtures."):
            expert, rest = key[len("mot.mixtures."):].split(".", 1)
            names = [f"{p}.{rest}" for p in (f"core.{expert}_expert", f"core.mot.mixtures.{expert}",
                                              f"core.dit.mixtures.{expert}", f"dit.mixtures.{expert}")]
        else:
            names = [f"core.{key}"]
        out.update({name: tensor.clone() for name in names})
    out["core.video_expert.blocks.0.self_attn.norm_q._extra_state"] = torch.zeros(0, dtype=torch.uint8)
    out["core.vae.model.encoder.conv1.weight"] = torch.zeros(2, 2)
    return out


def test_checkpoint_layouts_round_trip(golden, fixture, tmp_path):
    from embodied_models.fastwam.checkpoint import load_video_expert, save_video_expert

    _, _, weights = fixture
    reference = golden.state_dict()
    assert sorted(reference) == sorted(weights)  # our names are lerobot's; nothing saved twice
    # lerobot policy file (model. prefix) and the older mot.mixtures.<expert>.blocks.N layout
    legacy = {}
    for key, tensor in weights.items():
        if key.startswith("mot.layers."):
            _, _, n, _, expert, rest = key.split(".", 5)
            key = f"mot.mixtures.{expert}.blocks.{n}.{rest}"
        legacy[f"model.{key}"] = tensor.clone()
    save_file(legacy, str(tmp_path / "lerobot.safetensors"))
    model = _model()
    assert model.load_pretrained_checkpoint(tmp_path / "lerobot.safetensors").ok
    assert all(torch.equal(model.state_dict()[k], v) for k, v in reference.items())
    # LoongForge: aliases deduplicated, extra state and VAE ignored
    aliased = _aliased_loongforge_state(weights)
    save_file(aliased, str(tmp_path / "loongforge.safetensors"))
    model = _model()
    report = model.load_pretrained_checkpoint(tmp_path / "loongforge.safetensors")
    assert report.ok and len(report.loaded) == len(weights) and len(report.ignored) == 3 * (len(weights) - 2) + 2
    assert all(torch.equal(model.state_dict()[k], v) for k, v in reference.items())
    aliased["dit.mixtures.action.head.weight"] = aliased["dit.mixtures.action.head.weight"] + 1
    save_file(aliased, str(tmp_path / "mixed.safetensors"))
    with pytest.raises(CheckpointError, match=r"core\.action_expert\.head\.weight and dit\.mixtures"):
        _model().load_pretrained_checkpoint(tmp_path / "mixed.safetensors")
    # LoongForge's save_checkpoint payload {"mot": MoT.state_dict(), "proprio_encoder": ...}
    mot = {k[len("core.mot."):]: v for k, v in _aliased_loongforge_state(weights).items() if k.startswith("core.mot.")}
    proprio = {k[len("proprio_encoder."):]: v for k, v in weights.items() if k.startswith("proprio_encoder.")}
    torch.save({"mot": mot, "proprio_encoder": proprio, "step": 3}, tmp_path / "fastwam.pt")
    model = _model()
    assert model.load_pretrained_checkpoint(tmp_path / "fastwam.pt").ok
    assert all(torch.equal(model.state_dict()[k], v) for k, v in reference.items())
    # diffusers WanTransformer3DModel folder of the video expert: ours -> diffusers -> a diffusers model -> ours
    from diffusers import WanTransformer3DModel

    folder = save_video_expert(golden, tmp_path / "transformer")
    wan = WanTransformer3DModel.from_pretrained(str(folder))
    assert sum(p.numel() for p in wan.parameters()) == sum(
        v.numel() for k, v in reference.items() if ".video" in k)
    wan.save_pretrained(str(tmp_path / "wan"))
    model = _model()
    report = load_video_expert(model, tmp_path / "wan")
    assert not report.unexpected and all(torch.equal(model.state_dict()[k], reference[k]) for k in reference
                                         if ".video" in k)


def test_init_fastwam_action_dit_from_a_wan_video_dit(golden, tmp_path, capsys):
    from embodied_core.checkpoint.readers import torch_load
    from embodied_core.cli.main import main as embodied_main
    from embodied_models.fastwam.checkpoint import save_video_expert

    src = save_video_expert(golden, tmp_path / "transformer")
    out = tmp_path / "action_dit.pt"
    argv = ["checkpoint", "init-fastwam-action-dit", str(src), str(out), "--action-hidden-dim", "24",
            "--action-ffn-dim", "48", "--action-dim", "7", "--action-freq-dim", "12"]
    assert embodied_main(argv) == 0, capsys.readouterr().err[-3000:]
    backbone = torch_load(out)["backbone_state_dict"]
    video = golden.state_dict()
    q_src = video["mot.layers.1.blocks.video.self_attn.q.weight"]  # [32, 32] -> [32, 24]: input dim shrinks
    grid = torch.linspace(0, 31, 24)
    low = grid.floor().long().clamp(max=30)
    frac = grid - low
    manual = (q_src[:, low] * (1 - frac) + q_src[:, low + 1] * frac) * math.sqrt(32 / 24)
    torch.testing.assert_close(backbone["blocks.1.self_attn.q.weight"], manual, atol=1e-5, rtol=1e-5)
    assert torch.equal(backbone["blocks.0.self_attn.norm_q.weight"],  # same shape: copied
                       video["mot.layers.0.blocks.video.self_attn.norm_q.weight"])
    assert backbone["blocks.0.ffn.0.weight"].shape == (48, 24)
    model = _model(action_pretrained_path=str(out))  # loaded while building (action_encoder / head stay random)
    assert torch.equal(model.state_dict()["mot.layers.1.blocks.action.self_attn.q.weight"],
                       backbone["blocks.1.self_attn.q.weight"])
    capsys.readouterr()
    assert embodied_main(["checkpoint", "init-fastwam-action-dit", str(tmp_path / "nowhere"), str(out)]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and "Traceback" not in err


def test_official_size_on_meta():
    cfg = load_config(training={"model_name": "fastwam"}, data={"action_dim": 7, "state_dim": 8})
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.data)

    def count(expert):
        return sum(p.numel() for p in model.mot.mixtures[expert].parameters()) + sum(
            p.numel() for layer in model.mot.layers for p in layer.blocks[expert].parameters())

    total = sum(p.numel() for p in model.parameters())
    print(f"fastwam on meta: video {count('video') / 1e6:.1f} M, action {count('action') / 1e6:.1f} M, "
          f"total {total / 1e9:.3f} B")
    assert abs(total / 6.02e9 - 1) < 0.005
    assert abs(count("video") / 4999.8e6 - 1) < 1e-4 and abs(count("action") / 1020.9e6 - 1) < 1e-4


def test_init_on_meta_initializes_every_tensor():
    from embodied_core.trainer.meta_init import materialize

    cfg = load_config(training={"model_name": "fastwam_tiny"}, data={"action_dim": 7, "state_dim": 8})
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.data)
    materialize(model, device=torch.device("cpu"), init=model.init_module_weights, seed=0)  # raises on a gap
    table = model.mot.layers[0].blocks["video"].modulation
    assert abs(table.std().item() * 32**0.5 - 1) < 0.3 and model.mot.layers[0].blocks["action"].norm3.weight.eq(1).all()
