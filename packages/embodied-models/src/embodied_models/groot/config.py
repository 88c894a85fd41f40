"""The config fields and rules the GR00T ports (N1.6 and N1.7) share (no torch; ``--help`` reads these).

:class:`SharedModelFields` and :class:`SharedDataFields` hold the fields both ports declare with the same name,
type, default, validator and docstring, and the cross-field rules both apply. A port's section subclasses one and
places its groups where the port always listed them (``field_transformer=model_field_order(...)`` /
``data_field_order()`` on its ``attrs.define``, the anchors being the port's own fields), so ``--help``, the YAML
and ``config.yaml`` keep each port's order; tyro finds the docstrings here through the MRO. The fields whose
default or docstring differ (the sizes of the released checkpoints, what each reference calls a setting) stay in
the ports, as do the backbone-specific rules.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import non_negative, positive, probability

__all__ = ["DATA_GROUPS", "MODEL_GROUPS", "SharedDataFields", "SharedModelFields", "data_field_order",
           "model_field_order", "non_negative_items", "place_groups"]

FieldTransformer = Callable[[type, list[attrs.Attribute]], list[attrs.Attribute]]


def non_negative_items(instance: object, attribute: attrs.Attribute, value: list[int]) -> None:
    """attrs validator: every entry of a list of layer indices is >= 0."""
    if any(v < 0 for v in value):
        raise ValueError(f"every entry must be >= 0 (got {value!r})")


def place_groups(*groups: tuple[str, tuple[str, ...]]) -> FieldTransformer:
    """An attrs ``field_transformer`` that lists each group of inherited fields right after its anchor field, in
    the order given (``(anchor, names)`` pairs; an anchor may be a field an earlier group placed)."""

    def transform(cls: type, fields: list[attrs.Attribute]) -> list[attrs.Attribute]:
        for anchor, names in groups:
            moved = [f for name in names for f in fields if f.name == name and f.inherited]
            if len(moved) != len(names):
                raise TypeError(f"{cls.__name__}: place_groups fields {names} are not all inherited fields")
            rest = [f for f in fields if f not in moved]
            position = next((i for i, f in enumerate(rest) if f.name == anchor), None)
            if position is None:
                raise TypeError(f"{cls.__name__}: place_groups anchor {anchor!r} is not one of its fields")
            fields = [*rest[: position + 1], *moved, *rest[position + 1:]]
        return fields

    return transform


MODEL_GROUPS = {
    "language": ("llm_mlp_dim", "llm_num_heads", "llm_num_kv_heads", "llm_head_dim"),
    "vision": ("vision_num_heads",),
    "tokens": ("hidden_size", "input_embedding_dim"),
    "dit": ("max_num_embodiments", "max_seq_len", "dit_num_layers", "dit_num_heads", "dit_head_dim"),
    "alternation": ("attend_text_every_n_blocks",),
    "flow": ("noise_beta_alpha", "noise_beta_beta", "noise_s", "num_timestep_buckets"),
}
"""The groups of :class:`SharedModelFields` a port places (each group's fields in this order)."""


def model_field_order(*, tokens_after: str, alternation_after: str, flow_after: str) -> FieldTransformer:
    """:func:`place_groups` of :data:`MODEL_GROUPS` for a port's model section: the language sizes after
    ``llm_width``, the vision heads after ``vision_mlp_dim`` and the DiT sizes after ``action_horizon`` (both
    ports), the token widths, the text/image alternation and the flow constants after the port's given fields."""
    return place_groups(("llm_width", MODEL_GROUPS["language"]), ("vision_mlp_dim", MODEL_GROUPS["vision"]),
                        (tokens_after, MODEL_GROUPS["tokens"]), ("action_horizon", MODEL_GROUPS["dit"]),
                        (alternation_after, MODEL_GROUPS["alternation"]), (flow_after, MODEL_GROUPS["flow"]))


@attrs.define(kw_only=True)
class SharedModelFields(BaseModelConfig):
    """The GR00T model fields both ports declare alike (grouped as :data:`MODEL_GROUPS`) and the rules both apply."""

    # --- language model sizes ---
    llm_mlp_dim: int = attrs.field(default=6144, validator=positive)
    """SwiGLU inner width of the language model."""
    llm_num_heads: int = attrs.field(default=16, validator=positive)
    """Query heads of the language model."""
    llm_num_kv_heads: int = attrs.field(default=8, validator=positive)
    """Key/value heads of the language model (grouped-query attention)."""
    llm_head_dim: int = attrs.field(default=128, validator=positive)
    """Per-head width of the language model."""
    # --- vision tower ---
    vision_num_heads: int = attrs.field(default=16, validator=positive)
    """Vision attention heads."""
    # --- action head ---
    hidden_size: int = attrs.field(default=1024, validator=positive)
    """Width of the state encoder's hidden layer, the DiT output and the action decoder."""
    input_embedding_dim: int = attrs.field(default=1536, validator=positive)
    """Width of the state/action tokens (= DiT width = dit_num_heads x dit_head_dim)."""
    max_num_embodiments: int = attrs.field(default=32, validator=positive)
    """Embodiment slots of the category-specific encoders and decoder."""
    max_seq_len: int = attrs.field(default=1024, validator=positive)
    """Rows of the learned action position table (>= action_horizon)."""
    dit_num_layers: int = attrs.field(default=32, validator=positive)
    """DiT blocks: odd ones self-attend over [state; actions], even ones cross-attend to text or image tokens."""
    dit_num_heads: int = attrs.field(default=32, validator=positive)
    """DiT attention heads."""
    dit_head_dim: int = attrs.field(default=48, validator=positive)
    """DiT per-head width."""
    attend_text_every_n_blocks: int = attrs.field(default=2, validator=positive)
    """Cross-attention blocks alternate text and image tokens: block i attends text when i % (2 n) == 0."""
    # --- flow matching (GR00T time convention: t = 1 is data) ---
    noise_beta_alpha: float = attrs.field(default=1.5, validator=positive)
    """Training time t = (1 - Beta(alpha, beta)) * noise_s."""
    noise_beta_beta: float = attrs.field(default=1.0, validator=positive)
    """See noise_beta_alpha."""
    noise_s: float = attrs.field(default=0.999, validator=positive)
    """See noise_beta_alpha (t stays below 1)."""
    num_timestep_buckets: int = attrs.field(default=1000, validator=positive)
    """The network sees int(t * num_timestep_buckets), never the continuous t."""

    @property
    def dit_width(self) -> int:
        """Inner width of the DiT (heads x head_dim)."""
        return self.dit_num_heads * self.dit_head_dim

    def token_problems(self) -> list[str]:
        """The DiT runs on the state/action tokens, whose width must be even (sin-cos time features)."""
        problems = []
        if self.dit_width != self.input_embedding_dim:
            problems.append(f"model.dit_num_heads x model.dit_head_dim = {self.dit_width} must equal "
                            f"model.input_embedding_dim ({self.input_embedding_dim}): the DiT runs on the tokens")
        if self.input_embedding_dim % 2:
            problems.append(f"model.input_embedding_dim must be even for the sin-cos time features "
                            f"(got {self.input_embedding_dim})")
        return problems

    def square_problems(self, field: str) -> list[str]:
        """``model.<field>`` (a position table's rows) must be a square number."""
        value = getattr(self, field)
        side = round(value ** 0.5)
        return [] if side * side == value else [f"model.{field} must be a square number (got {value})"]

    def table_problems(self) -> list[str]:
        """One learned position per action token, and 3 pixel statistics per side (std > 0)."""
        problems = []
        if self.max_seq_len < self.action_horizon:
            problems.append(f"model.max_seq_len {self.max_seq_len} is shorter than model.action_horizon "
                            f"{self.action_horizon} (one learned position per action token)")
        if len(self.image_mean) != 3 or len(self.image_std) != 3 or any(s <= 0 for s in self.image_std):
            problems.append(f"model.image_mean / model.image_std must be 3 values each, std > 0 (got "
                            f"{self.image_mean}, {self.image_std})")
        return problems


DATA_GROUPS = {
    "views": ("shortest_image_edge", "crop_fraction"),
    "clip": ("clip_outliers",),
    "prompt": ("embodiment_id", "language_key", "formalize_language", "mask_padded_actions"),
}
"""The groups of :class:`SharedDataFields` a port places (each group's fields in this order)."""


def data_field_order() -> FieldTransformer:
    """:func:`place_groups` of :data:`DATA_GROUPS` for a port's data section (the same anchors in both ports): the
    view geometry after ``image_size``, clipping after ``normalization``, the slot and prompt settings after
    ``embodiment_tag``."""
    return place_groups(("image_size", DATA_GROUPS["views"]), ("normalization", DATA_GROUPS["clip"]),
                        ("embodiment_tag", DATA_GROUPS["prompt"]))


@attrs.define(kw_only=True)
class SharedDataFields(BaseDataConfig):
    """The GR00T data fields both ports declare alike (grouped as :data:`DATA_GROUPS`) and the rules both apply."""

    shortest_image_edge: int | None = attrs.field(default=256, validator=positive)
    """Each frame's shorter side is resized to this before the centre crop (unset: data.image_size[0])."""
    crop_fraction: float = attrs.field(default=0.95, validator=probability)
    """Centre crop keeping this fraction of each side, then a resize to data.image_size (1: no crop)."""
    clip_outliers: bool = True
    """Clip min-max / percentile normalized values to [-1, 1] (GR00T's clip_outliers)."""
    embodiment_id: int | None = attrs.field(default=None, validator=attrs.validators.optional(non_negative))
    """Explicit projector slot; unset: the slot of data.embodiment_tag."""
    language_key: str = "task"
    """Sample key of the instruction (task, or an annotation.* key of the groot_n1_7 strategy)."""
    formalize_language: bool = True
    """Lower-case the instruction and drop punctuation (GR00T's formalize_language)."""
    mask_padded_actions: bool = False
    """Exclude horizon steps past the episode end (action_is_pad) from the loss; GR00T keeps them (the
    dataset repeats the last action), so the default keeps them too."""

    @property
    def resize_edge(self) -> int:
        """The shorter side frames are resized to before the crop."""
        return self.shortest_image_edge or self.image_size[0]

    def shared_problems(self, *, slots: dict[str, int], unknown_tag: Callable[[str], str], label: str,
                        state_note: str) -> list[str]:
        """The base section's rules, then: an embodiment tag of the port's table ``slots`` (or an explicit
        data.embodiment_id), one state step (``label`` and ``state_note`` name the port and its reference), and a
        positive crop fraction."""
        problems = super().validate()
        if self.embodiment_id is None and self.embodiment_tag not in slots:
            problems.append(unknown_tag(self.embodiment_tag))
        if self.state_history != 1:
            problems.append(f"data.state_history must be 1 for {label} ({state_note}; got {self.state_history})")
        if self.crop_fraction <= 0:
            problems.append(f"data.crop_fraction must be in (0, 1] (got {self.crop_fraction})")
        return problems
