"""cosmos3: our batched network and objective equal diffusers' own ``Cosmos3OmniTransformer`` forward; full size on
the meta device; the LoongForge DCP, diffusers and own checkpoint layouts; sampling."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from embodied_core.errors import CheckpointError, DataError
from embodied_models.cosmos3.batch import read_batch
from embodied_models.cosmos3.checkpoint import LOONGFORGE_RULES, map_key
from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.flow import draw_step_key, sample_generator, shift_sigma, train_time
from embodied_models.cosmos3.modeling import Cosmos3Model, build_model
from embodied_models.cosmos3.packing import sample_positions

PRESETS = Path(__file__).resolve().parents[2] / "packages/embodied-models/src/embodied_models/cosmos3"


def _preset(name: str) -> tuple[Cosmos3ModelConfig, Cosmos3DataConfig]:
    doc = yaml.safe_load((PRESETS / f"{name}.yaml").read_text())
    return Cosmos3ModelConfig(**doc["model"]), Cosmos3DataConfig(action_dim=8, **doc["data"])


@pytest.fixture(scope="module")
def tiny() -> Cosmos3Model:
    torch.manual_seed(0)
    model_config, data_config = _preset("cosmos3_tiny")
    model = build_model(model_config, data_config)
    with torch.no_grad():  # away from the near-zero init, so every path carries signal
        for param in model.net.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


def _batch(lengths=(23, 31), canvases=((96, 64), (80, 96)), contents=((72, 64), (80, 90))) -> dict:
    gen = torch.Generator().manual_seed(5)
    return {
        "videos": [torch.randint(0, 256, (3, 9, h, w), dtype=torch.uint8, generator=gen) for h, w in canvases],
        "image_sizes": [torch.tensor([h, w, ch, cw], dtype=torch.float32)
                        for (h, w), (ch, cw) in zip(canvases, contents, strict=True)],
        "text_token_ids": [torch.randint(3, 380, (n,), generator=gen).tolist() for n in lengths],
        "actions": [torch.randn(9, 64, generator=gen) for _ in lengths],
        "raw_action_dims": [torch.tensor(8), torch.tensor(5)],
        "action_domain_ids": [torch.tensor(8), torch.tensor(3)],
        "fps_values": [15.0, 10.0],
        "dataset_indices": [4, 17],
    }


def _reference_predictions(model: Cosmos3Model, text: list[int], latent: torch.Tensor, actions: torch.Tensor,
                           timestep: torch.Tensor, domain: torch.Tensor, fps: float):
    """diffusers' forward of one sample, packed as its pipeline packs (text, video patches, action rows)."""
    from diffusers import Cosmos3OmniTransformer

    ref = Cosmos3OmniTransformer.from_config(model.net.config)  # default attention processor
    ref.load_state_dict(model.net.state_dict())
    cfg = model.config
    tokens = [*text, cfg.eos_token_id, cfg.start_of_generation_token_id]
    lu, p = len(tokens), cfg.latent_patch_size
    t, h, w = latent.shape[1], math.ceil(latent.shape[2] / p), math.ceil(latent.shape[3] / p)
    nv, na = t * h * w, actions.shape[0]
    noisy_v, noisy_a = torch.arange(1, t), torch.arange(1, na)  # frame 0 / the observed state row are clean
    vision_loss_idx = torch.arange(lu + h * w, lu + nv)
    positions = sample_positions(cfg, text_len=lu, grid=(t, h, w), action_len=na, fps=fps,
                                 action_start_frame_offset=0, temporal_compression=4)
    out = ref(input_ids=torch.tensor(tokens), text_indexes=torch.arange(lu), position_ids=positions, und_len=lu,
              sequence_length=lu + nv + na, vision_tokens=[latent[None]], vision_token_shapes=[(t, h, w)],
              vision_sequence_indexes=torch.arange(lu, lu + nv), vision_mse_loss_indexes=vision_loss_idx,
              vision_timesteps=timestep.expand(len(vision_loss_idx)), vision_noisy_frame_indexes=[noisy_v],
              action_tokens=[actions], action_token_shapes=[(na, 1, 1)],
              action_sequence_indexes=torch.arange(lu + nv, lu + nv + na), action_mse_loss_indexes=lu + nv + noisy_a,
              action_timesteps=timestep.expand(na - 1), action_noisy_frame_indexes=[noisy_a],
              action_domain_ids=[domain])
    return out.sample[0][0], out.action[0]


