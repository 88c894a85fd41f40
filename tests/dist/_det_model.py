"""``tiny_flow_det`` for the distributed tests: the benchmarks' model (``benchmarks/_det_model.py``), one copy.

tiny_flow_policy with noise and flow time drawn per sample from its dataset index, so the loss of a global batch
does not depend on how it is split over ranks (what the parity tests compare). Imported as ``tests.dist._det_model``
by the tests and as ``_det_model`` by the torchrun worker scripts next to this file; the launches put the repository
root on ``PYTHONPATH``, so ``benchmarks`` is importable in the ranks too.
"""

from __future__ import annotations

from benchmarks._det_model import NAME, SPEC, TinyFlowDet, build

__all__ = ["NAME", "SPEC", "TinyFlowDet", "build"]
