"""Florence-2's encoder side as X-VLA uses it: DaViT + projector per view, then BART's encoder over
``[view-0 image tokens | instruction]``.

Built on transformers' native ``Florence2Model`` from a config (its decoder deleted, as lerobot's ``XVLAModel``
does), so the module names are lerobot's ``vlm.*``. The BART layer loop is written here: no attention mask (pad
tokens and the images are attended, as X-VLA passes an all-ones mask), learned positions over the merged sequence
(offset 2), and optional gradient checkpointing per layer.

Shapes: B batch, V views, N image tokens per view (1 mean token + the last DaViT grid), L instruction
tokens, C Florence-2 width (projection_dim = BART d_model).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import Florence2Config, Florence2Model

from embodied_core.trainer.compile import compiled_block_names
from embodied_models.xvla.config import XvlaModelConfig

__all__ = ["FlorenceEncoder", "florence_config"]


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def florence_config(config: XvlaModelConfig) -> Florence2Config:
    """The native transformers Florence-2 config of ``model:`` (BART ids 0 BOS, 1 pad, 2 EOS; SDPA attention).

    Every field of the reference's Florence-2 config is either a ``model.*`` field here or fixed to the one value
    this port implements (DaViT ``in_channels`` 3, ``qkv_bias``, exact GELU in both towers, no BART layer drop);
    :mod:`embodied_models.xvla.reference` maps a reference config onto ``model.*`` and refuses the rest."""
    vision = dict(
        embed_dim=list(config.vision_embed_dim), depths=list(config.vision_depths),
        num_heads=list(config.vision_num_heads), num_groups=list(config.vision_num_groups),
        patch_size=list(config.vision_patch_size), patch_stride=list(config.vision_patch_stride),
        patch_padding=list(config.vision_patch_padding), patch_prenorm=list(config.vision_patch_prenorm),
        window_size=config.vision_window_size, mlp_ratio=config.vision_mlp_ratio,
        drop_path_rate=config.vision_drop_path_rate, projection_dim=config.projection_dim,
        max_position_embeddings=config.vision_max_position_embeddings,
        max_temporal_embeddings=config.vision_max_temporal_embeddings, activation_function="gelu", in_channels=3,
        qkv_bias=True,
    )
    text = dict(
        model_type="bart", vocab_size=config.vocab_size, d_model=config.text_width,
        encoder_layers=config.text_depth, encoder_attention_heads=config.text_num_heads,
        encoder_ffn_dim=config.text_ffn_dim, max_position_embeddings=config.text_max_position_embeddings,
        # the decoder is deleted after construction; keep its throwaway build small
        decoder_layers=1, decoder_attention_heads=config.text_num_heads, decoder_ffn_dim=config.text_ffn_dim,
        dropout=config.text_dropout, attention_dropout=_or(config.text_attention_dropout, config.text_dropout),
        activation_dropout=_or(config.text_activation_dropout, config.text_dropout),
        scale_embedding=config.text_scale_embedding,
        # fixed by this port (xvla.reference refuses other values in a reference config): exact GELU, no layer
        # drop, BART's special ids
        activation_function="gelu", encoder_layerdrop=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )
    cfg = Florence2Config(vision_config=vision, text_config=text, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          is_encoder_decoder=True, tie_word_embeddings=True)
    cfg._attn_implementation = "sdpa"
    return cfg


class FlorenceEncoder(Florence2Model):
    """Florence-2's vision tower, projector and BART encoder, the decoder removed (lerobot's ``vlm.*`` names).

    Args:
        config: the ``model:`` section.
    """

    def __init__(self, config: XvlaModelConfig) -> None:
        super().__init__(florence_config(config))
        del self.language_model.decoder  # X-VLA only encodes
        self.checkpoint_layers = config.gradient_checkpointing

    def image_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """Pixel values [N, 3, H, W] -> image tokens [N, 1 + h*w, C] (the mean token first)."""
        grid = self.vision_tower(pixels).last_hidden_state
        return self.multi_modal_projector(grid)

    def text_embeddings(self, tokens: torch.Tensor) -> torch.Tensor:
        """Instruction ids [B, L] -> embeddings [B, L, C] (BART's shared table and its embed_scale)."""
        return self.language_model.shared(tokens)

    def encode_text(self, merged: torch.Tensor) -> torch.Tensor:
        """BART's encoder over ``[image tokens | text embeddings]`` without a mask -> [B, S, C]."""
        encoder = self.language_model.encoder
        positions = encoder.embed_positions(merged[:, :, -1])  # reads the shape only; offset 2 inside
        h = encoder.layernorm_embedding(merged + positions.to(merged.dtype))
        h = F.dropout(h, p=encoder.dropout, training=self.training)
        for layer in encoder.layers:
            if self.checkpoint_layers and self.training and torch.is_grad_enabled():
                h = checkpoint(layer, h, None, use_reentrant=False)
            else:
                h = layer(h, None)
        return h

    def forward(self, tokens: torch.Tensor, pixels: torch.Tensor, masks: torch.Tensor,
                *, encoded_views: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Encodes a batch; returns ``(vlm_features [B, N + L, C], aux_visual_inputs [B, (V-1) N, C])``.

        Views ``>= encoded_views`` are known to be empty (more views than cameras) and are not run through the
        tower. Of the others, masked views get all-zero features. Eager, only the unmasked views run through the
        tower, as lerobot computes them (a batch with one absent view costs one view less); under ``--compile``
        every view runs and the masked ones are zeroed afterwards, so each DaViT stage keeps the one fixed shape
        it is compiled for (see :func:`embodied_core.trainer.compile.mark_static_shapes`). Both give the same
        values up to float rounding (the tower's matmuls see another batch size).
        """
        b, v = pixels.shape[:2]
        run = max(1, min(encoded_views, v))
        feats = self.view_features(pixels[:, :run].flatten(0, 1), masks[:, :run].flatten()).unflatten(0, (b, run))
        if run < v:
            feats = torch.cat([feats, feats.new_zeros(b, v - run, *feats.shape[2:])], dim=1)
        text = self.text_embeddings(tokens)
        vlm = self.encode_text(torch.cat([feats[:, 0].to(text.dtype), text], dim=1))
        aux = feats[:, 1:].reshape(b, -1, feats.shape[-1])
        return vlm, aux

    def view_features(self, pixels: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """Image tokens [N, 1 + h*w, C] of views ``pixels`` [N, 3, H, W], zero where ``present`` [N] is False."""
        if not self.static_view_batch():
            count = int(present.sum())  # a host sync where the mask lives on a device, as in lerobot
            if 0 < count < present.numel():
                kept = self.image_tokens(pixels[present])
                return kept.new_zeros(present.numel(), *kept.shape[1:]).index_put((present,), kept)
        feats = self.image_tokens(pixels)
        return torch.where(present[:, None, None], feats, torch.zeros((), dtype=feats.dtype, device=feats.device))

    def static_view_batch(self) -> bool:
        """Whether the tower's blocks run compiled (``--compile``), which fixes the number of views per batch."""
        return bool(compiled_block_names(self.vision_tower))
