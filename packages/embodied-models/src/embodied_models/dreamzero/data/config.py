"""``DreamZeroDataConfig``: the ``data:`` section of the DreamZero models (``--dataset-strategy dreamzero``).

No torch here: ``embodied train --model-name dreamzero_tiny --help`` builds its parser from this class. The frame
geometry (``num_frames``, ``action_horizon``, ``max_chunk_size``, ``num_frame_per_block``, ``state_horizon``,
``max_state_dim``, ``max_action_dim``) mirrors the model's; the model config checks that both agree.
"""

from __future__ import annotations

import string

import attrs

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.validators import non_negative, positive
from embodied_models.dreamzero.config import supported_only

__all__ = ["CACHE_FEATURES", "CACHE_TEMPLATE_FIELDS", "CACHE_VALIDATION", "EMBODIMENT_TAGS", "DreamZeroDataConfig",
           "cache_template_problem"]

EMBODIMENT_TAGS = ("oxe_droid", "libero_sim", "agibot", "yam")
CACHE_FEATURES = ("video_latents", "first_frame_latents", "prompt_embs")
CACHE_TEMPLATE_FIELDS = ("index", "trajectory_id", "base_index")
"""The fields a cache file name template may use (what the cache reader formats): the flat sample index, the
episode (trajectory) and the anchor step inside it."""
CACHE_VALIDATION = ("manifest", "shapes", "off")


def _unit_interval_open(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"data.{attribute.name} must be in (0, 1] (got {value})")


def cache_template_problem(template: str) -> str | None:
    """What is wrong with a cache file name ``template`` (None: nothing). It may use only
    :data:`CACHE_TEMPLATE_FIELDS`, by name, and must name one file per sample: ``{index}``, or both
    ``{trajectory_id}`` and ``{base_index}`` (LoongForge's ``cache_{trajectory_id:04d}_{base_index:04d}.pt``)."""
    valid = ", ".join(f"{{{name}}}" for name in CACHE_TEMPLATE_FIELDS)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"is not a format string ({exc}); it may use {valid}"
    unknown = sorted({name for name in fields if name not in CACHE_TEMPLATE_FIELDS})
    if unknown:
        shown = ", ".join("{}" if not name else f"{{{name}}}" for name in unknown)
        return f"uses {shown}, which the cache reader does not format; valid fields: {valid}"
    if "index" not in fields and not {"trajectory_id", "base_index"} <= set(fields):
        return ("must name one file per sample: use {index} (the flat sample index), or both {trajectory_id} and "
                "{base_index} (LoongForge's cache_{trajectory_id:04d}_{base_index:04d}.pt)")
    try:
        template.format(index=0, trajectory_id=0, base_index=0)
    except (ValueError, TypeError) as exc:
        return f"cannot be formatted with integer {valid} ({exc})"
    return None


def _cache_features(instance: object, attribute: attrs.Attribute, value: list[str]) -> None:
    unknown = [name for name in value if name not in CACHE_FEATURES]
    if unknown:
        raise ValueError(f"data.{attribute.name}: unknown features {unknown}; valid: {', '.join(CACHE_FEATURES)}")