def test_forward_equals_diffusers_network_under_our_objective(tiny):
    """Two samples of different caption lengths, canvases, contents, fps, raw widths and domains in one batch:
    our loss equals the loss computed from diffusers' per-sample forward on the same weights and draws."""
    batch = _batch()
    torch.manual_seed(123)
    with torch.no_grad():
        ours = tiny(batch)
    inputs = read_batch(batch)
    latents = tiny._latents(inputs)
    assert [tuple(x.shape) for x in latents] == [(8, 3, 4, 4), (8, 3, 5, 5)]
    torch.manual_seed(123)
    key = draw_step_key()
    vision, action = [], []
    for i, latent in enumerate(latents):
        gen = sample_generator(key, inputs.sample_keys[i])
        sigma = shift_sigma(1.0 - train_time("waver", gen), 5.0)
        noise_v = torch.randn(latent.shape, generator=gen)
        noise_a = torch.randn(inputs.actions[i].shape, generator=gen)
        x0_a, dim = inputs.actions[i], inputs.raw_action_dims[i]
        keep = torch.ones(latent.shape[1], 1, 1)
        keep[0] = 0.0
        x_v = sigma * keep * noise_v + (1 - sigma * keep) * latent
        keep_a = torch.ones(x0_a.shape[0], 1)
        keep_a[0] = 0.0
        x_a = sigma * keep_a * noise_a + (1 - sigma * keep_a) * x0_a
        x_a[:, dim:] = 0.0
        with torch.no_grad():
            pred_v, pred_a = _reference_predictions(tiny, inputs.text_ids[i], x_v, x_a, sigma * 1000.0,
                                                    inputs.domain_ids[i], inputs.fps[i])
        vision.append(((pred_v - (noise_v - latent)) ** 2 * keep[None]).mean())
        action.append((((pred_a - (noise_a - x0_a)) ** 2)[:, :dim] * keep_a).mean())
    vision_loss, action_loss = torch.stack(vision).mean(), torch.stack(action).mean()
    torch.testing.assert_close(ours.metrics["vision_loss"], vision_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.metrics["action_loss"], action_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.loss, vision_loss + 10.0 * action_loss, rtol=1e-5, atol=1e-6)


def test_draws_depend_on_the_sample_not_its_batch(tiny):
    """A sample's loss terms are the same alone or next to another sample (what 2-process runs rely on)."""
    both = _batch()
    first = {k: v[:1] for k, v in both.items()}
    torch.manual_seed(9)
    with torch.no_grad():
        out_both = tiny(both)
    torch.manual_seed(9)
    with torch.no_grad():
        out_first = tiny(first)
    torch.manual_seed(9)
    second = {k: v[1:] for k, v in both.items()}
    with torch.no_grad():
        out_second = tiny(second)
    torch.testing.assert_close(out_both.metrics["vision_loss"],
                               (out_first.metrics["vision_loss"] + out_second.metrics["vision_loss"]) / 2)


def test_sample_actions_is_deterministic_given_noise_and_zero_beyond_raw_width(tiny):
    batch = _batch(canvases=((96, 64), (96, 64)), contents=((72, 64), (72, 64)))
    noise = {"action": torch.randn(2, 9, 64), "video": torch.randn(2, 8, 3, 4, 4)}
    a = tiny.sample_actions(batch, noise=noise, num_steps=3)
    b = tiny.sample_actions(batch, noise=noise, num_steps=3)
    assert a.shape == (2, 8, 64)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert a[0, :, 8:].abs().max() == 0 and a[1, :, 5:].abs().max() == 0 and a[1, :, :5].abs().max() > 0
    observation = {k: v for k, v in batch.items() if k not in ("actions", "raw_action_dims")}
    assert tiny.sample_actions(observation, num_steps=2).shape == (2, 8, 64)  # no state row: diffusers' layout
    with pytest.raises(DataError, match="lacks videos"):
        tiny({"text_token_ids": [[1]]})


