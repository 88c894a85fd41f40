"""GR00T N1.7's truncated Qwen3-VL backbone against transformers' own ``Qwen3VLModel`` at tiny size, and the
prompt / pixel processing against transformers' Qwen3-VL processor pieces."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_models.groot_n1_7.backbone import GrootBackbone, qwen3vl_configs
from embodied_models.groot_n1_7.positions import mrope_positions
from embodied_models.groot_n1_7.processor import IMAGE_TOKEN, VLProcessor
from embodied_models.groot_n1_7.transforms import GrootCollate


def _tiny_model_config(**overrides):
    return load_config("groot_n1_7_tiny", training={"dataset_format": "dummy_datasets"}, model=overrides).model


@pytest.fixture(scope="module")
def pair():
    """Our backbone (select_layer 2, DeepStack after layer 0) and a 3-layer Qwen3VLModel sharing its weights."""
    cfg = _tiny_model_config(select_layer=2)
    torch.manual_seed(0)
    ours = GrootBackbone(cfg).eval()
    text, vision = qwen3vl_configs(cfg)
    processor = VLProcessor.tiny()
    full = Qwen3VLConfig(text_config={**text.to_dict(), "num_hidden_layers": 3}, vision_config=vision.to_dict(),
                         image_token_id=processor.image_token_id, video_token_id=processor.image_token_id + 1)
    hf = Qwen3VLModel(full).eval()
    state = {}
    for key, value in hf.state_dict().items():
        if key.startswith("visual."):
            state[key] = value
        elif key.startswith("language_model.") and not key.startswith(("language_model.norm",
                                                                        "language_model.layers.2")):
            state[key.removeprefix("language_model.")] = value
    ours.load_state_dict(state, strict=True)
    return ours, hf, processor


def _batch(processor: VLProcessor, texts: list[str], views: int = 2):
    """Two prompts of different length (so one is left-padded) with ``views`` 32x32 views each."""
    samples = [{"input_ids": torch.tensor(processor.prompt_ids(t, num_images=views, tokens_per_image=4)),
                "images": torch.randint(0, 256, (views, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator()
                                        .manual_seed(i)),
                "state": torch.zeros(1, 4), "embodiment_id": torch.tensor(0), "sample_index": torch.tensor(i)}
               for i, t in enumerate(texts)]
    return GrootCollate(processor.pad_token_id, processor.image_token_id, (2, 2))(samples)


def test_truncated_backbone_equals_qwen3vl_hidden_state_at_select_layer(pair):
    ours, hf, processor = pair
    batch = _batch(processor, ["pick the red cube", "stack the blue block on the red one please"])
    assert not batch.attention_mask[0].all() and batch.attention_mask[1].all()  # left padding in play
    with torch.no_grad():
        features = ours(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask, batch.position_ids)
        assert torch.equal(ours(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask), features)
        pixels, grid = ours.pixel_values(batch.images.flatten(0, 1))
        out = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask.long(), pixel_values=pixels,
                 image_grid_thw=grid, mm_token_type_ids=batch.image_mask.int(), output_hidden_states=True)
    # every position, padded ones included (the action head's VL self-attention sees them)
    torch.testing.assert_close(features, out.hidden_states[2], atol=1e-5, rtol=1e-5)
    assert (features - out.hidden_states[3]).abs().max() > 1e-2  # layer 3 would be a different tensor


def test_mrope_positions_equal_qwen3vl_rope_index(pair):
    _, hf, processor = pair
    batch = _batch(processor, ["a", "a much longer instruction"], views=3)
    grid = torch.tensor([[1, 4, 4]] * 6)
    expected, _ = hf.get_rope_index(batch.input_ids, mm_token_type_ids=batch.image_mask.int(), image_grid_thw=grid,
                                    attention_mask=batch.attention_mask.long())
    assert torch.equal(mrope_positions(batch.attention_mask, batch.image_mask, (2, 2)), expected)
    assert torch.equal(batch.position_ids, expected)  # what the collate function hands the model


def test_pixels_equal_the_qwen2vl_image_processor(tmp_path, pair):
    ours, _, processor = pair
    folder = processor.save(tmp_path / "proc")
    reference = Qwen2VLImageProcessorPil.from_pretrained(str(folder))
    images = torch.randint(0, 256, (3, 3, 32, 48), dtype=torch.uint8)
    expected = reference(images=[i.permute(1, 2, 0).numpy() for i in images], return_tensors="pt")
    pixels, grid = ours.pixel_values(images)
    assert torch.equal(grid, expected["image_grid_thw"])
    torch.testing.assert_close(pixels, expected["pixel_values"], atol=1e-6, rtol=0)


def test_prompt_is_the_chat_template_with_expanded_image_tokens(tmp_path):
    tiny = VLProcessor.tiny()
    rendered = tiny.render("pick it", 2)
    assert rendered == ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|>"
                        "<|vision_end|>pick it<|im_end|>\n")
    ids = tiny.prompt_ids("pick it", num_images=2, tokens_per_image=4)
    assert ids == tiny.tokenizer(rendered.replace(IMAGE_TOKEN, IMAGE_TOKEN * 4))["input_ids"]
    assert ids.count(tiny.image_token_id) == 8
    loaded = VLProcessor.from_folder(tiny.save(tmp_path / "p"))
    assert loaded.prompt_ids("pick it", num_images=2, tokens_per_image=4) == ids
    assert loaded.image_settings == tiny.image_settings


def test_a_folder_that_is_not_a_qwen3vl_processor_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"not a directory"):
        VLProcessor.from_folder(tmp_path / "absent")
    tiny = VLProcessor.tiny()
    folder = tiny.save(tmp_path / "p")
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(ConfigError, match=r"no preprocessor_config.json"):
        VLProcessor.from_folder(folder)


def test_collate_left_pads_and_marks_image_tokens():
    processor = VLProcessor.tiny()
    batch = _batch(processor, ["x", "a longer one"])
    lengths = batch.attention_mask.sum(dim=1)
    assert lengths[0] < lengths[1] == batch.input_ids.shape[1]
    pad = batch.input_ids.shape[1] - int(lengths[0])
    assert (batch.input_ids[0, :pad] == processor.pad_token_id).all() and not batch.attention_mask[0, :pad].any()
    assert batch.image_mask.sum(dim=1).tolist() == [8, 8]
    assert np.array_equal(batch.sample_index.numpy(), [0, 1])