@attrs.define(kw_only=True)
class DreamZeroDataConfig(BaseDataConfig):
    """DreamZero's LeRobot data: embodiment layout, frame geometry, augmentation, normalization, cache."""

    state_key: str = "state"
    """Key of the concatenated (unpadded) state the strategy reports in the dataset's features and stats."""
    action_key: str = "action"
    """Key of the concatenated (unpadded) action the strategy reports in the dataset's features and stats."""
    embodiment_tag: str = attrs.field(default="oxe_droid", validator=attrs.validators.in_(EMBODIMENT_TAGS))
    """Embodiment preset: keys of meta/modality.json, camera layout, prompt template and projector id
    (oxe_droid 17, libero_sim 21, agibot 26, yam 32)."""
    num_frames: int = attrs.field(default=33, validator=positive)
    """Video frames per sample (non-DROID embodiments): consecutive frames from the anchor, clamped into the
    episode (the model's ``num_frames``)."""
    action_horizon: int = attrs.field(default=24, validator=positive)
    """Actions per chunk (the model's ``action_horizon``); DROID language chunks always hold 24."""
    state_horizon: int = attrs.field(default=1, validator=positive)
    """State rows per chunk (the model's ``state_horizon``)."""
    max_chunk_size: int = attrs.field(default=4, validator=positive)
    """Action chunks per sample (the model's ``max_chunk_size``); DROID: at most this many language chunks."""
    num_frame_per_block: int = attrs.field(default=2, validator=positive)
    """Latent frames per causal block (the model's ``num_frame_per_block``; the model checks that the latent frames
    of ``num_frames`` split into whole blocks)."""
    max_state_dim: int = attrs.field(default=64, validator=positive)
    """State vectors are zero padded to this width (``state_mask`` marks the real dimensions)."""
    max_action_dim: int = attrs.field(default=32, validator=positive)
    """Action vectors are zero padded to this width (``action_mask`` marks the real dimensions)."""
    image_height: int = attrs.field(default=176, validator=positive)
    """Height of each camera view after crop and resize."""
    image_width: int = attrs.field(default=320, validator=positive)
    """Width of each camera view after crop and resize."""
    crop_scale: float = attrs.field(default=0.95, validator=_unit_interval_open)
    """Crop int(H*s) x int(W*s): at a random place in training (one draw per sample, shared by every view and
    frame), centred in evaluation."""
    enable_color_jitter: bool = True
    """Colour jitter (brightness 0.3, contrast 0.4, saturation 0.5, hue 0.08) after the resize, training only."""
    use_sample_transform_seed: bool = False
    """Draw each sample's augmentation from ``sample_transform_seed + flat index`` (independent of workers, order
    and epoch; the reference's switch for bitwise-reproducible caches), ``+ mixture index`` with
    ``use_mixture_dataset`` (as LoongForge's mixture); off: the loader's per-sample seed."""
    sample_transform_seed: int = attrs.field(default=0, validator=non_negative)
    """Base seed of ``use_sample_transform_seed``."""
    max_text_length: int = attrs.field(default=512, validator=positive)
    """UMT5 token ids per prompt (padded / truncated)."""
    tokenizer_path: str | None = None
    """Local folder of the UMT5 tokenizer (tokenizer.json); unset: ``--tokenizer-path``."""
    relative_action: bool = False
    """Make the actions of each chunk relative to the chunk's anchor state (``relative_action_keys``) and normalize
    them with relative statistics (``meta/relative_stats_dreamzero.json``, computed in memory when missing)."""
    relative_action_keys: list[str] | None = None
    """Action parts made relative; unset: every action part whose name does not contain 'gripper'."""
    language_chunk_sampling: bool = False
    """DROID sampling: 24-step chunks anchored every 24 steps inside the anchor's language segment (on for the
    oxe_droid presets)."""
    require_full_language_chunks: bool = False
    """Keep only anchors with exactly ``max_chunk_size`` language chunks (all samples get one shape, so any of them
    can be batched together); off keeps every anchor with at least one chunk."""
    keep_empty_language_chunks: bool = False
    """Reference behaviour: keep the anchors without any valid language chunk as samples (LoongForge then fails
    with IndexError when reading them); off (default) leaves them out of the sample index."""
    literal_eval_tasks: bool = False
    """Reference behaviour: pass each task through ``ast.literal_eval`` before building the prompt (a task that
    is a Python literal, e.g. ``"[1, 2]"``, is rewritten); off uses the task text as it is."""
    stats_path: str | None = None
    """A stats.json to normalize with instead of ``meta/stats.json``; missing stats are computed in memory (never
    written into the dataset)."""
    precomputed_cache_dir: str | None = None
    """Folder of a precomputed cache (``embodied data precompute-dreamzero``); relative paths are under the
    dataset root. Unset: no cached features (the model encodes online)."""
    cache_template: str = "index_{index:08d}.pt"
    """File name of one sample in the cache: ``{index}`` (flat sample index), ``{trajectory_id}`` (episode) and
    ``{base_index}`` (anchor step in it), with format specs; e.g. LoongForge's
    ``cache_{trajectory_id:04d}_{base_index:04d}.pt``."""
    cache_validation: str = attrs.field(default="manifest", validator=attrs.validators.in_(CACHE_VALIDATION))
    """How the cache is checked. 'manifest': its manifest.json/_SUCCESS must match this dataset and these transform
    settings before training starts, and each file's size/sha256 its manifest.jsonl entry. 'shapes' (caches without
    a manifest, e.g. written by LoongForge's tools): every file read must hold the features with the shapes this
    data section implies (latent frames of the sample's video, ``max_text_length`` prompt rows), the same shape in
    every file, and a floating dtype; the model checks channels, latent grid and text width against its config.
    'off': as 'shapes' without the dtype check, and a warning naming what is not checked."""
    cache_features: list[str] = attrs.field(factory=lambda: ["video_latents", "prompt_embs"],
                                            validator=_cache_features)
    """Cached features attached to each sample (video_latents, first_frame_latents, prompt_embs)."""
    cache_validate_sample_hash: bool | None = None
    """Check each cached file's size and sha256 against manifest.jsonl when it is read; unset: on with
    ``cache_validation=manifest`` (true needs it: the sizes and hashes are in the manifest)."""
    cache_require_full_coverage: bool = False
    """Refuse a cache whose manifest does not cover every sample of the dataset (needs ``cache_validation=manifest``;
    otherwise a sample without a file is a DataError when it is read)."""

    # ---------------------------------------------------------------- LoongForge settings with one supported value
    use_global_metadata: bool = attrs.field(default=False, validator=supported_only(
        False, "statistics come from the dataset's meta/ or data.stats_path; LoongForge's packaged per-embodiment "
               "metadata folders are not shipped"))
    """LoongForge's packaged metadata (with ``metadata_version``); only false (use data.stats_path)."""
    relative_action_per_horizon: bool = attrs.field(default=False, validator=supported_only(
        False, "relative actions are normalized with one statistic per dimension; per-horizon-step relative "
               "statistics are not implemented"))
    """LoongForge's per-horizon-step relative statistics; only false."""

    # ---------------------------------------------------------------- LoongForge's training mixture (data/mixture.py)
    use_mixture_dataset: bool = False
    """Draw every sample as LoongForge's mixture does: index i of epoch e is a random (dataset, trajectory, step)
    from sha256((e, i, seed)), epochs of int(sum(n_d p_d)) indices (the --dataset-path alone, or every entry of a
    data_mixture with its weight); off: every (episode, step) once per epoch (or the weighted mixture schedule)."""
    mixture_sampling_seed: int | None = None
    """Seed of the mixture draws; unset: --seed."""
    balance_dataset_weights: bool = True
    """Mixture: multiply each dataset's weight by its number of samples."""
    balance_trajectory_weights: bool = True
    """Mixture: draw trajectories in proportion to their length (off: every trajectory equally often)."""
    allow_padding_at_end: bool = False
    """Mixture: draw any step of a trajectory, also those whose window runs past its end (padded); off: only steps
    whose window (the largest frame offset a sample reads) fits, and only trajectories that long."""
    mixture_inclusive_step_bound: bool = False
    """Reference behaviour: LoongForge keeps steps s <= L - m (inclusive), so windows still run one frame past the
    end with allow_padding_at_end=false; off (default) keeps s < L - m. True reproduces LoongForge's draws."""

    def embodiment_fields(self, tag: str) -> dict[str, str]:
        """A dataset-mixture entry's ``embodiment`` tag as ``embodiment_tag`` when it is a DreamZero embodiment
        (oxe_droid, libero_sim, agibot, yam); another tag only labels the entry's statistics."""
        return {"embodiment_tag": tag} if tag in EMBODIMENT_TAGS else {}

    def mixture_draw(self) -> str | None:
        """The draw factory of ``use_mixture_dataset`` (embodied_core.data.mixture.drawn), else None."""
        return "embodied_models.dreamzero.data.mixture:build_mixture_draw" if self.use_mixture_dataset else None

    def validate(self) -> list[str]:
        """Cross-field rules (in addition to the base class')."""
        problems = super().validate()
        if self.require_full_language_chunks and not self.language_chunk_sampling:
            problems.append("data.require_full_language_chunks=true needs data.language_chunk_sampling=true")
        if self.keep_empty_language_chunks and not self.language_chunk_sampling:
            problems.append("data.keep_empty_language_chunks=true needs data.language_chunk_sampling=true")
        if self.keep_empty_language_chunks and self.require_full_language_chunks:
            problems.append("data.keep_empty_language_chunks and data.require_full_language_chunks exclude each "
                            "other")
        if self.use_mixture_dataset and self.language_chunk_sampling:
            problems.append("data.use_mixture_dataset draws (trajectory, step) pairs of window samples; "
                            "data.language_chunk_sampling=true samples language-chunk anchors: drop one of the two")
        mixture_only = [name for name, default in (("mixture_sampling_seed", None), ("balance_dataset_weights", True),
                                                   ("balance_trajectory_weights", True),
                                                   ("allow_padding_at_end", False),
                                                   ("mixture_inclusive_step_bound", False))
                        if getattr(self, name) != default]
        if mixture_only and not self.use_mixture_dataset:
            problems.append(f"data.{', data.'.join(mixture_only)} act only with data.use_mixture_dataset=true")
        if self.language_chunk_sampling and self.embodiment_tag != "oxe_droid":
            problems.append(f"data.language_chunk_sampling=true is the oxe_droid sampling; data.embodiment_tag is "
                            f"{self.embodiment_tag!r}")
        template = cache_template_problem(self.cache_template)
        if template is not None:
            problems.append(f"data.cache_template={self.cache_template!r} {template}")
        if self.cache_validation != "manifest":
            for field, value in (("cache_validate_sample_hash", self.cache_validate_sample_hash),
                                 ("cache_require_full_coverage", self.cache_require_full_coverage)):
                if value:
                    problems.append(f"data.{field}=true reads the cache's manifest, which data.cache_validation="
                                    f"{self.cache_validation} does not use: set data.cache_validation=manifest or "
                                    f"leave data.{field} unset")
        return problems

    @property
    def validates_sample_hash(self) -> bool:
        """Whether each cache file is checked against its manifest.jsonl entry."""
        if self.cache_validate_sample_hash is None:
            return self.cache_validation == "manifest"
        return self.cache_validate_sample_hash
