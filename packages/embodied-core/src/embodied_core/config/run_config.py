"""``RunConfig``: the complete, validated configuration of one training run."""

from __future__ import annotations

from typing import Any

import attrs

from embodied_core.config.mixture import DataMixture
from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.training_args import TrainingArgs

__all__ = ["RunConfig"]


@attrs.define(kw_only=True)
class RunConfig:
    """Training flags, the selected model's ``model:`` and ``data:`` sections, and the ``plugins:`` section.

    Attributes:
        plugins: the structured options of every selected plugin that declares an ``options`` class, by plugin
            name (see :mod:`embodied_core.config.options`); empty when none does.
        data_mixture: the dataset mixture (``data_mixture:`` section or ``--dataset-mixture``); None: one dataset.
    """

    training: TrainingArgs
    model: BaseModelConfig
    data: BaseDataConfig
    plugins: dict[str, Any] = attrs.field(factory=dict)
    data_mixture: DataMixture | None = None

    @property
    def model_name(self) -> str:
        """The selected model plugin (``--model-name``)."""
        assert self.training.model_name is not None, "RunConfig is built only with a model name"
        return self.training.model_name

    def to_dict(self) -> dict[str, Any]:
        """Plain data of the sections, as written to config.yaml (``plugins`` only when a plugin has options)."""
        from embodied_core.config.converter import unstructure

        out = {"training": unstructure(self.training), "model": unstructure(self.model),
               "data": unstructure(self.data)}
        if self.plugins:
            out["plugins"] = {name: unstructure(options) for name, options in self.plugins.items()}
        if self.data_mixture is not None:
            out["data_mixture"] = unstructure(self.data_mixture)
        return out
