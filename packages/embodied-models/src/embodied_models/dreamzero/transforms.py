"""DreamZero's transforms: the strategy prepares each sample, the model's collate tokenizes and stacks.

The ``dreamzero`` dataset strategy (:mod:`embodied_models.dreamzero.data`) already turns every LeRobot sample into
DreamZero's fields in the DataLoader workers (views, normalized padded state/action, masks, cache features), so the
per-sample transform passes those through and prepares only policy observations (:mod:`.inference`, which also
gives ``postprocess_actions``); the collate is the strategy's :class:`DreamZeroCollator` (embodiment prompt,
UMT5 token ids of ``data.max_text_length``, the golden batch's fields). The tokenizer folder is
``data.tokenizer_path`` or ``--tokenizer-path`` (exported as ``TOKENIZER_PATH``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from embodied_core.errors import UsageError
from embodied_core.model_api import Transforms
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.data.collate import DreamZeroBatch, DreamZeroCollator
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.embodiments import embodiment
from embodied_models.dreamzero.inference import ActionPostprocess, ObservationTransform

if TYPE_CHECKING:
    from embodied_core.protocols import Stats

__all__ = ["ModelCollate", "make_transforms", "tokenizer_folder"]


def tokenizer_folder(data_config: DreamZeroDataConfig) -> str:
    """``data.tokenizer_path``, else ``--tokenizer-path`` (``TOKENIZER_PATH``); a UsageError naming both when unset."""
    path = data_config.tokenizer_path or os.environ.get("TOKENIZER_PATH")
    if not path:
        raise UsageError("DreamZero tokenizes its prompts with UMT5's tokenizer: set data.tokenizer_path or "
                         "--tokenizer-path to a local folder holding tokenizer.json")
    return path


class ModelCollate:
    """The strategy's collator over the DreamZero fields only: core's raw ``task`` string (already turned into
    ``text`` by the strategy) is left out. Picklable."""

    def __init__(self, collator: DreamZeroCollator, drop: tuple[str, ...] = ("task",)) -> None:
        self.collator = collator
        self.drop = drop

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> DreamZeroBatch:
        """Samples -> :class:`DreamZeroBatch`."""
        return self.collator([{k: v for k, v in s.items() if k not in self.drop} for s in samples])


def make_transforms(model_config: DreamZeroModelConfig, data_config: DreamZeroDataConfig, *,
                    stats: Stats | None) -> Transforms:
    """The ``transforms`` factory of the ``dreamzero_*`` specs (:class:`embodied_core.protocols.MakeTransforms`)."""
    views = len(embodiment(data_config.embodiment_tag).video)
    collate = DreamZeroCollator(tokenizer_folder(data_config), max_length=data_config.max_text_length,
                                num_views=views, literal_eval_tasks=data_config.literal_eval_tasks)
    postprocess = ActionPostprocess(stats) if stats is not None and "action" in stats else None
    return Transforms(sample_transform=ObservationTransform(model_config, data_config, stats if stats and "state" in
                                                             stats else None),
                      collate_fn=ModelCollate(collate), postprocess_actions=postprocess)
