"""GR00T N1.7's action head: embodiment tables, state/action encoders, the DiT and the flow-matching objective.

Port of the computation of lerobot 0.6.1 ``GR00TN17ActionHead`` (``policies/groot/groot_n1_7.py``), which follows
Isaac-GR00T's ``gr00t_n1d7``. The layers, the flow terms and the sampler are shared with N1.6
(``embodied_models.groot``: layers.py, head.py, dit.py); N1.7 adds the VL self-attention over the backbone features
and zeroes the state token on state dropout. Names importable from here before that split stay importable.

Shape legend: B batch, H action tokens (model.action_horizon), A max_action_dim, S max_state_dim, L backbone
tokens, D token width (input_embedding_dim), C backbone width.
"""

from __future__ import annotations

import torch
from torch import nn

from embodied_models.groot.dit import AlternateVLDiT, SelfAttentionStack
from embodied_models.groot.head import ActionHeadInputs, FlowMatchingHead
from embodied_models.groot.layers import (
    CategorySpecificLinear,
    CategorySpecificMLP,
    MultiEmbodimentActionEncoder,
    masked_flow_loss,
    time_features,
)
from embodied_models.groot_n1_7.config import GrootModelConfig

__all__ = ["ActionHeadInputs", "CategorySpecificLinear", "CategorySpecificMLP", "GrootActionHead",
           "MultiEmbodimentActionEncoder", "masked_flow_loss", "time_features"]


class GrootActionHead(FlowMatchingHead, nn.Module):
    """The flow-matching action head (parameter names as in GR00T / lerobot checkpoints under ``action_head.``)."""

    def __init__(self, config: GrootModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = AlternateVLDiT(num_layers=config.dit_num_layers, num_heads=config.dit_num_heads,
                                    head_dim=config.dit_head_dim, output_dim=config.hidden_size,
                                    cross_attention_dim=config.llm_width,
                                    attend_text_every_n_blocks=config.attend_text_every_n_blocks,
                                    dropout=config.dropout)
        self.state_encoder = CategorySpecificMLP(config.max_num_embodiments, config.max_state_dim, config.hidden_size,
                                                 config.input_embedding_dim)
        self.action_encoder = MultiEmbodimentActionEncoder(config.max_action_dim, config.input_embedding_dim,
                                                           config.max_num_embodiments)
        self.action_decoder = CategorySpecificMLP(config.max_num_embodiments, config.hidden_size, config.hidden_size,
                                                  config.max_action_dim)
        self.vlln = nn.LayerNorm(config.llm_width)
        self.vl_self_attention = SelfAttentionStack(num_layers=config.vl_num_layers, num_heads=config.vl_num_heads,
                                                    head_dim=config.vl_head_dim, dropout=config.dropout)
        self.position_embedding = nn.Embedding(config.max_seq_len, config.input_embedding_dim)
        nn.init.normal_(self.position_embedding.weight, mean=0.0, std=0.02)

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute DiT and VL self-attention blocks in backward."""
        self.model.gradient_checkpointing = enabled
        self.vl_self_attention.gradient_checkpointing = enabled

    def encode_context(self, features: torch.Tensor) -> torch.Tensor:
        """``vl_self_attention(vlln(features))``: what the DiT cross-attends to."""
        return self.vl_self_attention(self.vlln(features))

    def encode_state(self, state: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """The state token [B, 1, D] from the state [B, 1, S]."""
        return self.state_encoder(state.reshape(state.shape[0], 1, -1), embodiment_id)
