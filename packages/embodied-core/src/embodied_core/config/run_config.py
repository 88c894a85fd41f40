"""``RunConfig``: the complete, validated configuration of one training run."""

from __future__ import annotations

from typing import Any

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.training_args import TrainingArgs

__all__ = ["RunConfig"]


@attrs.define(kw_only=True)
class RunConfig:
    """Training flags plus the selected model's ``model:`` and ``data:`` sections."""

    training: TrainingArgs
    model: BaseModelConfig
    data: BaseDataConfig

    @property
    def model_name(self) -> str:
        """The selected model plugin (``--model-name``)."""
        assert self.training.model_name is not None, "RunConfig is built only with a model name"
        return self.training.model_name

    def to_dict(self) -> dict[str, Any]:
        """Plain data of the three sections, as written to config.yaml."""
        from embodied_core.config.converter import unstructure

        return {"training": unstructure(self.training), "model": unstructure(self.model),
                "data": unstructure(self.data)}