def test_full_size_on_meta():
    """cosmos3_nano's transformer is ~15.2B (NVIDIA: ~16B with the Wan2.2 VAE and the Qwen3-VL vision tower)."""
    model_config, data_config = _preset("cosmos3_nano")
    with torch.device("meta"):
        model = build_model(model_config, data_config)
    net = sum(p.numel() for p in model.net.parameters())
    vae = sum(p.numel() for p in model.vae.parameters())
    layer = sum(p.numel() for p in model.net.layers[0].parameters())
    assert layer == 2 * (4096 * (4096 * 2 + 1024 * 2) + 3 * 4096 * 12288 + 2 * 4096 + 2 * 128)
    assert net == 15_173_136_576  # + the whole Wan2.2 VAE (0.70B) = 15.88B, NVIDIA: ~16B
    assert vae == 149_637_088  # the Wan2.2 encoder half (the decoder is not kept)
    assert all(p.is_meta for p in model.parameters())


def _loongforge_name(ours: str) -> str:
    """Our name -> LoongForge's (the inverse of the declared rules, written out independently)."""
    table = {"to_q": "q_proj", "to_k": "k_proj", "to_v": "v_proj", "to_out": "o_proj", "add_q_proj": "q_proj_moe_gen",
             "add_k_proj": "k_proj_moe_gen", "add_v_proj": "v_proj_moe_gen", "to_add_out": "o_proj_moe_gen",
             "norm_q": "q_norm", "norm_k": "k_norm", "norm_added_q": "q_norm_moe_gen",
             "norm_added_k": "k_norm_moe_gen"}
    name = ours[len("net."):]
    top = {"proj_in": "vae2llm", "proj_out": "llm2vae", "action_proj_in": "action2llm",
           "action_proj_out": "llm2action", "time_embedder.linear_1": "time_embedder.mlp.0",
           "time_embedder.linear_2": "time_embedder.mlp.2", "action_modality_embed": "action_modality_embed"}
    for src, dst in top.items():
        if name == src or name.startswith(src + "."):
            return "net." + dst + name[len(src):]
    if name.startswith("lm_head"):
        return "net.language_model." + name
    parts = name.split(".")
    if parts[0] == "layers" and parts[2] == "self_attn":
        parts[3] = table[parts[3]]
    return "net.language_model.model." + ".".join(parts)


def test_loongforge_dcp_and_diffusers_layouts_load_strictly(tiny, tmp_path):
    import torch.distributed.checkpoint as dcp

    from embodied_core.checkpoint.dcp_reader import single_process_is_intended

    state = {k: v.clone() for k, v in tiny.state_dict().items()}
    lf = {_loongforge_name(k): v for k, v in state.items() if k.startswith("net.")}
    assert all(map_key(k) == ours for ours, k in ((o, _loongforge_name(o)) for o in state if o.startswith("net.")))
    assert len(LOONGFORGE_RULES) == 18
    with single_process_is_intended():
        dcp.save(lf, checkpoint_id=str(tmp_path / "lf" / "model"), no_dist=True)
    model_config, data_config = _preset("cosmos3_tiny")
    fresh = build_model(model_config, data_config)
    with pytest.raises(CheckpointError, match=r"missing: vae\."):  # LoongForge's DCP holds no VAE
        fresh.load_pretrained_checkpoint(tmp_path / "lf")
    vae_dir = tmp_path / "vae"
    tiny.vae.save_pretrained(str(vae_dir))
    fresh = build_model(attrs_evolve(model_config, vae_path=str(vae_dir), vae_latents_mean=None,
                                     vae_latents_std=None), data_config)
    report = fresh.load_pretrained_checkpoint(tmp_path / "lf")
    skipped = {k for k in state if k.startswith(("net.action_proj_in", "net.action_proj_out"))} | {
        "net.action_modality_embed"}
    assert set(report.missing) == skipped | {k for k in state if k.startswith("vae.")}
    for key, value in fresh.state_dict().items():
        if key not in skipped:
            torch.testing.assert_close(value, state[key], rtol=0, atol=0, msg=key)
    fresh = build_model(model_config, data_config)
    tiny.net.save_pretrained(str(tmp_path / "diffusers" / "transformer"))  # diffusers' layout, keys without net.
    with pytest.raises(CheckpointError, match=r"missing: vae\."):
        fresh.load_pretrained_checkpoint(tmp_path / "diffusers")
    report = build_model(attrs_evolve(model_config, vae_path=str(vae_dir), vae_latents_mean=None,
                                      vae_latents_std=None), data_config).load_pretrained_checkpoint(
        tmp_path / "diffusers")
    assert not [k for k in report.missing if not k.startswith("vae.")] and not report.unexpected


