"""X-VLA configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are X-VLA-0.9B's: Florence-2-large's encoder (DaViT + BART-large encoder) and a 1024 x 24 soft-prompted
transformer with 30 domains x 32 soft prompts (lerobot ``policies/xvla/configuration_xvla.py``, the 2toINF X-VLA
``XVLAConfig``). ``xvla_tiny.yaml`` holds the CPU preset.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import non_negative, positive, probability
from embodied_models.vla.checks import builtin_vocab_problems, multiple_problems
from embodied_models.vla.fields import LocalTokenizerPath

__all__ = ["ACTION_MODES", "XvlaDataConfig", "XvlaModelConfig"]

ACTION_MODES = ("ee6d", "joint", "agibot_ee6d", "franka_joint7", "so101_bimanual", "auto")
"""The action spaces of lerobot's ``action_hub.py``; each has its own layout, loss and postprocessing."""

ActionMode = Literal["ee6d", "joint", "agibot_ee6d", "franka_joint7", "so101_bimanual", "auto"]


def _non_negative_items(instance: object, attribute: attrs.Attribute, value: list[int]) -> None:
    if not value or any(v < 0 for v in value):
        raise ValueError(f"must be a non-empty list of values >= 0 (got {value!r})")


def _positive_items(instance: object, attribute: attrs.Attribute, value: list[int] | list[float]) -> None:
    if not value or any(not v > 0 for v in value):
        raise ValueError(f"must be a non-empty list of values > 0 (got {value!r})")


