"""Which first-party distribution provides which plugins, for "install this package" hints.

Core cannot discover plugins of a distribution that is not installed, so a user who selects
``--model-name pi05_tiny`` with only embodied-core installed would otherwise read "unknown name". The table
names what each first-party distribution registers (a test checks it against their entry points).
"""

from __future__ import annotations

from importlib import metadata

from embodied_core.registry import groups

__all__ = ["FIRST_PARTY", "INSTALL_HOW", "install_hint"]

FIRST_PARTY: dict[str, dict[str, tuple[str, ...]]] = {
    "embodied-data": {
        groups.DATASET_FORMATS: ("dummy_datasets", "hdf5_datasets", "lerobot_datasets"),
        groups.DATASET_STRATEGIES: ("default", "groot_n1_7"),
        groups.VIDEO_BACKENDS: ("decord", "opencv", "pyav", "torchcodec", "torchvision_av"),
        groups.SAMPLERS: ("distributed", "global_batch_shard", "sharded"),
        groups.COMMANDS: ("data",),
        groups.IMAGE_AUGMENTATIONS: ("color_jitter", "cosmos3", "dreamzero", "groot", "lerobot", "openpi",
                                     "random_affine", "random_crop", "random_rotation", "resize", "sharpness_jitter"),
    },
    "embodied-models": {
        groups.MODELS: (
            "cosmos3_nano", "cosmos3_tiny",
            "dreamzero_agibot_wan21_14b", "dreamzero_full_wan21_14b", "dreamzero_full_wan22_5b",
            "dreamzero_libero_wan22_5b", "dreamzero_lora_wan21_14b", "dreamzero_lora_wan22_5b", "dreamzero_tiny",
            "dreamzero_wan21_14b", "dreamzero_wan22_5b", "dreamzero_yam_wan21_14b",
            "fastwam", "fastwam_tiny",
            "groot_n1_6", "groot_n1_6_tiny", "groot_n1_7", "groot_n1_7_tiny",
            "lingbot_va_libero", "lingbot_va_robotwin", "lingbot_va_tiny",
            "pi05", "pi05_tiny",
            "smolvla", "smolvla_tiny",
            "xvla", "xvla_tiny",
        ),
        groups.DATASET_STRATEGIES: ("cosmos3_droid", "dreamzero", "fastwam", "lingbot_va"),
        groups.TRAINERS: ("dreamzero", "groot_n1_6", "groot_n1_7", "lingbot_va"),
        groups.COMMANDS: ("checkpoint-import-lerobot-smolvla", "checkpoint-init-fastwam-action-dit",
                          "data-precompute-dreamzero", "data-precompute-latents", "data-precompute-text"),
    },
    "embodied-dist": {
        groups.DISTRIBUTED_STRATEGIES: ("ddp", "fsdp"),
        groups.COMMANDS: ("checkpoint",),
    },
    "embodied-eval": {
        groups.COMMANDS: ("data-collect", "eval", "serve"),
        groups.ENVS: ("aloha_insertion", "aloha_transfer_cube", "metaworld", "pusht", "synth_reach"),
    },
}
"""``{distribution: {group: names}}`` of the plugins each first-party distribution registers."""

INSTALL_HOW = ("pip install --find-links wheelhouse {dist} (wheels built by scripts/build_wheels.sh; from a "
               "checkout also pip install -e packages/{dist})")
"""How to install a first-party distribution (none is on a package index; see README "Installing only some
packages")."""


def _installed(dist: str) -> bool:
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def install_hint(group: str, name: str) -> str:
    """A sentence saying which missing first-party distribution provides ``name`` (or more of ``group``).

    Empty when the plugin is not first-party or its distribution is installed (then the name is a typo or
    the plugin failed to register, and the installed names are the useful answer).
    """
    for dist, provided in FIRST_PARTY.items():
        if name in provided.get(group, ()) and not _installed(dist):
            how = INSTALL_HOW.format(dist=dist)
            return f"{name!r} is provided by the package {dist}, which is not installed: {how}"
    missing = [dist for dist, provided in FIRST_PARTY.items() if group in provided and not _installed(dist)]
    if not missing:
        return ""
    return f"more {group.removeprefix('embodied.')} come with {' and '.join(missing)} (not installed)"
