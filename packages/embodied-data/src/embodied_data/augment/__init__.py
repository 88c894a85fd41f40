"""Image augmentation ops and presets on torchvision's transforms.v2 (``embodied.image_augmentations``).

The pipeline that applies them per sample (seeding, camera handling, subsets) is core's
:mod:`embodied_core.data.image_augmentation`; here are the ops it builds (``ops.py``, needing the ``augment``
extra: torchvision), their parameters (``params.py``), the presets (``presets.py``) and their specs (``specs.py``).
"""