@attrs.define(kw_only=True)
class XvlaModelConfig(BaseModelConfig):
    """X-VLA network sizes, action space and flow constants. Defaults are X-VLA-0.9B's."""

    # --- Florence-2 vision tower (DaViT), one entry per stage ---
    vision_embed_dim: list[int] = attrs.field(factory=lambda: [256, 512, 1024, 2048], validator=_positive_items)
    """Channels of each DaViT stage (Florence-2-large: 256, 512, 1024, 2048)."""
    vision_depths: list[int] = attrs.field(factory=lambda: [1, 1, 9, 1], validator=_positive_items)
    """(spatial + channel) block pairs per stage."""
    vision_num_heads: list[int] = attrs.field(factory=lambda: [8, 16, 32, 64], validator=_positive_items)
    """Window-attention heads per stage."""
    vision_num_groups: list[int] = attrs.field(factory=lambda: [8, 16, 32, 64], validator=_positive_items)
    """Channel-attention groups per stage."""
    vision_patch_size: list[int] = attrs.field(factory=lambda: [7, 3, 3, 3], validator=_positive_items)
    """Kernel of each stage's stem convolution."""
    vision_patch_stride: list[int] = attrs.field(factory=lambda: [4, 2, 2, 2], validator=_positive_items)
    """Stride of each stage's stem convolution (the image side shrinks by their product: 32)."""
    vision_patch_padding: list[int] = attrs.field(factory=lambda: [3, 1, 1, 1], validator=_non_negative_items)
    """Padding of each stage's stem convolution."""
    vision_patch_prenorm: list[bool] = attrs.field(factory=lambda: [False, True, True, True])
    """Whether a stage's stem LayerNorm comes before its convolution (after it when False)."""
    vision_window_size: int = attrs.field(default=12, validator=positive)
    """Side of the spatial attention windows (grids are zero-padded to a multiple)."""
    vision_mlp_ratio: float = attrs.field(default=4.0, validator=positive)
    """DaViT FFN width / channels."""
    vision_drop_path_rate: float = attrs.field(default=0.1, validator=probability)
    """Highest stochastic-depth rate of the DaViT blocks (training only)."""
    projection_dim: int = attrs.field(default=1024, validator=positive)
    """Image-token width after Florence-2's projector; equals the BART width."""
    vision_max_position_embeddings: int = attrs.field(default=50, validator=positive)
    """Rows of the learned 2-D position table of the last DaViT grid (grid side <= this)."""
    vision_max_temporal_embeddings: int = attrs.field(default=100, validator=positive)
    """Rows of the cosine temporal table (one frame per view is used)."""
    # --- Florence-2 language encoder (BART) ---
    vocab_size: int = attrs.field(default=51289, validator=positive)
    """Token embedding rows (Florence-2: 51289)."""
    text_width: int = attrs.field(default=1024, validator=positive)
    """BART d_model (Florence-2-large: 1024)."""
    text_depth: int = attrs.field(default=12, validator=positive)
    """BART encoder layers (the decoder is not built: X-VLA only encodes)."""
    text_num_heads: int = attrs.field(default=16, validator=positive)
    """BART encoder attention heads."""
    text_ffn_dim: int = attrs.field(default=4096, validator=positive)
    """BART encoder FFN width."""
    text_max_position_embeddings: int = attrs.field(default=1024, validator=positive)
    """BART learned positions; image tokens of view 0 + text tokens must fit."""
    text_dropout: float = attrs.field(default=0.1, validator=probability)
    """BART dropout on the embeddings and after each sub-layer (BART ``dropout``), training only."""
    text_attention_dropout: float | None = attrs.field(default=None, validator=attrs.validators.optional(probability))
    """BART dropout on the attention probabilities (``attention_dropout``), training only; unset: text_dropout."""
    text_activation_dropout: float | None = attrs.field(default=None,
                                                        validator=attrs.validators.optional(probability))
    """BART dropout after the FFN activation (``activation_dropout``), training only; unset: text_dropout."""
    text_scale_embedding: bool = False
    """Multiply the instruction's token embeddings (not the image tokens) by sqrt(text_width), BART's
    ``scale_embedding`` (Florence-2 and X-VLA-0.9B: false)."""
    # --- soft-prompted transformer ---
    hidden_size: int = attrs.field(default=1024, validator=positive)
    """Width of the soft-prompted transformer."""
    depth: int = attrs.field(default=24, validator=positive)
    """Blocks of the soft-prompted transformer."""
    num_heads: int = attrs.field(default=16, validator=positive)
    """Attention heads of the soft-prompted transformer."""
    mlp_ratio: float = attrs.field(default=4.0, validator=positive)
    """MLP width / hidden_size."""
    dropout: float = attrs.field(default=0.1, validator=probability)
    """Attention and MLP dropout of the soft-prompted transformer (X-VLA: 0.1), training only."""
    num_domains: int = attrs.field(default=30, validator=positive)
    """Embodiment/domain slots: each has its own soft prompts and action encoder/decoder weights."""
    len_soft_prompts: int = attrs.field(default=32, validator=non_negative)
    """Soft-prompt tokens appended per domain (0: none)."""
    dim_time: int = attrs.field(default=32, validator=positive)
    """Width of the cos/sin flow-time embedding."""
    time_max_period: float = attrs.field(default=100.0, validator=positive)
    """Longest period of the time embedding (X-VLA: 100, with t in [0, 1])."""
    max_len_seq: int = attrs.field(default=512, validator=positive)
    """Rows of the learned position table: action + VLM + auxiliary-view tokens must fit."""
    use_hetero_proj: bool = False
    """Project VLM and auxiliary-view tokens with per-domain weights instead of shared Linears."""
    # --- actions and state ---
    action_mode: ActionMode = "ee6d"
    """Action space (layout, loss, gripper handling): ee6d (2 x [xyz, 6-D rotation, gripper], 20), joint
    (2 x [6 joints, gripper], 14), agibot_ee6d (ee6d with MSE grippers), franka_joint7 (7 joints in 20),
    so101_bimanual (2 x [5 joints, gripper] in 20), auto (the dataset's action_dim in max_action_dim)."""
    max_action_dim: int = attrs.field(default=20, validator=positive)
    """Model action width of action_mode=auto (the other spaces fix their own)."""
    max_state_dim: int = attrs.field(default=20, validator=positive)
    """The state is zero-padded to this width (X-VLA-0.9B checkpoints: 20)."""
    use_proprio: bool = True
    """Feed the state to the action tokens; False drops it (the action encoder is then narrower)."""
    num_denoising_steps: int = attrs.field(default=10, validator=positive)
    """Sampling steps: t = K/K, ..., 1/K, re-noising toward the same noise each step."""
    # --- text ---
    tokenizer: Literal["bart", "bytes"] = "bart"
    """Instruction tokenizer: the BART tokenizer of data.tokenizer_path / --tokenizer-path (facebook/bart-large or
    the checkpoint's), or the built-in byte tokenizer of xvla_tiny (no files, 260 ids)."""
    tokenizer_max_length: int = attrs.field(default=64, validator=positive)
    """Instruction tokens per sample: truncated and right-padded to this length (pad tokens are attended, as
    X-VLA does)."""
    # --- execution ---
    gradient_checkpointing: bool = False
    """Recompute each soft-prompted transformer block and BART layer in backward to save activation memory."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = []
        stages = {name: len(getattr(self, name)) for name in (
            "vision_embed_dim", "vision_depths", "vision_num_heads", "vision_num_groups", "vision_patch_size",
            "vision_patch_stride", "vision_patch_padding", "vision_patch_prenorm")}
        if len(set(stages.values())) > 1:
            problems.append("model.vision_*: every per-stage list needs one entry per stage (got "
                            + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")")
        for dim, heads, groups in zip(self.vision_embed_dim, self.vision_num_heads, self.vision_num_groups,
                                      strict=False):
            if dim % heads or dim % groups:
                problems.append(f"model.vision_embed_dim {dim} must be a multiple of its stage's heads ({heads}) "
                                f"and groups ({groups})")
        if self.projection_dim != self.text_width:
            problems.append(f"model.projection_dim {self.projection_dim} must equal model.text_width "
                            f"{self.text_width}: image tokens enter the BART encoder")
        problems += multiple_problems(self, ("text_width", "text_num_heads"), ("hidden_size", "num_heads"))
        if self.tokenizer == "bytes":
            from embodied_models.xvla.tokenizer import BYTES_VOCAB_SIZE

            problems += builtin_vocab_problems(self.vocab_size, BYTES_VOCAB_SIZE, builtin="byte tokenizer",
                                               alternative="model.tokenizer=bart")
        if self.tokenizer_max_length < 2:
            problems.append(f"model.tokenizer_max_length must be >= 2 (BOS and EOS; got {self.tokenizer_max_length})")
        return problems


@attrs.define(kw_only=True)
class XvlaDataConfig(LocalTokenizerPath, BaseDataConfig):
    """What X-VLA asks of the data (X-VLA-0.9B: 224 px views, chunks of 30 actions, no normalization).

    ``camera_keys`` fill the views in order; view 0 goes through the BART encoder with the instruction, the others
    enter the transformer as auxiliary tokens. Views beyond the cameras, and cameras a sample lacks, are zero
    images with mask 0 (their features are zeros, as X-VLA does).
    """

    camera_keys: list[str] | None = None
    """Camera feature keys in view order (view 0 is the main one); unset: the dataset's cameras in declared order."""
    num_image_views: int | None = attrs.field(default=None, validator=positive)
    """Views per sample (each costs the image tokens of one view); unset: one per camera."""
    image_size: tuple[int, int] = (224, 224)
    """(height, width) every view is resized to, keeping the aspect and padding on the left and top (lerobot's
    X-VLA convention); the padding is 0 after ImageNet normalization."""
    state_dim: int | None = None
    """Real state width (<= model.max_state_dim); unset: the dataset's."""
    action_dim: int | None = None
    """Real action width; unset: the dataset's. It must fit the action space (see model.action_mode)."""
    action_horizon: int = 30
    """Action chunk length (X-VLA: 30)."""
    normalization: Literal["none", "mean_std", "min_max", "quantile"] = "none"
    """State/action normalization from the dataset stats. X-VLA trains on raw values (none); spaces with BCE
    grippers (ee6d, joint) need none, since their gripper targets must stay 0/1."""
    domain_id: int = attrs.field(default=0, validator=non_negative)
    """Domain (embodiment) of every sample: selects its soft prompts and action layers (< model.num_domains;
    X-VLA-0.9B: 0 Bridge, 3 LIBERO, 6 RoboTwin 2.0, ...)."""
    domain_id_key: str | None = None
    """Dataset key holding a per-frame domain id instead of data.domain_id (mixed-embodiment datasets)."""
    tokenizer_path: str | None = None
    """Local Hugging Face tokenizer directory (BART); falls back to --tokenizer-path (env TOKENIZER_PATH)."""

    def views(self) -> int:
        """The number of image views (data.num_image_views, else one per camera)."""
        return self.num_image_views if self.num_image_views is not None else len(self.camera_keys or ())

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = super().validate()
        if self.camera_keys is not None and not self.camera_keys:
            problems.append("data.camera_keys is empty; X-VLA needs at least one camera")
        if (self.camera_keys is not None and self.num_image_views is not None
                and len(self.camera_keys) > self.num_image_views):
            problems.append(f"data.camera_keys has {len(self.camera_keys)} cameras {self.camera_keys} but "
                            f"data.num_image_views is {self.num_image_views}; choose cameras with "
                            "data.camera_keys=[...] or raise the views")
        if self.state_history != 1 or self.image_history != 1:
            problems.append("data.state_history and data.image_history must be 1 for X-VLA (got "
                            f"{self.state_history}, {self.image_history})")
        return problems
