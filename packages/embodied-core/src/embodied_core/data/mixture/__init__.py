"""Dataset mixtures at run time: several datasets, one model (the ``data_mixture:`` section, ``--dataset-mixture``).

- :mod:`.schedule`: the seeded per-epoch sampling schedule (shares, draws, interleaving), the loader's epoch order;
- :mod:`.dataset`: the entries as one dataset, and the per-entry sample transform;
- :mod:`.stats`: statistics of a union from each dataset's own (merged and per-embodiment statistics);
- :mod:`.build`: the whole mixture of a run, checked on one sample per entry before the model is built.

The section itself (file format, validation) is :mod:`embodied_core.config.mixture`.
"""

from embodied_core.data.mixture.build import EmbodimentRecord, MixtureData, build_mixture, embodiment_tags
from embodied_core.data.mixture.dataset import ENTRY_KEY, MixtureDataset, MixtureTransform
from embodied_core.data.mixture.schedule import MixtureSchedule, apportion
from embodied_core.data.mixture.stats import QUANTILE_LEVELS, merge_stats

__all__ = ["ENTRY_KEY", "QUANTILE_LEVELS", "EmbodimentRecord", "MixtureData", "MixtureDataset", "MixtureSchedule",
           "MixtureTransform", "apportion", "build_mixture", "embodiment_tags", "merge_stats"]
