"""embodied-core: configuration, plugin registry, hooks, CLI and the Trainer API.

Importing this package is cheap (no torch); heavy names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embodied_core import deprecation as _deprecation
from embodied_core.errors import ConfigError, EmbodiedError, UsageError

_deprecation.install()  # old module paths (embodied_core.strategies, ...) keep importing, with a FutureWarning

if TYPE_CHECKING:
    from embodied_core.api_version import PLUGIN_API_VERSION
    from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
    from embodied_core.config.resolve import load_config
    from embodied_core.config.run_config import RunConfig
    from embodied_core.config.training_args import TrainingArgs
    from embodied_core.hooks import hookimpl
    from embodied_core.model_api import ModelOutput, TensorBatch, Transforms
    from embodied_core.model_base import EmbodiedModel
    from embodied_core.policy.load import load_policy
    from embodied_core.protocols import DatasetFeature, ModelPlugin, Policy, PolicyMetadata, TrainingDataset
    from embodied_core.registry import register
    from embodied_core.trainer.api import Trainer

__version__ = "0.2.0"

__all__ = [
    "PLUGIN_API_VERSION",
    "BaseDataConfig",
    "BaseModelConfig",
    "ConfigError",
    "DatasetFeature",
    "EmbodiedError",
    "EmbodiedModel",
    "ModelOutput",
    "ModelPlugin",
    "Policy",
    "PolicyMetadata",
    "RunConfig",
    "TensorBatch",
    "Trainer",
    "TrainingArgs",
    "TrainingDataset",
    "Transforms",
    "UsageError",
    "hookimpl",
    "load_config",
    "load_policy",
    "register",
]

_LAZY = {
    "PLUGIN_API_VERSION": "embodied_core.api_version",
    "hookimpl": "embodied_core.hooks",
    "register": "embodied_core.registry",
    "BaseDataConfig": "embodied_core.config.model_config",
    "BaseModelConfig": "embodied_core.config.model_config",
    "load_config": "embodied_core.config.resolve",
    "RunConfig": "embodied_core.config.run_config",
    "TrainingArgs": "embodied_core.config.training_args",
    "ModelOutput": "embodied_core.model_api",
    "TensorBatch": "embodied_core.model_api",
    "Transforms": "embodied_core.model_api",
    "Trainer": "embodied_core.trainer.api",
    "EmbodiedModel": "embodied_core.model_base",
    "DatasetFeature": "embodied_core.protocols",
    "ModelPlugin": "embodied_core.protocols",
    "Policy": "embodied_core.protocols",
    "PolicyMetadata": "embodied_core.protocols",
    "TrainingDataset": "embodied_core.protocols",
    "load_policy": "embodied_core.policy.load",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'embodied_core' has no attribute {name!r}")
