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
        groups.COMMANDS: ("data",),
    },
    "embodied-models": {
        groups.MODELS: ("lingbot_va_libero", "lingbot_va_robotwin", "lingbot_va_tiny", "pi05", "pi05_tiny"),
        groups.DATASET_STRATEGIES: ("lingbot_va",),
        groups.TRAINERS: ("lingbot_va",),
        groups.COMMANDS: ("data-precompute-latents",),
    },
    "embodied-dist": {
        groups.DISTRIBUTED_STRATEGIES: ("ddp", "fsdp"),
        groups.COMMANDS: ("checkpoint",),
    },
    "embodied-eval": {
        groups.COMMANDS: ("eval", "serve"),
        groups.ENVS: ("aloha_insertion", "aloha_transfer_cube", "pusht", "synth_reach"),
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