def attrs_evolve(config: Cosmos3ModelConfig, **changes) -> Cosmos3ModelConfig:
    import attrs

    return attrs.evolve(config, **changes)


def test_init_module_weights_covers_every_tensor_after_meta_build():
    """--init-on-meta: every parameter and buffer of the materialized model is written by init_module_weights
    (children first), as the trainer requires; the action heads start as LoongForge's init (bias zero)."""
    model_config, data_config = _preset("cosmos3_tiny")
    with torch.device("meta"):
        model = build_model(model_config, data_config)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.fill_(float("nan"))
    for module in reversed(list(model.modules())):
        model.init_module_weights(module)
    untouched = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if torch.isnan(t).any()]
    assert not untouched
    assert model.net.action_proj_in.bias.weight.abs().max() == 0
    assert torch.equal(model.net.layers[0].self_attn.norm_q.weight, torch.ones(16))


def test_token_ids_that_disagree_with_the_tokenizer_are_a_usage_error(tmp_path, capsys):
    """Checked against --tokenizer-path before anything is built: exit 2, the fix named, no traceback."""
    from embodied_core.cli.main import main as cli_main
    from tests.support import DATASETS_DIR

    strategies = DATASETS_DIR / "strategies"
    code = cli_main(["train", "--model-name", "cosmos3_tiny", "--dataset-format", "lerobot_datasets",
                     "--dataset-path", str(strategies / "cosmos3_droid_v30"), "--dataset-strategy", "cosmos3_droid",
                     "--tokenizer-path", str(strategies / "tokenizers" / "qwen3vl_tiny"), "--output-dir",
                     str(tmp_path / "out"), "model.start_of_generation_token_id=385"])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "set model.start_of_generation_token_id=384" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_one_euler_step_is_noise_minus_the_predicted_velocity(tiny):
    """num_steps=1 integrates sigma 1 -> 0 in one step: actions = noise - v(noise, t=1000) on the command rows,
    with the observed state row clean in the network's input and channels past raw_action_dim zero."""
    from embodied_models.cosmos3.network import GenInputs

    batch = _batch(canvases=((96, 64), (96, 64)), contents=((72, 64), (72, 64)))
    noise = {"action": torch.randn(2, 9, 64), "video": torch.randn(2, 8, 3, 4, 4)}
    got = tiny.sample_actions(batch, noise=noise, num_steps=1)
    inputs = read_batch(batch)
    first = tiny._latents(inputs, first_frame_only=True)
    gens = []
    for i in range(2):
        latent = noise["video"][i].clone()
        latent[:, 0] = first[i][:, 0]
        actions = noise["action"][i].clone()
        actions[0] = inputs.actions[i][0]
        actions[:, inputs.raw_action_dims[i]:] = 0.0
        gens.append(GenInputs(latent=latent, actions=actions, noisy_frames=torch.tensor([False, True, True]),
                              noisy_rows=torch.arange(9) > 0, timestep=torch.tensor(1000.0),
                              domain_id=inputs.domain_ids[i]))
    with torch.no_grad():
        _, velocity = tiny.predict_velocity(inputs, gens)
    for i in range(2):
        expected = gens[i].actions - velocity[i]
        expected[:, inputs.raw_action_dims[i]:] = 0.0
        torch.testing.assert_close(got[i], expected[1:], rtol=1e-5, atol=1e-6)
